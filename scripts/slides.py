"""Build an offline reveal.js deck per chapter from the committed notebooks.

Usage: python scripts/slides.py OUT_DIR [NOTEBOOK ...]

A deck is built from a chapter's committed cells, with nothing executed:

* a title slide: the chapter's heading and its objectives;
* one slide per numbered section (``## 1.2 ...``): its heading, the section's
  "Predict, then run" question if it has one, and its figures, one slide each;
* the summary;
* and every cell tagged ``slides``, in its place, whatever its kind.

Everything a deck loads (reveal.js, MathJax) is copied next to it from book/vendor, so
the folder opens from a local web server with no network.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import sys
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "book" / "vendor"
SLIDE_TAG = "slides"
PREDICT = re.compile(r"```\{admonition\} Predict, then run\n(?::class:[^\n]*\n)?(.*?)```", re.S)
DIRECTIVE = re.compile(r"^(```|~~~)\{[^}]+\}.*?^\1", re.S | re.M)
ROLE = re.compile(r"\{(?:ref|prf:ref|doc|term)\}`([^`]*)`")
CITE = re.compile(r"\{cite(?::[pt])?\}`([^`]*)`")
BIB_ENTRY = re.compile(r"@\w+\{(\w+),(.*?)\n\}", re.S)

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{title}</title>
<link rel="stylesheet" href="vendor/reveal.js/reveal.css">
<link rel="stylesheet" href="vendor/reveal.js/theme/white.css">
<style>
.reveal {{ font-size: 30px; }}
.reveal h1, .reveal h2 {{ text-transform: none; }}
.reveal h1 {{ font-size: 1.7em; }} .reveal h2 {{ font-size: 1.25em; }}
.reveal img {{ max-height: 560px; border: 0; box-shadow: none; }}
.reveal .predict {{ border-left: 6px solid #2e8b57; padding: 0.4em 0.8em; text-align: left;
                    background: #eef7f1; }}
.reveal ul {{ font-size: 0.85em; }} .reveal pre {{ font-size: 0.45em; }}
</style>
<script>window.MathJax = {{tex: {{inlineMath: [["\\\\(", "\\\\)"]],
  displayMath: [["\\\\[", "\\\\]"]]}}}};</script>
<script src="vendor/mathjax/tex-mml-chtml.js"></script>
</head><body>
<div class="reveal"><div class="slides">
{slides}
</div></div>
<script src="vendor/reveal.js/reveal.js"></script>
<script>Reveal.initialize({{hash: true, slideNumber: true, width: 1280, height: 720}});</script>
</body></html>
"""


def markdown_renderer() -> MarkdownIt:
    """CommonMark with $...$ and $$...$$ kept for MathJax as \\( \\) and \\[ \\]."""
    md = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin)
    md.add_render_rule("math_inline", lambda self, tokens, idx, *_: (
        "\\(" + html.escape(tokens[idx].content) + "\\)"))
    md.add_render_rule("math_block", lambda self, tokens, idx, *_: (
        "\\[" + html.escape(tokens[idx].content) + "\\]"))
    return md


def short_citations(bib: Path) -> dict[str, str]:
    """{key: "Surname et al. year"} for every entry of a BibTeX file."""
    names = {}
    for key, body in BIB_ENTRY.findall(bib.read_text()):
        author = re.search(r"author\s*=\s*\{(.*?)\},?\n", body, re.S)
        year = re.search(r"year\s*=\s*\{(\d+)\}", body)
        authors = author.group(1).split(" and ") if author else ["?"]
        surname = authors[0].split(",")[0].strip("{} ")
        names[key] = f"{surname}{' et al.' if len(authors) > 1 else ''} " \
                     f"{year.group(1) if year else ''}".strip()
    return names


CITATIONS = short_citations(ROOT / "book" / "references.bib")


