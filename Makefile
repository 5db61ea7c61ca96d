# specdec_lite: build, test and book pipeline.
#   make test       - everything a submission must pass: ruff, the library tests (the
#                     browser run of the live edition included), strict nbval under every
#                     BLAS kernel this CPU can run
#   make test-fast  - the edit-run loop: ruff, the tests not marked slow, browser, server or
#                     statistical, and strict nbval on this machine's kernel
#   make book       - render the committed outputs into _build/html (offline), with the live
#                     edition where npm exists; nothing is executed
#   make book-checked - re-execute and compare every notebook (nbval), then `make book`
#   make test-book  - the tests of the built pages (make book, make book-student first)
# The tests and the notebooks run in .venv (requirements*.txt, every extra); the book renders
# in the much smaller .venv-book (book/requirements.txt).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Kernels: make Jupyter find the venv's "python3" kernelspec before any user-level one,
# so notebooks always execute with the venv's interpreter. Fixed hash seed for determinism.
export JUPYTER_PATH := $(CURDIR)/$(VENV)/share/jupyter
export JUPYTER_PLATFORM_DIRS := 1
export PYTHONHASHSEED := 0
# One BLAS thread: the same floating-point summation order on every machine (notebook
# outputs are compared exactly), and no spinning BLAS threads fighting over 2 cores.
export OPENBLAS_NUM_THREADS := 1
export OMP_NUM_THREADS := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
BOOK_FLAGS := -W -n --keep-going --all

.PHONY: venv book-venv test test-fast test-book test-torch lint pytest pytest-fast nbval nbval-kernels book-checked lite book book-student figures slides notebooks lab screenshots vendor clean distclean

venv: $(STAMP)

# requirements.txt pins the book and test toolchain; each requirements-<extra>.txt pins one
# optional extra (serving, metrics, browser edition, ...) that the book and tests use. They are
# resolved together in one pip call, so `pip check` sees one consistent environment.
REQUIREMENTS := $(sort $(wildcard requirements*.txt))

