"""Decode record batches written by librdkafka (the C Kafka client) and check every field.

The vectors in ``tests/vectors/librdkafka`` are the exact bytes librdkafka put in its Produce requests
to a fake broker (``scripts/capture_librdkafka.py``; see the README there).  Each sidecar states what
the producer was asked to send and what the broker assigned, so these tests check kafkatx against
librdkafka's real output on both backends: CRC, compression, attributes, producer id/epoch, sequences,
offsets, timestamps, keys, values and headers, with ``decode_records``, ``RecordBatch`` and
``decode_arrow``; and, with base offsets set and markers added as a broker would, read_committed.
"""

from __future__ import annotations

import base64
import gzip
import json
import pathlib
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from kafkatx.compression import decompress
from kafkatx.transactions import encode_marker

VECTORS = pathlib.Path(__file__).parent / "vectors" / "librdkafka"
CASES = sorted(p.stem for p in VECTORS.glob("*.json"))
EXPECTED_CASES = (
    {f"{c}_{kind}" for c in ("none", "gzip", "snappy", "lz4", "zstd") for kind in ("plain", "idempotent")}
    | {"snappy_bulk", "lz4_bulk", "zstd_bulk", "zstd_small_batches", "none_small_batches"}
    | {"transactional", "transactional_lz4"}
)
COMPRESSION_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADER_SIZE = 61  # a v2 batch header; the records (compressed or not) follow
XERIAL_MAGIC = b"\x82SNAPPY\x00"


# ----------------------------------------------------------------------------------------- helpers
def load(name):
    return (VECTORS / f"{name}.bin").read_bytes(), json.loads((VECTORS / f"{name}.json").read_text())


def payload(spec):
    """The sidecar's ``null`` / ``{"utf8"|"b64": s, "times"?: n}`` as bytes."""
    if spec is None:
        return None
    raw = spec["utf8"].encode("utf-8") if "utf8" in spec else base64.b64decode(spec["b64"])
    return raw * spec.get("times", 1)


def intended(side):
    """(key, value, headers, timestamp or None) of every record given to produce(), in order."""
    return [
        (payload(r["key"]), payload(r["value"]), tuple((k, payload(v)) for k, v in r["headers"]), r["timestamp"])
        for r in side["records"]
    ]


def batch_bytes(data, meta):
    return data[meta["position"] : meta["position"] + meta["size"]]


def batch_intent(side, meta):
    return intended(side)[meta["first_record"] : meta["first_record"] + meta["record_count"]]


def assert_timestamp(actual, wanted, side, where):
    if wanted is not None:
        assert actual == wanted, f"{where}: timestamp {actual} != {wanted}"
    else:  # no timestamp given: librdkafka stamps the record with its clock when produce() is called
        lo, hi = side["produce_window_ms"]
        assert lo <= actual <= hi, f"{where}: clock timestamp {actual} outside the produce window {lo}..{hi}"


def assert_records(records, side, meta, where):
    """Records of one batch as librdkafka sent it: relative offsets 0..n-1 and the intended contents."""
    want = batch_intent(side, meta)
    assert len(records) == len(want), where
    base_seq = meta["first_record"] if side["idempotent"] else -1
    for i, (r, (key, value, headers, ts)) in enumerate(zip(records, want)):
        w = f"{where} record {i}"
        assert r.offset == i, w
        assert r.key == key, w
        assert r.value == value, w
        assert type(r.key) is (type(None) if key is None else bytes), w
        assert type(r.value) is (type(None) if value is None else bytes), w
        assert isinstance(r.headers, tuple), w
        assert r.headers == headers, w
        assert_timestamp(r.timestamp, ts, side, w)
        assert r.sequence == (base_seq + i if side["idempotent"] else -1), w


def stored_log(data, side):
    """The partition as the fake broker would have written it: base offsets assigned and, for a
    transactional producer, the COMMIT/ABORT markers the coordinator appends after EndTxn.

    Only the base offset (not covered by the CRC) changes in librdkafka's batches."""
    pieces = []
    for meta in side["batches"]:
        raw = bytearray(batch_bytes(data, meta))
        struct.pack_into(">q", raw, 0, meta["broker_base_offset"])
        pieces.append((meta["broker_base_offset"], bytes(raw)))
    for m in side["broker"]["markers"]:
        marker = encode_marker(m["kind"], producer_id=m["producer_id"], producer_epoch=m["producer_epoch"],
                               base_offset=m["offset"])  # fmt: skip
        pieces.append((m["offset"], marker))
    return b"".join(raw for _, raw in sorted(pieces))


def record_rows(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in records]


def arrow_rows(table):
    """Rows of decode_arrow's table in the shape of record_rows (timestamps back to epoch millis)."""
    import pyarrow as pa

    d = table.to_pydict()
    d["timestamp"] = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [
        (off, ts, k, v, tuple((h["key"], h["value"]) for h in hs), seq)
        for off, ts, k, v, hs, seq in zip(d["offset"], d["timestamp"], d["key"], d["value"], d["headers"],
                                          d["sequence"])
    ]  # fmt: skip


