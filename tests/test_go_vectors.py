"""Decode record batches compressed by the Go libraries Go Kafka clients use, and check every field.

The vectors in ``tests/vectors/go`` were written by ``scripts/go_vectors/main.go`` (see its README): an
independent Go encoder of Kafka's v2 record batch (CRC-32C from Go's ``hash/crc32`` Castagnoli table),
whose payloads are compressed by klauspost/compress (zstd, s2), pierrec/lz4, eapache/go-xerial-snappy,
golang/snappy and Go's ``compress/gzip``, configured as franz-go (and, for snappy, Sarama) configures
them.  It is not franz-go itself: franz-go could not be fetched, its compressor libraries and settings
could.  The tests read the frozen bytes and need no Go.

Each sidecar gives every batch field and every record (offset, timestamp, key, value, headers,
sequence, and whether read_committed shows it).  The vectors are first checked without kafkatx (header
parsed with ``struct``, CRC-32C from the ``crc32c`` package, payloads inflated by gzip, cramjam,
lz4.frame and zstandard, records read by kafka-python's ``DefaultRecordBatch``), then decoded on both
backends with ``iter_batches``, ``RecordBatch``, ``decode_records``, ``ReadCommittedFilter`` and
``decode_arrow``, and every payload is inflated with ``kafkatx.compression.decompress`` and compared with
the reference libraries.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import pathlib
import struct
import warnings

import cramjam
import lz4.frame
import pytest
import zstandard

from _spec import CODEC_IDS, HEADER, HEADER_SIZE, crc32c, inc_seq, rebatch
from kafkatx.compression import decompress
from test_librdkafka import XERIAL_MAGIC, arrow_rows, batch_bytes, payload, record_rows

with warnings.catch_warnings():
    # as in test_differential: kafka-python's import-time DeprecationWarning is not ours to fix
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.record.default_records as kp_records

VECTORS = pathlib.Path(__file__).parent / "vectors" / "go"
CASES = sorted(p.stem for p in VECTORS.glob("*.json"))
EXPECTED_CASES = {
    "none_basic", "gzip_basic",
    "snappy_raw_s2", "snappy_raw_golang", "snappy_raw_s2_bulk", "snappy_xerial_eapache", "snappy_xerial_s2",
    "lz4_default", "lz4_block_checksum_64k", "lz4_content_size", "lz4_incompressible", "many_records_lz4",
    "zstd_encodeall_small", "zstd_encodeall_under_1k", "zstd_encodeall_1mib", "zstd_stream_flush",
    "zstd_incompressible", "one_record_zstd",
    "gzip_stream", "lz4_stream", "zstd_stream_records", "snappy_xerial_stream",
    "idempotent", "idempotent_sequence_wrap", "transactional", "log_append_time", "offset_gaps",
}  # fmt: skip
TIMESTAMP_TYPES = {"create_time": 0, "log_append_time": 1}


# ----------------------------------------------------------------------------------------- helpers
def load(name):
    return (VECTORS / f"{name}.bin").read_bytes(), json.loads((VECTORS / f"{name}.json").read_text())


def expected_rows(side, records=None):
    """Sidecar records in ``record_rows`` shape: (offset, timestamp, key, value, headers, sequence)."""
    return [
        (r["offset"], r["timestamp"], payload(r["key"]), payload(r["value"]),
         tuple((k, payload(v)) for k, v in r["headers"]), r["sequence"])
        for r in (side["records"] if records is None else records)
    ]  # fmt: skip


def batch_records(side, meta):
    return side["records"][meta["first_record"] : meta["first_record"] + meta["records_count"]]


def data_rows(side, read_committed=False):
    """Rows a consumer returns: no control records, and under read_committed no aborted ones."""
    keep = [r for r in side["records"] if not r["control"] and (r["read_committed"] or not read_committed)]
    return expected_rows(side, keep)


# ------------------------------------------------------------------------------------- the vectors
def test_vector_set_is_complete():
    assert set(CASES) == EXPECTED_CASES
    builds = set()
    total = 0
    for name in CASES:
        data, side = load(name)
        assert side["name"] == name
        pos = 0
        for meta in side["batches"]:  # the batches tile the file
            assert meta["position"] == pos, name
            pos += meta["size"]
        assert pos == len(data), name
        assert sum(m["records_count"] for m in side["batches"]) == len(side["records"]), name
        builds.add((side["go_version"], json.dumps(side["go_packages"])))
        total += len(data) + (VECTORS / f"{name}.json").stat().st_size
    assert len(builds) == 1, builds  # one Go toolchain and one set of libraries made them all
    assert total < 3_000_000


@pytest.mark.parametrize("name", CASES)
def test_vectors_without_kafkatx(name):
    """The Go encoder wrote what the sidecar says, by an independent reading: Kafka's 61-byte header with
    ``struct``, CRC-32C over bytes 21.. with the ``crc32c`` package, payloads inflated by the reference
    libraries to the sidecar's uncompressed size and SHA-256."""
    data, side = load(name)
    for meta in side["batches"]:
        where = f"{name} batch at {meta['position']}"
        raw = batch_bytes(data, meta)
        (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq,
         count) = HEADER.unpack_from(raw)  # fmt: skip
        assert (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch,
                base_seq, count) == (
            meta["base_offset"], meta["batch_length"], meta["partition_leader_epoch"], 2, meta["crc"],
            meta["attributes"], meta["last_offset_delta"], meta["base_timestamp"], meta["max_timestamp"],
            meta["producer_id"], meta["producer_epoch"], meta["base_sequence"], meta["records_count"],
        ), where  # fmt: skip
        assert length + 12 == len(raw) == meta["size"], where
        assert crc32c(raw[21:]) == crc, where
        assert attributes == (CODEC_IDS[meta["compression"]] | TIMESTAMP_TYPES[meta["timestamp_type"]] << 3
                              | meta["is_transactional"] << 4 | meta["is_control"] << 5), where  # fmt: skip
        assert meta["last_offset"] == base_offset + last_delta
        assert meta["last_sequence"] == (inc_seq(base_seq, last_delta) if base_seq >= 0 else -1)
        body = raw[HEADER_SIZE:]
        assert len(body) == meta["payload_size"], where
        inflated = reference_decompress(meta["compression"], body)
        assert len(inflated) == meta["uncompressed_size"], where
        assert hashlib.sha256(inflated).hexdigest() == meta["uncompressed_sha256"], where
        for r in batch_records(side, meta):
            assert r["offset"] == base_offset + r["offset_delta"]
            assert r["sequence"] == (inc_seq(base_seq, r["offset_delta"]) if base_seq >= 0 else -1)
            assert r["timestamp"] == (max_ts if meta["timestamp_type"] == "log_append_time"
                                      else base_ts + r["timestamp_delta"])  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_records_read_by_kafka_python(name):
    """The Go encoder's records, read by another implementation: kafka-python's DefaultRecordBatch, given
    each batch with its payload inflated by the reference libraries (compression bits cleared, CRC fixed)."""
    data, side = load(name)
    for meta in side["batches"]:
        where = f"{name} batch at {meta['position']}"
        raw = batch_bytes(data, meta)
        plain = rebatch(raw, reference_decompress(meta["compression"], raw[HEADER_SIZE:]), CODEC_IDS["none"])
        peer = kp_records.DefaultRecordBatch(plain)
        assert peer.validate_crc(), where
        assert (peer.base_offset, peer.last_offset_delta, peer.producer_id, peer.producer_epoch, peer.base_sequence,
                peer.is_transactional, peer.is_control_batch, peer.timestamp_type, peer.max_timestamp) == (
            meta["base_offset"], meta["last_offset_delta"], meta["producer_id"], meta["producer_epoch"],
            meta["base_sequence"], meta["is_transactional"], meta["is_control"],
            TIMESTAMP_TYPES[meta["timestamp_type"]], meta["max_timestamp"]), where  # fmt: skip
        want = [row[:5] for row in expected_rows(side, batch_records(side, meta))]
        records = list(peer)  # (iterating consumes the batch)
        got = [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in records]
        assert got == want, where
        if meta["is_control"]:
            (marker,) = records
            assert (marker.version, marker.type) == (meta["control"]["key_version"], meta["control"]["type_id"])


