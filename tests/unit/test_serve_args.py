"""``specdec_lite serve``'s ``--spec-max-batch``: a size from 0 to 256, or ``auto``; anything
else ends the command with one line naming the option and exit status 2."""

from __future__ import annotations

import pytest

from specdec_lite.service.server import parser


@pytest.mark.parametrize(("text", "value"), [("auto", "auto"), ("0", 0), ("3", 3), ("256", 256)])
def test_spec_max_batch_takes_a_size_or_auto(text, value) -> None:
    assert parser().parse_args(["--spec-max-batch", text]).spec_max_batch == value


@pytest.mark.parametrize("text", ["banana", "-1", "257", "Auto", "2.5"])
def test_spec_max_batch_refuses_anything_else_in_one_line(text, capsys) -> None:
    with pytest.raises(SystemExit) as ended:
        parser().parse_args(["--spec-max-batch", text])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--spec-max-batch" in err