# ------------------------------------------------------------------------------------- the vectors
def test_vector_set_is_complete():
    assert set(CASES) == EXPECTED_CASES
    versions = set()
    for name in CASES:
        data, side = load(name)
        assert side["name"] == name
        assert sum(b["size"] for b in side["batches"]) == len(data), name
        assert sum(b["record_count"] for b in side["batches"]) == len(side["records"]), name
        versions.add(side["librdkafka_version"])
    assert len(versions) == 1, versions  # one librdkafka made them all
    assert sum((VECTORS / f"{n}.bin").stat().st_size for n in CASES) < 200_000


# -------------------------------------------------------------------------------------- batches
@pytest.mark.parametrize("name", CASES)
def test_batch_fields(codec, name):
    data, side = load(name)
    it = codec.iter_batches(data)  # verify_crc=True: a bad CRC raises
    batches = list(it)
    assert it.valid_bytes == len(data) and it.trailing_bytes == 0, name
    assert len(batches) == len(side["batches"]), name
    idempotent = side["idempotent"]
    cid = COMPRESSION_IDS[side["compression"]]
    for batch, meta in zip(batches, side["batches"]):
        where = f"{name} batch at {meta['position']}"
        n = meta["record_count"]
        first_seq = meta["first_record"]  # one producer per case, sequences from 0 in produce order
        checks = {
            "position": meta["position"],
            "size_in_bytes": meta["size"],
            "magic": 2,
            "is_valid": True,
            "compression": side["compression"],
            # only the compression bits and, for a transactional producer, bit 4
            "attributes": cid | (0x10 if side["transactional"] else 0),
            "timestamp_type": "create_time",
            "is_transactional": side["transactional"],
            "is_control": False,
            "has_delete_horizon": False,
            "delete_horizon_ms": None,
            "base_offset": 0,  # a producer writes 0; the broker assigns the real one
            "last_offset_delta": n - 1,
            "last_offset": n - 1,
            "next_offset": n,
            "records_count": n,
            "producer_id": side["broker"]["producer_id"] if idempotent else -1,
            "producer_epoch": side["broker"]["producer_epoch"] if idempotent else -1,
            "base_sequence": first_seq if idempotent else -1,
            "last_sequence": first_seq + n - 1 if idempotent else -1,
            "partition_leader_epoch": 0,  # librdkafka writes 0 (Java's producer writes -1)
        }
        for field, want in checks.items():
            got = getattr(batch, field)
            assert got == want, f"{where}: {field} = {got!r}, expected {want!r}"
        batch.validate_crc()
        assert batch.compute_crc() == batch.crc == struct.unpack_from(">I", data, meta["position"] + 17)[0]
        assert batch.tobytes() == batch_bytes(data, meta)
        records = batch.records()
        assert_records(records, side, meta, where)
        assert record_rows(batch) == record_rows(records)
        # baseTimestamp is the first record's, maxTimestamp the largest (not the last) of them
        assert batch.base_timestamp == records[0].timestamp, where
        assert batch.max_timestamp == max(r.timestamp for r in records), where


@pytest.mark.parametrize("name", CASES)
def test_sequences_run_on_across_batches(codec, name):
    """Idempotence: one producer id and epoch, base sequences consecutive over every batch sent."""
    data, side = load(name)
    batches = list(codec.iter_batches(data))
    if not side["idempotent"]:
        assert {(b.producer_id, b.producer_epoch, b.base_sequence) for b in batches} == {(-1, -1, -1)}
        return
    assert {(b.producer_id, b.producer_epoch) for b in batches} == {
        (side["broker"]["producer_id"], side["broker"]["producer_epoch"])
    }
    expected = 0
    for b in batches:
        assert b.base_sequence == expected, name
        assert b.last_sequence == b.base_sequence + b.records_count - 1
        expected = b.last_sequence + 1
    assert expected == len(side["records"])
    assert [r.sequence for b in batches for r in b] == list(range(len(side["records"])))


# -------------------------------------------------------------------------------------- records
@pytest.mark.parametrize("name", CASES)
def test_decode_records(codec, name):
    """decode_records on each batch as librdkafka sent it.  On the whole capture (every batch at base
    offset 0) a record below the next offset already reached is skipped, as Kafka's consumer does."""
    data, side = load(name)
    for meta in side["batches"]:
        raw = batch_bytes(data, meta)
        out = codec.decode_records(raw)
        assert_records(list(out), side, meta, f"{name} batch at {meta['position']}")
        assert out.next_offset == meta["record_count"]
        assert out.valid_bytes == len(raw) and out.trailing_bytes == 0
        # the same bytes in other buffer types
        for buf in (bytearray(raw), memoryview(raw)):
            assert record_rows(codec.decode_records(buf)) == record_rows(out)
    expected, floor = [], 0
    for meta in side["batches"]:
        expected += [r for r in record_rows(codec.decode_records(batch_bytes(data, meta))) if r[0] >= floor]
        floor = max(floor, meta["record_count"])
    out = codec.decode_records(data)
    assert record_rows(out) == expected
    assert out.next_offset == floor and out.valid_bytes == len(data)