# -------------------------------------------------------------------------------------- batches
@pytest.mark.parametrize("name", CASES)
def test_batch_fields(codec, name):
    data, side = load(name)
    it = codec.iter_batches(data)  # verify_crc=True: a bad CRC raises
    batches = list(it)
    assert it.valid_bytes == len(data) and it.trailing_bytes == 0, name
    assert len(batches) == len(side["batches"]), name
    for batch, meta in zip(batches, side["batches"]):
        where = f"{name} batch at {meta['position']}"
        checks = {
            "position": meta["position"],
            "size_in_bytes": meta["size"],
            "magic": 2,
            "is_valid": True,
            "crc": meta["crc"],
            "compression": meta["compression"],
            "attributes": meta["attributes"],
            "timestamp_type": meta["timestamp_type"],
            "is_transactional": meta["is_transactional"],
            "is_control": meta["is_control"],
            "has_delete_horizon": False,
            "delete_horizon_ms": None,
            "base_offset": meta["base_offset"],
            "last_offset_delta": meta["last_offset_delta"],
            "last_offset": meta["last_offset"],
            "next_offset": meta["last_offset"] + 1,
            "records_count": meta["records_count"],
            "base_timestamp": meta["base_timestamp"],
            "max_timestamp": meta["max_timestamp"],
            "producer_id": meta["producer_id"],
            "producer_epoch": meta["producer_epoch"],
            "base_sequence": meta["base_sequence"],
            "last_sequence": meta["last_sequence"],
            "partition_leader_epoch": meta["partition_leader_epoch"],
        }
        for field, want in checks.items():
            got = getattr(batch, field)
            assert got == want, f"{where}: {field} = {got!r}, expected {want!r}"
        batch.validate_crc()
        assert batch.compute_crc() == meta["crc"], where
        assert batch.tobytes() == batch_bytes(data, meta), where

        want = expected_rows(side, batch_records(side, meta))
        records = batch.records()
        assert record_rows(records) == want, where
        assert record_rows(batch) == want, where
        for r in records:
            assert type(r.key) in (bytes, type(None)) and type(r.value) in (bytes, type(None)), where
            assert isinstance(r.headers, tuple), where

        # the same batch opened on its own, at its position in the file
        alone = codec.RecordBatch(data, meta["position"])
        assert (alone.size_in_bytes, alone.crc, alone.base_offset) == (meta["size"], meta["crc"], meta["base_offset"])
        assert record_rows(alone.records()) == want, where

        control = batch.control_record()
        if meta["is_control"]:
            m = meta["control"]
            (rec,) = batch_records(side, meta)
            assert (control.type, control.type_id, control.key_version, control.marker_version,
                    control.coordinator_epoch, control.offset, control.timestamp) == (
                m["type"], m["type_id"], m["key_version"], m["marker_version"], m["coordinator_epoch"],
                rec["offset"], rec["timestamp"]), where  # fmt: skip
            assert batch.first_control_type() == m["type_id"]
        else:
            assert control is None and "control" not in meta, where


