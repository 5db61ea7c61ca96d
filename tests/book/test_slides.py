"""scripts/slides.py: an offline deck per chapter, from the committed notebooks."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from support import ROOT

CHAPTER = ROOT / "notebooks" / "02_acceptance.ipynb"


def test_a_deck_has_the_sections_figures_and_nothing_remote(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "slides.py"), str(tmp_path),
                           str(CHAPTER)], capture_output=True, text=True, check=True)
    deck = (tmp_path / "02_acceptance.html").read_text()
    assert "slides" in done.stdout
    text = "".join("".join(cell["source"]) + "\n"
                   for cell in json.loads(CHAPTER.read_text())["cells"])
    sections = re.findall(r"^## (\d+\.\d+ [^$\n]*)", text, re.M)
    assert sections, "the chapter has numbered sections"
    for heading in sections:
        assert heading.strip() in deck, heading
    assert deck.count("data:image/png;base64,") >= 3  # the chapter's figures
    assert "Predict, then run." in deck
    assert "{cite" not in deck and "{exercise}" not in deck  # MyST reduced to plain text
    assert "Leviathan et al. 2023" in deck
    # everything the page loads is next to it
    for url in re.findall(r'(?:src|href)="([^"]+)"', deck):
        if url.startswith("data:"):
            continue
        assert not re.match(r"[a-z]+://", url), url
        assert (tmp_path / url).is_file(), url


def test_a_missing_notebook_is_one_clear_error(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "slides.py"), str(tmp_path),
                           "notebooks/nope.ipynb"], capture_output=True, text=True)
    assert done.returncode != 0
    assert "no such notebook: notebooks/nope.ipynb" in done.stderr
