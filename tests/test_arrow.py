"""Columnar decoding and encoding: decode_arrow / feed_arrow / encode_arrow and kafkatx.arrow.

Every decode is checked against the record decoder (``decode_records`` plus ``iter_batches`` for the
batch-level fields), against Kafka's own golden vectors, and against what hypothesis-built transactional
logs must give (worked out in ``_arrow_logs`` from the strategy's own choices).  Both backends run through
the ``codec`` fixture; the ``arrow`` fixture points kafkatx.arrow at that backend.
"""

from __future__ import annotations

import contextlib
import gc
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
import kafkatx.arrow as kafkatx_arrow
from _arrow_logs import aborted_lists, logs, split_points
from _strategies import CODECS
from conftest import BACKENDS, golden_cases, load_backend, load_golden
from kafkatx._common import ARROW_COLUMNS, arrow_schema
from kafkatx.errors import CorruptRecordError, CrcMismatchError, InvalidAppendError, InvalidRecordError
from kafkatx.transactions import aborted_transactions, encode_marker

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

CASES = golden_cases()
CORRUPT = {"corrupt_crc_none", "corrupt_crc_zstd", "corrupt_count_none", "corrupt_magic_none"}
DECODABLE = [c for c in CASES if c not in CORRUPT]
ISOLATIONS = ["read_uncommitted", "read_committed"]
TS_TYPES = {"create_time": 0, "log_append_time": 1, "no_timestamp_type": -1}
T_BASE = 1_700_000_000_000
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

# encode_arrow: both backends (the twin's arrived after the compiled one)
ENCODE_BACKENDS = BACKENDS


@pytest.fixture(params=ENCODE_BACKENDS)
def encoder(request):
    return load_backend(request.param)


@pytest.fixture
def arrow(codec, monkeypatch):
    """kafkatx.arrow running on the backend under test."""
    monkeypatch.setattr(kafkatx_arrow, "_codec", codec)
    monkeypatch.setattr(kafkatx_arrow, "decode_arrow", codec.decode_arrow)
    return kafkatx_arrow


# ----------------------------------------------------------------------------------------- helpers
def arrow_rows(rb) -> list:
    """The rows of a decoded RecordBatch as tuples of plain values (timestamp null → -1, headers as tuples)."""
    cols = []
    for name in rb.schema.names:
        col = rb.column(name)
        if name == "timestamp":
            vals = [-1 if v is None else v for v in col.cast(pa.int64()).to_pylist()]
        elif name == "headers":
            vals = [tuple((h["key"], h["value"]) for h in row) for row in col.to_pylist()]
        else:
            vals = col.to_pylist()
        cols.append(vals)
    return list(zip(*cols)) if cols else []


def record_rows(codec, data, columns=None, **kw) -> list:
    """What decode_arrow must hold, from decode_records and the batch headers of iter_batches."""
    verify = kw.get("verify_crc", True)
    batch_of = {}
    for b in codec.iter_batches(data, verify_crc=verify):
        if b.is_control:
            continue
        fields = (TS_TYPES[b.timestamp_type], b.producer_id, b.producer_epoch, b.is_transactional)
        for r in b.records():
            batch_of[r.offset] = fields
    out = []
    for r in codec.decode_records(data, **kw):
        ts_type, pid, epoch, txn = batch_of[r.offset]
        row = dict(offset=r.offset, timestamp=r.timestamp, timestamp_type=ts_type, key=r.key, value=r.value,
                   headers=tuple(r.headers), producer_id=pid, producer_epoch=epoch, sequence=r.sequence,
                   is_transactional=txn)  # fmt: skip
        out.append(tuple(row[c] for c in ARROW_COLUMNS if columns is None or c in columns))
    return out


def info(rb) -> tuple:
    m = rb.schema.metadata
    return tuple(m[k].decode() for k in (b"next_offset", b"valid_bytes", b"trailing_bytes"))


def strip(rb):
    return rb.replace_schema_metadata(None)


def concat(batches):
    return pa.concat_batches([strip(b) for b in batches])


def log_rows(log_records) -> list:
    """_arrow_logs' expected tuples → arrow_rows' column order."""
    return [(o, ts, tt, k, v, h, pid, ep, seq, txn) for (o, ts, k, v, h, seq, pid, ep, txn, tt) in log_records]


def segment_rows(data: bytes) -> list:
    return [data[p : p + s] for p, s in _spec.split_batches(data)]


# ------------------------------------------------------------------------------------ import hygiene
def test_kafkatx_arrow_imports_without_pyarrow():
    code = (
        "import sys, kafkatx, kafkatx.arrow as a\n"
        "bad = [m for m in ('pyarrow', 'pandas', 'numpy', 'pyspark') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "assert a.spark_schema(['offset']) == '`offset` BIGINT'\n"
        "assert not [m for m in ('pyarrow', 'pandas', 'numpy') if m in sys.modules]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reexports_are_the_active_backend():
    from kafkatx import _backend

    assert kafkatx_arrow.decode_arrow is _backend.codec.decode_arrow
    assert kafkatx_arrow.arrow_schema is _backend.codec.arrow_schema is arrow_schema
    assert kafkatx_arrow.ARROW_COLUMNS == ARROW_COLUMNS
    if hasattr(_backend.codec, "encode_arrow"):
        assert kafkatx_arrow.encode_arrow is _backend.codec.encode_arrow


# ------------------------------------------------------------------------------------------ goldens
@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("name", DECODABLE)
def test_golden_decode_arrow_equals_decode_records(codec, name, isolation):
    data, side = load_golden(name)
    aborted = aborted_transactions(data) if isolation == "read_committed" else None
    rb = codec.decode_arrow(data, isolation=isolation, aborted_transactions=aborted)
    assert rb.schema.remove_metadata() == arrow_schema()
    assert arrow_rows(rb) == record_rows(codec, data, isolation=isolation, aborted_transactions=aborted)
    recs = codec.decode_records(data, isolation=isolation, aborted_transactions=aborted)
    assert kafkatx_arrow.read_info(rb) == {
        "next_offset": recs.next_offset, "valid_bytes": recs.valid_bytes, "trailing_bytes": recs.trailing_bytes
    }  # fmt: skip
    # nulls are real Arrow nulls, counted
    expected = [r for b in side["batches"] if not b["is_control"] for r in b["records"]]
    if isolation == "read_uncommitted":
        assert rb.column("key").null_count == sum(r["key"] is None for r in expected)
        assert rb.column("value").null_count == sum(r["value"] is None for r in expected)
        assert rb.column("timestamp").null_count == sum(r["timestamp"] == -1 for r in expected)
    for name_ in ("offset", "timestamp_type", "headers", "producer_id", "producer_epoch", "sequence",
                  "is_transactional"):  # fmt: skip
        assert rb.column(name_).null_count == 0


def test_golden_segment_mixed_read_committed_content(codec):
    """The sidecar says: pid 1001 (first 3) and 1003 (first 13) aborted; 1002 committed."""
    data, _ = load_golden("segment_mixed")
    assert sorted(aborted_transactions(data)) == [(1001, 3), (1003, 13)]
    rb = codec.decode_arrow(data, isolation="read_committed", aborted_transactions=[(1003, 13), (1001, 3)])
    assert rb.column("producer_id").to_pylist().count(1001) == 0
    assert 1003 not in rb.column("producer_id").to_pylist()
    assert rb.column("value").to_pylist()[:3] == [b"plain-0", b"plain-1", b"plain-2"]
    assert b"txn-1002-2" in rb.column("value").to_pylist()
    assert kafkatx_arrow.next_offset(rb) == 18
    # read_uncommitted sees the aborted data too
    assert 1001 in codec.decode_arrow(data).column("producer_id").to_pylist()


@pytest.mark.parametrize("name", ["legacy_v0_none", "legacy_v0_gzip", "legacy_v1_none", "legacy_v1_lz4"])
def test_legacy_timestamp_type(codec, name):
    data, side = load_golden(name)
    rb = codec.decode_arrow(data)
    assert rb.num_rows == sum(len(b["records"]) for b in side["batches"]) > 0
    if "v0" in name:
        assert set(rb.column("timestamp_type").to_pylist()) == {-1}
        assert rb.column("timestamp").null_count == rb.num_rows
    else:
        assert set(rb.column("timestamp_type").to_pylist()) <= {0, 1}
    assert set(rb.column("producer_id").to_pylist()) == {-1}
    assert set(rb.column("sequence").to_pylist()) == {-1}
    assert not any(rb.column("is_transactional").to_pylist())


def test_no_timestamp_and_null_key_value(codec):
    data, _ = load_golden("no_timestamp_none")
    rb = codec.decode_arrow(data)
    assert rb.column("timestamp").null_count == rb.num_rows == 2
    assert rb.column("timestamp").to_pylist() == [None, None]
    b = codec.BatchBuilder()
    b.append(None, key=None, timestamp=5)
    b.append(b"", key=b"", timestamp=-1)
    b.append(b"v", key=None, timestamp=0)
    rb = codec.decode_arrow(b.build())
    assert rb.column("key").to_pylist() == [None, b"", None]
    assert rb.column("key").null_count == 2
    assert rb.column("value").to_pylist() == [None, b"", b"v"]
    assert rb.column("value").null_count == 1
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [5, None, 0]
    assert rb.column("timestamp").null_count == 1


def test_every_key_and_value_length_to_300(codec):
    """Each length from 0 to 300 bytes, for keys and values, in one log: the compiled decoder copies up to
    128 bytes with fixed-size moves (1-3, 4-7, 8-15, 16-32, 33-64, 65-128 bytes) and longer ones with
    memcpy, so every branch and every boundary between them is met, in both binary layouts."""
    lengths = list(range(301))
    b = codec.BatchBuilder()
    for n in lengths:
        b.append(bytes((n * 7 + i) & 0xFF for i in range(n)), key=bytes((n + i * 3) & 0xFF for i in range(n // 2)),
                 timestamp=n)  # fmt: skip
    log = b.build()
    want = record_rows(codec, log)
    for large_binary in (False, True):
        rb = codec.decode_arrow(log, large_binary=large_binary)
        rb.validate(full=True)
        assert arrow_rows(rb) == want
        assert [len(v) for v in rb.column("value").to_pylist()] == lengths


@settings(max_examples=60, **SETTINGS)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=40),
                           st.sampled_from([-1, 0, 1_700_000_000_000])), min_size=1, max_size=40),
        min_size=1, max_size=5),
    binary_view=st.booleans(), large_binary=st.booleans(),
)  # fmt: skip
def test_null_patterns_across_batches(codec, batches, binary_view, large_binary):
    """Nulls first seen anywhere (mid-byte of the bitmap, in a later batch) give the same rows as the
    record decoder, and every array is valid Arrow (the bitmaps are written lazily)."""
    if binary_view and large_binary:
        large_binary = False
    log, base = b"", 0
    for rows in batches:
        b = codec.BatchBuilder(base_offset=base)
        for key, value, ts in rows:
            b.append(value, key=key, timestamp=ts)
        log += b.build()
        base += len(rows)
    rb = codec.decode_arrow(log, binary_view=binary_view, large_binary=large_binary)
    rb.validate(full=True)
    assert arrow_rows(rb) == record_rows(codec, log)
    for name, want in (("key", 0), ("value", 1)):
        assert rb.column(name).null_count == sum(r[want] is None for rows in batches for r in rows)
    assert rb.column("timestamp").null_count == sum(r[2] == -1 for rows in batches for r in rows)


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_golden_corrupt_raises_like_decode_records(codec, name):
    data, _ = load_golden(name)
    with pytest.raises(CorruptRecordError) as want:
        codec.decode_records(data)
    with pytest.raises(type(want.value)):
        codec.decode_arrow(data)


