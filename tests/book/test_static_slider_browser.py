"""A precomputed slider moves in a real browser: the module's markup plus book/js/static_slider.js,
served on 127.0.0.1 and driven by Playwright with the system Chromium (no browser download).

Skipped, with one reason, when Playwright or /usr/bin/chromium is missing.
"""

import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from support import ROOT, serve  # noqa: E402

from specdec_lite.teaching.static_slider import precompute  # noqa: E402

SCRIPT = ROOT / "book" / "js" / "static_slider.js"
CHROMIUM = Path("/usr/bin/chromium")

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright not installed (pip install -r requirements-lite.txt)"
)
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)", allow_module_level=True)


def bar(height: float) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.bar([0], [height])
    ax.set_ylim(0, 4)
    return fig


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>static slider</title></head>
<body>
{slider}
{script}
</body></html>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A directory with the slider page (with and without the script), served on a free
    port of 127.0.0.1; yields the base URL."""
    root = tmp_path_factory.mktemp("static_slider_site")
    markup = precompute(bar, [1.0, 2.0, 3.0], label="h", default=1.0)._repr_html_()
    shutil.copy(SCRIPT, root / "static_slider.js")
    (root / "index.html").write_text(
        PAGE.format(slider=markup, script='<script src="static_slider.js"></script>'), "utf-8")
    (root / "nojs.html").write_text(PAGE.format(slider=markup, script=""), "utf-8")
    with serve(root) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


def open_page(browser, url, outside: list[str]):
    page = browser.new_page()

    def route(r):
        if r.request.url.startswith("http://127.0.0.1:"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(url)
    return page


def visible_frames(page) -> list[str]:
    return page.eval_on_selector_all(
        "[data-sds-frame]", "els => els.filter(e => !e.hidden && e.offsetWidth > 0)"
                            ".map(e => e.dataset.sdsIndex)")


def test_slider_swaps_frames(site, browser):
    outside: list[str] = []
    page = open_page(browser, site + "/index.html", outside)
    slider = page.locator("input[data-sds-input]")
    assert slider.is_visible() and slider.is_enabled()
    assert not page.locator("[data-sds-note]").is_visible()
    assert visible_frames(page) == ["0"]
    first_src = page.locator("[data-sds-frame]:visible").get_attribute("src")
    assert page.get_by_label("h").count() == 1  # the <label> names the slider

    slider.focus()
    page.keyboard.press("ArrowRight")
    assert visible_frames(page) == ["1"]
    assert slider.get_attribute("aria-valuetext") == "h = 2"
    assert page.locator("[data-sds-current]").inner_text() == "h = 2"
    assert page.locator("[data-sds-frame]:visible").get_attribute("src") != first_src

    slider.evaluate("el => { el.value = '2'; el.dispatchEvent(new Event('input')); }")
    assert visible_frames(page) == ["2"]
    assert page.locator("[data-sds-current]").inner_text() == "h = 3"

    page.keyboard.press("Home")
    assert visible_frames(page) == ["0"]
    assert outside == []
    page.close()


def test_without_the_script_the_default_frame_and_a_note_show(site, browser):
    outside: list[str] = []
    page = open_page(browser, site + "/nojs.html", outside)
    assert not page.locator("input[data-sds-input]").is_visible()
    assert page.locator("[data-sds-note]").is_visible()
    assert "Showing h = 1" in page.locator("[data-sds-note]").inner_text()
    assert visible_frames(page) == ["0"]
    assert outside == []
    page.close()