def plain_markdown(text: str) -> str:
    """MyST reduced to what plain markdown can show: citations become "Author year",
    other roles their text, and directives (exercises, proofs, dropdowns) are left out."""
    text = CITE.sub(lambda m: "; ".join(CITATIONS.get(key.strip(), key.strip())
                                        for key in m.group(1).split(",")), text)
    return ROLE.sub(r"\1", DIRECTIVE.sub("", text))


def figures(cell: dict) -> list[str]:
    """The PNG outputs of a code cell, base64."""
    return [out["data"]["image/png"].replace("\n", "")
            for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]


def section_slides(md: MarkdownIt, heading: str, cells: list[dict]) -> list[str]:
    """Slides for one section: its heading (with its prediction question), then one
    slide per figure."""
    title = md.renderInline(plain_markdown(heading.lstrip("#").strip()))
    question = ""
    for cell in cells:
        match = PREDICT.search("".join(cell["source"])) if cell["cell_type"] == "markdown" else None
        if match:
            question = f'<div class="predict"><b>Predict, then run.</b> ' \
                       f'{md.render(plain_markdown(match.group(1)))}</div>'
            break
    slides = [f"<section><h2>{title}</h2>{question}</section>"]
    for cell in cells:
        for png in figures(cell):
            slides.append(f'<section><h2>{title}</h2><img src="data:image/png;base64,{png}">'
                          "</section>")
    return slides


def tagged_slide(md: MarkdownIt, cell: dict) -> str:
    """A cell tagged for slides, shown whole: markdown rendered, code with its figures."""
    source = "".join(cell["source"])
    if cell["cell_type"] == "markdown":
        return f"<section>{md.render(plain_markdown(source))}</section>"
    body = f"<pre><code>{html.escape(source)}</code></pre>"
    body += "".join(f'<img src="data:image/png;base64,{png}">' for png in figures(cell))
    return f"<section>{body}</section>"


def deck(notebook: Path, md: MarkdownIt) -> tuple[str, str]:
    """(title, HTML of the slides) for one chapter notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    first = "".join(cells[0]["source"])
    title = first.splitlines()[0].lstrip("# ").strip()
    intro = plain_markdown(first.split("\n", 1)[1] if "\n" in first else "")
    slides = [f"<section><h1>{html.escape(title)}</h1>{md.render(intro)}</section>"]
    sections: list[tuple[str, list[dict]]] = [("", [])]  # (heading, its cells) in order
    for cell in cells[1:]:
        source = "".join(cell["source"])
        heading = next((line for line in source.splitlines() if line.startswith("## ")), None)
        if cell["cell_type"] == "markdown" and heading:
            sections.append((heading, []))
        sections[-1][1].append(cell)
    for heading, group in sections:
        if heading.startswith("## Exercises"):
            break
        if heading.startswith("## Summary"):
            summary = "".join(group[0]["source"]).split("\n", 1)[1]
            slides.append(f"<section><h2>Summary</h2>{md.render(plain_markdown(summary))}"
                          "</section>")
        elif heading:
            slides.extend(section_slides(md, heading, group))
        slides.extend(tagged_slide(md, cell) for cell in group
                      if SLIDE_TAG in cell.get("metadata", {}).get("tags", []))
    return title, "\n".join(slides)


def main(out_dir: str, notebooks: list[str]) -> None:
    out = Path(out_dir)
    paths = [Path(p) for p in notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"slides: no such notebook: {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("reveal.js", "mathjax"):
        shutil.copytree(VENDOR / name, out / "vendor" / name, dirs_exist_ok=True)
    md = markdown_renderer()
    for path in paths:
        title, slides = deck(path, md)
        target = out / f"{path.stem}.html"
        target.write_text(PAGE.format(title=html.escape(title), slides=slides))
        print(target, f"({slides.count('<section>')} slides)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: python scripts/slides.py OUT_DIR [NOTEBOOK ...]")
    main(sys.argv[1], sys.argv[2:])
