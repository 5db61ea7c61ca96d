"""The built book must work offline, and the table of contents must point at real files.

The HTML checks run only when a build exists (`make book`, `make book-student`), and fail
without one under `make test-book` (tests/support.py); the table-of-contents check always
runs.
"""

import re
import subprocess
import sys

import pytest
from support import BOOK, ROOT, STUDENT, need_dirs

BUILD_DIRS = [BOOK, STUDENT]

# A tag that makes the browser fetch something: <script src=...>, <link href=...>,
# <img src=...>, <iframe src=...>. Remote means http(s):// or protocol-relative //host.
FETCHING_TAG = re.compile(r"<(script|link|img|iframe|source)\b[^>]*>", re.IGNORECASE)
FETCHING_ATTR = re.compile(r"\b(src|href)\s*=\s*[\"']?\s*(https?:)?//", re.IGNORECASE)
# <link rel="canonical"> and the like name a URL without loading it.
NON_LOADING_REL = re.compile(r"\brel\s*=\s*[\"']?(canonical|alternate|author|license)\b", re.I)


def remote_fetches(html: str) -> list[str]:
    found = []
    for tag in FETCHING_TAG.finditer(html):
        text = tag.group(0)
        if tag.group(1).lower() == "link" and NON_LOADING_REL.search(text):
            continue
        if FETCHING_ATTR.search(text):
            found.append(text)
    return found


def test_remote_fetch_detector():
    assert remote_fetches('<script src="https://cdn.example/x.js"></script>')
    assert remote_fetches("<link rel=stylesheet href=//cdn.example/x.css>")
    assert remote_fetches('<img alt="" src="http://example.org/a.png">')
    assert not remote_fetches('<script src="../_static/mathjax/tex-mml-chtml.js"></script>')
    assert not remote_fetches('<a href="https://arxiv.org/abs/2211.17192">paper</a>')
    assert not remote_fetches('<link rel="canonical" href="https://example.org/intro.html">')


@pytest.mark.parametrize("build", BUILD_DIRS, ids=["book", "student"])
def test_built_html_loads_nothing_remote(build):
    need_dirs(build, hint="run `make book` / `make book-student`")
    pages = sorted(build.rglob("*.html"))
    assert pages, f"no HTML pages under {build}"
    offenders = {}
    for page in pages:
        bad = remote_fetches(page.read_text(encoding="utf-8", errors="replace"))
        if bad:
            offenders[str(page.relative_to(build))] = bad[:3]
    assert not offenders, f"pages that load remote resources: {offenders}"


@pytest.mark.parametrize("build", BUILD_DIRS, ids=["book", "student"])
def test_vendored_assets_are_in_build(build):
    need_dirs(build, hint="run `make book` / `make book-student`")
    for asset in ["mathjax/tex-mml-chtml.js", "requirejs/require.js", "html-manager/embed-amd.js"]:
        assert (build / "_static" / asset).is_file(), asset


def _toc_files(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("root", "file") and isinstance(value, str):
                yield value
            else:
                yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def test_toc_entries_exist():
    yaml = pytest.importorskip("yaml")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = list(_toc_files(toc))
    assert entries and entries[0] == toc["root"]
    missing = [
        entry
        for entry in entries
        if not any((ROOT / f"{entry}{suffix}").is_file() for suffix in ("", ".md", ".ipynb"))
    ]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"


def test_vendored_sources_exist():
    vendor = ROOT / "book" / "vendor"
    for asset in ["mathjax/tex-mml-chtml.js", "requirejs/require.js", "html-manager/embed-amd.js"]:
        assert (vendor / asset).is_file(), f"missing {asset}: run scripts/vendor_assets.sh"


def test_student_toc_drops_only_the_teachers_guide(tmp_path):
    yaml = pytest.importorskip("yaml")
    out = tmp_path / "toc.yml"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "student_toc.py"),
                    str(ROOT / "_toc.yml"), str(out)], check=True)
    book = list(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    student = list(_toc_files(yaml.safe_load(out.read_text())))
    assert "book/teachers_guide" in book
    assert student == [entry for entry in book if entry != "book/teachers_guide"]


def test_student_build_has_no_solutions_and_no_guide():
    build, book = BUILD_DIRS[1], BUILD_DIRS[0]
    need_dirs(book, build, hint="run `make book` and `make book-student` first")
    assert (book / "book" / "teachers_guide.html").is_file()
    assert not (build / "book" / "teachers_guide.html").exists()
    solution = re.compile(r'class="[^"]*\bsolution\b')
    chapters = sorted((build / "notebooks").glob("*.html"))
    assert chapters
    for page in chapters:
        html = page.read_text(encoding="utf-8")
        assert not solution.search(html), page.name
        assert "teachers_guide" not in html, page.name
    # the teacher's build does show them
    assert solution.search((book / "notebooks" / "02_acceptance.html").read_text("utf-8"))
