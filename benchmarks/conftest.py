"""pytest-benchmark setup for ``pytest benchmarks/ --benchmark-only`` (not part of the normal test run).

* ``bench_*.py`` files are collected here (pytest's default pattern is ``test_*.py``).
* The workload is ``benchmarks/_data.py`` at ``KAFKATX_BENCH_RECORDS`` records (default 100,000).
* kafkatx backends: ``cython`` and ``python``; with ``KAFKATX_NO_EXTENSIONS=1`` only ``python``.  A missing
  compiled extension is an error, not a skip (as in ``tests/``).
* The allocator heap is warmed once per session as ``compare.py`` does by default (``compare.warm_heap``);
  ``KAFKATX_BENCH_HEAP=cold`` skips that.
"""

from __future__ import annotations

import os
import warnings

import pytest

import _bench
import _data
import compare

# kafka-python 3.0 calls the deprecated importlib.resources.read_text/open_text when imported, which the repo's
# ``filterwarnings = ["error"]`` would turn into an error inside the first test that imports it: import it
# once here with just that warning silenced.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="(read|open)_text is deprecated", category=DeprecationWarning)
    import kafka.record  # noqa: F401


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def n_records() -> int:
    return _bench.BENCH_RECORDS


@pytest.fixture(scope="session")
def workload(n_records):
    """The cached logs: ``{codec: bytes}`` for none/lz4/zstd, built by kafkatx."""
    return {c: _data.build_log(c, n_records) for c in _data.CODECS}


@pytest.fixture(scope="session", autouse=True)
def _warm_heap(n_records):
    """Pin allocator arenas so timed rounds reuse mapped memory (see ``compare.warm_heap``)."""
    pins = [] if os.environ.get("KAFKATX_BENCH_HEAP", "warm") == "cold" else compare.warm_heap(n_records)
    yield
    del pins
