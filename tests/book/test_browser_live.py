"""The live edition runs every chapter in the browser, offline.

Serves the JupyterLite site that `make lite` builds (_build/lite) on 127.0.0.1 and drives the
system Chromium through Playwright (no browser download). In one browser session, for every
chapter the site ships (scripts/lite/not-live.txt lists those it leaves out): open it in the
Notebook interface, run all cells in the Pyodide kernel and assert that no cell shows an error
(cells tagged `raises-exception` excepted); in chapter 2 move the θ slider and in chapter 3 the
k slider with the mouse, and see their output change. Every request to a host other than the
local server is aborted and counted, and the count must be zero. Prints each chapter's time
and its three slowest cells (`pytest -s`).

Skipped, with one line saying why, where Chromium or Playwright is missing.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support import ROOT, serve

SITE = ROOT / "_build" / "lite"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# LIVE_CHAPTERS=02,03 runs only the chapters whose names start with those prefixes.
ONLY = tuple(os.environ.get("LIVE_CHAPTERS", "").split(","))
# chapter -> (slider description, the call in the cell that shows the `interact` widget).
SLIDERS = {"02_acceptance.ipynb": ("θ", "widgets.threshold_drift("),
           "03_decode_loop.ipynb": ("k", "widgets.k_explorer(")}
# Seconds one chapter may take (open, run all, move its slider): about three times what it
# took on a 2-core machine, so a timeout means a hang, not a slow machine. LIVE_TIMEOUT_S
# overrides them all.
CHAPTER_TIMEOUT_S = {"05_medusa.ipynb": 360}
DEFAULT_TIMEOUT_S = 150


def chapter_timeout_s(name: str) -> int:
    return int(os.environ.get("LIVE_TIMEOUT_S") or CHAPTER_TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S))



if not CHROMIUM.is_file():
    pytest.skip(f"live-edition browser test skipped: no Chromium at {CHROMIUM} "
                "(apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="live-edition browser test "
                               "skipped: playwright not installed (requirements-lite.txt)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site() -> Path:
    """The built live edition (`make lite` is a no-op when it is up to date)."""
    subprocess.run(["make", "-s", "lite"], cwd=ROOT, check=True)
    assert (SITE / "notebooks" / "index.html").is_file()
    return SITE


@pytest.fixture(scope="module")
def base_url(site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser_page(base_url, tmp_path_factory):
    """One Chromium for all chapters; `outside` lists every blocked non-local request and
    `fetched` the site's paths the browser asked for."""
    outside: list[str] = []
    local = urlsplit(base_url).netloc

    def guard(route):
        url = route.request.url
        if urlsplit(url).netloc == local or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    with sync_api.sync_playwright() as pw:
        # A dead proxy as a second wall: anything that slipped past the route would fail.
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True,
            # No background traffic of the browser's own (updates, sync, safe browsing).
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
            proxy={"server": "http://127.0.0.1:9", "bypass": "127.0.0.1"},
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", guard)
        fetched: set[str] = set()  # local paths the browser asked for (first-visit size)

        def seen(request):
            parts = urlsplit(request.url)
            if parts.netloc == local:
                fetched.add(parts.path)
            elif not request.url.startswith(("data:", "blob:")):
                outside.append(request.url)

        context.on("request", seen)
        page = context.new_page()
        page.set_default_timeout(DEFAULT_TIMEOUT_S * 1000)
        yield page, outside, fetched
        context.close()
        browser.close()


# Runs in the page: every code cell's tags, execution count and output types.
CELL_STATE_JS = r"""() => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  return nb.widgets.filter(c => c.model.type === 'code').map(c => ({
    tags: c.model.getMetadata('tags') || [],
    count: c.model.executionCount,
    errors: c.model.outputs.toJSON().filter(o => o.output_type === 'error')
                          .map(o => [o.ename + ': ' + o.evalue, ...o.traceback.slice(-4)]
                                    .join('\n').replace(/\x1b\[[0-9;]*m/g, '')),
  }));
}"""

