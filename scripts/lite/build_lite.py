"""Build the live edition of the book: a JupyterLite site that runs the chapters in the browser.

Usage: python scripts/lite/build_lite.py OUT_DIR CACHE_DIR   (run by `make lite`)

The site is static files only: JupyterLite 0.6.4 (the Lab and Notebook interfaces), the
Pyodide kernel 0.6.1, the Pyodide 0.27.7 distribution that pyodide_dist.py assembles and
verifies, the widget front end and jupyterlab-myst (federated extensions, taken from .venv,
where requirements-lite.txt and requirements.txt pin them), the chapters with their outputs
cleared (less those in not-live.txt), and the results/*.json files that chapter 6 and the
appendix read. It fetches nothing at run time (`disablePyPIFallback`); downloads at build
time are cached in CACHE_DIR.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))
import pyodide_dist  # noqa: E402  (a sibling script module, not part of the library)
from live_button import not_live  # noqa: E402  (the book's extension reads the same list)

ROOT = Path(__file__).resolve().parents[2]
LABEXTENSIONS = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
# The federated extensions of the site (folders in .venv, installed by pinned pip packages).
FEDERATED = [
    "@jupyterlite/pyodide-kernel-extension",  # jupyterlite-pyodide-kernel
    "@jupyter-widgets/jupyterlab-manager",  # jupyterlab_widgets (ipywidgets' front end)
    "jupyterlab-myst",  # MyST directives, roles and math in markdown cells
]
APPS = ["lab", "notebooks", "tree"]
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
PYODIDE_KERNELSPEC = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}


NOT_LIVE = Path(__file__).with_name("not-live.txt")


def live_copy(notebook: Path, dest: Path) -> None:
    """The chapter as the browser kernel should open it: no outputs, the Pyodide kernel."""
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(PYODIDE_KERNELSPEC)
    nbformat.write(nb, dest)


def stage_contents(contents: Path) -> int:
    """notebooks/*.ipynb (less the not-live ones) and results/*.json, in the repository's
    layout; the number of chapters staged."""
    shutil.rmtree(contents, ignore_errors=True)
    (contents / "notebooks").mkdir(parents=True)
    (contents / "results").mkdir()
    skipped = not_live(NOT_LIVE)
    missing = sorted(set(skipped) - {nb.name for nb in (ROOT / "notebooks").glob("*.ipynb")})
    if missing:
        sys.exit(f"build_lite: not-live.txt names chapters that do not exist: {missing}")
    chapters = sorted(nb for nb in (ROOT / "notebooks").glob("*.ipynb") if nb.name not in skipped)
    for nb in chapters:
        live_copy(nb, contents / "notebooks" / nb.name)
    for data in sorted((ROOT / "results").glob("*.json")):
        shutil.copy2(data, contents / "results" / data.name)
    return len(chapters)


def lite_config(output: Path, cache: Path) -> dict:
    return {
        "LiteBuildConfig": {
            "apps": APPS,
            "contents": ["contents"],
            "output_dir": str(output),
            "cache_dir": str(cache / "jupyterlite"),
            "no_sourcemaps": True,
            "no_unused_shared_packages": True,
            "ignore_sys_prefix": ["federated_extensions"],
            "federated_extensions": [str(LABEXTENSIONS / name) for name in FEDERATED],
        }
    }


def main(output: Path, cache: Path) -> None:
    lite_dir = output.parent / "lite-src"  # the staging folder `jupyter lite build` reads
    shutil.rmtree(lite_dir, ignore_errors=True)
    lite_dir.mkdir(parents=True)

    tgz = pyodide_dist.fetch_pyodide_tarball(cache)
    wheels = cache / "wheels"
    pyodide_dist.download_wheels(Path(__file__).with_name("browser-wheels.txt"), wheels)
    project_wheel = pyodide_dist.build_project_wheel(ROOT, lite_dir / "dist")
    # static/pyodide/ is where the Pyodide addon looks for a local distribution.
    summary = pyodide_dist.assemble(tgz, wheels, project_wheel, lite_dir / "static" / "pyodide")
    n = stage_contents(lite_dir / "contents")

    (lite_dir / "jupyter_lite_config.json").write_text(json.dumps(lite_config(output, cache)))
    shutil.rmtree(output, ignore_errors=True)
    # Its log (a line per file) is shown only when the build fails.
    build = subprocess.run([str(Path(sys.executable).with_name("jupyter")), "lite", "build",
                            "--lite-dir", str(lite_dir)], cwd=lite_dir,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if build.returncode:
        sys.exit(f"{build.stdout}\nbuild_lite: `jupyter lite build` failed ({build.returncode})")
    patch_site_config(output)
    check_site(output)
    print(f"build_lite: {n} chapters; {summary['verified_against_npm_lock']} Pyodide packages "
          f"verified against pyodide-lock.json; added {', '.join(summary['added'])}; "
          f"{_size_mb(output):.1f} MB in {output}")


def patch_site_config(output: Path) -> None:
    """Settings of the built site, written into its jupyter-lite.json files.

    They are set on the output because the build's addons rewrite these files late (the
    piplite addon drops a `disablePyPIFallback` given in the staging folder). Each app's
    config that names the kernel gets the flag too.
    """
    for path in [output / "jupyter-lite.json", *output.glob("*/jupyter-lite.json")]:
        config = json.loads(path.read_text())
        data = config.setdefault("jupyter-config-data", {})
        plugins = data.setdefault("litePluginSettings", {})
        if path.parent == output:
            data["appName"] = "specdec_lite, live"
            # window.jupyterapp, which tests/book/test_browser_live.py drives.
            data["exposeAppInBrowser"] = "true"
        if path.parent == output or KERNEL_PLUGIN in plugins:
            plugins.setdefault(KERNEL_PLUGIN, {})["disablePyPIFallback"] = True
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def check_site(output: Path) -> None:
    """The built site points its kernel at the local Pyodide and never falls back to PyPI."""
    config = json.loads((output / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"][KERNEL_PLUGIN]
    if not kernel.get("disablePyPIFallback") or not kernel.get("pyodideUrl", "").startswith("./"):
        sys.exit(f"build_lite: unexpected kernel settings {kernel}")
    if not (output / "static" / "pyodide" / "pyodide-lock.json").is_file():
        sys.exit("build_lite: the site has no static/pyodide/pyodide-lock.json")


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[2].strip())
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())
