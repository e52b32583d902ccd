"""Encode benchmarks: 1000-record transactional batches, append (explicit timestamps) + build.

Run: ``pytest benchmarks/bench_encode.py --benchmark-only`` (see benchmarks/README.md).
"""

from __future__ import annotations

import pytest

import _data
from _bench import KAFKATX_LIBS, PEERS, kafkatx_module, run

LIBS = KAFKATX_LIBS + PEERS


def encoder(lib):
    if lib.startswith("kafkatx"):
        m = kafkatx_module(lib)
        return lambda codec, n: _data.encode_kafkatx(m, codec, n)
    return {"aiokafka": _data.encode_aiokafka, "kafka-python": _data.encode_kafka_python}[lib]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("codec", _data.CODECS)
def test_encode(benchmark, workload, n_records, lib, codec):
    benchmark.group = f"encode {codec} ({n_records} records)"
    _data.records(n_records)  # inputs are built before timing
    parts = run(benchmark, lib, encoder(lib), codec, n_records)
    assert len(parts) == n_records // _data.BATCH_RECORDS
    built = b"".join(parts) if lib.startswith("kafkatx") else _data.with_base_offsets(parts, n_records)
    if codec == "none" and lib != "kafka-python":  # kafka-python writes partitionLeaderEpoch 0, not -1
        assert built == workload["none"]
    else:
        kx = _data.import_kafkatx()
        got = kx.decode_records(built)
        assert len(got) == n_records and got[-1].value == _data.records(n_records)[1][-1]
