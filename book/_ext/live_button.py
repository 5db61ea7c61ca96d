"""A visible "Run live" button at the top of every chapter page.

The button opens the chapter in the live edition: the JupyterLite site that `make lite`
builds and `make book` copies to `<html>/lite/`, where the chapter runs in the reader's
browser (Pyodide), offline. Only pages built from a notebook get one; a chapter listed in
scripts/lite/not-live.txt (one the browser cannot run) gets the listed reason instead.

The student edition (`hide_solutions: true`, `make book-student`) gets none: the live
notebooks are the full chapters, solutions included, so linking them would undo the
hidden solutions. Nor does a book built without the live edition (`make book` on a machine
without npm sets SPECDEC_LIVE_EDITION=0): a button there would lead nowhere.
"""

import os
from html import escape
from pathlib import Path

BUTTON = (
    '<div class="live-edition" style="margin: 0 0 1rem 0">'
    '<a class="btn btn-sm btn-primary" href="{href}" title="{title}">&#9654; Run live</a> '
    '<span class="live-edition-note" style="font-size: 0.85em">{note}</span></div>'
)
TITLE = "Open this chapter in the live edition: Python runs in your browser, offline"
# Shown in place of the button on a chapter that scripts/lite/not-live.txt leaves out.
NOT_LIVE_NOTE = ('<div class="live-edition live-edition-absent" style="margin: 0 0 1rem 0; '
                 'font-size: 0.85em">Not in the live edition. {reason}</div>')
NOTE = ("runs this chapter in your browser, no install; the first visit loads about 51 MB "
        "(served over http, see the introduction)")


def live_url(pagename: str, live_path: str) -> str:
    """The chapter's address in the live edition, relative to the page `pagename`."""
    up = "../" * pagename.count("/")
    notebook = f"notebooks/{pagename.rsplit('/', 1)[-1]}.ipynb"
    return f"{up}{live_path}/notebooks/index.html?path={notebook}"


def not_live(listing: Path) -> dict[str, str]:
    """{notebook file name: why} for the chapters the live edition leaves out (the same file
    scripts/lite/build_lite.py reads)."""
    out = {}
    for line in listing.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.strip().partition(" ")
            out[name] = reason.strip()
    return out


def add_button(app, pagename, templatename, context, doctree):
    if getattr(app.config, "hide_solutions", False) or "body" not in context:
        return
    if os.environ.get("SPECDEC_LIVE_EDITION", "1") == "0":  # built without the live edition
        return
    if not pagename.startswith("notebooks/"):
        return
    if not str(app.env.doc2path(pagename)).endswith(".ipynb"):
        return
    skipped = not_live(Path(app.srcdir) / app.config.live_edition_not_live)
    reason = skipped.get(pagename.rsplit("/", 1)[-1] + ".ipynb")
    if reason is not None:
        context["body"] = NOT_LIVE_NOTE.format(reason=escape(reason)) + context["body"]
        return
    href = live_url(pagename, app.config.live_edition_path)
    context["body"] = BUTTON.format(href=escape(href), title=escape(TITLE),
                                    note=escape(NOTE)) + context["body"]


def setup(app):
    # Where `make book` puts the live edition, relative to the HTML root.
    app.add_config_value("live_edition_path", "lite", "html")
    # The chapters the live edition leaves out, relative to the book's source folder.
    app.add_config_value("live_edition_not_live", "scripts/lite/not-live.txt", "html")
    app.connect("html-page-context", add_button)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