$(STAMP): $(REQUIREMENTS) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(foreach f,$(REQUIREMENTS),-r $(f))
	$(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python -m pip check
	touch $@

test: lint pytest nbval nbval-kernels

# The quick tier for the edit-run loop (about 3 minutes on 2 cores with a warm venv): ruff,
# then the unit tests and strict nbval side by side, one core each. What it leaves out runs
# in `make test` and CI: tests marked slow, browser, server, statistical or torch
# (pyproject.toml registers the markers, tests/conftest.py marks whole modules) and nbval
# under the other BLAS kernels.
FAST_MARKERS := not slow and not browser and not server and not statistical and not torch

test-fast: lint
	$(MAKE) -j2 --output-sync=target pytest-fast nbval

pytest-fast: venv
	$(BIN)/pytest -q -m "$(FAST_MARKERS)" tests

# The tests of what readers get: the built pages load nothing remote, carry the vendored
# assets, the student build has no solutions, every shipped chapter has its live twin. A
# missing build fails them here (REQUIRE_BUILT_BOOK=1) instead of skipping them.
BOOK_TESTS := tests/book/test_offline_html.py tests/book/test_live_button.py

test-book: venv
	REQUIRE_BUILT_BOOK=1 $(BIN)/pytest -q $(BOOK_TESTS)

# Optional: the torch extra in its own venv (.venv-train, CPU wheel), for retraining the
# weights (python -m specdec_lite.training.train) and for the numpy-vs-torch forward test.
TRAIN_STAMP := .venv-train/.installed

$(TRAIN_STAMP): pyproject.toml
	test -x .venv-train/bin/python || $(PYTHON) -m venv .venv-train
	.venv-train/bin/python -m pip install -q torch==2.13.0 pytest==9.2.0
	.venv-train/bin/python -m pip install -q -e .
	touch $@

test-torch: $(TRAIN_STAMP)
	.venv-train/bin/python -m pytest -q tests/unit/test_transformer.py tests/unit/test_medusa.py

lint: venv
	$(BIN)/ruff check .

# .venv-book: what rendering the book needs (book/requirements.txt), about 310 MB.
BOOK_VENV := .venv-book
BOOK_BIN := $(BOOK_VENV)/bin
BOOK_STAMP := $(BOOK_VENV)/.installed

book-venv: $(BOOK_STAMP)

$(BOOK_STAMP): book/requirements.txt
	test -x $(BOOK_BIN)/python || $(PYTHON) -m venv $(BOOK_VENV)
	$(BOOK_BIN)/python -m pip install -q -r book/requirements.txt
	$(BOOK_BIN)/python -m pip check
	touch $@

# The browser test of the live edition (tests/book/test_browser_live.py) needs Debian's Chromium
# and the built site, which needs npm: with both, `make lite` runs first; without, the test
# skips and says so.
CHROMIUM := $(wildcard /usr/bin/chromium)
NPM := $(shell command -v npm 2>/dev/null)

pytest: venv $(if $(and $(CHROMIUM),$(NPM)),lite)
ifeq ($(CHROMIUM),)
	@echo "live edition: browser test SKIPPED, no /usr/bin/chromium (apt-get install chromium)"
else ifeq ($(NPM),)
	@echo "live edition: browser test SKIPPED, no npm to build the site (apt-get install npm)"
endif
	$(BIN)/pytest -q tests

# Strict nbval: every committed output must equal a fresh run (up to nbval_sanitize.cfg;
# cells tagged `nbval-ignore-output` are run but not compared, `nbval-skip` are not run).
NBVAL := $(BIN)/pytest -q -p no:cacheprovider --nbval --nbval-current-env \
    --nbval-sanitize-with nbval_sanitize.cfg $(NOTEBOOKS)

nbval: venv
ifeq ($(NOTEBOOKS),)
	@echo "nbval: no notebooks/*.ipynb yet, nothing to check"
else
	$(NBVAL)
endif

# Strict nbval again under each other OpenBLAS kernel this CPU can run (Haswell and/or
# SkylakeX, scripts/other_kernels.py): a committed output whose digits depend on the kernel's
# order of summation fails here, on the author's machine, instead of on a reader's. The
# Haswell run also caps torch at AVX2, as on the CPUs that get that kernel.
KERNEL_ENV_Haswell := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2

nbval-kernels: venv
ifneq ($(NOTEBOOKS),)
	@kernels="$$($(BIN)/python scripts/other_kernels.py)"; \
	if [ -z "$$kernels" ]; then echo "nbval-kernels: this CPU runs no other OpenBLAS kernel"; fi; \
	for k in $$kernels; do \
	    echo "nbval under OPENBLAS_CORETYPE=$$k"; \
	    if [ "$$k" = Haswell ]; then extra="$(KERNEL_ENV_Haswell)"; else extra=; fi; \
	    env OPENBLAS_CORETYPE=$$k $$extra $(NBVAL) || exit 1; \
	done
endif

# The live edition: a JupyterLite site that runs the chapters in the reader's browser (Pyodide),
# offline. Built into _build/lite from pinned, sha256-verified parts (scripts/lite/) by the
# book's environment; downloads (the npm registry's Pyodide) are cached in .cache/lite.
# `make book` copies it into _build/html/lite after jupyter-book ran.
LITE_OUT := _build/lite
LITE_CACHE := .cache/lite
LITE_STAMP := $(LITE_OUT)/.built
LITE_INPUTS := $(NOTEBOOKS) $(wildcard results/*.json) $(wildcard scripts/lite/*.py) \
    scripts/lite/browser-wheels.txt scripts/lite/not-live.txt book/_ext/live_button.py pyproject.toml \
    $(shell find specdec_lite -type f -not -path '*/__pycache__/*' 2>/dev/null)

lite: $(LITE_STAMP)

$(LITE_STAMP): $(LITE_INPUTS) $(BOOK_STAMP)
	$(BOOK_BIN)/python scripts/lite/build_lite.py $(LITE_OUT) $(LITE_CACHE)
	touch $@

# The book renders the committed outputs (_config.yml: execute_notebooks off); `make test`
# (and so CI) is where they are re-executed and compared. The live edition goes into
# _build/html/lite after jupyter-book, so a rebuild of _build/html never leaves a stale copy;
# without npm the book is built without it (and without Run live buttons), and says so.
book: $(BOOK_STAMP) $(if $(NPM),lite)
	$(if $(NPM),,SPECDEC_LIVE_EDITION=0) $(BOOK_BIN)/jupyter-book build . $(BOOK_FLAGS)
	rm -rf _build/html/lite
ifeq ($(NPM),)
	@echo "live edition: NOT BUILT, no npm (apt-get install npm, then make book)"
	@echo "Book: $(CURDIR)/_build/html/index.html"
else
	cp -R $(LITE_OUT) _build/html/lite && rm -f _build/html/lite/.built
	@echo "Book: $(CURDIR)/_build/html/index.html (live edition: serve _build/html, see README)"
endif

# For authors who changed a notebook: re-execute and compare every one, then build.
book-checked: nbval
	$(MAKE) book

# The same book with exercise solutions removed (sphinx-exercise `hide_solutions: true`)
# and without the teacher's guide. Its config is _config.yml with solutions hidden and no
# source/.ipynb downloads (they contain the solutions), and its table of contents is
# _toc.yml without book/teachers_guide; both are generated so they cannot drift.
STUDENT_CONFIG := _build/_config_student.yml
STUDENT_TOC := _build/_toc_student.yml

book-student: $(BOOK_STAMP)
	rm -rf _build/student && mkdir -p _build
	$(BOOK_BIN)/python -c "import yaml; c = yaml.safe_load(open('_config.yml')); \
	    c['sphinx']['config'].update(hide_solutions=True, html_copy_source=False); \
	    c['html']['use_download_button'] = False; \
	    ext = c['sphinx']['local_extensions']; \
	    ext.update({k: '$(CURDIR)/' + v for k, v in ext.items()}); \
	    yaml.safe_dump(c, open('$(STUDENT_CONFIG)', 'w'), sort_keys=False)"
	$(BOOK_BIN)/python scripts/student_toc.py _toc.yml $(STUDENT_TOC)
	$(BOOK_BIN)/jupyter-book build . $(BOOK_FLAGS) --config $(STUDENT_CONFIG) \
	    --toc $(STUDENT_TOC) --path-output _build/student
	@echo "Student book: $(CURDIR)/_build/student/_build/html/index.html"

# The key figure of each chapter at slide size (16:9, large fonts), for teaching.
figures: venv
	$(BIN)/python scripts/figures.py _build/figures

# One offline reveal.js deck per chapter, from the committed notebooks (nothing executed):
# section headings, predict-then-run questions, figures, the summary, and cells tagged
# `slides`. Serve _build/slides (python -m http.server) and open a chapter's .html.
slides: venv
	$(BIN)/python scripts/slides.py _build/slides

# Re-execute every notebook in place so committed outputs equal a fresh execution.
notebooks: venv
ifeq ($(NOTEBOOKS),)
	@echo "no notebooks/*.ipynb yet"
else
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.kernel_name=python3 --ExecutePreprocessor.timeout=600 \
	    --ExecutePreprocessor.record_timing=False \
	    $(NOTEBOOKS)
endif

lab: venv
	$(BIN)/jupyter lab notebooks/

screenshots: book
	bash scripts/screenshots.sh _build/html screenshots

# Re-download the pinned offline assets in book/vendor (needs npm and the npm registry).
vendor:
	bash scripts/vendor_assets.sh

clean:
	rm -rf _build .jupyter_cache .pytest_cache .ruff_cache screenshots
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(BOOK_VENV) *.egg-info

# Benchmark (specdec_lite.bench): one BLAS thread, so timings are stable and comparable.
# `make bench` is the full set (about 8 minutes, on a quiet machine): the full run on this
# CPU's own OpenBLAS kernel with the best backend installed (results/bench.json and the
# figures), bench-check (a second full run, the reproduction check), bench-haswell (the full
# run again with OPENBLAS_CORETYPE=Haswell, the kernel AMD Zen and older Intel CPUs get) and
# kernel-curves (T(n) per kernel and backend); then bench-readme renders the README's tables.
BENCH_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: bench bench-check bench-haswell kernel-curves roofline-sizes bench-quick bench-readme

bench: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite bench --simulate-width 16 \
	    --json results/bench.json --plot results
	$(MAKE) bench-check bench-haswell kernel-curves roofline-sizes
	$(MAKE) bench-readme

# A second full run, compared row by row with results/bench.json: is each new median inside
# the committed 95% CI (or within 0.05 of it)? Writes results/bench_check.json (with a
# "comparison"), which appendix A reads; results/bench.json stays as it is.
bench-check: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite bench --simulate-width 16 \
	    --json results/bench_check.json --compare results/bench.json

# The same full run under the Haswell kernel (set in this process's environment only).
bench-haswell: venv
	OPENBLAS_CORETYPE=Haswell $(BENCH_ENV) $(BIN)/python -m specdec_lite bench \
	    --simulate-width 16 --json results/bench_haswell.json

kernel-curves: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite.bench.curves --json results/kernel_curves.json

# r(n) of numpy's product and the skinny kernel on layers from 0.15 MB to 1 GB (chapter 6,
# section 6.3): about a minute, 3 GB of memory.
roofline-sizes: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite.bench.roofline --json results/roofline_sizes.json

bench-quick: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite bench --quick --json _build/bench-quick.json

# Draft sources and policies (bench --drafters) on both forwards of this machine:
# results/drafters_$(TAG)_numpy.json and _numba.json (TAG names the machine and run; chapter 9
# reads the amd10 pair). drafters-readme renders the README's table from the files
# DRAFTER_RESULTS lists (NAME=PATH, NAME up to 5 characters: a column heading).
TAG ?= here
DRAFTER_RESULTS := A-np=results/drafters_numpy.json A-nb=results/drafters_numba.json \
    I-np=results/drafters_xeon_numpy.json I-nb=results/drafters_xeon_numba.json \
    I3-np=results/drafters_xeon3_numpy.json I3-nb=results/drafters_xeon3_numba.json \
    I4-nb=results/drafters_xeon4_numba.json A2-nb=results/drafters_amd2_numba.json \
    A3-nb=results/drafters_amd3_numba.json A4-nb=results/drafters_amd4_numba.json \
    A5-nb=results/drafters_amd5_numba.json A6-nb=results/drafters_amd6_numba.json \
    A7-nb=results/drafters_amd7_numba.json A8-nb=results/drafters_amd8_numba.json \
    A9-nb=results/drafters_amd9_numba.json A10np=results/drafters_amd10_numpy.json \
    A10nb=results/drafters_amd10_numba.json

.PHONY: bench-drafters drafters-readme

bench-drafters: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite bench --drafters --backend numpy \
	    --json results/drafters_$(TAG)_numpy.json
	$(BENCH_ENV) $(BIN)/python -m specdec_lite bench --drafters --backend numba \
	    --json results/drafters_$(TAG)_numba.json

drafters-readme: venv
	$(BIN)/python scripts/drafters_readme.py README.md $(DRAFTER_RESULTS)

bench-readme: venv
	$(BIN)/python scripts/bench_readme.py results/bench.json README.md \
	    results/bench_check.json results/bench_haswell.json results/kernel_curves.json

# The service under load (scripts/service_load.py): four real server processes on 127.0.0.1
# (batching on/off x speculation on/off), 200 seeded requests from 16 clients each, every
# run bounded to 60 s; writes results/service_load.json, which appendix C reads.
.PHONY: service-load batch-throughput serve

service-load: venv
	$(BENCH_ENV) $(BIN)/python scripts/service_load.py results/service_load.json

# The engine's throughput against batch size alone (about 20 s): results/batch_throughput.json.
batch-throughput: venv
	$(BENCH_ENV) $(BIN)/python scripts/batch_throughput.py results/batch_throughput.json

# Run the service on 127.0.0.1:8000 with its journal in ./specdec_data (Ctrl-C stops it).
serve: venv
	$(BENCH_ENV) $(BIN)/python -m specdec_lite serve --log-level info
