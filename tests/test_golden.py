"""Decode every golden vector written by Apache Kafka's kafka-clients 4.3.0 and compare with its sidecar.

Each case's sidecar (``NAME.json``) holds every batch and record field as Kafka's own Java classes read
them, so these tests check kafkatx against Kafka itself, field by field, on both backends.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import mmap

import pytest

from conftest import golden_cases, load_golden
from kafkatx.errors import CorruptRecordError, CrcMismatchError, InvalidRecordError, KafkaTxError

CASES = golden_cases()
CORRUPT = {"corrupt_crc_none", "corrupt_crc_zstd", "corrupt_count_none", "corrupt_magic_none"}
DECODABLE = [c for c in CASES if c not in CORRUPT]

TIMESTAMP_TYPES = {
    "CREATE_TIME": "create_time",
    "LOG_APPEND_TIME": "log_append_time",
    "NO_TIMESTAMP_TYPE": "no_timestamp_type",
}


# ----------------------------------------------------------------------------------------- helpers
def assert_payload(actual, expected, what):
    """``expected`` is the sidecar's ``null`` or ``{len, sha256, b64?, utf8?}``."""
    if expected is None:
        assert actual is None, f"{what}: expected null, got {actual!r:.80}"
        return
    assert isinstance(actual, bytes), f"{what}: expected bytes, got {type(actual).__name__}"
    assert len(actual) == expected["len"], what
    if "b64" in expected:
        assert actual == base64.b64decode(expected["b64"]), what
    assert hashlib.sha256(actual).hexdigest() == expected["sha256"], what


def assert_batch_fields(batch, exp, where):
    """Every batch-level field of the sidecar."""
    legacy = exp["magic"] < 2
    checks = {
        "position": exp["position"],
        "magic": exp["magic"],
        "base_offset": exp["base_offset"],
        "last_offset": exp["last_offset"],
        "next_offset": exp["last_offset"] + 1,
        "last_offset_delta": exp["last_offset_delta"],
        "size_in_bytes": exp["size_in_bytes"],
        "crc": exp["crc"],
        "compression": exp["compression"],
        "timestamp_type": TIMESTAMP_TYPES[exp["timestamp_type"]],
        "max_timestamp": exp["max_timestamp"],
        "producer_id": exp["producer_id"],
        "producer_epoch": exp["producer_epoch"],
        "base_sequence": exp["base_sequence"],
        "last_sequence": exp["last_sequence"],
        "is_transactional": exp["is_transactional"],
        "is_control": exp["is_control"],
        "partition_leader_epoch": exp["partition_leader_epoch"],
        "delete_horizon_ms": exp["delete_horizon_ms"],
        "has_delete_horizon": exp["delete_horizon_ms"] is not None,
        "is_valid": exp["crc_valid"],
    }
    if not legacy:
        checks["attributes"] = exp["attributes"]
        checks["base_timestamp"] = exp["base_timestamp"]
        checks["records_count"] = exp["count"]
        assert batch.attributes & 0x07 == exp["compression_id"], where
        assert batch.size_in_bytes - 12 == exp["batch_length_field"], where
    for name, want in checks.items():
        got = getattr(batch, name)
        assert got == want, f"{where}: {name} = {got!r}, Kafka says {want!r}"
    if "crc_computed" in exp:
        assert batch.compute_crc() == exp["crc_computed"], where
    if legacy:
        # Kafka has no record count for legacy entries; ours must match the records actually there
        assert exp["count"] is None
        assert batch.records_count == exp["records_parsed"], where


def assert_records(records, exp_records, where):
    assert len(records) == len(exp_records), where
    for r, e in zip(records, exp_records):
        w = f"{where} record {e['index']}"
        assert r.offset == e["offset"], w
        assert r.timestamp == e["timestamp"], w
        assert r.sequence == e["sequence"], w
        assert_payload(r.key, e["key"], f"{w} key")
        assert_payload(r.value, e["value"], f"{w} value")
        assert isinstance(r.headers, tuple), w
        assert len(r.headers) == len(e["headers"]), w
        for i, ((hk, hv), eh) in enumerate(zip(r.headers, e["headers"])):
            assert isinstance(hk, str), w
            assert hk == eh["key"], f"{w} header {i} key"
            assert_payload(hv, eh["value"], f"{w} header {i} value")


