"""The "Run live" button's link (book/_ext/live_button.py) points into the live edition."""

import sys

from support import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))

import live_button  # noqa: E402  (a Sphinx extension module, not part of the library)
import pytest  # noqa: E402
from support import BOOK, LITE, STUDENT, missing_build, need_dirs  # noqa: E402

NOT_LIVE = ROOT / "scripts" / "lite" / "not-live.txt"


def test_not_live_list_names_real_chapters_with_reasons():
    skipped = live_button.not_live(NOT_LIVE)
    assert "12_appendix_service.ipynb" in skipped  # it starts a server: no sockets in a tab
    for name, reason in skipped.items():
        assert (ROOT / "notebooks" / name).is_file(), name
        assert len(reason) > 20, f"{name}: say why it is not live"


def test_not_live_parser_skips_comments_and_blank_lines(tmp_path):
    listing = tmp_path / "not-live.txt"
    listing.write_text("# a comment\n\n09_x.ipynb  Needs a GPU.\n")
    assert live_button.not_live(listing) == {"09_x.ipynb": "Needs a GPU."}


def test_link_from_a_chapter_page_reaches_the_live_notebook():
    url = live_button.live_url("notebooks/02_acceptance", "lite")
    assert url == "../lite/notebooks/index.html?path=notebooks/02_acceptance.ipynb"


def test_link_target_exists_in_the_live_site_layout():
    # The live site keeps the repository layout: files/notebooks/<chapter>.ipynb.
    site = LITE
    need_dirs(site, hint="make lite, or make book where npm exists")
    skipped = live_button.not_live(NOT_LIVE)
    for chapter in (ROOT / "notebooks").glob("*.ipynb"):
        shipped = (site / "files" / "notebooks" / chapter.name).is_file()
        assert shipped != (chapter.name in skipped), chapter.name
    assert (site / "files" / "results" / "bench.json").is_file()


def test_every_chapter_page_has_the_button_and_the_student_edition_none():
    book, student = BOOK / "notebooks", STUDENT / "notebooks"
    need_dirs(book, student, hint="run `make book` and `make book-student` first")
    need_dirs(BOOK / "lite", hint="the live edition: `make book` where npm exists")
    yaml = pytest.importorskip("yaml")
    skipped = live_button.not_live(NOT_LIVE)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    pages = [ROOT / f"{f}.ipynb" for f in files if f.startswith("notebooks/")]
    assert pages
    stale = [c.stem for c in pages if not (book / f"{c.stem}.html").is_file()]
    if stale:
        missing_build(f"_build/html predates _toc.yml (no page for {stale}): run `make book`")
    for chapter in pages:
        html = (book / f"{chapter.stem}.html").read_text(encoding="utf-8")
        href = live_button.live_url(f"notebooks/{chapter.stem}", "lite")
        if chapter.name in skipped:
            assert "Not in the live edition" in html and href not in html, chapter.name
        else:
            assert f'href="{href}"' in html and "Run live" in html, chapter.name
            # the link's target is in the built book
            assert (book.parent / "lite" / "files" / "notebooks" / chapter.name).is_file()
        student_html = (student / f"{chapter.stem}.html").read_text(encoding="utf-8")
        assert "live-edition" not in student_html, chapter.name


def test_no_button_in_a_book_built_without_the_live_edition(monkeypatch):
    """`make book` without npm builds no live edition and sets SPECDEC_LIVE_EDITION=0: the
    chapter pages then carry no button that would lead nowhere."""
    from types import SimpleNamespace

    app = SimpleNamespace(
        config=SimpleNamespace(hide_solutions=False, live_edition_path="lite",
                               live_edition_not_live="scripts/lite/not-live.txt"),
        env=SimpleNamespace(doc2path=lambda name: ROOT / f"{name}.ipynb"), srcdir=str(ROOT))
    page = "notebooks/02_acceptance"
    with_button = {"body": "<p>chapter</p>"}
    live_button.add_button(app, page, "page.html", with_button, None)
    assert "Run live" in with_button["body"]
    monkeypatch.setenv("SPECDEC_LIVE_EDITION", "0")
    without = {"body": "<p>chapter</p>"}
    live_button.add_button(app, page, "page.html", without, None)
    assert without["body"] == "<p>chapter</p>"
