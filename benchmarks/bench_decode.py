"""Decode benchmarks: log bytes -> list of record objects, for kafkatx's backends and the peers.

Run: ``pytest benchmarks/bench_decode.py --benchmark-only`` (see benchmarks/README.md).
"""

from __future__ import annotations

import pytest

import _data
import compare
from _bench import KAFKATX_LIBS, PEERS, kafkatx_module, run

LIBS = KAFKATX_LIBS + PEERS


def decoder(lib):
    if lib.startswith("kafkatx"):
        m = kafkatx_module(lib)
        return lambda log, verify: m.decode_records(log, verify_crc=verify)
    return {"aiokafka": compare.aiokafka_decode, "kafka-python": compare.kafka_python_decode}[lib]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(
    "codec, verify",
    [("none", True), ("none", False), ("lz4", True), ("zstd", True)],
    ids=["none-crc", "none-nocrc", "lz4-crc", "zstd-crc"],
)
def test_decode(benchmark, workload, n_records, lib, codec, verify):
    benchmark.group = f"decode {codec} {'+ CRC' if verify else 'no CRC'} ({n_records} records)"
    decode = decoder(lib)
    out = run(benchmark, lib, decode, workload[codec], verify)
    keys, values, _ = _data.records(n_records)
    assert len(out) == n_records
    assert (out[-1].offset, out[-1].key, out[-1].value) == (n_records - 1, keys[-1], values[-1])


def reader(lib):
    if lib.startswith("kafkatx"):
        m = kafkatx_module(lib)

        def read(log, aborted, committed):
            iso = "read_committed" if committed else "read_uncommitted"
            return m.decode_records(log, isolation=iso, aborted_transactions=aborted)

        return read
    return {"aiokafka": compare.aiokafka_read, "kafka-python": compare.kafka_python_read}[lib]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("committed", [False, True], ids=["read_uncommitted", "read_committed"])
def test_isolation(benchmark, n_records, lib, committed):
    """A log with a marker after every batch and 10 % of transactions aborted."""
    log, aborted, n_committed = _data.build_txn_log("none", n_records)
    iso = "read_committed" if committed else "read_uncommitted"
    benchmark.group = f"transactions {iso}, 10% aborted ({n_records} records)"
    out = run(benchmark, lib, reader(lib), log, aborted, committed)
    assert len(out) == (n_committed if committed else n_records)
