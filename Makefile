# kafkatx developer commands.
#
#   make demo    create .venv, build kafkatx (C extension included) and run `kafkatx demo --spark`
#   make test    create .venv and run the test suite against the compiled extension
#   make bench   run benchmarks/compare.py and benchmarks/log_io.py (the README's tables)
#   make clean   remove .venv and build products
#
# Needs: Python >= 3.10 with its venv module and C headers, a C compiler, make; pip fetches the rest.
# On Debian/Ubuntu: apt-get install python3-venv python3-dev gcc make

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

# The interpreter the virtual environment is made from: python3.11 if there is one, else python3.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null || echo python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.kafkatx-installed
BENCH_STAMP := $(VENV)/.kafkatx-bench-installed

# Anything that changes what `pip install -e .` builds; the editable install does not rebuild the
# extension by itself, so a change here reinstalls.
BUILD_INPUTS := pyproject.toml setup.py $(wildcard src/kafkatx/*.pyx src/kafkatx/*.pxd src/kafkatx/*.pxi \
                src/kafkatx/_c/*.c src/kafkatx/_c/*.h)

# `make test` is about the compiled extension: never let an exported switch select the pure twin.
unexport KAFKATX_NO_EXTENSIONS

.PHONY: help venv demo test bench clean check-python

help:
	@echo "make demo   - build kafkatx in .venv and run 'kafkatx demo --spark'"
	@echo "make test   - build kafkatx in .venv and run the tests (compiled extension required)"
	@echo "make bench  - run benchmarks/compare.py and benchmarks/log_io.py"
	@echo "make clean  - remove .venv and build products"

venv: $(STAMP)

# Checks that turn the usual failures of a fresh machine into one clear message each.
check-python:
	@command -v "$(PYTHON)" >/dev/null 2>&1 || { \
	  echo "error: no Python interpreter found (tried python3.11 and python3)." >&2; \
	  echo "  Debian/Ubuntu: sudo apt-get install python3" >&2; exit 1; }
	@"$(PYTHON)" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' || { \
	  echo "error: kafkatx needs Python >= 3.10; $(PYTHON) is $$("$(PYTHON)" -V 2>&1)." >&2; \
	  echo "  Run with another interpreter: make PYTHON=/path/to/python3.11 ..." >&2; exit 1; }
	@"$(PYTHON)" -c 'import venv, ensurepip' >/dev/null 2>&1 || { \
	  v=$$("$(PYTHON)" -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "error: $(PYTHON) cannot create virtual environments (its venv/ensurepip modules are missing)." >&2; \
	  echo "  Debian/Ubuntu: sudo apt-get install python3-venv   (or python$$v-venv)" >&2; exit 1; }
	@"$(PYTHON)" -c 'import os, sys, sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' || { \
	  v=$$("$(PYTHON)" -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  echo "error: the C headers of $(PYTHON) (Python.h) are missing; they are needed to build kafkatx._codec." >&2; \
	  echo "  Debian/Ubuntu: sudo apt-get install python3-dev   (or python$$v-dev)" >&2; exit 1; }
	@cc=$${CC:-cc}; command -v "$$cc" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || { \
	  echo "error: no C compiler found (\$$CC, cc or gcc); one is needed to build kafkatx._codec." >&2; \
	  echo "  Debian/Ubuntu: sudo apt-get install gcc" >&2; exit 1; }

$(VENV)/bin/python:
	@$(MAKE) --no-print-directory check-python
	@rm -rf "$(VENV)"
	@echo "+ $(PYTHON) -m venv $(VENV)"
	@"$(PYTHON)" -m venv "$(VENV)" || { rm -rf "$(VENV)"; \
	  echo "error: '$(PYTHON) -m venv' failed; on Debian/Ubuntu install python3-venv." >&2; exit 1; }
	"$(VPY)" -m pip install --quiet --upgrade "pip>=25.1"

# pip >= 25.1 installs PEP 735 dependency groups: --group test is [dependency-groups] test in pyproject.toml.
$(STAMP): $(VENV)/bin/python $(BUILD_INPUTS)
	@$(MAKE) --no-print-directory check-python
	@test -f src/kafkatx/_codec.pyx || { \
	  echo "error: src/kafkatx/_codec.pyx is missing; the compiled extension cannot be built." >&2; exit 1; }
	@echo "+ $(VPY) -m pip install --editable . --group test"
	@"$(VPY)" -m pip install --editable . --group test || { \
	  echo "error: installing kafkatx into $(VENV) failed: see the pip/Cython/compiler output above." >&2; exit 1; }
	@rm -f "$(BENCH_STAMP)"
	@touch "$@"

# The demo ends with its Spark step where PySpark (the test group has it on Python 3.11+) and Java are there.
SPARK_DEMO := import importlib.util as u, os, shutil; \
  print("--spark" if u.find_spec("pyspark") and (shutil.which("java") or os.environ.get("JAVA_HOME")) else "")
demo: venv
	"$(VENV)/bin/kafkatx" demo $$("$(VPY)" -c '$(SPARK_DEMO)')

# The import line fails loudly if the extension did not build; KAFKATX_REQUIRE_EXTENSIONS=1 tells the
# test suite the same.  pytest's own exit codes (1 failures, 5 no tests collected) fail the target.
test: venv
	"$(VPY)" -c 'import kafkatx._codec, kafkatx; assert kafkatx.BACKEND == "cython", kafkatx.BACKEND; print("kafkatx", kafkatx.__version__, "backend", kafkatx.BACKEND)'
	KAFKATX_REQUIRE_EXTENSIONS=1 "$(VPY)" -m pytest -q tests

$(BENCH_STAMP): $(STAMP)
	"$(VPY)" -m pip install --group bench
	@touch "$@"

# The README's tables: the codec against its peers, then the log reader and writer on a ~1 GB directory.
bench: $(BENCH_STAMP)
	"$(VPY)" benchmarks/compare.py --markdown
	"$(VPY)" benchmarks/log_io.py --markdown

clean:
	rm -rf "$(VENV)" build dist .pytest_cache .hypothesis .benchmarks src/*.egg-info
	rm -f src/kafkatx/_codec.c src/kafkatx/*.so src/kafkatx/*.pyd src/kafkatx/*.html
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
