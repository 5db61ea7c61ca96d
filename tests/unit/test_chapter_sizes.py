"""Every class chapter fits one lesson: at most about 3,300 words of prose and 170 lines of
code, at least two predict-then-run moments and three exercises. The chapters are the
``Chapters`` part of ``_toc.yml``; appendices are optional reading and not held to it."""

from __future__ import annotations

import json
import re

import pytest
from support import ROOT

MAX_WORDS = 3300  # whitespace-separated tokens over all markdown cells, math included
MAX_CODE_LINES = 175  # non-blank lines over all code cells


def class_chapters() -> list[str]:
    toc = (ROOT / "_toc.yml").read_text()
    part = toc.split("caption: Chapters", 1)[1].split("- caption:", 1)[0]
    return re.findall(r"- file: (notebooks/\S+)", part)


def test_the_toc_lists_the_chapters() -> None:
    assert len(class_chapters()) >= 9


@pytest.mark.parametrize("chapter", class_chapters())
def test_a_chapter_fits_one_lesson(chapter: str) -> None:
    cells = json.loads((ROOT / f"{chapter}.ipynb").read_text())["cells"]
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    words = sum(len(text.split()) for text in markdown)
    code_lines = sum(1 for text in code for line in text.splitlines() if line.strip())
    predictions = sum(text.count("{admonition} Predict, then run") for text in markdown)
    exercises = sum(text.count("```{exercise}") for text in markdown)
    assert words <= MAX_WORDS, f"{chapter}: {words} words of prose"
    assert code_lines <= MAX_CODE_LINES, f"{chapter}: {code_lines} lines of code"
    assert predictions >= 2, f"{chapter}: {predictions} predict-then-run boxes"
    assert exercises >= 3, f"{chapter}: {exercises} exercises"
