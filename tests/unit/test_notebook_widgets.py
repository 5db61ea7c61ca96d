"""The committed notebooks' widget outputs can be drawn: every widget view an output
shows names a model that the notebook's saved widget state holds. Restoring a cell's
output from an earlier execution while keeping the newer execution's state (or the
reverse) leaves a view pointing at nothing, which the static page draws as an error."""

from __future__ import annotations

import json

import pytest
from support import ROOT

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")),
                         ids=lambda p: p.stem)
def test_every_widget_view_has_its_model_saved(path) -> None:
    notebook = json.loads(path.read_text())
    saved = notebook["metadata"].get("widgets", {}).get(STATE, {}).get("state", {})
    views = [(i, output["data"][VIEW]["model_id"])
             for i, cell in enumerate(notebook["cells"])
             for output in cell.get("outputs", []) if VIEW in output.get("data", {})]
    missing = [(i, model) for i, model in views if model not in saved]
    assert not missing, f"{path.name}: widget views with no saved model (cell, id): {missing}"