def decoded(codec, data, **kw):
    """Plain-Python snapshot of everything iter_batches yields (used to compare buffer types)."""
    it = codec.iter_batches(data, **kw)
    out = []
    for b in it:
        out.append(
            (
                b.position, b.base_offset, b.last_offset, b.magic, b.crc, b.attributes, b.records_count,
                b.size_in_bytes, b.producer_id, b.producer_epoch, b.base_sequence, b.max_timestamp,
                b.is_valid, b.tobytes(),
                [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in b.records()],
            )
        )  # fmt: skip
    return out, it.valid_bytes, it.trailing_bytes


# --------------------------------------------------------------------------------- every valid case
@pytest.mark.parametrize("name", DECODABLE)
def test_golden_batches_and_records(codec, name):
    data, side = load_golden(name)
    assert len(data) == side["size"]
    it = codec.iter_batches(data)
    batches = list(it)
    assert len(batches) == len(side["batches"]), name
    for batch, exp in zip(batches, side["batches"]):
        where = f"{name} batch {exp['index']}"
        assert_batch_fields(batch, exp, where)
        records = batch.records()
        assert len(records) == exp["records_parsed"], where
        assert_records(records, exp["records"], where)
        # iterating a batch gives the same records as records()
        assert [(r.offset, r.key, r.value) for r in batch] == [(r.offset, r.key, r.value) for r in records]
        assert batch.tobytes() == data[exp["position"] : exp["position"] + exp["size_in_bytes"]]
        batch.validate_crc()  # must not raise
    complete = sum(b["size_in_bytes"] for b in side["batches"])
    assert it.valid_bytes == complete
    assert it.trailing_bytes == len(data) - complete
    assert it.position == complete


@pytest.mark.parametrize("name", DECODABLE)
def test_golden_record_summary(codec, name):
    """record_summary (the records counted and checked without making them) against the sidecar: the
    count, the smallest and largest record timestamp but -1, offsets base_offset, base_offset + 1, ..."""
    data, side = load_golden(name)
    for batch, exp in zip(codec.iter_batches(data), side["batches"]):
        where = f"{name} batch {exp['index']}"
        stamps = [r["timestamp"] for r in exp["records"] if r["timestamp"] != -1]
        in_sequence = [r["offset"] for r in exp["records"]] == list(
            range(exp["base_offset"], exp["base_offset"] + len(exp["records"])))  # fmt: skip
        got = batch.record_summary()
        assert tuple(got) == (exp["records_parsed"], min(stamps, default=-1), max(stamps, default=-1),
                              in_sequence), where  # fmt: skip
        assert (got.records, got.min_timestamp, got.max_timestamp, got.offsets_in_sequence) == tuple(got)


@pytest.mark.parametrize("name", DECODABLE)
def test_golden_decode_records_matches_sidecar(codec, name):
    """decode_records returns every data record (never a control record) and the next offset."""
    data, side = load_golden(name)
    out = codec.decode_records(data)
    expected = [
        r for b in side["batches"] if not b["is_control"] for r in b["records"]
    ]
    assert_records(list(out), expected, name)
    assert out.next_offset == side["batches"][-1]["last_offset"] + 1
    complete = sum(b["size_in_bytes"] for b in side["batches"])
    assert out.valid_bytes == complete
    assert out.trailing_bytes == len(data) - complete


@pytest.mark.parametrize("name", [c for c in DECODABLE if c.startswith("control_")])
def test_golden_control_markers(codec, name):
    """Control records are parsed (key version/type), first_control_type names ABORT=0 / COMMIT=1."""
    data, side = load_golden(name)
    (batch,) = list(codec.iter_batches(data))
    exp = side["batches"][0]["records"][0]["control"]
    assert batch.is_control and batch.is_transactional
    assert batch.first_control_type() == exp["type_id"]
    assert exp["type_id"] == (0 if "abort" in name else 1)
    (rec,) = batch.records()
    assert rec.key[:2] == exp["key_version"].to_bytes(2, "big")
    assert int.from_bytes(rec.value[2:6], "big") == exp["coordinator_epoch"]
    assert list(codec.decode_records(data)) == []


