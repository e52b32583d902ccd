"""CRC-32C benchmarks: kafkatx's backends vs aiokafka's, kafka-python's and the ``crc32c`` package.

Sizes: 1 KiB (per-call overhead), 1 MiB, and the whole ``none`` workload log.  kafkatx's pure-Python
CRC is a byte-at-a-time table loop, so it only runs on the two small sizes.

Run: ``pytest benchmarks/bench_crc32c.py --benchmark-only`` (see benchmarks/README.md).
"""

from __future__ import annotations

import random

import pytest

from _bench import KAFKATX_LIBS, kafkatx_module, run

LIBS = KAFKATX_LIBS + ["aiokafka", "kafka-python", "crc32c-package"]
SIZES = ["1KiB", "1MiB", "log"]


def crc_function(lib):
    if lib.startswith("kafkatx"):
        return kafkatx_module(lib).crc32c
    if lib == "aiokafka":
        from aiokafka.record.util import calc_crc32c

        return calc_crc32c
    if lib == "kafka-python":
        from kafka.record.util import calc_crc32c

        return calc_crc32c
    import crc32c

    return crc32c.crc32c


def data_for(size, workload):
    if size == "log":
        return workload["none"]
    n = {"1KiB": 1024, "1MiB": 1 << 20}[size]
    return random.Random(n).randbytes(n)


CASES = [(lib, size) for size in SIZES for lib in LIBS if not (lib == "kafkatx[python]" and size == "log")]


@pytest.mark.parametrize("lib, size", CASES, ids=[f"{size}-{lib}" for lib, size in CASES])
def test_crc32c(benchmark, workload, lib, size):
    import crc32c

    data = data_for(size, workload)
    benchmark.group = f"crc32c {size} ({len(data)} bytes)"
    fn = crc_function(lib)
    if size == "1KiB":  # microseconds: let pytest-benchmark calibrate
        value = benchmark(fn, data)
    else:
        value = run(benchmark, lib, fn, data)
    assert value == crc32c.crc32c(data)