# -------------------------------------------------------------------------------------- records
@pytest.mark.parametrize("name", CASES)
def test_decode_records(codec, name):
    data, side = load(name)
    out = codec.decode_records(data)
    assert record_rows(out) == data_rows(side), name
    assert out.next_offset == side["log_end_offset"]
    assert out.valid_bytes == len(data) and out.trailing_bytes == 0
    for buf in (bytearray(data), memoryview(data)):
        assert record_rows(codec.decode_records(buf)) == record_rows(out)
    for meta in side["batches"]:  # each batch alone
        one = codec.decode_records(batch_bytes(data, meta))
        keep = [r for r in batch_records(side, meta) if not r["control"]]
        assert record_rows(one) == expected_rows(side, keep), f"{name} batch at {meta['position']}"
        assert one.next_offset == meta["last_offset"] + 1


@pytest.mark.parametrize("name", CASES)
def test_read_committed(codec, name):
    """read_committed with the aborted transactions a broker would list: aborted records and markers
    hidden, in one call and fed batch by batch through ReadCommittedFilter."""
    data, side = load(name)
    aborted = [tuple(a) for a in side["aborted_transactions"]]
    lso = side["last_stable_offset"]
    want = data_rows(side, read_committed=True)
    out = codec.decode_records(data, isolation="read_committed", aborted_transactions=aborted,
                               last_stable_offset=lso)  # fmt: skip
    assert record_rows(out) == want, name
    assert out.next_offset == side["log_end_offset"]

    f = codec.ReadCommittedFilter(aborted, last_stable_offset=lso)
    fed = []
    for meta in side["batches"]:
        fed += record_rows(f.feed(batch_bytes(data, meta)))
    assert fed == want and f.next_offset == side["log_end_offset"], name

    pytest.importorskip("pyarrow")
    table = codec.decode_arrow(data, isolation="read_committed", aborted_transactions=aborted, last_stable_offset=lso)
    assert arrow_rows(table) == want, name

    # the aborted list and the LSO as kafkatx finds them from the markers in the log
    from kafkatx import transactions

    assert sorted(transactions.aborted_transactions(codec.iter_batches(data))) == sorted(aborted)
    assert transactions.last_stable_offset(codec.iter_batches(data)) == lso
    if aborted:  # the transactional case: something is hidden
        assert len(out) < len(codec.decode_records(data))


