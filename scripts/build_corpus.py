"""Build the bundled corpus from the running Python's standard library.

The corpus is the concatenation of every top-level ``Lib/*.py`` module of the
interpreter that runs this script (CPython 3.11.7 for the shipped files).
Modules are sorted by name; every tenth one (index % 10 == 0) goes to the
held-out split, the rest to the training split. Tabs become four spaces and
any non-ASCII character becomes ``?`` so that the text fits the 96-symbol
``CharTokenizer.ascii()`` alphabet. The source is PSF-licensed; the licence
text is copied next to the corpus.

Usage: python scripts/build_corpus.py [OUT_DIR]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
import shutil
import sys
import sysconfig
from pathlib import Path


def normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\t", "    ")
    return "".join(ch if (ch == "\n" or 32 <= ord(ch) < 127) else "?" for ch in text)


def main(out_dir: Path) -> None:
    lib = Path(sysconfig.get_paths()["stdlib"])
    modules = sorted(p for p in lib.glob("*.py"))
    splits: dict[str, list[str]] = {"train": [], "heldout": []}
    texts: dict[str, list[str]] = {"train": [], "heldout": []}
    for index, path in enumerate(modules):
        split = "heldout" if index % 10 == 0 else "train"
        splits[split].append(path.name)
        body = normalise(path.read_text(encoding="utf-8", errors="replace"))
        texts[split].append(f"# ---- {path.name} ----\n{body}\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "source": "CPython standard library, top-level Lib/*.py modules",
        "python_version": platform.python_version(),
        "licence": "PSF License Agreement (see PYTHON_LICENSE.txt)",
        "split_rule": "modules sorted by file name; index % 10 == 0 -> heldout",
        "normalisation": "CRLF->LF, tab->4 spaces, non-ASCII->'?'",
        "files": {},
    }
    for split, parts in texts.items():
        data = "".join(parts).encode("ascii")
        name = f"stdlib_{split}.txt.gz"
        with gzip.GzipFile(out_dir / name, "wb", mtime=0) as fh:
            fh.write(data)
        manifest["files"][name] = {
            "modules": splits[split],
            "chars": len(data),
            "sha256_of_text": hashlib.sha256(data).hexdigest(),
        }
    shutil.copy(lib / "LICENSE.txt", out_dir / "PYTHON_LICENSE.txt")
    (out_dir / "corpus_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote corpus to {out_dir} from Python {platform.python_version()}", file=sys.stderr)


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[1] / "specdec_lite" / "data"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