@pytest.mark.parametrize("name", CASES)
def test_decode_arrow_matches_decode_records(codec, name):
    pytest.importorskip("pyarrow")
    data, side = load(name)
    for meta in side["batches"]:
        raw = batch_bytes(data, meta)
        records = codec.decode_records(raw)
        table = codec.decode_arrow(raw)
        assert table.num_rows == len(records) == meta["record_count"]
        assert arrow_rows(table) == record_rows(records)
        d = table.to_pydict()
        assert set(d["producer_id"]) == {side["broker"]["producer_id"] if side["idempotent"] else -1}
        assert set(d["is_transactional"]) == {side["transactional"]}
        assert set(d["timestamp_type"]) == {0}  # CreateTime
        assert table.schema.metadata[b"next_offset"] == str(meta["record_count"]).encode()


# -------------------------------------------------------------------------- as a broker stores it
@pytest.mark.parametrize("name", CASES)
def test_stored_log(codec, name):
    """With the base offsets the broker assigned (and its markers) the capture is a partition's log:
    read_uncommitted sees every record at its broker offset, read_committed drops aborted transactions."""
    data, side = load(name)
    log = stored_log(data, side)
    every = [(meta, i) for meta in side["batches"] for i in range(meta["record_count"])]
    offsets = [meta["broker_base_offset"] + i for meta, i in every]
    want = intended(side)
    end = side["broker"]["log_end_offset"]

    out = codec.decode_records(log)
    assert [r.offset for r in out] == offsets
    assert [(r.key, r.value, r.headers) for r in out] == [w[:3] for w in want]
    assert out.next_offset == end and out.valid_bytes == len(log)

    aborted_txns = {t for t, txn in enumerate(side["transactions"]) if txn["outcome"] == "abort"}
    aborted = [(side["broker"]["producer_id"], min(m["broker_base_offset"] for m in side["batches"]
                                                   if m["transaction"] == t)) for t in sorted(aborted_txns)]  # fmt: skip
    committed = codec.decode_records(log, isolation="read_committed", aborted_transactions=aborted)
    keep = [(meta["transaction"] not in aborted_txns) for meta, _ in every]
    assert [r.offset for r in committed] == [o for o, k in zip(offsets, keep) if k]
    assert [(r.key, r.value) for r in committed] == [w[:2] for w, k in zip(want, keep) if k]
    assert committed.next_offset == end
    if side["transactional"]:
        assert aborted and len(committed) < len(out)
        # without the aborted-transactions list, read_committed keeps them (as Kafka's consumer would)
        assert len(codec.decode_records(log, isolation="read_committed")) == len(out)
    pytest.importorskip("pyarrow")
    table = codec.decode_arrow(log, isolation="read_committed", aborted_transactions=aborted)
    assert arrow_rows(table) == record_rows(committed)


# ------------------------------------------------------------------------ librdkafka's framings
def zstd_has_content_size(frame) -> bool:
    descriptor = frame[4]
    return descriptor >> 6 != 0 or bool(descriptor & 0x20)  # Frame_Content_Size_flag, Single_Segment_flag


def lz4_blocks(frame) -> int:
    """Walk an LZ4 frame (no content size, no checksums, as librdkafka writes it): number of blocks."""
    pos, blocks = 7, 0  # magic, FLG, BD, header checksum
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            assert pos == len(frame)  # the end mark ends the batch's payload
            return blocks
        pos += size & 0x7FFFFFFF
        blocks += 1


@pytest.mark.parametrize("name", [c for c in CASES if not c.startswith(("none_", "transactional"))]
                         + ["transactional_lz4"])  # fmt: skip
def test_compression_framing(name):
    """What librdkafka's compressed payloads look like, and that kafkatx inflates them exactly as the
    reference libraries do."""
    data, side = load(name)
    codec_name = side["compression"]
    for meta in side["batches"]:
        body = batch_bytes(data, meta)[HEADER_SIZE:]
        if codec_name == "snappy":
            # librdkafka writes one RAW snappy block, never Java's xerial framing
            assert not body.startswith(XERIAL_MAGIC), name
            reference = cramjam.snappy.decompress_raw(body)
        elif codec_name == "lz4":
            assert body[:4] == b"\x04\x22\x4d\x18", name  # an LZ4 frame (not Kafka's legacy variant)
            assert body[4] == 0x60 and body[5] == 0x40, name  # independent 64 KiB blocks, no content size
            reference = lz4.frame.decompress(body)  # also checks the frame header checksum
            if name == "lz4_bulk":
                assert lz4_blocks(body) > 1
        elif codec_name == "zstd":
            assert body[:4] == b"\x28\xb5\x2f\xfd", name
            assert not zstd_has_content_size(body), name  # streamed: a decoder must not need the size
            reference = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        else:
            assert codec_name == "gzip" and body[:3] == b"\x1f\x8b\x08", name
            reference = gzip.decompress(body)
        assert bytes(decompress(COMPRESSION_IDS[codec_name], body)) == bytes(reference), name
        if name == "snappy_bulk":
            assert len(reference) > 64 * 1024  # one raw block, larger than any xerial chunk
