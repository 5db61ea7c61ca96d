"""The tests, by layer: unit/ (one module or helper at a time), statistical/ (chi-square and
sampled-law checks of the decoders), integration/ (the service, the journal and the CLI, in
child processes) and book/ (plots, slides and the built pages). Shared helpers live in
tests/support.py, which every folder imports as ``support``: tests/ goes on sys.path here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from specdec_lite.bench.timing import pin_blas_threads  # noqa: E402

# One BLAS thread for the whole run: a threaded product splits its sums by core count, so
# float32 results (compared at 1e-6 in places) would depend on the machine and on whether
# an earlier test had pinned the threads (the servers the tests start get the same).
pin_blas_threads(1)


# Markers of whole modules, in one place, keyed by file name whatever the folder
# (pyproject.toml registers them; `make test-fast` deselects slow, browser, server and
# statistical). Single tests carry their own marks.
MODULE_MARKERS = {
    "test_browser_live.py": ("browser", "slow"),
    "test_static_slider_browser.py": ("browser",),
    "test_service.py": ("server",),
    "test_service_crash.py": ("server", "slow"),
    "test_service_trust.py": ("server", "slow"),
    "test_service_openai.py": ("server",),
    "test_hf.py": ("torch",),
    # whole-sequence chi-square and sampled-law tests, sized by their power analyses
    "test_lossless.py": ("statistical",),
    "test_sampling_filters.py": ("statistical",),
    "test_pitfalls.py": ("statistical",),
    "test_drafters_exact.py": ("statistical",),
    "test_eagle_exact.py": ("statistical",),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in MODULE_MARKERS.get(item.path.name, ()):
            item.add_marker(name)
