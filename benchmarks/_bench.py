"""Shared helpers of the pytest-benchmark files (``bench_*.py``); see ``conftest.py``."""

from __future__ import annotations

import importlib
import os

import _data

BENCH_RECORDS = int(os.environ.get("KAFKATX_BENCH_RECORDS", "100000"))
KAFKATX_BACKENDS = (
    ["python"] if os.environ.get("KAFKATX_NO_EXTENSIONS", "") not in ("", "0") else ["cython", "python"]
)
KAFKATX_LIBS = [f"kafkatx[{b}]" for b in KAFKATX_BACKENDS]
PEERS = ["aiokafka", "kafka-python"]
_MODULES = {"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}


def kafkatx_module(lib: str):
    """``"kafkatx[cython]"`` -> ``kafkatx._codec`` (the package is imported first, from ``src/`` if needed)."""
    _data.import_kafkatx()
    return importlib.import_module(_MODULES[lib[len("kafkatx[") : -1]])


def is_slow(lib: str) -> bool:
    """Pure-Python implementations: fewer rounds keep the suite short."""
    return lib in ("kafkatx[python]", "kafka-python")


def run(benchmark, lib: str, fn, *args):
    """Time ``fn(*args)`` with a fixed number of rounds (3 for pure Python, 7 otherwise) after one warm-up."""
    rounds = 3 if is_slow(lib) else 7
    return benchmark.pedantic(fn, args=args, rounds=rounds, iterations=1, warmup_rounds=1)
