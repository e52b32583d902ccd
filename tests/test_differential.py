"""kafkatx against the other Python codecs, and against payloads other Kafka writers produce.

(a) batches kafkatx writes are read identically by aiokafka (its Cython ``_crecords`` codec) and by
    kafka-python (pure Python); (b) batches those two write are read identically by kafkatx; (c) raw
    snappy as librdkafka writes it; (d) zstd/lz4/gzip framings Kafka accepts or rejects.
"""

from __future__ import annotations

import gzip
import io
import struct
import warnings
import zlib

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
from _strategies import CODECS, batch_st, build, expected
from kafkatx import compression
from kafkatx.errors import DecompressionError

with warnings.catch_warnings():
    # kafka-python 3.0 uses importlib.resources.read_text at import time (DeprecationWarning on 3.11+),
    # and the suite turns warnings into errors; the peers' import-time warnings are not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    import aiokafka.record.default_records as aio_records
    import kafka.codec as kp_codec
    import kafka.record.default_records as kp_records

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
AIO_CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class _CramjamSnappy:
    """Stands in for python-snappy (not installed) so kafka-python can read/write xerial snappy."""

    @staticmethod
    def compress(data):
        return bytes(cramjam.snappy.compress_raw(bytes(data)))

    @staticmethod
    def decompress(data):
        return bytes(cramjam.snappy.decompress_raw(bytes(data)))


@pytest.fixture
def kp_snappy(monkeypatch):
    """kafka-python with a snappy codec: its own xerial framing code, cramjam's raw snappy blocks."""
    monkeypatch.setattr(kp_codec, "snappy", _CramjamSnappy)
    assert kp_codec.has_snappy()


def test_aiokafka_is_the_cython_codec():
    cls = aio_records.DefaultRecordBatch
    assert cls.__module__.startswith("aiokafka.record._crecords"), cls.__module__
    assert aio_records.DefaultRecordBatchBuilder.__module__.startswith("aiokafka.record._crecords")


# ---------------------------------------------------------------------- (a) kafkatx → aiokafka, kafka-python
def _peer_records(batch):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch]


def _our_records(spec, offsets):
    return [e[:5] for e in expected(spec, offsets)]


def _check_peer_batch(peer, spec, offsets, data):
    pid, epoch, seq, txn = spec["producer"]
    recs = spec["records"]
    assert peer.base_offset == spec["base_offset"]
    assert peer.magic == 2
    assert peer.crc == _spec.crc32c(data[21:])
    assert peer.attributes & 0x07 == AIO_CODEC_IDS[spec["compression"]]
    assert peer.last_offset_delta == offsets[-1] - spec["base_offset"]
    assert peer.next_offset == offsets[-1] + 1
    assert (peer.producer_id, peer.producer_epoch, peer.base_sequence) == (pid, epoch, seq)
    assert bool(peer.is_transactional) is txn
    assert not peer.is_control_batch
    assert peer.first_timestamp == recs[0]["timestamp"]
    if spec["log_append_time"] is None:
        assert peer.timestamp_type == 0
        assert peer.max_timestamp == max(r["timestamp"] for r in recs)
    else:
        assert peer.timestamp_type == 1
        assert peer.max_timestamp == spec["log_append_time"]
    assert _peer_records(peer) == _our_records(spec, offsets)


@settings(max_examples=80, **SETTINGS)
@given(spec=batch_st)
def test_kafkatx_batches_read_by_aiokafka(codec, spec):
    data, offsets = build(codec, spec)
    peer = aio_records.DefaultRecordBatch(data)
    assert peer.validate_crc() is True
    _check_peer_batch(peer, spec, offsets, data)