@pytest.mark.parametrize("name", [c for c in DECODABLE if not c.startswith("control_")][:8])
def test_first_control_type_of_data_batch(codec, name):
    data, _side = load_golden(name)
    for batch in codec.iter_batches(data):
        if not batch.is_control:
            assert batch.first_control_type() == -1


def test_golden_log_append_time_and_delete_horizon(codec):
    """Spelled out (the sidecar loop checks them too): LOG_APPEND_TIME and the delete horizon."""
    for name in ("log_append_time_none", "log_append_time_lz4"):
        data, side = load_golden(name)
        (batch,) = list(codec.iter_batches(data))
        assert batch.timestamp_type == "log_append_time"
        assert batch.max_timestamp == side["spec"]["batches"][0]["log_append_time"]
        assert {r.timestamp for r in batch.records()} == {batch.max_timestamp}
    for name in ("delete_horizon_none", "delete_horizon_gzip"):
        data, side = load_golden(name)
        (batch,) = list(codec.iter_batches(data))
        horizon = side["spec"]["batches"][0]["delete_horizon_ms"]
        assert batch.has_delete_horizon and batch.delete_horizon_ms == horizon == batch.base_timestamp
        assert [r.timestamp for r in batch.records()] == [
            r["timestamp"] for r in side["spec"]["batches"][0]["records"]
        ]
    data, _ = load_golden("plain_none")
    (batch,) = list(codec.iter_batches(data))
    assert batch.delete_horizon_ms is None and not batch.has_delete_horizon


# ------------------------------------------------------------------------------------- corrupt cases
@pytest.mark.parametrize("name", ["corrupt_crc_none", "corrupt_crc_zstd"])
def test_corrupt_crc_raises(codec, name):
    data, side = load_golden(name)
    exp = side["batches"][0]
    with pytest.raises(CrcMismatchError) as ei:
        list(codec.iter_batches(data))
    assert ei.value.position == exp["position"] == 0
    assert ei.value.base_offset == exp["base_offset"]
    assert str(exp["crc"]) in str(ei.value) or hex(exp["crc"]) in str(ei.value).lower()
    with pytest.raises(CrcMismatchError):
        codec.decode_records(data)
    assert isinstance(ei.value, CorruptRecordError) and isinstance(ei.value, ValueError)


@pytest.mark.parametrize("name", ["corrupt_crc_none", "corrupt_crc_zstd"])
def test_corrupt_crc_decodes_without_verification(codec, name):
    data, side = load_golden(name)
    exp = side["batches"][0]
    (batch,) = list(codec.iter_batches(data, verify_crc=False))
    assert_batch_fields(batch, exp, name)
    assert batch.is_valid is False
    assert batch.compute_crc() == exp["crc_computed"] != batch.crc
    with pytest.raises(CrcMismatchError) as ei:
        batch.validate_crc()
    assert ei.value.position == 0
    assert_records(batch.records(), exp["records"], name)
    assert_records(list(codec.decode_records(data, verify_crc=False)), exp["records"], name)


def test_corrupt_count_raises_invalid_record(codec):
    """Count 7→9 with the CRC fixed: the header and CRC are fine, iterating the records fails."""
    data, side = load_golden("corrupt_count_none")
    exp = side["batches"][0]
    (batch,) = list(codec.iter_batches(data))  # CRC is valid: no error yet
    assert_batch_fields(batch, exp, "corrupt_count_none")
    assert batch.records_count == 9
    with pytest.raises(InvalidRecordError) as ei:
        batch.records()
    err = ei.value
    assert isinstance(err.position, int)
    # the records run out at the end of the batch: the error points inside this batch, at or past record 7
    record7_end = 61 + sum(r["size_in_bytes"] for r in exp["records"])
    assert record7_end == len(data)
    assert exp["position"] + 61 <= err.position <= len(data)
    assert err.base_offset == exp["base_offset"]
    with pytest.raises(InvalidRecordError):
        codec.decode_records(data)
    with pytest.raises(InvalidRecordError) as es:  # the summary checks the records as records() does
        batch.record_summary()
    assert (str(es.value), es.value.position) == (str(err), err.position)


