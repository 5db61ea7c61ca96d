"""Two screenshots of the live edition, for a person to look at (not a test).

Usage: python scripts/lite/screenshot_live.py [HTML_DIR] [OUT_DIR]   (defaults: _build/html
screenshots). Serves HTML_DIR (a `make book` output, with its lite/ folder) on 127.0.0.1,
blocks every other address, and with the system Chromium saves
- live_button_<chapter>.png: the top of the chapter's page in the book, its "Run live" button;
- live_running_<chapter>.png: the chapter open in the live edition after "Run all", scrolled
  to its θ slider.
"""

import functools
import http.server
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import sync_playwright

CHAPTER = "02_acceptance"
SLIDER_CALL = "widgets.threshold_drift("
RUN_ALL_JS = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.sessionContext.ready;
  await window.jupyterapp.commands.execute('notebook:run-all-cells');
  while (panel.sessionContext.session.kernel.status !== 'idle') {
    await new Promise(r => setTimeout(r, 200));
  }
}"""
SHOW_CELL_JS = """async (call) => {
  const nb = window.jupyterapp.shell.currentWidget.content;
  const index = nb.widgets.findIndex(c => c.model.sharedModel.getSource().includes(call));
  await nb.scrollToItem(index, 'start');
}"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # one line of output, not one per file
        pass


def main(html: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    blocked = []

    def guard(route):
        if urlsplit(route.request.url).netloc == urlsplit(base).netloc:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route("**/*", guard)
        page.set_default_timeout(180_000)
        page.goto(f"{base}/notebooks/{CHAPTER}.html")
        page.locator(".live-edition a").wait_for()
        page.screenshot(path=out / f"live_button_{CHAPTER}.png")
        page.locator(".live-edition a").click()
        page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                               " && window.jupyterapp.shell.currentWidget.sessionContext")
        page.evaluate(RUN_ALL_JS)
        page.evaluate(SHOW_CELL_JS, SLIDER_CALL)
        page.locator(".widget-interact img").first.wait_for()
        page.screenshot(path=out / f"live_running_{CHAPTER}.png")
        browser.close()
    server.shutdown()
    print(f"screenshot_live: 2 screenshots in {out}; blocked outside requests: {len(blocked)}")


if __name__ == "__main__":
    args = [Path(a) for a in sys.argv[1:3]]
    main(*(args + [Path("_build/html"), Path("screenshots")][len(args):]))