@settings(max_examples=80, **SETTINGS)
@given(spec=batch_st)
def test_kafkatx_batches_read_by_kafkapy(codec, kp_snappy, spec):
    data, offsets = build(codec, spec)
    peer = kp_records.DefaultRecordBatch(data)
    assert peer.validate_crc() is True
    assert peer.size_in_bytes == len(data)
    assert peer.records_count == len(spec["records"])
    assert peer.leader_epoch == spec["leader_epoch"]
    seq = spec["producer"][2]
    assert peer.last_sequence == (_spec.inc_seq(seq, offsets[-1] - spec["base_offset"]) if seq >= 0 else -1)
    _check_peer_batch(peer, spec, offsets, data)


@pytest.mark.parametrize("frames", [1, 2])
def test_large_zstd_batches_read_by_peers(codec, frames):
    """Payloads of ZSTD_SPLIT_MIN record bytes or more: one frame, which the compiled builders join from two
    halves (test_zstd_frames), or with zstd_frames=2 two frames; kafka-python 3.0 reads those (2.0.2
    inflated only the first frame, hence one frame by default)."""
    values = [b"value %d " % i + _spec.lcg_bytes(60 + i % 90, i) for i in range(2_000)]
    b = codec.BatchBuilder(base_offset=9, compression="zstd", zstd_frames=frames)
    for i, v in enumerate(values):
        b.append(v, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
    data = b.build()
    assert len(list(compression._zstd_frames(memoryview(data)[61:]))) == frames
    want = [(9 + i, b"k%d" % i, v) for i, v in enumerate(values)]
    for peer in (aio_records.DefaultRecordBatch(data), kp_records.DefaultRecordBatch(data)):
        assert peer.validate_crc() is True
        assert [(r.offset, r.key, r.value) for r in peer] == want


# ---------------------------------------------------------------------- (b) aiokafka, kafka-python → kafkatx
peer_record_st = st.fixed_dictionaries(
    {
        "key": st.one_of(st.none(), st.binary(max_size=40)),
        "value": st.one_of(st.none(), st.binary(max_size=200), st.just(b"compressible " * 40)),
        "headers": st.lists(
            st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
        ),
        "timestamp": st.integers(0, 1 << 48),
        "gap": st.integers(1, 50),
    }
)
peer_batch_st = st.fixed_dictionaries(
    {
        "compression": st.sampled_from(CODECS),
        "producer": st.one_of(
            st.just((-1, -1, -1, False)),
            st.tuples(st.integers(0, (1 << 62)), st.integers(0, (1 << 15) - 1),
                      st.integers(0, (1 << 31) - 1), st.booleans()),
        ),  # fmt: skip
        "records": st.lists(peer_record_st, min_size=1, max_size=20),
    }
)


def _peer_build(builder_cls, spec):
    pid, epoch, seq, txn = spec["producer"]
    b = builder_cls(2, AIO_CODEC_IDS[spec["compression"]], int(txn), pid, epoch, seq, 1 << 24)
    offsets = []
    offset = -1
    for i, r in enumerate(spec["records"]):
        offset = 0 if i == 0 else offset + r["gap"]
        meta = b.append(offset, r["timestamp"], r["key"], r["value"], list(r["headers"]))
        assert meta is not None
        offsets.append(offset)
    return bytes(b.build()), offsets


def _check_kafkatx_reads_peer(codec, spec, data, offsets, peer_batch_cls):
    pid, epoch, seq, txn = spec["producer"]
    (batch,) = list(codec.iter_batches(data))
    assert batch.is_valid
    # peers send uncompressed when compression does not shrink the records
    assert batch.compression in (spec["compression"], "none")
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional is txn
    assert batch.base_offset == 0 and batch.last_offset == offsets[-1]
    assert batch.records_count == len(offsets)
    assert batch.base_timestamp == spec["records"][0]["timestamp"]
    assert batch.max_timestamp == max(r["timestamp"] for r in spec["records"])
    want = [
        (off, r["timestamp"], r["key"], r["value"], tuple(r["headers"]),
         _spec.inc_seq(seq, off) if seq >= 0 else -1)
        for off, r in zip(offsets, spec["records"])
    ]  # fmt: skip
    got = [_spec.rec_tuple(r) for r in batch.records()]
    assert got == want
    # and the same as the peer reads its own batch
    assert [g[:5] for g in got] == _peer_records(peer_batch_cls(data))
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


@settings(max_examples=80, **SETTINGS)
@given(spec=peer_batch_st)
def test_aiokafka_batches_read_by_kafkatx(codec, spec):
    data, offsets = _peer_build(aio_records.DefaultRecordBatchBuilder, spec)
    _check_kafkatx_reads_peer(codec, spec, data, offsets, aio_records.DefaultRecordBatch)


@settings(max_examples=80, **SETTINGS)
@given(spec=peer_batch_st)
def test_kafkapy_batches_read_by_kafkatx(codec, kp_snappy, spec):
    data, offsets = _peer_build(kp_records.DefaultRecordBatchBuilder, spec)
    _check_kafkatx_reads_peer(codec, spec, data, offsets, kp_records.DefaultRecordBatch)


@pytest.mark.parametrize("peer", ["aiokafka", "kafkapy"])
@pytest.mark.parametrize("compression", CODECS)
def test_peer_compressed_batches(codec, kp_snappy, peer, compression):
    """Deterministic: each peer really compresses here, and kafkatx reads it."""
    builder = (aio_records if peer == "aiokafka" else kp_records).DefaultRecordBatchBuilder
    b = builder(2, AIO_CODEC_IDS[compression], 0, -1, -1, -1, 1 << 24)
    values = [b"value %d " % i * 20 for i in range(50)]
    for i, v in enumerate(values):
        b.append(i, 1_700_000_000_000 + i, b"k%d" % i, v, [("h", b"%d" % i)])
    data = bytes(b.build())
    (batch,) = list(codec.iter_batches(data))
    assert batch.compression == compression
    assert [(r.offset, r.key, r.value, r.headers) for r in batch.records()] == [
        (i, b"k%d" % i, v, (("h", b"%d" % i),)) for i, v in enumerate(values)
    ]


# ---------------------------------------------------------------------- (c) librdkafka's raw snappy
def _plain_batch(codec, n=30, **kw):
    b = codec.BatchBuilder(base_offset=1000, **kw)
    for i in range(n):
        b.append(b"librdkafka value %d " % i * 10, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i,
                 headers=[("trace", b"%08d" % i)])  # fmt: skip
    data = b.build()
    return data, [_spec.rec_tuple(r) for r in codec.decode_records(data)]


def test_raw_snappy_payload(codec):
    plain, want = _plain_batch(codec)
    raw = bytes(cramjam.snappy.compress_raw(plain[61:]))
    assert not raw.startswith(b"\x82SNAPPY\x00")
    data = _spec.rebatch(plain, raw, 2)
    (batch,) = list(codec.iter_batches(data))
    assert batch.compression == "snappy" and batch.is_valid
    assert [_spec.rec_tuple(r) for r in batch.records()] == want


def test_raw_snappy_tiny_payload(codec):
    """A raw block shorter than the 16-byte xerial header is still raw snappy."""
    rec = _spec.raw_record(value=b"x")
    raw = bytes(cramjam.snappy.compress_raw(rec))
    assert len(raw) < 16
    data = _spec.v2_batch(raw, count=1, attributes=2)
    (r,) = codec.decode_records(data)
    assert (r.offset, r.key, r.value) == (0, None, b"x")


def test_xerial_snappy_concatenated_streams(codec):
    """snappy-java accepts a second xerial header where a chunk length is expected."""
    plain, want = _plain_batch(codec)
    recs = plain[61:]
    cut = len(recs) // 3
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    parts = []
    for piece in (recs[:cut], recs[cut:]):
        block = bytes(cramjam.snappy.compress_raw(piece))
        parts.append(header + struct.pack(">i", len(block)) + block)
    data = _spec.rebatch(plain, b"".join(parts), 2)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


# ---------------------------------------------------------------------- (d) zstd, lz4, gzip framings
@pytest.mark.parametrize("content_size", [True, False])
@pytest.mark.parametrize("checksum", [True, False])
def test_zstd_several_frames(codec, content_size, checksum):
    plain, want = _plain_batch(codec)
    recs = plain[61:]
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=content_size, write_checksum=checksum)
    cuts = [0, 1, len(recs) // 2, len(recs) - 1, len(recs)]
    payload = b"".join(cctx.compress(recs[a:b]) for a, b in zip(cuts, cuts[1:]))
    data = _spec.rebatch(plain, payload, 4)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_zstd_streamed_frame_without_content_size(codec):
    plain, want = _plain_batch(codec, n=300)
    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    recs = plain[61:]
    payload = b"".join(cobj.compress(recs[i : i + 1000]) for i in range(0, len(recs), 1000)) + cobj.flush()
    assert zstandard.get_frame_parameters(payload).content_size == zstandard.CONTENTSIZE_UNKNOWN
    data = _spec.rebatch(plain, payload, 4)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_zstd_skippable_frame_is_skipped(codec):
    plain, want = _plain_batch(codec)
    skippable = struct.pack("<II", 0x184D2A50, 5) + b"12345"
    payload = skippable + zstandard.ZstdCompressor().compress(plain[61:])
    data = _spec.rebatch(plain, payload, 4)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_lz4_linked_blocks_rejected(codec):
    plain, _ = _plain_batch(codec, n=400)
    recs = plain[61:]
    assert len(recs) > 64 * 1024  # more than one 64 KiB block, so the blocks really are linked
    payload = lz4.frame.compress(recs, block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    assert not payload[4] & 0x20
    data = _spec.rebatch(plain, payload, 3)
    (batch,) = list(codec.iter_batches(data))  # header and CRC are fine
    with pytest.raises(DecompressionError) as ei:
        batch.records()
    assert isinstance(ei.value.position, int) and 0 <= ei.value.position <= len(data)
    with pytest.raises(DecompressionError):
        codec.decode_records(data)


@pytest.mark.parametrize(
    "kw",
    [
        dict(store_size=True),  # content size field (Kafka skips it, but it is in the header checksum)
        dict(block_checksum=True),  # block checksums are verified
        dict(content_checksum=True),  # read, not verified by Kafka
        dict(block_size=lz4.frame.BLOCKSIZE_MAX256KB),
        dict(block_size=lz4.frame.BLOCKSIZE_MAX4MB),
    ],
    ids=["content_size", "block_checksum", "content_checksum", "bd256k", "bd4m"],
)
def test_lz4_frame_variants_kafka_accepts(codec, kw):
    plain, want = _plain_batch(codec, n=300)
    opts = dict(block_linked=False, store_size=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    opts.update(kw)
    payload = lz4.frame.compress(plain[61:], **opts)
    data = _spec.rebatch(plain, payload, 3)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_lz4_bad_block_checksum_rejected(codec):
    plain, _ = _plain_batch(codec)
    payload = bytearray(
        lz4.frame.compress(plain[61:], block_linked=False, block_checksum=True, store_size=False)
    )
    payload[-5] ^= 0x01  # last byte of the block checksum, just before the end mark
    data = _spec.rebatch(plain, bytes(payload), 3)
    with pytest.raises(DecompressionError):
        codec.decode_records(data)


def _lz4_frame(blocks, flg=0x60, bd=0x40, content_size=None, trailer=b""):
    """An LZ4 frame put together by hand: ``blocks`` of ``(bytes, stored)``, then the end mark and
    ``trailer`` (a content checksum, when FLG says so)."""
    desc = bytes([flg, bd]) + (struct.pack("<Q", content_size) if content_size is not None else b"")
    out = b"\x04\x22\x4d\x18" + desc + bytes([compression._lz4_header_checksum(desc)])
    for data, stored in blocks:
        out += struct.pack("<I", len(data) | (0x80000000 if stored else 0)) + data
    return out + b"\x00\x00\x00\x00" + trailer


def test_lz4_block_is_read_without_a_size_prefix():
    """A block's first bytes are a token and literals, never a length (cramjam < 2.11 read a 4-byte size
    prefix there): 0x50 = five literals, which also read as a little-endian length of 0x0550."""
    frame = _lz4_frame([(b"\x50\x05\x00\x00\x00\x01", False), (b"stored", True), (b"\x30abc", False)])
    assert compression.decompress(3, frame) == b"\x05\x00\x00\x00\x01storedabc"
    assert bytes(compression.decompress_view(3, frame)) == b"\x05\x00\x00\x00\x01storedabc"


@pytest.mark.parametrize("block_checksum", [False, True], ids=["blocks", "block_checksums"])
@pytest.mark.parametrize("flaw", ["content_checksum", "content_size"])
def test_lz4_content_checksum_and_size_are_not_checked(codec, block_checksum, flaw):
    """Kafka's Lz4BlockInputStream skips the content size and reads the content checksum without
    verifying either; a frame with a wrong one decodes, whether its blocks carry checksums or not."""
    plain, want = _plain_batch(codec, n=300)
    recs = plain[61:]
    payload = lz4.frame.compress(recs, block_linked=False, store_size=flaw == "content_size",
                                 content_checksum=flaw == "content_checksum", block_checksum=block_checksum,
                                 block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    b = bytearray(payload)
    if flaw == "content_checksum":
        b[-1] ^= 0x5A
    else:
        b[6:14] = struct.pack("<Q", len(recs) + 7)  # a wrong size, with the header checksum to match
        b[14] = compression._lz4_header_checksum(bytes(b[4:14]))
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(bytes(b))  # liblz4's frame decoder does check it
    data = _spec.rebatch(plain, bytes(b), 3)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


@pytest.mark.parametrize("room", ["one_byte_over", "garbage"])
def test_lz4_bad_block_rejected(codec, room):
    """A block that inflates past its frame's block size, or is not LZ4 at all, is a DecompressionError."""
    plain, _ = _plain_batch(codec)
    if room == "one_byte_over":
        blocks = [(lz4.block.compress(b"x" * (64 * 1024 + 1), store_size=False), False)]
    else:
        blocks = [(b"\xff" * 40, False)]
    data = _spec.rebatch(plain, _lz4_frame(blocks), 3)
    with pytest.raises(DecompressionError, match="invalid lz4 payload"):
        codec.decode_records(data)


def test_lz4_bad_header_checksum_rejected_for_v2(codec):
    plain, _ = _plain_batch(codec)
    payload = bytearray(lz4.frame.compress(plain[61:], block_linked=False, store_size=False))
    payload[6] ^= 0xFF
    data = _spec.rebatch(plain, bytes(payload), 3)
    with pytest.raises(DecompressionError):
        codec.decode_records(data)


def test_gzip_two_members(codec):
    plain, want = _plain_batch(codec)
    recs = plain[61:]
    cut = len(recs) // 2
    payload = gzip.compress(recs[:cut], mtime=0) + gzip.compress(recs[cut:], mtime=0)
    data = _spec.rebatch(plain, payload, 1)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_gzip_member_with_header_fields(codec):
    """FNAME/FEXTRA-style headers (Python's gzip module writes the file name when given one)."""
    plain, want = _plain_batch(codec)
    bio = io.BytesIO()
    with gzip.GzipFile(filename="records.bin", mode="wb", fileobj=bio, mtime=123) as g:
        g.write(plain[61:])
    payload = bio.getvalue()
    assert payload[3] & 0x08  # FNAME present
    data = _spec.rebatch(plain, payload, 1)
    assert [_spec.rec_tuple(r) for r in codec.decode_records(data)] == want


def test_raw_deflate_is_not_gzip(codec):
    plain, _ = _plain_batch(codec)
    payload = zlib.compress(plain[61:])  # zlib wrapper, not gzip
    data = _spec.rebatch(plain, payload, 1)
    with pytest.raises(DecompressionError):
        codec.decode_records(data)