def test_corrupt_magic_raises(codec):
    data, _side = load_golden("corrupt_magic_none")
    assert data[16] == 3
    it = codec.iter_batches(data)
    with pytest.raises(CorruptRecordError) as ei:
        next(iter(it))
    err = ei.value
    assert not isinstance(err, (CrcMismatchError, InvalidRecordError))
    assert "magic" in str(err).lower() and "3" in str(err)
    assert err.position in (0, 16)  # the entry, or the magic byte itself
    with pytest.raises(CorruptRecordError):
        codec.decode_records(data)


def test_truncated_tail_segment(codec):
    data, side = load_golden("truncated_tail_segment")
    full, _ = load_golden("segment_mixed")
    assert data == full[: len(full) - 7]
    it = codec.iter_batches(data)
    batches = list(it)
    assert len(batches) == 9 == len(side["batches"])
    complete = sum(b["size_in_bytes"] for b in side["batches"])
    assert it.valid_bytes == complete
    assert it.trailing_bytes == len(data) - complete > 0
    assert list(it) == []  # stays exhausted
    out = codec.decode_records(data)
    assert out.valid_bytes == complete and out.trailing_bytes == len(data) - complete
    assert out.next_offset == side["batches"][-1]["last_offset"] + 1
    assert [r.offset for r in out] == [
        r["offset"] for b in side["batches"] if not b["is_control"] for r in b["records"]
    ]


def test_golden_errors_are_kafkatx_errors(codec):
    for name in CORRUPT:
        data, _ = load_golden(name)
        with pytest.raises(KafkaTxError):
            for b in codec.iter_batches(data):
                b.records()


# ------------------------------------------------------------------------------------- buffer types
@pytest.mark.parametrize(
    "name", ["segment_mixed", "plain_none", "legacy_v1_gzip", "large_zstd", "truncated_tail_segment"]
)
def test_buffer_types_decode_identically(codec, name, tmp_path):
    data, _ = load_golden(name)
    want = decoded(codec, data)
    assert decoded(codec, bytearray(data)) == want
    assert decoded(codec, memoryview(data)) == want
    # a memoryview that is a slice of a bigger buffer: positions are relative to the view
    padded = b"\xee" * 13 + data + b"\xdd" * 5
    sliced = memoryview(padded)[13 : 13 + len(data)]
    assert decoded(codec, sliced) == want
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            assert decoded(codec, mm) == want
            gc.collect()
        finally:
            mm.close()  # raises BufferError if the codec leaked a buffer export


# Zero-copy contract (both backends): iter_batches keeps a buffer export of the caller's object, it does
# not copy it. So (1) a byte changed in place after a batch was yielded is seen by that batch, (2) the
# object cannot be resized while a batch (or the iterator) is alive, (3) the export is released once they
# are gone, and (4) records already decoded own their bytes and do not change afterwards.
def test_iter_batches_does_not_copy(codec):
    data, side = load_golden("plain_none")
    buf = bytearray(data)
    it = codec.iter_batches(buf)
    batch = next(iter(it))
    before = batch.records()
    value_pos = data.index(b"value-0")
    buf[value_pos] = ord("V")  # in place: same size, no realloc
    after = batch.records()
    assert after[0].value == b"Value-0"  # the batch reads the caller's memory
    assert before[0].value == b"value-0"  # decoded records own their bytes
    assert batch.is_valid is False  # and the CRC sees the change
    with pytest.raises(BufferError):
        buf.extend(b"\x00" * 4096)
    with pytest.raises(BufferError):
        del buf[-10:]
    del batch, it, after
    gc.collect()
    buf.extend(b"\x00" * 4096)  # export released: resizing works again
    assert len(buf) == len(data) + 4096
    assert before[0].value == b"value-0"


def test_decoded_records_survive_mutation(codec):
    data, _ = load_golden("segment_mixed")
    buf = bytearray(data)
    records = codec.decode_records(buf)
    snapshot = [(r.offset, r.key, r.value, r.headers) for r in records]
    gc.collect()
    buf[:] = b"\x00" * len(buf)  # decode_records holds no export once it returned
    buf.extend(b"\x01" * 100)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == snapshot