@pytest.mark.parametrize("name", ["corrupt_crc_none", "corrupt_crc_zstd"])
def test_corrupt_crc_without_verification(codec, name):
    data, _ = load_golden(name)
    rb = codec.decode_arrow(data, verify_crc=False)
    assert arrow_rows(rb) == record_rows(codec, data, verify_crc=False)
    with pytest.raises(CrcMismatchError):
        codec.decode_arrow(data)


def test_truncated_tail_metadata(codec):
    data, side = load_golden("truncated_tail_segment")
    rb = codec.decode_arrow(data)
    complete = sum(b["size_in_bytes"] for b in side["batches"])
    assert kafkatx_arrow.read_info(rb) == {
        "next_offset": side["batches"][-1]["last_offset"] + 1, "valid_bytes": complete,
        "trailing_bytes": len(data) - complete,
    }  # fmt: skip
    assert arrow_rows(rb) == record_rows(codec, data)


def test_fetch_offset_and_empty_input(codec):
    data, _ = load_golden("segment_mixed")
    rb = codec.decode_arrow(data, fetch_offset=8)
    assert arrow_rows(rb) == record_rows(codec, data, fetch_offset=8)
    assert min(rb.column("offset").to_pylist()) == 8
    empty = codec.decode_arrow(b"")
    assert empty.num_rows == 0 and empty.schema.remove_metadata() == arrow_schema()
    assert kafkatx_arrow.read_info(empty) == {"next_offset": None, "valid_bytes": 0, "trailing_bytes": 0}
    assert kafkatx_arrow.next_offset(codec.decode_arrow(b"", fetch_offset=42)) == 42


@pytest.mark.parametrize("name", ["segment_mixed", "many_zstd", "legacy_v1_gzip", "large_lz4"])
def test_large_binary(codec, name):
    data, _ = load_golden(name)
    small = codec.decode_arrow(data)
    large = codec.decode_arrow(data, large_binary=True)
    assert large.schema.remove_metadata() == arrow_schema(large_binary=True)
    assert large.schema.field("key").type == large.schema.field("value").type == pa.large_binary()
    assert large.column("value").to_pylist() == small.column("value").to_pylist()
    assert large.column("key").null_count == small.column("key").null_count
    assert strip(large).cast(strip(small).schema).equals(strip(small))
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    assert f.feed_arrow(data, large_binary=True).equals(large, check_metadata=True)


def test_read_info_rejects_foreign_batches():
    with pytest.raises(ValueError, match="next_offset"):
        kafkatx_arrow.read_info(pa.record_batch({"x": [1]}))


# --------------------------------------------------------------------------- both backends agree
@pytest.mark.parametrize("large_binary", [False, True])
def test_backends_equal_on_goldens(large_binary):
    cy, py = (load_backend(b) for b in BACKENDS)
    for name in DECODABLE:
        data, _ = load_golden(name)
        for isolation in ISOLATIONS:
            aborted = aborted_transactions(data)
            kw = dict(isolation=isolation, aborted_transactions=aborted, large_binary=large_binary)
            a, b = cy.decode_arrow(data, **kw), py.decode_arrow(data, **kw)
            assert a.equals(b, check_metadata=True), (name, isolation)
            sub = ["value", "offset", "headers"]
            assert cy.decode_arrow(data, columns=sub, **kw).equals(py.decode_arrow(data, columns=sub, **kw),
                                                                  check_metadata=True)  # fmt: skip


@settings(max_examples=60, **SETTINGS)
@given(log=logs(), data=st.data())
def test_backends_equal_on_logs(log, data):
    cy, py = (load_backend(b) for b in BACKENDS)
    aborted, _ = data.draw(aborted_lists(log))
    lso = data.draw(st.one_of(st.none(), st.integers(log.start, log.end + 1)))
    columns = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(ARROW_COLUMNS), min_size=1, unique=True)))
    for isolation in ISOLATIONS:
        kw = dict(isolation=isolation, aborted_transactions=aborted, last_stable_offset=lso, columns=columns)
        assert cy.decode_arrow(log.data, **kw).equals(py.decode_arrow(log.data, **kw), check_metadata=True)


# ----------------------------------------------------------------------- hypothesis transactional logs
@settings(max_examples=80, **SETTINGS)
@given(log=logs(), data=st.data())
def test_logs_decode_arrow_equals_decode_records(codec, log, data):
    aborted, exact = data.draw(aborted_lists(log))
    lso = data.draw(st.one_of(st.none(), st.just(log.last_stable_offset), st.integers(log.start, log.end + 1)))
    for isolation in ISOLATIONS:
        kw = dict(isolation=isolation, aborted_transactions=aborted, last_stable_offset=lso)
        rb = codec.decode_arrow(log.data, **kw)
        rb.validate(full=True)
        rows = arrow_rows(rb)
        assert rows == record_rows(codec, log.data, **kw)
        recs = codec.decode_records(log.data, **kw)
        assert info(rb) == (str(recs.next_offset), str(recs.valid_bytes), str(recs.trailing_bytes))
        if exact or isolation == "read_uncommitted":
            cut = lso if isolation == "read_committed" else None
            assert rows == log_rows(log.expected(isolation, cut))


@settings(max_examples=60, **SETTINGS)
@given(log=logs(), data=st.data())
def test_logs_feed_arrow_random_chunks(codec, log, data):
    """feed_arrow over random byte splits (bytes, bytearray, memoryview) equals one-shot decode_arrow."""
    aborted, _ = data.draw(aborted_lists(log))
    isolation = data.draw(st.sampled_from(ISOLATIONS))
    lso = data.draw(st.one_of(st.none(), st.integers(log.start, log.end + 1)))
    columns = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(ARROW_COLUMNS), min_size=1, unique=True)))
    cuts = split_points(data.draw, len(log.data))
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    whole = codec.decode_arrow(log.data, isolation=isolation, aborted_transactions=aborted,
                               last_stable_offset=lso, columns=columns)  # fmt: skip
    f = codec.ReadCommittedFilter(aborted, isolation=isolation, last_stable_offset=lso)
    parts = []
    for a, b in zip([0] + cuts, cuts + [len(log.data)]):
        rb = f.feed_arrow(kind(log.data[a:b]), columns=columns)
        assert rb.schema.remove_metadata() == arrow_schema(columns)
        assert int(info(rb)[2]) == f.pending_bytes
        parts.append(rb)
    assert concat(parts).equals(strip(whole))
    assert info(parts[-1])[0] == info(whole)[0]  # next_offset
    assert sum(int(info(p)[1]) for p in parts) == int(info(whole)[1])  # valid_bytes
    assert info(parts[-1])[2] == info(whole)[2]  # trailing_bytes


@settings(max_examples=60, **SETTINGS)
@given(log=logs(), data=st.data())
def test_logs_feed_arrow_parts(codec, log, data):
    """feed_arrow_parts over random byte splits gives decode_arrow's one batch, metadata included."""
    aborted, _ = data.draw(aborted_lists(log))
    isolation = data.draw(st.sampled_from(ISOLATIONS))
    lso = data.draw(st.one_of(st.none(), st.integers(log.start, log.end + 1)))
    view = data.draw(st.booleans())
    cuts = split_points(data.draw, len(log.data))
    kw = dict(isolation=isolation, aborted_transactions=aborted, last_stable_offset=lso)
    whole = codec.decode_arrow(log.data, binary_view=view, **kw)
    f = codec.ReadCommittedFilter(aborted, isolation=isolation, last_stable_offset=lso)
    parts = [log.data[a:b] for a, b in zip([0] + cuts, cuts + [len(log.data)])]
    got = f.feed_arrow_parts([memoryview(p) for p in parts], binary_view=view)
    got.validate(full=True)
    assert got.equals(whole, check_metadata=True)
    assert f.pending_bytes == int(info(whole)[2])


def test_feed_arrow_parts_error_names_the_part(codec):
    b = codec.BatchBuilder(base_offset=0)
    b.append(b"v", key=b"k", timestamp=T_BASE)
    first = b.build()
    b = codec.BatchBuilder(base_offset=1)
    b.append(b"w", key=b"k", timestamp=T_BASE)
    second = bytearray(b.build())
    second[-1] ^= 0xFF  # breaks the CRC
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    with pytest.raises(CrcMismatchError) as err:
        f.feed_arrow_parts([first, bytes(second)])
    assert err.value.part == 1 and err.value.position == 0 and err.value.carried_bytes == 0
    assert f.next_offset == 1  # the first part was decoded
    # the bad batch cut across two parts: the bytes of it that the second part decodes after come first
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    with pytest.raises(CrcMismatchError) as err:
        f.feed_arrow_parts([first + bytes(second[:10]), bytes(second[10:])])
    assert (err.value.part, err.value.carried_bytes, err.value.position) == (1, 10, 0)
    empty = codec.ReadCommittedFilter().feed_arrow_parts([])
    assert empty.num_rows == 0 and info(empty) == ("None", "0", "0")


@settings(max_examples=60, **SETTINGS)
@given(log=logs(), data=st.data())
def test_logs_columns_subsets(codec, log, data):
    columns = data.draw(st.lists(st.sampled_from(ARROW_COLUMNS), min_size=1, unique=True))
    isolation = data.draw(st.sampled_from(ISOLATIONS))
    kw = dict(isolation=isolation, aborted_transactions=log.aborted)
    full = codec.decode_arrow(log.data, **kw)
    sub = codec.decode_arrow(log.data, columns=columns, **kw)
    order = [c for c in ARROW_COLUMNS if c in columns]
    assert sub.schema.names == order
    assert sub.schema.remove_metadata() == arrow_schema(columns)
    assert sub.equals(full.select(order), check_metadata=True)
    assert sub.num_rows == full.num_rows


def test_columns_errors(codec):
    data, _ = load_golden("plain_none")
    with pytest.raises(ValueError, match="bogus"):
        codec.decode_arrow(data, columns=["value", "bogus"])
    with pytest.raises(ValueError):
        codec.decode_arrow(data, isolation="serializable")
    # order and duplicates of the request do not matter
    a = codec.decode_arrow(data, columns=["value", "offset", "value"])
    assert a.schema.names == ["offset", "value"]


# -------------------------------------------------------------------------------------- encode_arrow
def _table(rows, *, key=True, timestamp=True, headers=True, string_values=False):
    cols = {}
    if key:
        cols["key"] = pa.array([r["key"] for r in rows], pa.binary())
    if string_values:
        cols["value"] = pa.array([None if r["value"] is None else r["value"].hex() for r in rows], pa.string())
    else:
        cols["value"] = pa.array([r["value"] for r in rows], pa.binary())
    if timestamp:
        cols["timestamp"] = pa.array([None if r["timestamp"] == -1 else r["timestamp"] for r in rows],
                                     pa.timestamp("ms", tz="UTC"))  # fmt: skip
    if headers:
        cols["headers"] = pa.array([[{"key": k, "value": v} for k, v in r["headers"]] for r in rows], HEADER_TYPE)
    return pa.table(cols)


