"""Fixtures the compiled-step tests share (tests/unit/test_compiled_step.py and
test_draft_kernels.py): a switch to the Python step, and a record of the kernels run."""

from __future__ import annotations

import pytest


@pytest.fixture
def python_step(monkeypatch):
    """A function running its argument with the compiled step switched off."""
    from specdec_lite.engine import compiled_step

    def run(decode):
        with monkeypatch.context() as patch:
            patch.setattr(compiled_step, "step_for", lambda *args: None)
            return decode()
    return run


@pytest.fixture
def kernel_calls() -> list:
    """The kernels the engine calls, in order, recorded as it runs."""
    from specdec_lite.engine.kernel_time import kernel_timer

    with kernel_timer() as timer:
        yield timer.calls