def test_transactional_case_shape(codec):
    """The interleaved transactions: one aborted, markers of both kinds, and what read_committed keeps."""
    data, side = load("transactional")
    batches = list(codec.iter_batches(data))
    markers = [(b.base_offset, b.producer_id, b.control_record().type) for b in batches if b.is_control]
    assert markers == [(5, 5001, "commit"), (8, 5002, "abort"), (12, 5001, "commit")]
    assert side["aborted_transactions"] == [[5002, 3]]
    committed = codec.decode_records(data, isolation="read_committed", aborted_transactions=[(5002, 3)])
    assert [r.offset for r in committed] == [0, 1, 2, 9, 10, 11]
    assert [r.offset for r in codec.decode_records(data)] == [0, 1, 2, 3, 4, 6, 7, 9, 10, 11]


@pytest.mark.parametrize("name", CASES)
def test_decode_arrow(codec, name):
    pytest.importorskip("pyarrow")
    data, side = load(name)
    table = codec.decode_arrow(data)
    assert arrow_rows(table) == data_rows(side), name
    assert table.schema.metadata[b"next_offset"] == str(side["log_end_offset"]).encode()
    d = table.to_pydict()
    batch_of = [side["batches"][r["batch"]] for r in side["records"] if not r["control"]]
    assert d["producer_id"] == [m["producer_id"] for m in batch_of]
    assert d["producer_epoch"] == [m["producer_epoch"] for m in batch_of]
    assert d["is_transactional"] == [m["is_transactional"] for m in batch_of]
    assert d["timestamp_type"] == [TIMESTAMP_TYPES[m["timestamp_type"]] for m in batch_of]
    for meta in side["batches"]:
        one = codec.decode_arrow(batch_bytes(data, meta))
        assert arrow_rows(one) == record_rows(codec.decode_records(batch_bytes(data, meta)))