enc_record_st = st.fixed_dictionaries(
    {
        "key": st.one_of(st.none(), st.binary(max_size=10)),
        "value": st.one_of(st.none(), st.binary(max_size=30)),
        "timestamp": st.one_of(st.just(-1), st.integers(0, 1 << 44)),
        "headers": st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
    }
)


@settings(max_examples=60, **SETTINGS)
@given(
    rows=st.lists(enc_record_st, max_size=30),
    compression=st.sampled_from(CODECS),
    records_per_batch=st.integers(1, 12),
    parts=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    slice_at=st.integers(0, 5),
    chunk_at=st.one_of(st.none(), st.integers(0, 30)),
)
def test_encode_arrow_roundtrip(encoder, codec, rows, compression, records_per_batch, parts, slice_at, chunk_at):
    key, timestamp, headers, string_values = parts
    table = _table(rows, key=key, timestamp=timestamp, headers=headers, string_values=string_values)
    table = table.slice(min(slice_at, len(rows)))  # non-zero array offsets
    if chunk_at is not None:
        k = min(chunk_at, table.num_rows)
        table = pa.concat_tables([table.slice(0, k), table.slice(k)])  # two chunks per column
    rows = rows[min(slice_at, len(rows)) :]
    data = encoder.encode_arrow(table, records_per_batch=records_per_batch, compression=compression,
                                base_offset=10, timestamp=1234)  # fmt: skip
    batches = list(codec.iter_batches(data))
    assert len(batches) == -(-len(rows) // records_per_batch)
    assert all(b.compression == compression for b in batches)
    rb = codec.decode_arrow(data)
    assert rb.num_rows == len(rows)
    assert rb.column("offset").to_pylist() == list(range(10, 10 + len(rows)))
    assert rb.column("key").to_pylist() == [r["key"] if key else None for r in rows]
    want_values = [None if r["value"] is None else (r["value"].hex().encode() if string_values else r["value"])
                   for r in rows]  # fmt: skip
    assert rb.column("value").to_pylist() == want_values
    want_ts = [(None if r["timestamp"] == -1 else r["timestamp"]) if timestamp else 1234 for r in rows]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == want_ts
    want_h = [tuple(r["headers"]) if headers else () for r in rows]
    assert [tuple((h["key"], h["value"]) for h in row) for row in rb.column("headers").to_pylist()] == want_h
    # decoding the output and encoding it again gives the same bytes (decode_arrow's table is valid input)
    assert encoder.encode_arrow(rb, records_per_batch=records_per_batch, compression=compression,
                                base_offset=10, timestamp=1234) == data  # fmt: skip


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_encode_arrow_from_threads_matches_one_thread(encoder, compression):
    """Threads encoding different tables at once (the compiled encoder runs without the GIL) each get the
    bytes a single thread gets: no state is shared between calls."""
    from concurrent.futures import ThreadPoolExecutor

    headers = pa.array([[{"key": "h", "value": b"%d" % i}] if i % 3 else [] for i in range(3000)], HEADER_TYPE)
    tables = [pa.table({"key": pa.array([b"k%d-%d" % (t, i) for i in range(3000)], pa.binary()),
                        "value": pa.array([b"v" * (i % 97 + t) for i in range(3000)], pa.binary()),
                        "timestamp": pa.array([1_700_000_000_000 + i * (t + 1) for i in range(3000)], pa.int64()),
                        "headers": headers})
              for t in range(4)]  # fmt: skip
    kw = dict(records_per_batch=250, producer_id=9, producer_epoch=1, base_sequence=0, compression=compression)
    alone = [encoder.encode_arrow(t, **kw) for t in tables]
    with ThreadPoolExecutor(4) as ex:
        for _ in range(3):
            assert list(ex.map(lambda t: encoder.encode_arrow(t, **kw), tables)) == alone
    assert len(set(alone)) == len(alone)


@pytest.mark.parametrize("compression", CODECS)
def test_encode_arrow_offsets_and_sequences_continue(encoder, codec, compression):
    table = pa.table({"value": [b"v%d" % i for i in range(25)]})
    seq0 = (1 << 31) - 12  # the sequences wrap past INT32_MAX in the third batch
    data = encoder.encode_arrow(table, records_per_batch=10, base_offset=500, producer_id=77, producer_epoch=4,
                                base_sequence=seq0, transactional=True, compression=compression,
                                partition_leader_epoch=9, timestamp=1_700_000_000_000)  # fmt: skip
    batches = list(codec.iter_batches(data))
    assert [b.base_offset for b in batches] == [500, 510, 520]
    assert [b.records_count for b in batches] == [10, 10, 5]
    assert [b.base_sequence for b in batches] == [seq0, seq0 + 10, _spec.inc_seq(seq0, 20)]
    assert all(b.producer_id == 77 and b.producer_epoch == 4 and b.is_transactional for b in batches)
    assert all(b.partition_leader_epoch == 9 and b.compression == compression for b in batches)
    rb = codec.decode_arrow(data)
    assert rb.column("sequence").to_pylist() == [_spec.inc_seq(seq0, i) for i in range(25)]
    assert rb.column("offset").to_pylist() == list(range(500, 525))
    assert set(rb.column("is_transactional").to_pylist()) == {True}
    # read_committed hides them once the transaction is aborted
    marker = encode_marker("abort", producer_id=77, producer_epoch=4, base_offset=525, timestamp=1)
    assert codec.decode_arrow(data + marker, isolation="read_committed",
                              aborted_transactions=[(77, 500)]).num_rows == 0  # fmt: skip


def test_encode_arrow_log_append_time(encoder):
    codec = encoder
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([5, 6], pa.int64())})
    data = encoder.encode_arrow(table, timestamp_type="log_append_time")
    (batch,) = codec.iter_batches(data)
    assert batch.timestamp_type == "log_append_time"
    rb = codec.decode_arrow(data)
    assert rb.column("timestamp_type").to_pylist() == [1, 1]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [batch.max_timestamp] * 2


@pytest.mark.parametrize("compression", CODECS)
def test_encode_arrow_same_bytes_as_batch_builder(encoder, compression):
    rng = np.random.default_rng(7)
    n = 1000
    rows = []
    for i in range(n):
        rows.append(
            dict(
                key=None if i % 5 == 0 else rng.bytes(int(rng.integers(0, 12))),
                value=None if i % 7 == 0 else rng.bytes(int(rng.integers(0, 60))),
                timestamp=-1 if i % 11 == 0 else 1_700_000_000_000 + int(rng.integers(-5000, 5000)),
                headers=[("h%d" % j, None if j == 1 else b"x" * j) for j in range(i % 3)],
            )
        )
    kw = dict(base_offset=1000, producer_id=12, producer_epoch=2, base_sequence=(1 << 31) - 100,
              transactional=False, compression=compression, partition_leader_epoch=3)  # fmt: skip
    got = encoder.encode_arrow(_table(rows), records_per_batch=7, **kw)
    parts = []
    for s in range(0, n, 7):
        b = encoder.BatchBuilder(
            **{**kw, "base_offset": 1000 + s, "base_sequence": _spec.inc_seq(kw["base_sequence"], s)}
        )
        for r in rows[s : s + 7]:
            b.append(r["value"], key=r["key"], timestamp=r["timestamp"], headers=r["headers"])
        parts.append(b.build())
    assert got == b"".join(parts)


def test_encode_arrow_column_types(encoder):
    """binary, large_binary, string, large_string, binary_view and chunked columns all encode the same."""
    codec = encoder
    values = [b"alpha", None, b"", b"\xff\x00"]
    want = None
    for typ in (pa.binary(), pa.large_binary(), pa.binary_view()):
        t = pa.table({"value": pa.array(values, typ), "key": pa.array(values[::-1], typ)})
        data = encoder.encode_arrow(t, timestamp=9)
        want = want or data
        assert data == want, typ
    chunked = pa.table({"value": pa.chunked_array([values[:1], values[1:]], pa.binary()),
                        "key": pa.chunked_array([values[::-1][:3], values[::-1][3:]], pa.large_binary())})  # fmt: skip
    assert encoder.encode_arrow(chunked, timestamp=9) == want
    strings = pa.table(
        {"value": pa.array(["héllo", None], pa.string()), "key": pa.array(["k", "é"], pa.large_string())}
    )
    rb = codec.decode_arrow(encoder.encode_arrow(strings, timestamp=9))
    assert rb.column("value").to_pylist() == ["héllo".encode(), None]
    assert rb.column("key").to_pylist() == [b"k", "é".encode()]
    views = pa.table({"value": pa.array(["héllo", None], pa.string_view()), "key": pa.array(["k", "é"])})
    assert encoder.encode_arrow(views, timestamp=9) == encoder.encode_arrow(strings, timestamp=9)
    assert encoder.encode_arrow(pa.table({"value": pa.array([], pa.binary())})) == b""
    # a RecordBatch works like a Table, and int timestamps are milliseconds
    rbin = pa.record_batch({"value": [b"x"], "timestamp": pa.array([77], pa.int32())})
    assert codec.decode_records(encoder.encode_arrow(rbin))[0].timestamp == 77


def test_encode_arrow_timestamp_units(encoder):
    """Seconds scale up to milliseconds; a timestamp given in µs/ns is floored to ms (or refused cleanly)."""
    codec = encoder
    t = pa.table({"value": [b"x"], "timestamp": pa.array([15], pa.timestamp("s"))})
    assert codec.decode_records(encoder.encode_arrow(t))[0].timestamp == 15_000
    t = pa.table({"value": [b"x"], "timestamp": pa.array([2_000_000], pa.timestamp("ns", tz="UTC"))})
    assert codec.decode_records(encoder.encode_arrow(t))[0].timestamp == 2
    # pandas gives ns timestamps with sub-millisecond parts: floored, never a pyarrow.ArrowInvalid
    t = pa.table({"value": [b"x"], "timestamp": pa.array([1_500_001], pa.timestamp("ns", tz="UTC"))})
    assert codec.decode_records(encoder.encode_arrow(t))[0].timestamp == 1
    # before 1970, floored too (a cast would truncate -1.5 ms to -1, "no timestamp"): refused, as negative
    # milliseconds are; a null writes no timestamp
    for us in (-1, -999, -1000, -1500):
        t = pa.table({"value": [b"x"], "timestamp": pa.array([us], pa.timestamp("us"))})
        with pytest.raises(InvalidAppendError, match="negative"):
            encoder.encode_arrow(t)
    t = pa.table({"value": [b"x", b"y"], "timestamp": pa.array([None, 2_999], pa.timestamp("us"))})
    assert [r.timestamp for r in codec.decode_records(encoder.encode_arrow(t))] == [-1, 2]


def test_encode_arrow_timestamps_past_int64_milliseconds(encoder):
    """A time that does not fit int64 milliseconds is refused naming its row, never wrapped: seconds past
    2^63 ms (10^17 s once became 7766279631452241920 ms), or µs/ns near -2^63 (their floor to milliseconds
    wrapped to a time far in the future).  The last second that fits is written."""
    top = ((1 << 63) - 1) // 1000  # the last second that fits
    for unit, bad, match in (
        ("s", 10**17, "10+ s in row 2, which does not fit int64 milliseconds"),
        ("s", top + 1, f"{top + 1} s in row 2, which does not fit int64 milliseconds"),
        ("s", -(10**17), r"negative time, before 1970, in row 2 \(-10+ s\)"),
        ("us", -(1 << 63) + 1, "negative time, before 1970, in row 2"),
        ("ns", -(1 << 63) + 1, "negative time, before 1970, in row 2"),
    ):
        for tz in (None, "UTC"):
            t = pa.table({"value": [b"x", b"y", b"z"], "timestamp": pa.array([1, None, bad], pa.timestamp(unit, tz))})
            with pytest.raises(InvalidAppendError, match=match):
                encoder.encode_arrow(t)
    t = pa.table({"value": [b"x"], "timestamp": pa.array([top], pa.timestamp("s"))})
    assert encoder.decode_records(encoder.encode_arrow(t))[0].timestamp == top * 1000


