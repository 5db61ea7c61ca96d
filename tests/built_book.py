"""The built book for the tests of what readers get (tests/test_offline_html.py and
tests/test_live_button.py).

Under plain pytest a missing build skips those tests, so the edit-run loop needs no book.
`make test-book` sets REQUIRE_BUILT_BOOK=1, which turns every such skip into a failure: CI
builds the book first, and a test of the pages that could not run must not pass quietly.
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student" / "_build" / "html"
LITE = ROOT / "_build" / "lite"


def required() -> bool:
    return os.environ.get("REQUIRE_BUILT_BOOK", "") not in ("", "0")


def missing_build(why: str) -> None:
    """Skip the calling test with ``why``, or fail it under REQUIRE_BUILT_BOOK=1."""
    if required():
        pytest.fail(f"REQUIRE_BUILT_BOOK: {why}")
    pytest.skip(why)


def need_dirs(*dirs: Path, hint: str) -> None:
    """Skip (or fail, see :func:`missing_build`) unless every one of ``dirs`` exists."""
    absent = [str(d.relative_to(ROOT)) for d in dirs if not d.is_dir()]
    if absent:
        missing_build(f"{', '.join(absent)} not built ({hint})")