# Runs in the page: "Run all", then wait for the kernel to settle. Returns, for each code
# cell, the seconds from the previous cell's end to its own (null if it never finished):
# a code cell's execution count is cleared when it starts and set when it ends.
RUN_ALL_JS = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.sessionContext.ready;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  const ended = cells.map(() => null);
  const look = () => cells.forEach((c, i) => {
    if (ended[i] === null && c.model.executionCount !== null) ended[i] = performance.now();
  });
  let finished = false;
  const start = performance.now();
  app.commands.execute('notebook:run-all-cells').finally(() => { finished = true; });
  while (!finished || panel.sessionContext.session.kernel.status !== 'idle') {
    look();
    await new Promise(r => setTimeout(r, 100));
  }
  look();
  let last = start;
  return ended.map(t => {
    if (t === null) return null;
    const took = (t - last) / 1000;
    last = t;
    return took;
  });
}"""


def open_chapter(page, base_url: str, name: str) -> None:
    page.goto(f"{base_url}/notebooks/index.html?path=notebooks/{name}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext")
    page.wait_for_function("() => { const s = window.jupyterapp.shell.currentWidget"
                           ".sessionContext; return s.session && s.session.kernel"
                           " && s.session.kernel.status === 'idle'; }")


# Runs in the page: bring the cell whose source has `call` into view (the notebook renders
# only the cells near the viewport) and mark it for the locators.
SHOW_CELL_JS = """async (call) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const index = nb.widgets.findIndex(c => c.model.sharedModel.getSource().includes(call));
  if (index < 0) return false;
  await nb.scrollToItem(index, 'center');
  nb.widgets[index].node.setAttribute('data-live-test', 'slider-cell');
  return true;
}"""


def move_slider(page, description: str, call: str) -> None:
    """Move the `interact` slider labelled `description` and wait for its output to change.

    The slider is moved as a reader does with the mouse: a click on its track, at 80% of its
    length (noUiSlider's "tap" behaviour moves the handle there and commits the value).
    Arrow keys pressed on the focused handle left the value unchanged in the live notebook
    (checked by hand), so the test does not rely on them.
    """
    assert page.evaluate(SHOW_CELL_JS, call), f"no cell calls {call}"
    cell = page.locator("[data-live-test=slider-cell]")
    slider = cell.locator(".widget-slider").filter(
        has=page.locator(f".widget-label:text-is('{description}')"))
    output = cell.locator(".widget-interact .widget-output").last
    output.locator("img").first.wait_for()
    before = output.inner_html()
    readout = slider.locator(".widget-readout")
    old = readout.inner_text()
    track = slider.locator(".noUi-base")
    box = None
    for _ in range(40):  # JupyterLab renders cells lazily: scroll until the track is laid out
        page.evaluate(SHOW_CELL_JS, call)
        track.scroll_into_view_if_needed()
        box = track.bounding_box()
        if box and box["width"] > 0:
            break
        page.wait_for_timeout(250)
    assert box and box["width"] > 0, f"the {description} slider was never laid out on screen"
    track.click(position={"x": 0.8 * box["width"], "y": box["height"] / 2})
    page.wait_for_function(
        "([el, old]) => el.innerText !== old", arg=[readout.element_handle(), old])
    start = time.perf_counter()
    page.wait_for_function("([el, before]) => el.innerHTML !== before && el.querySelector('img')",
                           arg=[output.element_handle(), before])
    print(f"  slider {description}: {old} -> {readout.inner_text()}, output changed in "
          f"{time.perf_counter() - start:.1f} s")


def run_chapter(page, base_url: str, name: str) -> list[str]:
    """Open and run one chapter; the problems found (empty when it ran cleanly)."""
    open_chapter(page, base_url, name)
    took = page.evaluate(RUN_ALL_JS)
    slowest = sorted((t, i) for i, t in enumerate(took) if t is not None)[-3:][::-1]
    print(f"  ran {sum(t is not None for t in took)} code cells in {sum(filter(None, took)):.1f} s;"
          " slowest: " + ", ".join(f"cell {i} {t:.1f} s" for t, i in slowest))
    cells = page.evaluate(CELL_STATE_JS)
    problems = [f"code cell {i}: {err}" for i, c in enumerate(cells)
                if "raises-exception" not in c["tags"] for err in c["errors"]]
    problems += [f"code cell {i} never ran" for i, c in enumerate(cells) if c["count"] is None]
    if not problems and name in SLIDERS:
        move_slider(page, *SLIDERS[name])
    return problems or [] if cells else ["no code cells found"]


def live_chapters(site: Path) -> list[str]:
    """Every chapter the site ships (build_lite leaves out those in not-live.txt)."""
    return sorted(p.name for p in (site / "files" / "notebooks").glob("*.ipynb")
                  if p.name.startswith(ONLY))


def test_every_chapter_runs_live_offline(site, browser_page, base_url, capsys):
    # The times are printed even under pytest -q (`make test`): capture is off in here.
    with capsys.disabled():
        print()
        times, failures, outside = run_every_chapter(site, browser_page, base_url)
    assert not failures, "\n".join(f"{n}: {p}" for n, ps in failures.items() for p in ps)
    assert not outside, f"requests to other hosts: {outside[:5]}"


def run_every_chapter(site: Path, browser_page, base_url: str):
    """Run each chapter the site ships, printing its time; (times, failures, outside)."""
    page, outside, fetched = browser_page
    chapters = live_chapters(site)
    assert chapters, f"no chapter in {site} starts with {ONLY}"
    times, failures = {}, {}
    start = time.perf_counter()
    open_chapter(page, base_url, chapters[0])
    print(f"live edition: first visit, {chapters[0]} open with an idle kernel in "
          f"{time.perf_counter() - start:.1f} s")
    for name in chapters:
        page.set_default_timeout(chapter_timeout_s(name) * 1000)
        start = time.perf_counter()
        try:
            problems = run_chapter(page, base_url, name)
        except sync_api.Error as exc:  # a timeout or a missing element: report, go on
            problems = [f"{type(exc).__name__}: {str(exc).splitlines()[0]}"]
        times[name] = time.perf_counter() - start
        print(f"live {name}: {'ok' if not problems else 'FAILED'} in {times[name]:.1f} s")
        if problems:
            failures[name] = problems
    files = [site / path.lstrip("/") for path in fetched]
    size = sum(f.stat().st_size for f in files if f.is_file())
    print(f"live edition: {len(times)} chapters in {sum(times.values()):.1f} s; outside "
          f"requests: {len(outside)}; the browser loaded {size / 1e6:.1f} MB of the site "
          f"({sum(f.is_file() for f in files)} files)")
    return times, failures, outside


def test_site_never_falls_back_to_pypi(site):
    import json

    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["disablePyPIFallback"] is True
    assert kernel["pyodideUrl"] == "./static/pyodide/pyodide.js"
    assert shutil.which("make")