@pytest.mark.parametrize(
    "table, match",
    [
        (lambda: pa.table({"key": [b"k"]}), "value"),
        (lambda: pa.table({"value": [1, 2]}), "value"),
        (lambda: pa.table({"value": [b"x"], "key": [1.5]}), "key"),
        (lambda: pa.table({"value": [b"x"], "timestamp": ["yesterday"]}), "timestamp"),
        (lambda: pa.table({"value": [b"x"], "timestamp": [1.5]}), "timestamp"),
        (lambda: pa.table({"value": [b"x", b"y"], "timestamp": [5, -5]}), "negative timestamp"),
        (lambda: pa.table({"value": [b"x"], "timestamp": pa.array([-2], pa.timestamp("ms"))}), "negative"),
        (lambda: pa.table({"value": [b"x"], "nonsense": [1]}), "nonsense"),
        (lambda: pa.table({"value": pa.array([b"x"]).dictionary_encode()}), "value"),
        (
            lambda: pa.table({"value": [b"x"], "headers": pa.array([[{"key": None, "value": b"v"}]], HEADER_TYPE)}),
            "header",
        ),
    ],
)
def test_encode_arrow_bad_columns(encoder, table, match):
    with pytest.raises(InvalidAppendError, match=match):
        encoder.encode_arrow(table(), timestamp=1)


@pytest.mark.parametrize(
    "table",
    [
        pytest.param(lambda: pa.table({"value": [b"x"], "headers": [1]}), id="headers-int"),
        pytest.param(
            lambda: pa.table({"value": [b"x"], "headers": pa.array([[{"key": "k"}]])}),
            id="headers-struct-without-value",
        ),
        pytest.param(
            lambda: pa.table({"value": [b"x"], "headers": pa.array([[None]], HEADER_TYPE)}), id="headers-null-struct"
        ),
        pytest.param(lambda: pa.table({"value": [b"x"], "headers": pa.array([["k"]])}), id="headers-list-of-str"),
        pytest.param(
            lambda: pa.table({"value": [b"x"], "timestamp": pa.array([1 << 63], pa.uint64())}),
            id="timestamp-uint64-overflow",
        ),
    ],
)
def test_encode_arrow_bad_headers_and_timestamps_raise_invalid_append(encoder, table):
    """Wrong column types are InvalidAppendError, not TypeError/KeyError/ArrowInvalid from the inside."""
    with pytest.raises(InvalidAppendError):
        encoder.encode_arrow(table(), timestamp=1)


def test_encode_arrow_bad_arguments(encoder):
    t = pa.table({"value": [b"x"]})
    with pytest.raises(InvalidAppendError, match="records_per_batch"):
        encoder.encode_arrow(t, records_per_batch=0)
    with pytest.raises(InvalidAppendError, match="negative timestamp"):
        encoder.encode_arrow(t, timestamp=-3)
    with pytest.raises(InvalidAppendError, match="producer id"):
        encoder.encode_arrow(t, transactional=True)
    with pytest.raises(InvalidAppendError, match="sequence"):
        encoder.encode_arrow(t, producer_id=1, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidAppendError, match="timestamp_type"):
        encoder.encode_arrow(t, timestamp_type="whenever")
    with pytest.raises((TypeError, InvalidAppendError)):
        encoder.encode_arrow({"value": [b"x"]})


def test_encode_arrow_checks_its_arguments_first(encoder):
    """Compression level (KIP-390 range: InvalidAppendError; not an integer: TypeError) and the default
    timestamp (int64: OverflowError; not an integer: TypeError) are refused before anything is encoded, the
    same way on both backends, even with a table that is itself wrong."""
    t = pa.table({"value": [b"x" * 100]})
    for compression, level in (("gzip", 0), ("gzip", 10), ("lz4", 18), ("zstd", 23)):
        with pytest.raises(InvalidAppendError, match="compression level"):
            encoder.encode_arrow(t, compression=compression, compression_level=level)
        with pytest.raises(InvalidAppendError, match="compression level"):
            encoder.encode_arrow(pa.table({"nope": [1]}), compression=compression, compression_level=level)
    with pytest.raises(TypeError, match="compression_level"):
        encoder.encode_arrow(t, compression="gzip", compression_level="9")
    with pytest.raises(OverflowError, match="timestamp"):
        encoder.encode_arrow(t, timestamp=1 << 63)
    with pytest.raises(TypeError, match="timestamp"):
        encoder.encode_arrow(t, timestamp="5")
    data = encoder.encode_arrow(t, compression="gzip", compression_level=9, timestamp=5)
    assert [(r.value, r.timestamp) for r in encoder.decode_records(data)] == [(b"x" * 100, 5)]


def test_encode_arrow_offsets_end_at_long_max_value(encoder):
    top = (1 << 63) - 1
    two = pa.table({"value": [b"a", b"b"]})
    with pytest.raises(InvalidAppendError, match=f"following previous offset {top}"):
        encoder.encode_arrow(two, base_offset=top)
    with pytest.raises(InvalidAppendError, match=f"following previous offset {top}"):
        encoder.encode_arrow(two, base_offset=top, records_per_batch=1)
    data = encoder.encode_arrow(two, base_offset=top - 1, records_per_batch=1, timestamp=1)
    assert [r.offset for r in encoder.decode_records(data)] == [top - 1, top]


# -------------------------------------------------------------------------------------------- pandas
@pytest.mark.parametrize("name", ["segment_mixed", "no_timestamp_none", "legacy_v0_none", "many_snappy"])
def test_to_pandas_equals_decode_records(arrow, codec, name):
    data, _ = load_golden(name)
    for isolation in ISOLATIONS:
        kw = dict(isolation=isolation, aborted_transactions=aborted_transactions(data))
        df = arrow.to_pandas(data, **kw)
        recs = codec.decode_records(data, **kw)
        assert list(df.columns) == list(ARROW_COLUMNS)
        assert len(df) == len(recs)
        assert df["offset"].dtype == np.int64 and df["sequence"].dtype == np.int32
        assert df["timestamp_type"].dtype == np.int8 and df["producer_epoch"].dtype == np.int16
        assert df["is_transactional"].dtype == np.bool_
        assert isinstance(df["timestamp"].dtype, pd.DatetimeTZDtype) and str(df["timestamp"].dt.tz) == "UTC"
        for i, r in enumerate(recs):
            row = df.iloc[i]
            assert row["offset"] == r.offset and row["sequence"] == r.sequence
            if r.timestamp == -1:
                assert pd.isna(row["timestamp"])
            else:
                assert row["timestamp"] == pd.Timestamp(r.timestamp, unit="ms", tz="UTC")
            assert row["key"] == r.key and row["value"] == r.value
            assert (row["key"] is None) == (r.key is None) and (row["value"] is None) == (r.value is None)
            assert type(row["value"]) in (bytes, type(None))
            assert row["headers"] == r.headers
        assert df.attrs["next_offset"] == recs.next_offset


def test_to_pandas_options(arrow):
    data, _ = load_golden("segment_mixed")
    df = arrow.to_pandas(data, columns=["offset", "value"], types_mapper=pd.ArrowDtype)
    assert list(df.columns) == ["offset", "value"]
    assert df["value"].dtype == pd.ArrowDtype(pa.binary())
    assert df["value"].iloc[0] == b"plain-0"
    raw = arrow.to_pandas(data, headers="arrow")
    assert raw["headers"].dtype == object
    with pytest.raises(ValueError):
        arrow.to_pandas(data, headers="dicts")


def test_to_pandas_headers_as_tuples(arrow, codec):
    b = codec.BatchBuilder()
    b.append(b"v", timestamp=1, headers=[("a", b"1"), ("b", None)])
    b.append(b"w", timestamp=2)
    b.append(b"x", timestamp=3, headers=[("c", b"")])
    df = arrow.to_pandas(b.build())
    assert list(df["headers"]) == [(("a", b"1"), ("b", None)), (), (("c", b""),)]
    # an empty fetch has the same dtypes (pandas would make the empty list column float64)
    empty = arrow.to_pandas(b.build(), fetch_offset=3)
    assert len(empty) == 0 and empty.dtypes.to_dict() == df.dtypes.to_dict()


def test_to_pandas_empty_has_the_same_dtypes(arrow, codec):
    """An empty result's dtypes are a non-empty one's, column by column, whatever types_mapper maps (so
    concatenating fetches keeps them); a headers column types_mapper gives a dtype keeps it, empty or not."""
    b = codec.BatchBuilder()
    b.append(b"v", key=b"k", timestamp=1, headers=[("a", b"1")])
    b.append(b"w", timestamp=2)
    data = b.build()

    def lists_only(t):
        return pd.ArrowDtype(t) if pa.types.is_list(t) else None

    def binary_only(t):
        return pd.ArrowDtype(t) if pa.types.is_binary(t) else None

    for mapper in (None, pd.ArrowDtype, lists_only, binary_only):
        for headers in ("tuples", "arrow"):
            full = arrow.to_pandas(data, types_mapper=mapper, headers=headers)
            want = full.dtypes.to_dict()
            for empty in (arrow.to_pandas(b"", types_mapper=mapper, headers=headers),
                          arrow.to_pandas(data, types_mapper=mapper, headers=headers, fetch_offset=2)):  # fmt: skip
                assert len(empty) == 0 and empty.dtypes.to_dict() == want, (mapper, headers)
                assert pd.concat([full, empty]).dtypes.to_dict() == want, (mapper, headers)
            if mapper in (pd.ArrowDtype, lists_only):
                assert isinstance(want["headers"], pd.ArrowDtype)
                assert full["headers"].tolist()[0] == [{"key": "a", "value": b"1"}]
            elif headers == "tuples":
                assert want["headers"] == np.dtype(object) and list(full["headers"]) == [(("a", b"1"),), ()]


def test_argument_errors_are_the_same_on_both_backends(codec):
    """columns= and aborted_transactions= are checked by one function for both backends and the Spark
    helpers: the same classes and messages (a string for columns is a TypeError, not a list of letters; a
    malformed aborted-transaction entry a TypeError, not an IndexError)."""
    b = codec.BatchBuilder()
    b.append(b"v", timestamp=1)
    data = b.build()
    cases = [
        (dict(columns="offset"), TypeError, "list of column names"),
        (dict(columns=[]), ValueError, "at least one column"),
        (dict(columns=["offset", "partition"]), ValueError, r"unknown column\(s\) \['partition'\]"),
        (dict(columns=[], large_binary=True, binary_view=True), ValueError, "at least one column"),
        (dict(aborted_transactions=[(1,)]), TypeError, "pairs"),
        (dict(aborted_transactions=[(1, "5")]), TypeError, "pairs"),
        (dict(aborted_transactions=[5]), TypeError, "pairs"),
    ]
    for kw, cls, match in cases:
        with pytest.raises(cls, match=match):
            codec.decode_arrow(data, isolation="read_committed", **kw)
    for kw, cls, match in cases[4:]:
        with pytest.raises(cls, match=match):
            codec.decode_records(data, isolation="read_committed", **kw)
    for kw, cls, match in cases[:3]:
        with pytest.raises(cls, match=match):
            kafkatx_arrow.spark_schema(kw["columns"])
        with pytest.raises(cls, match=match):
            kafkatx_arrow.map_in_arrow_decoder("value", columns=kw["columns"])  # on the driver, not a task
    from kafkatx.txnindex import AbortedTxn

    assert len(codec.decode_records(data, isolation="read_committed", aborted_transactions=[AbortedTxn(1, 0, 5, 6)])) == 1


