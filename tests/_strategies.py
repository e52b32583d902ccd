"""Hypothesis strategies and a builder driver shared by the encode and differential tests."""

from __future__ import annotations

from hypothesis import strategies as st

import _spec

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

headers_st = st.lists(
    st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=4
)
record_st = st.fixed_dictionaries(
    {
        "key": st.one_of(st.none(), st.binary(max_size=40)),
        "value": st.one_of(st.none(), st.binary(max_size=300)),
        "headers": headers_st,
        "timestamp": st.one_of(st.just(-1), st.integers(0, 1 << 50)),
        "gap": st.one_of(st.just(1), st.integers(1, 1000)),
    }
)
batch_st = st.fixed_dictionaries(
    {
        "base_offset": st.one_of(st.just(0), st.integers(0, 1 << 60)),
        "producer": st.one_of(
            st.just((-1, -1, -1, False)),
            st.tuples(st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 15) - 1),
                      st.integers(0, (1 << 31) - 1), st.booleans()),
        ),  # fmt: skip
        "compression": st.sampled_from(CODECS),
        "log_append_time": st.one_of(st.none(), st.integers(0, 1 << 45)),
        "leader_epoch": st.integers(-1, (1 << 31) - 1),
        "records": st.lists(record_st, min_size=1, max_size=25),
    }
)


def build(codec, spec):
    pid, epoch, seq, txn = spec["producer"]
    kw = dict(
        base_offset=spec["base_offset"], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        transactional=txn, compression=spec["compression"], partition_leader_epoch=spec["leader_epoch"],
    )  # fmt: skip
    if spec["log_append_time"] is not None:
        kw.update(timestamp_type="log_append_time", log_append_time=spec["log_append_time"])
    b = codec.BatchBuilder(**kw)
    offsets = []
    offset = spec["base_offset"] - 1
    for i, r in enumerate(spec["records"]):
        offset += r["gap"] if i else 1
        explicit = offset if r["gap"] != 1 or i % 3 == 0 else None
        got = b.append(r["value"], key=r["key"], timestamp=r["timestamp"], headers=r["headers"], offset=explicit)
        assert got == offset
        offsets.append(offset)
    return b.build(), offsets


def expected(spec, offsets):
    pid, epoch, seq, txn = spec["producer"]
    base = spec["base_offset"]
    lat = spec["log_append_time"]
    return [
        (
            off,
            lat if lat is not None else r["timestamp"],
            r["key"],
            r["value"],
            tuple((k, v) for k, v in r["headers"]),
            _spec.inc_seq(seq, off - base) if seq >= 0 else -1,
        )
        for off, r in zip(offsets, spec["records"])
    ]
