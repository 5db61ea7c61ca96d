"""The "Run live" button's link (book/_ext/live_button.py) points into the live edition."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import live_button  # noqa: E402  (a Sphinx extension module, not part of the library)
import pytest  # noqa: E402


def test_link_from_a_chapter_page_reaches_the_live_notebook():
    url = live_button.live_url("notebooks/02_acceptance", "lite")
    assert url == "../lite/notebooks/index.html?path=notebooks/02_acceptance.ipynb"


def test_link_target_exists_in_the_live_site_layout():
    # The live site keeps the repository layout: files/notebooks/<chapter>.ipynb.
    site = ROOT / "_build" / "lite"
    if not site.is_dir():
        pytest.skip("_build/lite not built (make lite)")
    for chapter in (ROOT / "notebooks").glob("*.ipynb"):
        assert (site / "files" / "notebooks" / chapter.name).is_file(), chapter.name
    assert (site / "files" / "results" / "bench.json").is_file()