# ------------------------------------------------------------------------------- decode_column
def _rb_equal_whole(arrow, codec, column, data, **kw):
    whole = codec.decode_arrow(data, **{k: v for k, v in kw.items() if k != "row_tails"})
    got = arrow.decode_column(column, **kw)
    assert got.equals(whole, check_metadata=True)
    return got


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_decode_column_segment_rows(arrow, codec, isolation):
    data, _ = load_golden("segment_mixed")
    rows = segment_rows(data)
    assert len(rows) == 10
    kw = dict(isolation=isolation, aborted_transactions=[(1003, 13), (1001, 3)])
    for typ in (pa.binary(), pa.large_binary()):
        col = pa.array(rows, typ)
        _rb_equal_whole(arrow, codec, col, data, **kw)
        _rb_equal_whole(arrow, codec, col, data, row_tails="drop", **kw)
        # a Table column (chunked), a sliced array (non-zero offset), null rows in between
        _rb_equal_whole(arrow, codec, pa.table({"v": pa.chunked_array([col.slice(0, 3), col.slice(3)])})["v"], data,
                        **kw)  # fmt: skip
        with_nulls = pa.array([None] + rows[:4] + [None, None] + rows[4:] + [None], typ)
        _rb_equal_whole(arrow, codec, with_nulls.slice(1), data, **kw)
    _rb_equal_whole(arrow, codec, rows, data, **kw)  # a plain list
    _rb_equal_whole(arrow, codec, pd.Series(rows, dtype=object), data, **kw)
    _rb_equal_whole(arrow, codec, pa.array(rows, pa.binary_view()), data, **kw)
    for lso in (5, 12, 16):
        _rb_equal_whole(arrow, codec, pa.array(rows), data, last_stable_offset=lso, **kw)
    cols = ["offset", "value"]
    _rb_equal_whole(arrow, codec, pa.array(rows), data, columns=cols, large_binary=True, **kw)


def test_decode_column_null_rows_that_own_bytes(arrow, codec):
    """A null slot may still span bytes of the data buffer (Arrow allows it): they must be skipped."""
    data, _ = load_golden("segment_mixed")
    rows = segment_rows(data)
    garbage = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x20junk-junk-junk-junk-junk-junk!!"
    pieces = rows[:3] + [garbage] + rows[3:] + [garbage]
    offsets = np.cumsum([0] + [len(p) for p in pieces]).astype(np.int32)
    valid = [True] * 3 + [False] + [True] * 7 + [False]
    bitmap = pa.array(valid).buffers()[1]
    col = pa.Array.from_buffers(pa.binary(), len(pieces), [bitmap, pa.py_buffer(offsets.tobytes()),
                                                           pa.py_buffer(b"".join(pieces))], null_count=2)  # fmt: skip
    col.validate(full=True)
    for tails in ("carry", "drop"):
        _rb_equal_whole(arrow, codec, col, data, row_tails=tails)


def test_decode_column_arbitrary_chunks_carry(arrow, codec):
    data, _ = load_golden("segment_mixed")
    rng = np.random.default_rng(3)
    for _ in range(20):
        cuts = sorted(set(rng.integers(1, len(data), size=int(rng.integers(1, 30))).tolist()))
        pieces = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        _rb_equal_whole(arrow, codec, pa.array(pieces), data, isolation="read_committed",
                        aborted_transactions=[(1001, 3), (1003, 13)])  # fmt: skip