# ----------------------------------------------------------------------------- the Go framings
def xerial_chunks(body):
    """The raw snappy chunks of a xerial stream (magic, version, compat, then BE length + chunk)."""
    assert body[:8] == XERIAL_MAGIC
    pos, chunks = 16, []
    while pos < len(body):
        (n,) = struct.unpack_from(">i", body, pos)
        chunks.append(body[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(body)
    return chunks


def reference_decompress(codec_name, body) -> bytes:
    """Inflate a batch payload with the reference libraries only (no kafkatx code)."""
    if codec_name == "none":
        return bytes(body)
    if codec_name == "gzip":
        return gzip.decompress(body)
    if codec_name == "snappy":
        if body.startswith(XERIAL_MAGIC):
            return b"".join(bytes(cramjam.snappy.decompress_raw(c)) for c in xerial_chunks(body))
        return bytes(cramjam.snappy.decompress_raw(body))
    if codec_name == "lz4":
        return lz4.frame.decompress(body)  # checks the header, block and content checksums
    d = zstandard.ZstdDecompressor().decompressobj()  # checks the frame checksum
    out = d.decompress(body)
    assert d.eof and not d.unused_data
    return out


def lz4_frame(body) -> dict:
    """Walk an LZ4 frame: its FLG/BD bytes, optional content size, and blocks as (stored?, size)."""
    assert body[:4] == b"\x04\x22\x4d\x18"
    flg, bd = body[4], body[5]
    pos = 6
    content_size = None
    if flg & 0x08:
        (content_size,) = struct.unpack_from("<Q", body, pos)
        pos += 8
    pos += 1  # header checksum
    blocks = []
    while True:
        (size,) = struct.unpack_from("<I", body, pos)
        pos += 4
        if size == 0:
            break
        blocks.append((bool(size & 0x80000000), size & 0x7FFFFFFF))
        pos += (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0)
    pos += 4 if flg & 0x04 else 0
    assert pos == len(body)
    return {"flg": flg, "bd": bd, "content_size": content_size, "blocks": blocks}


def zstd_frames(body) -> list:
    """Walk zstd frames: header fields and blocks as (type, size)."""
    pos, frames = 0, []
    while pos < len(body):
        assert struct.unpack_from("<I", body, pos)[0] == 0xFD2FB528
        fhd = body[pos + 4]
        single = bool(fhd & 0x20)
        fcs_len = (1 if single else 0, 2, 4, 8)[fhd >> 6]
        window = None if single else body[pos + 5]
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
        content_size = int.from_bytes(body[pos : pos + fcs_len], "little") + (256 if fcs_len == 2 else 0)
        pos += fcs_len
        blocks = []
        while True:
            bh = int.from_bytes(body[pos : pos + 3], "little")
            pos += 3
            btype, bsize = ("raw", "rle", "compressed", "reserved")[(bh >> 1) & 3], bh >> 3
            blocks.append((btype, bsize))
            pos += 1 if btype == "rle" else bsize
            if bh & 1:
                break
        pos += 4 if fhd & 0x04 else 0
        frames.append({"single_segment": single, "window_descriptor": window, "fcs_bytes": fcs_len,
                       "content_size": content_size if fcs_len else None, "checksum": bool(fhd & 0x04),
                       "blocks": blocks})  # fmt: skip
    return frames


def check_framing(name, codec_name, body, size):
    """What the Go libraries wrote, case by case (the feature each case is there for)."""
    if codec_name == "gzip":
        # compress/gzip: no name, mtime 0, XFL 0, OS 255 (unknown)
        assert body[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", name
        if name == "gzip_stream":  # a sync flush per Flush: an empty stored block, 00 00 ff ff
            assert body.count(b"\x00\x00\xff\xff") >= 3, name
    elif codec_name == "snappy":
        if "xerial" in name:
            assert body[8:16] == b"\x00\x00\x00\x01\x00\x00\x00\x01", name  # version 1, compatible 1
            chunks = xerial_chunks(body)
            sizes = [len(cramjam.snappy.decompress_raw(c)) for c in chunks]
            assert len(chunks) > 1 and max(sizes) == 32 * 1024, (name, sizes)
            if name == "snappy_xerial_stream":  # a chunk ends at every Write: short chunks mid-stream
                assert min(sizes[:-1]) < 32 * 1024, sizes
            else:  # the whole payload cut in 32 KiB pieces
                assert all(n == 32 * 1024 for n in sizes[:-1]), (name, sizes)
        else:
            assert not body.startswith(XERIAL_MAGIC), name  # one raw block, as franz-go and Sarama write it
            if name == "snappy_raw_s2_bulk":
                assert size > 256 * 1024  # one raw block far larger than a xerial chunk
    elif codec_name == "lz4":
        f = lz4_frame(body)
        want = {  # FLG 0x64: version 1, independent blocks, content checksum; BD 0x70: 4 MiB blocks
            "lz4_default": (0x64, 0x70), "lz4_incompressible": (0x64, 0x70), "many_records_lz4": (0x64, 0x70),
            "lz4_block_checksum_64k": (0x74, 0x40),  # + block checksums, 64 KiB blocks
            "lz4_content_size": (0x68, 0x70),  # content size, no content checksum
        }.get(name, (0x64, 0x70))  # fmt: skip
        assert (f["flg"], f["bd"]) == want, name
        assert f["content_size"] == (size if name == "lz4_content_size" else None), name
        if name == "lz4_stream":  # one block per Flush, each far below the 4 MiB block size
            assert len(f["blocks"]) == 3 and not any(stored for stored, _ in f["blocks"]), f["blocks"]
        elif name == "lz4_block_checksum_64k":
            assert len(f["blocks"]) > 1 and not any(stored for stored, _ in f["blocks"])
        elif name == "lz4_incompressible":
            assert f["blocks"] == [(True, size)]  # stored: block size with the high bit set
        else:
            assert f["blocks"] == [(False, f["blocks"][0][1])], name
    elif codec_name == "zstd":
        (f,) = zstd_frames(body)  # one frame per batch
        assert f["checksum"], name  # klauspost writes the XXH64 content checksum by default
        types = [t for t, _ in f["blocks"]]
        if name in ("zstd_stream_flush", "zstd_stream_records"):
            # streamed: no content size, the 64 KiB window, a block per Flush, then an empty last block
            assert f["content_size"] is None and not f["single_segment"], name
            assert f["window_descriptor"] == 0x30  # 2^(10+6) = 64 KiB
            assert f["blocks"][-1] == ("raw", 0)
            if name == "zstd_stream_flush":  # Flush after every 32 KiB of input
                assert len(f["blocks"]) == -(-size // (32 * 1024)) + 1
            else:
                assert len(f["blocks"]) > 3
        elif name == "zstd_encodeall_1mib":
            assert f["content_size"] == size and f["fcs_bytes"] == 4 and not f["single_segment"]
            assert f["window_descriptor"] == 0x30 and size > 16 * 64 * 1024
            assert len(f["blocks"]) >= size // (64 * 1024) and set(types) == {"compressed"}
        elif name in ("zstd_encodeall_small", "zstd_incompressible"):
            assert f["single_segment"] and f["content_size"] == size and f["fcs_bytes"] == 2
            assert types == (["raw"] if name == "zstd_incompressible" else ["compressed"])
        elif name == "zstd_encodeall_under_1k" or 256 <= size <= 1024:
            assert not f["single_segment"] and f["window_descriptor"] == 0 and f["fcs_bytes"] == 2, name
            assert f["content_size"] == size
        elif size < 256:  # one_record_zstd, offset_gaps: no content size at all, a raw block
            assert not f["single_segment"] and f["window_descriptor"] == 0 and f["content_size"] is None, name
            assert f["blocks"] == [("raw", size)]


@pytest.mark.parametrize("name", CASES)
def test_decompress_payloads(name):
    """kafkatx.compression.decompress inflates every Go payload exactly as the reference libraries do."""
    data, side = load(name)
    compressed = [m for m in side["batches"] if m["compression"] != "none"]
    for meta in compressed:
        where = f"{name} batch at {meta['position']}"
        body = batch_bytes(data, meta)[HEADER_SIZE:]
        reference = reference_decompress(meta["compression"], body)
        ours = bytes(decompress(CODEC_IDS[meta["compression"]], body))
        assert ours == reference, where
        assert hashlib.sha256(ours).hexdigest() == meta["uncompressed_sha256"], where
        check_framing(name, meta["compression"], body, meta["uncompressed_size"])
    if name.startswith(("gzip", "snappy", "lz4", "zstd", "many", "one")):
        assert compressed, name