def test_decode_column_fetch_sets_drop_truncated_tails(arrow, codec):
    """Rows as Fetch responses: each ends with a cut copy of the next batch, which the next row re-sends whole."""
    data, _ = load_golden("segment_mixed")
    rows = segment_rows(data)
    fetches, dropped = [], 0
    for i in range(0, len(rows), 3):
        body = b"".join(rows[i : i + 3])
        tail = rows[i + 3][: len(rows[i + 3]) // 2] if i + 3 < len(rows) else b""
        fetches.append(body + tail)
        dropped += len(tail)
    got = arrow.decode_column(pa.array(fetches), row_tails="drop")
    whole = codec.decode_arrow(data)
    assert strip(got).equals(strip(whole))
    assert arrow.read_info(got) == {"next_offset": 18, "valid_bytes": len(data), "trailing_bytes": dropped}
    # carrying the tails over glues a half batch to a whole one: that must fail loudly, never decode garbage
    with pytest.raises(CorruptRecordError):
        arrow.decode_column(pa.array(fetches), row_tails="carry")


def test_decode_column_drop_tails_of_every_length(arrow, codec):
    """A batch cut to any length, 0 to whole, is dropped with row_tails="drop" (whole, it is decoded): as a
    row of its own, and after a whole batch in one row.  Shorter than the 12-byte log framing it has no
    length field (an 11-byte row was once taken for a complete entry)."""
    def batch(base):
        b = codec.BatchBuilder(base_offset=base)
        for i in range(2):
            b.append(b"v%d" % (base + i), key=b"k", timestamp=T_BASE)
        return b.build()

    b0, b1, b2 = batch(0), batch(2), batch(4)
    for cut in range(len(b1) + 1):
        whole = cut == len(b1)
        want = [0, 1, 2, 3, 4, 5] if whole else [0, 1, 4, 5]
        info = {"next_offset": 6, "valid_bytes": len(b0) + len(b2) + (cut if whole else 0),
                "trailing_bytes": 0 if whole else cut}  # fmt: skip
        for rows in ([b0, b1[:cut], b2], [b0 + b1[:cut], b2]):
            for typ in (pa.binary(), pa.large_binary()):
                got = arrow.decode_column(pa.array(rows, typ), row_tails="drop")
                assert got.column("offset").to_pylist() == want, (cut, len(rows), typ)
                assert arrow.read_info(got) == info, (cut, len(rows), typ)


def test_decode_column_empty_and_errors(arrow):
    empty = arrow.decode_column(pa.array([], pa.binary()), columns=["offset", "key"])
    assert empty.num_rows == 0 and empty.schema.remove_metadata() == arrow_schema(["offset", "key"])
    assert arrow.read_info(empty) == {"next_offset": None, "valid_bytes": 0, "trailing_bytes": 0}
    assert arrow.decode_column(pa.array([None, None, b""], pa.binary()), fetch_offset=7).num_rows == 0
    assert arrow.next_offset(arrow.decode_column(pa.array([None], pa.binary()), fetch_offset=7)) == 7
    with pytest.raises(TypeError):
        arrow.decode_column(pa.array([1, 2]))
    with pytest.raises(TypeError):
        arrow.decode_column(b"raw bytes")
    with pytest.raises(ValueError):
        arrow.decode_column(pa.array([b""]), row_tails="sometimes")
    data, _ = load_golden("corrupt_crc_none")
    with pytest.raises(CrcMismatchError):
        arrow.decode_column(pa.array([data]))
    assert arrow.decode_column(pa.array([data]), verify_crc=False).num_rows == 7


def _small_batch(codec, base: int) -> bytes:
    b = codec.BatchBuilder(base_offset=base)
    b.append(b"v%d" % base, key=b"k", timestamp=T_BASE + base)
    return b.build()


def _row_and_byte(rows, at: int, entry: int) -> tuple:
    """Where byte ``at`` of the stream the non-null ``rows`` make lies: (row, byte of that row).  A position
    past the failing entry's start (``entry``) that is exactly where a row ends stays with that row."""
    probe = at - 1 if at > entry else at
    pos = 0
    for i, r in enumerate(rows):
        if r is not None:
            if pos <= probe < pos + len(r):
                return i, at - pos
            pos += len(r)
    raise AssertionError(f"byte {at} is past the rows")


@settings(max_examples=60, **SETTINGS)
@given(case=st.sampled_from(sorted(CORRUPT)), before=st.integers(0, 3), after=st.integers(0, 2),
       whole=st.booleans(), data=st.data())  # fmt: skip
def test_decode_column_error_names_the_row(arrow, codec, case, before, after, whole, data):
    """An error from decode_column names the row of the column that holds the bad byte (nulls and earlier
    chunks counted) and gives its position in that row, whether the rows are whole batches or pieces of
    the byte stream that cut batches (the bad one too); its message says the row."""
    bad, _ = load_golden(case)
    with pytest.raises(CorruptRecordError) as alone:
        codec.decode_arrow(bad)
    head = b"".join(_small_batch(codec, i) for i in range(before))
    stream = head + bad + b"".join(_small_batch(codec, 10 + i) for i in range(after))
    if whole:  # rows of whole batches: either tail mode
        ends = [p + s for p, s in _spec.split_batches(head)]  # where each batch before the bad one ends
        cuts = data.draw(st.lists(st.sampled_from(ends), max_size=3)) if ends else []
        bounds = sorted({0, *cuts, len(head)})
        bounds = [*bounds, len(head) + len(bad), len(stream)]
        tails = data.draw(st.sampled_from(["carry", "drop"]))
    else:
        bounds = [0, *split_points(data.draw, len(stream)), len(stream)]
        tails = "carry"
    rows = []
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            rows.append(stream[a:b])
        if data.draw(st.booleans()):
            rows.append(None)
    typ = data.draw(st.sampled_from([pa.binary(), pa.large_binary()]))
    split = data.draw(st.integers(0, len(rows)))  # two chunks, as a Table column has
    column = pa.chunked_array([pa.array(rows[:split], typ), pa.array(rows[split:], typ)])
    with pytest.raises(type(alone.value)) as err:
        arrow.decode_column(column, row_tails=tails)
    row, byte = _row_and_byte(rows, len(head) + alone.value.position, len(head))
    assert (err.value.row, err.value.position, err.value.base_offset) == (row, byte, alone.value.base_offset)
    assert f"in row {row} of the column" in str(err.value)
    assert err.value.reason.startswith(alone.value.reason)


def test_decode_column_error_row_counts_slices_and_input_batches(arrow, codec):
    """Rows are counted from the start of the column given (a slice starts at its own row 0) and, in a
    map_in_arrow_decoder, across the input batches of the partition."""
    bad, _ = load_golden("corrupt_crc_none")
    a, b = _small_batch(codec, 0), _small_batch(codec, 1)
    with pytest.raises(CrcMismatchError) as err:
        arrow.decode_column(pa.array([a, b, None, a + bad])[1:])
    assert (err.value.row, err.value.position) == (2, len(a))
    decode = arrow.map_in_arrow_decoder("value", spark_types=False)
    batches = [pa.record_batch({"value": pa.array(r, pa.binary())}) for r in ([a, None], [b, b"" , bad])]
    with pytest.raises(CrcMismatchError) as err:
        list(decode(iter(batches)))
    assert (err.value.row, err.value.position) == (4, 0)
    assert "in row 4 of the column" in str(err.value)


@settings(max_examples=40, **SETTINGS)
@given(log=logs(), data=st.data())
def test_decode_column_logs(arrow, codec, log, data):
    """Batches grouped into rows at random (with null rows), both tail modes, equal one decode of the log."""
    spans = _spec.split_batches(log.data)
    groups = split_points(data.draw, len(spans) + 1, max_cuts=len(spans))
    bounds = [0] + [g for g in groups if g < len(spans)] + [len(spans)]
    rows = []
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            rows.append(log.data[spans[a][0] : spans[b - 1][0] + spans[b - 1][1]])
        if data.draw(st.booleans()):
            rows.append(None)
    typ = data.draw(st.sampled_from([pa.binary(), pa.large_binary()]))
    isolation = data.draw(st.sampled_from(ISOLATIONS))
    tails = data.draw(st.sampled_from(["carry", "drop"]))
    _rb_equal_whole(arrow, codec, pa.array(rows, typ), log.data, isolation=isolation,
                    aborted_transactions=log.aborted, row_tails=tails)  # fmt: skip


# ----------------------------------------------------------------------------------------- Spark
SPARK_DDL = (
    "`offset` BIGINT, `timestamp` TIMESTAMP, `timestamp_type` TINYINT, `key` BINARY, `value` BINARY, "
    "`headers` ARRAY<STRUCT<`key`: STRING, `value`: BINARY>>, `producer_id` BIGINT, `producer_epoch` SMALLINT, "
    "`sequence` INT, `is_transactional` BOOLEAN"
)


def test_spark_schema():
    assert kafkatx_arrow.spark_schema() == SPARK_DDL
    assert kafkatx_arrow.spark_schema(["value", "offset"]) == "`offset` BIGINT, `value` BINARY"
    with pytest.raises(ValueError):
        kafkatx_arrow.spark_schema(["partition"])
    with pytest.raises(TypeError):
        kafkatx_arrow.spark_schema("value")
    s = kafkatx_arrow.spark_arrow_schema()
    assert s.names == list(ARROW_COLUMNS)
    assert all(f.nullable for f in s)
    assert s.field("timestamp").type == pa.timestamp("us", tz="UTC")
    ddl_to_arrow = {"BIGINT": pa.int64(), "TINYINT": pa.int8(), "BINARY": pa.binary(), "SMALLINT": pa.int16(),
                    "INT": pa.int32(), "BOOLEAN": pa.bool_()}  # fmt: skip
    for part in SPARK_DDL.split(", "):
        name, _, typ = part.partition(" ")
        if typ in ddl_to_arrow:
            assert s.field(name.strip("`")).type == ddl_to_arrow[typ]


def test_map_in_arrow_decoder_names_a_timestamp_spark_cannot_hold(arrow, codec):
    """Kafka takes any millisecond timestamp; Spark's are int64 microseconds.  One past that range fails
    the task with kafkatx's InvalidTimestampError naming the record's offset (not pyarrow's ArrowInvalid);
    the largest that fits, and null ones, pass."""
    from kafkatx.errors import InvalidTimestampError

    fits = ((1 << 63) - 1) // 1000
    for ts, ok in ((1 << 62, False), (fits + 1, False), (fits, True)):
        b = codec.BatchBuilder()
        b.append(b"x", timestamp=5)
        b.append(b"y", timestamp=ts)
        decode = arrow.map_in_arrow_decoder("value")
        batches = iter([pa.record_batch({"value": [b.build()]})])
        if ok:
            out = list(decode(batches))[0]
            assert out.column("timestamp").cast(pa.int64()).to_pylist() == [5_000, ts * 1000]
        else:
            with pytest.raises(InvalidTimestampError, match=f"offset 1 has timestamp {ts} ms"):
                list(decode(batches))


def test_inflate_threads_of_the_column_decoders(arrow, codec, monkeypatch):
    """decode_column passes inflate_threads on (default None, as decode_arrow's); map_in_arrow_decoder
    defaults to 0 (a Spark task has one core) and checks the value on the driver."""
    data, _ = load_golden("segment_mixed")
    batch = pa.record_batch({"value": pa.array(segment_rows(data), pa.binary())})
    want = strip(codec.decode_arrow(data))
    seen = []
    real = codec.ReadCommittedFilter

    def spy(*args, **kwargs):
        seen.append(kwargs.get("inflate_threads", "unset"))
        return real(*args, **kwargs)

    monkeypatch.setattr(codec, "ReadCommittedFilter", spy)
    assert strip(arrow.decode_column(batch.column(0))).equals(want)
    assert strip(arrow.decode_column(batch.column(0), inflate_threads=1)).equals(want)
    (got,) = arrow.map_in_arrow_decoder(spark_types=False)(iter([batch]))
    assert strip(got).equals(want)
    list(arrow.map_in_arrow_decoder(inflate_threads=None)(iter([batch])))
    assert seen == [None, 1, 0, None]
    with pytest.raises(ValueError, match="inflate_threads"):
        arrow.map_in_arrow_decoder(inflate_threads=-1)


def test_map_in_arrow_decoder(arrow, codec):
    data, _ = load_golden("segment_mixed")
    rows = segment_rows(data)
    inputs = [
        pa.record_batch({"topic": ["t"] * 4, "value": pa.array(rows[:4], pa.binary())}),
        pa.record_batch({"topic": pa.array([], pa.string()), "value": pa.array([], pa.binary())}),
        pa.record_batch({"topic": ["t"] * 6, "value": pa.array(rows[4:], pa.binary())}),
    ]
    aborted = [(1001, 3), (1003, 13)]
    for isolation in ISOLATIONS:
        func = arrow.map_in_arrow_decoder(isolation=isolation, aborted_transactions=aborted)
        out = list(func(iter(inputs)))
        assert len(out) == 2  # one per input batch with visible records
        target = arrow.spark_arrow_schema()
        assert all(o.schema.equals(target) for o in out)
        whole = codec.decode_arrow(data, isolation=isolation, aborted_transactions=aborted)
        got = pa.concat_batches(out)
        assert got.column("timestamp").cast(pa.timestamp("ms", tz="UTC")).equals(whole.column("timestamp"))
        for name in ARROW_COLUMNS:
            if name != "timestamp":
                assert got.column(name).to_pylist() == whole.column(name).to_pylist(), name
        # the same function object serves several partitions: state does not leak between calls
        assert pa.concat_batches(list(func(iter(inputs)))).equals(got)
    own = arrow.map_in_arrow_decoder(column="payload", columns=["value", "offset"], spark_types=False)
    (res,) = own(iter([pa.record_batch({"payload": pa.array(rows, pa.large_binary())})]))
    assert strip(res).equals(strip(codec.decode_arrow(data, columns=["offset", "value"])))
    with pytest.raises(KeyError, match="value"):
        list(arrow.map_in_arrow_decoder()(iter([pa.record_batch({"payload": [b""]})])))
    with pytest.raises(ValueError):
        arrow.map_in_arrow_decoder(columns=["nope"])
    with pytest.raises(ValueError):
        arrow.map_in_arrow_decoder(isolation="dirty")


# ---------------------------------------------------------------------------------------- threads
def test_decode_arrow_parallel(arrow, codec):
    chunks = [load_golden(n)[0] for n in ("segment_mixed", "many_zstd", "large_gzip", "plain_none", "legacy_v1_lz4")]
    chunks.append(bytearray(chunks[0]))
    chunks.append(memoryview(chunks[1]))
    kw = dict(isolation="read_committed", columns=["offset", "key", "value", "headers"])
    want = [codec.decode_arrow(c, **kw) for c in chunks]
    for workers in (None, 1, 3):
        got = arrow.decode_arrow_parallel(chunks, max_workers=workers, **kw)
        assert len(got) == len(want)
        assert all(g.equals(w, check_metadata=True) for g, w in zip(got, want))
    assert arrow.decode_arrow_parallel(iter(chunks[:2])) == [codec.decode_arrow(c) for c in chunks[:2]]
    assert arrow.decode_arrow_parallel([]) == []
    bad, _ = load_golden("corrupt_crc_zstd")
    with pytest.raises(CrcMismatchError):
        arrow.decode_arrow_parallel(chunks[:3] + [bad], max_workers=2)
    with pytest.raises(ValueError):
        arrow.decode_arrow_parallel(chunks, max_workers=0)


def test_decode_arrow_parallel_raises_the_first_failure_in_input_order(arrow):
    """The calling thread drains chunks beside the pool's; whichever thread meets which failure, the error
    raised is the one of the first failing chunk, and chunks not started when a failure is seen never are."""
    good = load_golden("plain_none")[0]
    crc, _ = load_golden("corrupt_crc_none")
    count, _ = load_golden("corrupt_count_none")
    for _ in range(20):
        with pytest.raises(CrcMismatchError):
            arrow.decode_arrow_parallel([crc, good, count, good], max_workers=2)
        with pytest.raises(InvalidRecordError):
            arrow.decode_arrow_parallel([good, count, crc], max_workers=3)


def test_decode_arrow_parallel_same_buffers_many_threads(arrow, codec):
    """Big batches (the compiled decoder drops the GIL for them) decoded by 8 threads at once, sharing inputs."""
    rng = np.random.default_rng(11)
    values = [rng.bytes(int(rng.integers(0, 2000))) for _ in range(200)]
    table = pa.table({"value": values, "key": [v[:5] for v in values],
                      "headers": pa.array([[{"key": "i", "value": v[:3]}] for v in values], HEADER_TYPE)})  # fmt: skip
    plain = load_backend("cython").encode_arrow(table, records_per_batch=50, timestamp=5)
    packed = load_backend("cython").encode_arrow(table, records_per_batch=40, timestamp=5, compression="lz4")
    shared = bytearray(plain)
    chunks = [plain, packed, shared, memoryview(shared)] * 4
    want = {id(c): codec.decode_arrow(c) for c in chunks[:4]}
    got = arrow.decode_arrow_parallel(chunks, max_workers=8)
    for c, g in zip(chunks, got):
        assert g.equals(want[id(c)], check_metadata=True)
    assert got[0].column("value").to_pylist() == values
    viewed = arrow.decode_arrow_parallel(chunks[:8], max_workers=8, binary_view=True)
    assert all(arrow_rows(v) == arrow_rows(got[0]) for v in viewed)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_decode_arrow_parallel_after_fork():
    """The pool outlives calls; a forked child (a Spark Python worker, multiprocessing's fork) inherits
    it without its threads, so the child must get a pool of its own instead of waiting forever."""
    script = """
import os, sys
import kafkatx, kafkatx.arrow as ka
b = kafkatx.BatchBuilder()
for i in range(100):
    b.append(b"v%d" % i, key=b"k", timestamp=5)
data = b.build()
want = [kafkatx.decode_arrow(data)] * 3
assert ka.decode_arrow_parallel([data] * 3, max_workers=2) == want
pid = os.fork()
if pid == 0:
    import signal
    signal.alarm(60)  # a hung child ends itself rather than outliving the test
    ok = ka.decode_arrow_parallel([data] * 3, max_workers=2) == want
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=90, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------------- decoded buffers
def test_decoded_arrays_own_their_memory(codec):
    """The copying decoder's arrays must not point into the caller's buffer."""
    data, _ = load_golden("segment_mixed")
    buf = bytearray(data)
    rb = codec.decode_arrow(buf)
    snapshot = arrow_rows(rb)
    buf[:] = b"\x00" * len(buf)
    buf.extend(b"\x01" * 64)  # no export is held
    del buf
    gc.collect()
    assert arrow_rows(rb) == snapshot
    rb.validate(full=True)


def _header_key_bytes_invalid_utf8():
    """A batch with a header key that is not valid UTF-8 (Kafka does not check)."""
    rec = _spec.raw_record(key=b"k", value=b"v", headers=[(b"ok", b"1"), (b"\xff\xfebad", b"2")])
    return _spec.v2_batch(rec, count=1)


def test_invalid_utf8_header_key_is_repaired(codec):
    data = _header_key_bytes_invalid_utf8()
    rb = codec.decode_arrow(data)
    rb.validate(full=True)
    (hs,) = rb.column("headers").to_pylist()
    assert [h["key"] for h in hs] == ["ok", "\ufffd\ufffdbad"]
    assert [h["value"] for h in hs] == [b"1", b"2"]
    (r,) = codec.decode_records(data)
    assert r.headers[1][0].encode("utf-8", "surrogateescape") == b"\xff\xfebad"


@settings(max_examples=40, **SETTINGS)
@given(
    rows=st.lists(enc_record_st, max_size=25),
    compression=st.sampled_from(CODECS),
    records_per_batch=st.integers(1, 10),
    producer=st.sampled_from([(-1, -1, -1, False), (5, 1, 0, False), (6, 2, (1 << 31) - 4, True)]),
)
def test_encode_arrow_backends_write_the_same_bytes(rows, compression, records_per_batch, producer):
    pid, epoch, seq, txn = producer
    table = _table(rows)
    kw = dict(records_per_batch=records_per_batch, compression=compression, base_offset=3, producer_id=pid,
              producer_epoch=epoch, base_sequence=seq, transactional=txn, timestamp=1)  # fmt: skip
    cy, py = (load_backend(b) for b in BACKENDS)
    assert cy.encode_arrow(table, **kw) == py.encode_arrow(table, **kw)


EDGE_TABLES = {
    "binary-header-key": lambda: pa.table(
        {
            "value": [b"x"],
            "headers": pa.array(
                [[{"key": b"k", "value": b"v"}]], pa.list_(pa.struct([("key", pa.binary()), ("value", pa.binary())]))
            ),
        }
    ),
    "large-string-header-key": lambda: pa.table(
        {
            "value": [b"x"],
            "headers": pa.array(
                [[{"key": "k", "value": b"v"}]],
                pa.list_(pa.struct([("key", pa.large_string()), ("value", pa.binary())])),
            ),
        }
    ),
    "null-header-list": lambda: pa.table({"value": [b"x", b"y"], "headers": pa.array([None, []], HEADER_TYPE)}),
    "string-header-value": lambda: pa.table(
        {
            "value": [b"x", b"y"],
            "headers": pa.array(
                [[{"key": "k", "value": "vé"}, {"key": "n", "value": None}], []],
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
            ),
        }
    ),
    "large-list-headers": lambda: pa.table(
        {
            "value": [b"x"],
            "headers": pa.array([[{"key": "k", "value": b"v"}, {"key": "", "value": b""}]],
                                pa.large_list(HEADER_TYPE.value_type)),  # fmt: skip
        }
    ),
    # a null list whose offsets still span a header (Arrow allows it): the header is not the row's
    "null-header-list-over-a-segment": lambda: pa.table(
        {
            "value": [b"x", b"y", b"z"],
            "headers": pa.ListArray.from_arrays(
                pa.array([0, 1, 2, 3], pa.int32()),
                pa.array([{"key": "a", "value": b"1"}, {"key": "b", "value": b"2"}, {"key": "c", "value": None}],
                         HEADER_TYPE.value_type),  # fmt: skip
                mask=pa.array([False, True, False]),
            ),
        }
    ).slice(1),
    "null-header-key": lambda: pa.table(
        {"value": [b"x", b"y"], "headers": pa.array([[], [{"key": None, "value": b"v"}]], HEADER_TYPE)}
    ),
    "fixed-size-binary": lambda: pa.table({"value": pa.array([b"ab", None], pa.binary(2))}),
    "string-view": lambda: pa.table({"value": pa.array(["ab", None], pa.string_view())}),
    "uint64-timestamp": lambda: pa.table({"value": [b"x"], "timestamp": pa.array([1 << 63], pa.uint64())}),
    "int8-timestamp": lambda: pa.table({"value": [b"x", b"y"], "timestamp": pa.array([-1, 5], pa.int8())}),
    "date-timestamp": lambda: pa.table({"value": [b"x"], "timestamp": pa.array([1], pa.date32())}),
    "decoded-batch": lambda: pa.Table.from_batches(
        [load_backend("cython").decode_arrow(load_golden("segment_mixed")[0])]
    ),
    "extra-decoded-columns-only": lambda: pa.table({"value": [b"x"], "offset": [99], "sequence": [7]}),
}


@pytest.mark.parametrize("name", sorted(EDGE_TABLES))
def test_encode_arrow_backends_agree_on_edge_inputs(name):
    """Whatever the answer for an odd table, both backends give the same one (bytes, or the same error)."""
    outcomes = []
    for backend in BACKENDS:
        try:
            table = EDGE_TABLES[name]()
            outcomes.append(load_backend(backend).encode_arrow(table, timestamp=1))
        except Exception as exc:  # noqa: BLE001 - the type is what is compared
            outcomes.append(type(exc))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] in (InvalidAppendError,) or isinstance(outcomes[0], bytes)


# -------------------------------------------------------------------------- zero copy (binary_view)
ZERO_COPY_CASES = ["segment_mixed", "plain_none", "large_none", "large_zstd", "large_lz4", "many_gzip",
                   "legacy_v0_none", "legacy_v1_snappy", "compacted_gaps_zstd", "truncated_tail_segment",
                   "log_append_time_lz4"]  # fmt: skip


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("name", ZERO_COPY_CASES)
def test_binary_view_equals_copying_decode(codec, name, isolation):
    data, _ = load_golden(name)
    kw = dict(isolation=isolation, aborted_transactions=aborted_transactions(data))
    copied = codec.decode_arrow(data, **kw)
    viewed = codec.decode_arrow(data, binary_view=True, **kw)
    viewed.validate(full=True)
    assert viewed.schema.remove_metadata() == arrow_schema(binary_view=True)
    assert viewed.schema.field("value").type == pa.binary_view()
    assert info(viewed) == info(copied)
    assert strip(viewed).cast(strip(copied).schema).equals(strip(copied))
    assert arrow_rows(viewed) == arrow_rows(copied)
    sub = codec.decode_arrow(data, binary_view=True, columns=["value", "offset"], **kw)
    assert sub.schema.names == ["offset", "value"] and sub.column("value").equals(viewed.column("value"))
    # a binary_view table is valid encode_arrow input, and encodes like the copied one
    assert codec.encode_arrow(viewed, timestamp=1) == codec.encode_arrow(copied, timestamp=1)


def test_binary_view_backends_equal():
    cy, py = (load_backend(b) for b in BACKENDS)
    for name in ZERO_COPY_CASES:
        data, _ = load_golden(name)
        assert cy.decode_arrow(data, binary_view=True).equals(py.decode_arrow(data, binary_view=True),
                                                              check_metadata=True), name  # fmt: skip


def test_binary_view_excludes_large_binary(codec):
    with pytest.raises(ValueError):
        codec.decode_arrow(b"", binary_view=True, large_binary=True)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview"])
@pytest.mark.parametrize("name", ["large_none", "large_zstd", "large_lz4", "segment_mixed", "legacy_v1_gzip"])
def test_binary_view_survives_the_source(codec, name, kind):
    """Drop every reference to the source: the views must still read the right bytes (the array keeps it)."""
    data, _ = load_golden(name)
    want = codec.decode_arrow(data)
    src = {"bytes": lambda: bytes(bytearray(data)), "bytearray": lambda: bytearray(data),
           "memoryview": lambda: memoryview(bytearray(b"\xaa" * 7 + data))[7:]}[kind]()  # fmt: skip
    viewed = codec.decode_arrow(src, binary_view=True)
    del src
    gc.collect()
    _ = [bytes(1000) for _ in range(2000)]  # churn the allocator over any freed block
    viewed.validate(full=True)
    assert viewed.column("value").to_pylist() == want.column("value").to_pylist()
    assert viewed.column("key").to_pylist() == want.column("key").to_pylist()
    # a slice of the batch and the value column alone outlive the batch too
    col = viewed.column("value").slice(1)
    del viewed
    gc.collect()
    assert col.to_pylist() == want.column("value").to_pylist()[1:]


def test_binary_view_points_into_the_callers_buffer():
    """Compiled codec: uncompressed values are views of the caller's bytes, not copies."""
    cy = load_backend("cython")
    data, _ = load_golden("large_none")
    buf = bytearray(data)
    viewed = cy.decode_arrow(buf, binary_view=True)
    lo = np.frombuffer(buf, np.uint8).ctypes.data
    long_values = [v for v in viewed.column("value").to_pylist() if v is not None and len(v) > 12]
    assert long_values
    data_bufs = viewed.column("value").buffers()[2:]
    assert any(lo <= b.address < lo + len(buf) for b in data_bufs)
    with pytest.raises(BufferError):
        buf.extend(b"\x00")  # the arrays hold an export: the bytes cannot move under them
    first_long = next(i for i, v in enumerate(viewed.column("value").to_pylist()) if v and len(v) > 12)
    value = viewed.column("value")[first_long].as_py()
    pos = data.index(value)
    buf[pos + 12] ^= 0xFF  # in place: the view sees it (past the 4-byte inline prefix)
    assert viewed.column("value")[first_long].as_py() != value
    del viewed, data_bufs
    gc.collect()
    buf.extend(b"\x00")  # export released with the arrays


def test_binary_view_compressed_and_pending(codec):
    """Compressed payloads and a batch completed from a previous chunk's tail are kept alive by the arrays."""
    data, _ = load_golden("segment_mixed")
    want = codec.decode_arrow(data)
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    parts = []
    for a, b in ((0, 100), (100, 401), (401, 402), (402, len(data))):
        chunk = bytearray(data[a:b])
        parts.append(f.feed_arrow(chunk, binary_view=True))
        del chunk
        gc.collect()
    for p in parts:
        p.validate(full=True)
    got = pa.concat_batches([strip(p) for p in parts])
    assert arrow_rows(got) == arrow_rows(want)


def test_decode_column_binary_view(arrow, codec):
    data, _ = load_golden("segment_mixed")
    col = pa.array(segment_rows(data), pa.binary())
    got = arrow.decode_column(col, binary_view=True)
    del col
    gc.collect()
    got.validate(full=True)
    assert got.schema.field("value").type == pa.binary_view()
    assert arrow_rows(got) == arrow_rows(codec.decode_arrow(data))


@settings(max_examples=40, **SETTINGS)
@given(log=logs(), data=st.data())
def test_logs_binary_view_random_chunks(codec, log, data):
    isolation = data.draw(st.sampled_from(ISOLATIONS))
    cuts = split_points(data.draw, len(log.data))
    kw = dict(isolation=isolation, aborted_transactions=log.aborted)
    want = codec.decode_arrow(log.data, **kw)
    f = codec.ReadCommittedFilter(log.aborted, isolation=isolation)
    # each chunk is a temporary: it is freed as soon as feed_arrow returns, unless the arrays keep it
    parts = [f.feed_arrow(bytearray(log.data[a:b]), binary_view=True)
             for a, b in zip([0] + cuts, cuts + [len(log.data)])]  # fmt: skip
    got = concat(parts)
    got.validate(full=True)
    assert arrow_rows(got) == arrow_rows(want)


# -------------------------------------------------------------------------- recycled column memory
def _value_data(rb):
    return rb.column("value").buffers()[2]


def test_column_memory_is_recycled_only_when_no_array_uses_it():
    """Compiled codec: large column buffers go back to its cache when the last array using them is gone,
    and the next decode writes there; memory an array (or a slice of one) still uses is never reused."""
    cy = load_backend("cython")
    old = cy.buffer_cache_limit(64 << 20)
    try:
        b = cy.BatchBuilder(base_offset=0)  # 3 MiB of values: above the 1 MiB recycling threshold
        for i in range(40_000):
            b.append(b"v%07d" % i * 10, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
        log = b.build()
        want = cy.decode_arrow(log)
        expected = want.column("value").to_pylist()
        del want
        gc.collect()
        first = cy.decode_arrow(log)
        addr = _value_data(first).address
        second = cy.decode_arrow(log)  # the first is alive: its memory must not be handed out
        assert _value_data(second).address != addr
        tail = first.column("value").slice(10)  # outlives its batch
        del first
        gc.collect()
        third = cy.decode_arrow(log)
        assert _value_data(third).address != addr  # the slice still uses that memory
        assert tail.to_pylist() == expected[10:]
        del tail, second, third
        gc.collect()
        assert cy.buffer_cache_bytes() > 0
        fourth = cy.decode_arrow(log)
        assert fourth.column("value").to_pylist() == expected
        fourth.validate(full=True)
        # turned off: the cache empties and keeps nothing
        assert cy.buffer_cache_limit(0) == 64 << 20
        assert cy.buffer_cache_bytes() == 0
        del fourth
        gc.collect()
        assert cy.buffer_cache_bytes() == 0
    finally:
        cy.buffer_cache_limit(old)


def _decode_counting_fresh_memory(cy, log):
    """``(decode_arrow(log), bytes)``: bytes the call took from Arrow's default pool beyond the result's
    buffers of under 1 MiB, which are never recycled.  Under 1 MiB when every larger buffer was recycled."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    before = pool.total_bytes_allocated()
    out = cy.decode_arrow(log)
    fresh = pool.total_bytes_allocated() - before
    small = sum(b.size for col in out.columns for b in col.buffers() if b is not None and b.size < 1 << 20)
    return out, fresh - small


@contextlib.contextmanager
def _empty_cache(cy, limit):
    """The column buffer cache emptied and limited to ``limit`` bytes for a ``with`` block, then restored."""
    old = cy.buffer_cache_limit(0)
    try:
        cy.buffer_cache_limit(limit)
        yield
    finally:
        cy.buffer_cache_limit(old)


def _assert_steady_state(cy, log, expected_values, calls=3):
    """``calls`` decodes of ``log`` in a row, each gone before the next: none takes fresh large memory, and
    each gives ``expected_values``."""
    for _ in range(calls):
        out, fresh = _decode_counting_fresh_memory(cy, log)
        assert fresh < 1 << 20, f"{fresh:,} bytes of fresh large column memory in a steady-state call"
        assert out.column("value").to_pylist() == expected_values
        del out
        gc.collect()


def test_decode_after_decode_reuses_every_large_buffer():
    """Compiled codec: decoding the same input again, the previous result gone, writes every large column
    buffer into recycled memory, the offsets columns (which start with a small buffer holding their leading
    0) included, and the cache does not grow from call to call (it used to keep one more idle offsets
    buffer per binary column on every call while each call faulted in fresh ones)."""
    cy = load_backend("cython")
    with _empty_cache(cy, 256 << 20):
        b = cy.BatchBuilder(base_offset=0)  # 300k rows: int32 offsets of 1.2 MB, above the 1 MiB threshold
        for i in range(300_000):
            b.append(b"v%d" % i, key=None if i % 7 == 0 else b"k%d" % i, timestamp=1_700_000_000_000 + i,
                     headers=(("h", b"x"),) if i % 3 == 0 else ())
        log = b.build()

        def large_buffers(rb):
            return {(name, j): buf.address for name, col in zip(rb.schema.names, rb.columns)
                    for j, buf in enumerate(col.buffers()) if buf is not None and buf.size >= 1 << 20}  # fmt: skip

        first = cy.decode_arrow(log)  # (sizes the cache: what it leaves idle depends on what was there)
        expected = first.to_pylist()
        del first
        gc.collect()
        second = cy.decode_arrow(log)
        seen = large_buffers(second)
        assert {("key", 1), ("value", 1), ("headers", 1), ("offset", 1)} <= set(seen)
        busy = cy.buffer_cache_bytes()
        del second
        gc.collect()
        idle = cy.buffer_cache_bytes()
        for _ in range(3):
            again, fresh_large = _decode_counting_fresh_memory(cy, log)
            assert cy.buffer_cache_bytes() == busy  # nothing more left idle than the call before
            assert set(large_buffers(again)) == set(seen)
            assert fresh_large < 1 << 20  # every large buffer in recycled memory
            del again
            gc.collect()
            assert cy.buffer_cache_bytes() == idle
        assert cy.decode_arrow(log).to_pylist() == expected


def test_compressed_decode_after_uncompressed_one_reaches_a_steady_state():
    """Compiled codec: after an uncompressed decode has filled the cache, decoding a compressed log (whose
    columns are sized from its block headers, a little larger) settles after two calls: from then on a
    call allocates no large buffer, with a cache limit that holds the columns of one log but not of both.
    The key column, sized first, used to take the idle buffer made for the values (the smallest one big
    enough), so the value column allocated fresh memory on every call (32 MB here; on the benchmark's
    logs, lz4 into Arrow after an uncompressed decode faulted in 48 huge pages, ~13 ms, a call).  Values
    are now sized before keys."""
    cy = load_backend("cython")
    # room for the columns of one log, not of both (as 256 MiB for the benchmark's 1M-record logs)
    with _empty_cache(cy, 64 << 20):
        logs = []
        for codec in ("none", "lz4"):  # 200 batches of 1,000 records of ~100-byte values, as in benchmarks/
            batches = []
            for base in range(0, 200_000, 1000):
                b = cy.BatchBuilder(base_offset=base, compression=codec)
                for i in range(base, base + 1000):
                    b.append(b"value %d of a compressible record " % i * 3, key=b"key-%d" % i,
                             timestamp=1_700_000_000_000 + i)
                batches.append(b.build())
            logs.append(b"".join(batches))
        plain, packed = logs
        expected = cy.decode_arrow(plain).column("value").to_pylist()
        for _ in range(2):
            cy.decode_arrow(plain)
            gc.collect()
        for _ in range(2):  # (the first calls size what they need)
            cy.decode_arrow(packed)
            gc.collect()
        _assert_steady_state(cy, packed, expected)


def test_recycled_memory_of_a_shrunk_column_can_grow_in_the_next_decode():
    """Compiled codec: a column that used under a quarter of its buffer is copied into a smaller one, which
    goes to the cache when dropped; a later decode may take that buffer for a column that then has to grow."""
    cy = load_backend("cython")
    with _empty_cache(cy, 256 << 20):
        a = cy.BatchBuilder(base_offset=0)  # headers make up most of the record bytes: values are shrunk
        for i in range(20_000):
            a.append(b"%0100d" % i, key=None, timestamp=1_700_000_000_000, headers=(("h", b"x" * 1000),))
        first = cy.decode_arrow(a.build())
        assert first.column("value")[7].as_py() == b"%0100d" % 7
        del first
        gc.collect()
        assert cy.buffer_cache_bytes() > 0
        b = cy.BatchBuilder(base_offset=0)  # keys larger than the quarter of the record bytes first sized for
        for i in range(20_000):
            b.append(b"v", key=b"%0200d" % i, timestamp=1_700_000_000_000)
        second = cy.decode_arrow(b.build())
        second.validate(full=True)
        assert second.column("key")[19_999].as_py() == b"%0200d" % 19_999


def test_buffer_cache_limit_contract(codec):
    old = codec.buffer_cache_limit()
    try:
        assert codec.buffer_cache_limit(1 << 20) == old
        assert codec.buffer_cache_limit() == 1 << 20
        assert codec.buffer_cache_bytes() <= 1 << 20
        with pytest.raises(ValueError):
            codec.buffer_cache_limit(-1)
    finally:
        codec.buffer_cache_limit(old)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_columns_are_sized_from_the_frame_headers(compression):
    """Compiled codec: the value column of a compressed input is sized from what its lz4 blocks or zstd
    blocks say they inflate to, not from a fixed multiple of the compressed size. Here the values compress
    2:1, so four times the compressed size would be twice the column: that buffer would be too large to
    keep under this cache limit, and every decode would fault in fresh memory for its values."""
    cy = load_backend("cython")
    rng = np.random.default_rng(7)
    parts = []
    for batch in range(10):
        b = cy.BatchBuilder(base_offset=batch * 100, compression=compression)
        for i in range(100):  # 10 KB values: half random, half zeros
            last = rng.bytes(5_000) + bytes(5_000)
            b.append(last, timestamp=1_700_000_000_000 + i)
        parts.append(b.build())
    log = b"".join(parts)
    values = 1000 * 10_000
    assert len(log) > values // 3  # (compressed about 2:1: the premise of the test)
    with _empty_cache(cy, values * 3 // 2):
        rb = cy.decode_arrow(log, columns=["value"])
        assert rb.num_rows == 1000 and _value_data(rb).size == values
        del rb
        gc.collect()
        # the value buffer went back to the cache: it was sized near the 10 MB it holds
        assert values <= cy.buffer_cache_bytes() <= values * 3 // 2
        again = cy.decode_arrow(log, columns=["value"])
        assert cy.buffer_cache_bytes() == 0  # and the next decode took it
        assert again.column("value")[999].as_py() == last


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_small_compressed_batches_size_their_columns_near_what_they_hold(codec):
    """Compiled codec: Kafka's default 16 KiB batches are one lz4 or zstd block each, which may hold up to a
    whole block (64 or 128 KiB).  Guessed at the block size, the value column of such a log was sized at
    4-8x what it holds: past the buffer cache, so every call took fresh memory for it and then copied the
    filled part into a smaller buffer.  The last block of a frame is now guessed at a few times its size:
    with a cache that holds the columns twice over, calls after the first take no fresh large memory."""
    cy = load_backend("cython")
    with _empty_cache(cy, 64 << 20):
        batches = []
        for base in range(0, 200_000, 130):  # ~16 KiB of records a batch, ~22 MB of values in all
            b = cy.BatchBuilder(base_offset=base, compression=codec)
            for i in range(base, min(base + 130, 200_000)):
                b.append(b"value %d of a compressible record " % i * 3, key=b"key-%d" % i,
                         timestamp=1_700_000_000_000 + i)
            batches.append(b.build())
        log = b"".join(batches)
        expected = cy.decode_arrow(log).column("value").to_pylist()
        gc.collect()
        _assert_steady_state(cy, log, expected)
