"""BatchBuilder: byte-identical to Kafka's MemoryRecordsBuilder, Kafka's append rules, round trips."""

from __future__ import annotations

import enum
import random
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
from _strategies import CODECS, batch_st, build, expected
from conftest import golden_cases, load_backend, load_golden
from kafkatx._common import check_builder_args, timestamp_type_bits
from kafkatx import compression as _compression
from kafkatx.compression import codec_id
from kafkatx.errors import InvalidAppendError, KafkaTxError, UnsupportedCompressionError



def _golden_spec_batches():
    """(case, batch index, spec batch, position, size) for every replayable magic-2 data batch."""
    out = []
    for name in golden_cases():
        _data, side = load_golden(name)
        spec = side["spec"]
        if "batches" not in spec or len(spec["batches"]) != len(side["batches"]):
            continue  # derived/corrupt cases, and legacy sets (one spec batch → several entries)
        for sb, b in zip(spec["batches"], side["batches"]):
            if _spec.is_plain_v2(sb):
                out.append(
                    pytest.param(name, b["index"], sb, b["position"], b["size_in_bytes"],
                                 id=f"{name}-{b['index']}")
                )  # fmt: skip
    return out


GOLDEN_SPECS = _golden_spec_batches()
UNCOMPRESSED_SPECS = [p for p in GOLDEN_SPECS if p.values[2].get("compression", "none") == "none"]
COMPRESSED_SPECS = [p for p in GOLDEN_SPECS if p.values[2].get("compression", "none") != "none"]


def test_golden_spec_selection_is_not_empty():
    assert len(UNCOMPRESSED_SPECS) >= 10
    assert {p.values[2]["compression"] for p in COMPRESSED_SPECS} == {"gzip", "snappy", "lz4", "zstd"}


# ------------------------------------------------------------------------------- Java byte identity
@pytest.mark.parametrize("name,index,spec_batch,position,size", UNCOMPRESSED_SPECS)
def test_uncompressed_spec_is_byte_identical_to_java(codec, name, index, spec_batch, position, size):
    data, _ = load_golden(name)
    built = _spec.build_spec_batch(codec, spec_batch)
    want = data[position : position + size]
    assert len(built) == len(want)
    assert built == want


@pytest.mark.parametrize("name,index,spec_batch,position,size", COMPRESSED_SPECS)
def test_compressed_spec_round_trips(codec, name, index, spec_batch, position, size):
    data, _ = load_golden(name)
    want = data[position : position + size]
    built = _spec.build_spec_batch(codec, spec_batch)
    # the 61-byte header equals Java's except batchLength and CRC (they cover the compressed bytes)
    assert built[:8] == want[:8]
    assert built[12:17] == want[12:17]
    assert built[21:61] == want[21:61]
    (batch,) = list(codec.iter_batches(built))
    assert batch.compression == spec_batch["compression"]
    assert batch.size_in_bytes == len(built)
    assert [_spec.rec_tuple(r) for r in batch.records()] == _spec.spec_records(spec_batch)
    # and our decoder reads Java's bytes of the same spec to the same records
    (jbatch,) = list(codec.iter_batches(want))
    assert [_spec.rec_tuple(r) for r in jbatch.records()] == _spec.spec_records(spec_batch)
    # a zstd payload of more than 64 KiB of records is one frame joined from pieces by the compiled builders
    records = len(_spec.build_spec_batch(codec, dict(spec_batch, compression="none"))) - 61
    joined = getattr(codec, "_zstd_joins", lambda: False)() and records > 65536
    _check_payload_header(spec_batch["compression"], built[61:], want[61:], joined)


def _check_payload_header(compression, ours, java, joined=False):
    """The compressed-payload headers our writer promises to share with Java's (oracle README), but for a
    joined zstd frame's, which gives its content size (written last: the pieces end blocks, which a reader
    cannot size the frame from)."""
    if compression == "lz4":
        for payload in (ours, java):
            assert payload[:4] == b"\x04\x22\x4d\x18"
            assert payload[4] == 0x60  # version 01, independent blocks, no checksums, no content size
            assert payload[5] == 0x40  # 64 KiB blocks
        assert ours[:7] == java[:7]  # same FLG/BD, so the same header checksum
        assert ours[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    elif compression == "snappy":
        header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        assert java[:16] == header
        assert ours[:16] == header
        # 32 KiB chunks, each with a BE length prefix, exactly covering the payload
        pos = 16
        while pos < len(ours):
            (n,) = struct.unpack_from(">i", ours, pos)
            assert n > 0
            pos += 4 + n
        assert pos == len(ours)
    elif compression == "zstd":
        import zstandard

        for payload in (ours, java):
            assert payload[:4] == b"\x28\xb5\x2f\xfd"
            fhd = payload[4]
            assert not fhd & 0x04  # no content checksum
            assert fhd & 0x03 == 0  # no dictionary id
        for payload in (java,) if joined else (ours, java):
            fhd = payload[4]
            assert fhd >> 6 == 0  # no frame content size field
            assert not fhd & 0x20  # not single-segment (which would imply a content size)
        if joined:
            size = len(zstandard.ZstdDecompressor().decompressobj().decompress(ours))
            assert zstandard.get_frame_parameters(ours).content_size == size
    elif compression == "gzip":
        # RFC 1952 member, deflate, no optional fields, mtime 0 (as GZIPOutputStream); XFL/OS may differ
        assert java[:8] == ours[:8] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00"


def test_compression_levels(codec):
    """KIP-390 levels are accepted, change nothing in the records, and (for gzip/zstd) change bytes."""
    values = [_spec.lcg_bytes(500, i) + b"abc" * 300 for i in range(5)]

    def make(compression, level):
        b = codec.BatchBuilder(compression=compression, compression_level=level)
        for i, v in enumerate(values):
            b.append(v, timestamp=1_700_000_000_000 + i)
        return b.build()

    for compression, levels in (("gzip", (1, 9)), ("zstd", (1, 19)), ("lz4", (1, 9, 17))):
        outs = {lvl: make(compression, lvl) for lvl in levels}
        for out in outs.values():
            assert [r.value for r in codec.decode_records(out)] == values
        if compression != "lz4":
            assert outs[levels[0]] != outs[levels[-1]]


# ----------------------------------------------------------------------------------- append rules
def test_empty_builder_builds_nothing(codec):
    for compression in CODECS:
        assert codec.BatchBuilder(compression=compression).build() == b""
    b = codec.BatchBuilder(base_offset=5, producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    assert b.build() == b""


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(transactional=True),  # no producer id
        dict(transactional=True, producer_id=-1, producer_epoch=0, base_sequence=0),
        dict(producer_id=5),  # no epoch and no sequence
        dict(producer_id=5, producer_epoch=1),  # no sequence
        dict(producer_id=5, base_sequence=0),  # no epoch
        dict(timestamp_type="LogAppendTime"),
        dict(timestamp_type="no_timestamp_type"),
        dict(timestamp_type=None),
        dict(base_offset=-1),
        dict(producer_epoch=1 << 15, producer_id=1, base_sequence=0),
        dict(base_sequence=1 << 31, producer_id=1, producer_epoch=0),
        dict(delete_horizon_ms=-5),
    ],
)
def test_invalid_builder_arguments(codec, kwargs):
    with pytest.raises(InvalidAppendError):
        codec.BatchBuilder(**kwargs)


class _Small(enum.IntEnum):  # an int subclass: the compiled builder checks plain ints in C, others in Python
    ONE = 1


_INT_RANGES = {
    "base_offset": (0, (1 << 63) - 1),
    "producer_id": (-(1 << 63), (1 << 63) - 1),
    "producer_epoch": (-(1 << 15), (1 << 15) - 1),
    "base_sequence": (-(1 << 31), (1 << 31) - 1),
    "partition_leader_epoch": (-(1 << 31), (1 << 31) - 1),
}
_FOREIGN = [True, False, None, 1.0, "1", _Small.ONE]
_OTHER_VALUES = {
    **{name: st.one_of(st.sampled_from([lo - 1, lo, lo + 1, -1, 0, 1, hi - 1, hi, hi + 1] + _FOREIGN),
                       st.integers(lo - 2, hi + 2))
       for name, (lo, hi) in _INT_RANGES.items()},
    "transactional": st.sampled_from([True, False, 0, 1, None, "", "yes"]),
    "delete_horizon_ms": st.sampled_from([0, 5, (1 << 63) - 1, 1 << 63, -5, 1.5, True]),
    "timestamp_type": st.sampled_from(["log_append_time", "CREATE_TIME", "LogAppendTime", None, 0]),
    "compression": st.sampled_from(["lz4", "ZSTD", "Gzip", 0, 3, 4, 5, None, "brotli", True]),
}


@st.composite
def _builder_kwargs(draw):
    """Arguments a producer passes (an idempotent or transactional producer's, or none), with up to three of
    them changed to an edge of their range, a value past it or a value of another type."""
    idem = draw(st.booleans())
    kw = dict(
        base_offset=draw(st.integers(0, (1 << 63) - 1)),
        producer_id=draw(st.integers(0, (1 << 63) - 1)) if idem else -1,
        producer_epoch=draw(st.integers(0, (1 << 15) - 1)) if idem else -1,
        base_sequence=draw(st.integers(0, (1 << 31) - 1)) if idem else -1,
        partition_leader_epoch=draw(st.integers(-(1 << 31), (1 << 31) - 1)),
        transactional=draw(st.booleans()) if idem else False,
        delete_horizon_ms=None,
        timestamp_type="create_time",
        compression="none",
    )
    for name in draw(st.lists(st.sampled_from(sorted(_OTHER_VALUES)), max_size=3, unique=True)):
        kw[name] = draw(_OTHER_VALUES[name])
    return kw


def _one_field_cases():
    """Each integer argument at and past both ends of its range, or of another type, the others valid (an
    idempotent producer's, or none)."""
    for idem in (True, False):
        base = dict(producer_id=7, producer_epoch=1, base_sequence=5) if idem else {}
        for name, (lo, hi) in _INT_RANGES.items():
            for v in [lo - 1, lo, hi, hi + 1] + _FOREIGN:
                yield pytest.param({**base, name: v}, id=f"{'idem' if idem else 'plain'}-{name}={v!r}")


@pytest.mark.parametrize("kw", list(_one_field_cases()))
def test_builder_argument_edges_follow_the_python_rules(codec, kw):
    _check_builder_arguments(codec, kw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kw=_builder_kwargs())
def test_builder_arguments_follow_the_python_rules(codec, kw):
    _check_builder_arguments(codec, kw)


def _check_builder_arguments(codec, kw):
    """The compiled builder decides the common arguments in C: it must accept exactly what the rules in
    kafkatx._common and kafkatx.compression accept, and build the header they describe."""
    kw = {"base_offset": 0, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
          "partition_leader_epoch": -1, "transactional": False, "delete_horizon_ms": None,
          "timestamp_type": "create_time", "compression": "none", **kw}  # fmt: skip
    base_offset, producer_id, producer_epoch, base_sequence, leader_epoch, transactional = (
        kw["base_offset"], kw["producer_id"], kw["producer_epoch"], kw["base_sequence"],
        kw["partition_leader_epoch"], kw["transactional"])  # fmt: skip
    try:
        check_builder_args(base_offset, producer_id, producer_epoch, base_sequence, transactional, leader_epoch,
                           kw["delete_horizon_ms"])
        ts_bits = timestamp_type_bits(kw["timestamp_type"])
        cid = codec_id(kw["compression"])
    except (InvalidAppendError, UnsupportedCompressionError) as exc:
        with pytest.raises(type(exc)):
            codec.BatchBuilder(**kw)
        return
    b = codec.BatchBuilder(**kw)
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch) == (
        base_offset, producer_id, producer_epoch, base_sequence, leader_epoch)
    assert b.transactional == bool(transactional)
    b.append(b"v", key=b"k", timestamp=1_700_000_000_000)
    (batch,) = codec.iter_batches(b.build())
    assert batch.attributes & 0x7 == cid
    assert bool(batch.attributes & 0x8) == bool(ts_bits)
    assert batch.is_transactional == bool(transactional)
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.partition_leader_epoch) == (base_offset, producer_id, producer_epoch, base_sequence,
                                              leader_epoch)  # fmt: skip


def test_invalid_append_error_is_a_value_error():
    assert issubclass(InvalidAppendError, ValueError)
    assert issubclass(InvalidAppendError, KafkaTxError)


@pytest.mark.parametrize(
    "bad",
    [
        dict(value=b"x", offset=10),  # equal to the previous offset
        dict(value=b"x", offset=9),  # decreasing
        dict(value=b"x", offset=4),  # below base offset (and decreasing)
        dict(value="text"),  # str value
        dict(value=b"x", key="text"),  # str key
        dict(value=b"x", headers=[(None, b"v")]),  # null header key
        dict(value=b"x", headers=[("k", "text")]),  # str header value
        dict(value=b"x", timestamp=-2),
        dict(value=b"x", timestamp=-1_700_000_000_000),
        dict(value=12345),  # not bytes-like
    ],
)
def test_append_rules(codec, bad):
    b = codec.BatchBuilder(base_offset=5)
    assert b.append(b"first", timestamp=1_700_000_000_000, offset=10) == 10
    kw = dict(bad)
    value = kw.pop("value")
    kw.setdefault("timestamp", 1_700_000_000_001)
    with pytest.raises(InvalidAppendError):
        b.append(value, **kw)
    # a rejected append leaves the builder as it was
    assert b.append(b"second", timestamp=1_700_000_000_002) == 11
    (batch,) = list(codec.iter_batches(b.build()))
    assert batch.records_count == 2
    assert [(r.offset, r.value) for r in batch.records()] == [(10, b"first"), (11, b"second")]
    assert batch.base_offset == 5 and batch.last_offset == 11


def test_offset_below_base_on_first_append(codec):
    b = codec.BatchBuilder(base_offset=100)
    with pytest.raises(InvalidAppendError):
        b.append(b"v", timestamp=0, offset=99)
    assert b.build() == b""


def test_timestamp_minus_one_and_offsets(codec):
    b = codec.BatchBuilder(base_offset=7)
    assert b.append(b"a", timestamp=-1) == 7
    assert b.append(b"b", timestamp=-1) == 8
    assert b.append(b"c", timestamp=-1, offset=20) == 20
    assert b.append(b"d", timestamp=-1) == 21
    (batch,) = list(codec.iter_batches(b.build()))
    assert batch.base_timestamp == -1 and batch.max_timestamp == -1
    assert batch.last_offset_delta == 14 and batch.records_count == 4
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(7, -1), (8, -1), (20, -1), (21, -1)]


def test_buffer_types_accepted_for_payloads(codec):
    b = codec.BatchBuilder()
    b.append(bytearray(b"ba"), key=memoryview(b"xmvx")[1:3], timestamp=1, headers=[("h", bytearray(b"hv"))])
    (rec,) = codec.decode_records(b.build())
    assert (rec.key, rec.value, rec.headers) == (b"mv", b"ba", (("h", b"hv"),))
    assert type(rec.key) is bytes and type(rec.value) is bytes


# ------------------------------------------------------------------------------------- round trips
def _check_round_trip(codec, spec, data, offsets):
    pid, epoch, seq, txn = spec["producer"]
    recs = spec["records"]
    (batch,) = list(codec.iter_batches(data))
    assert batch.size_in_bytes == len(data)
    assert batch.magic == 2 and batch.is_valid
    assert batch.base_offset == spec["base_offset"]
    assert batch.last_offset == offsets[-1] and batch.next_offset == offsets[-1] + 1
    assert batch.last_offset_delta == offsets[-1] - spec["base_offset"]
    assert batch.records_count == len(recs)
    assert batch.compression == spec["compression"]
    assert batch.attributes & 0x07 == _spec.CODEC_IDS[spec["compression"]]
    assert batch.attributes & 0xFF00 == 0
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional is txn and batch.is_control is False
    assert batch.partition_leader_epoch == spec["leader_epoch"]
    assert batch.base_timestamp == recs[0]["timestamp"]
    if spec["log_append_time"] is None:
        assert batch.timestamp_type == "create_time"
        assert batch.max_timestamp == max(r["timestamp"] for r in recs)
    else:
        assert batch.timestamp_type == "log_append_time"
        assert batch.max_timestamp == spec["log_append_time"]
    assert batch.last_sequence == (_spec.inc_seq(seq, batch.last_offset_delta) if seq >= 0 else -1)
    assert batch.compute_crc() == batch.crc == _spec.crc32c(data[21:])
    assert [_spec.rec_tuple(r) for r in batch.records()] == expected(spec, offsets)
    out = codec.decode_records(data)
    assert [_spec.rec_tuple(r) for r in out] == expected(spec, offsets)
    assert out.next_offset == offsets[-1] + 1


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=batch_st)
def test_round_trip(codec, spec):
    data, offsets = build(codec, spec)
    _check_round_trip(codec, spec, data, offsets)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=batch_st)
def test_round_trip_quick(codec, spec):
    data, offsets = build(codec, spec)
    _check_round_trip(codec, spec, data, offsets)


def test_round_trip_large_and_many(codec):
    """Multi-block lz4/snappy/zstd payloads and multi-byte varint deltas."""
    big = _spec.lcg_bytes(200_000, 3) + bytes(150_000)
    for compression in CODECS:
        b = codec.BatchBuilder(base_offset=1 << 40, compression=compression)
        for i in range(400):
            b.append(b"v%d" % i, key=b"k", timestamp=1_700_000_000_000 + i * 977, headers=[("i", b"%d" % i)])
        b.append(big, key=None, timestamp=1_600_000_000_000)
        out = codec.decode_records(b.build())
        assert len(out) == 401
        assert out[-1].value == big and out[-1].timestamp == 1_600_000_000_000
        assert [r.offset for r in out] == [(1 << 40) + i for i in range(401)]
        assert out[399].headers == (("i", b"399"),)


def test_builders_one_after_another_of_changing_sizes_build_what_the_twin_builds():
    """The compiled builder keeps the buffer of the last builder freed (as it grew, up to 1 MiB) for the next:
    builders of growing, shrinking and past-1-MiB sizes in turn, alive one at a time, two at once, and one
    initialised again after a large batch, each write the twin's bytes."""
    cy, py = load_backend("cython"), load_backend("python")

    def fill(b, n, seed):
        for i in range(n):
            b.append(_spec.lcg_bytes(100 + i % 50, seed + i), key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
        return b

    def both(n, seed, **kw):
        return [fill(m.BatchBuilder(base_offset=seed, **kw), n, seed).build() for m in (cy, py)]

    for seed, n in enumerate([1000, 10, 3000, 8000, 1, 2000, 500, 12_000, 5]):
        a, b = both(n, seed)
        assert a == b, n
    held = fill(cy.BatchBuilder(), 3000, 1)  # holds the kept buffer while others come and go
    for seed, n in enumerate([2000, 5]):
        a, b = both(n, seed + 50, compression="gzip")
        assert a == b, n
    assert held.build() == fill(py.BatchBuilder(), 3000, 1).build()
    again = fill(cy.BatchBuilder(), 6000, 7)
    again.build()
    again.__init__(base_offset=9)
    assert fill(again, 20, 8).build() == fill(py.BatchBuilder(base_offset=9), 20, 8).build()


# -------------------------------------------------------------------------------- backend parity
@settings(max_examples=60, deadline=None)
@given(spec=batch_st)
def test_backends_build_identical_bytes(spec):
    """Same input → same bytes from both backends (all codecs: our compressors are deterministic)."""
    cy, py = load_backend("cython"), load_backend("python")
    data_cy, offs_cy = build(cy, spec)
    data_py, offs_py = build(py, spec)
    assert offs_cy == offs_py
    assert data_cy == data_py


def test_backends_build_identical_golden_specs():
    """Byte for byte, but for one-frame zstd payloads of ZSTD_SPLIT_MIN record bytes or more, which the
    compiled builder joins from two halves (test_zstd_frames) and the twin writes in one pass: the same
    records in one frame there."""
    cy, py = load_backend("cython"), load_backend("python")
    joined = 0
    for p in GOLDEN_SPECS:
        spec_batch = p.values[2]
        a, b = _spec.build_spec_batch(cy, spec_batch), _spec.build_spec_batch(py, spec_batch)
        if a != b and spec_batch.get("compression") == "zstd" and cy._zstd_joins():
            records = _spec.build_spec_batch(cy, {**spec_batch, "compression": "none"})[61:]
            assert len(records) >= _compression.ZSTD_SPLIT_MIN and spec_batch.get("zstd_frames", 1) == 1, p.id
            assert [len(list(_compression._zstd_frames(memoryview(x)[61:]))) for x in (a, b)] == [1, 1], p.id
            assert [_spec.rec_tuple(r) for r in cy.decode_records(a)] == [_spec.rec_tuple(r) for r in
                                                                           py.decode_records(b)], p.id
            joined += 1
            continue
        assert a == b, p.id
    assert (joined > 0) == bool(cy._zstd_joins())  # the large zstd cases


# ------------------------------------------------------------------------ argument handling parity
LEVELS_OK = [("gzip", 1), ("gzip", 9), ("gzip", -1), ("lz4", 1), ("lz4", 17), ("zstd", -131072), ("zstd", 22),
             ("zstd", 0), ("snappy", 5), ("none", 3)]  # fmt: skip
LEVELS_OUT_OF_RANGE = [("gzip", 0), ("gzip", 10), ("gzip", -2), ("lz4", 0), ("lz4", 18), ("lz4", -1),
                       ("zstd", -131073), ("zstd", 23)]  # fmt: skip


@pytest.mark.parametrize("compression, level", LEVELS_OUT_OF_RANGE)
def test_compression_level_out_of_range_is_refused_by_the_constructor(codec, compression, level):
    """KIP-390's ranges are checked when the builder is made (not by build(), with a builtin ValueError)."""
    with pytest.raises(InvalidAppendError, match=f"{compression} compression level") as ei:
        codec.BatchBuilder(compression=compression, compression_level=level)
    assert type(ei.value) is InvalidAppendError


@pytest.mark.parametrize("level", ["9", 9.0, True, b"1"])
def test_compression_level_of_another_type_is_a_type_error(codec, level):
    for compression in ("gzip", "zstd", "snappy", "none"):
        with pytest.raises(TypeError, match="compression_level"):
            codec.BatchBuilder(compression=compression, compression_level=level)


@pytest.mark.parametrize("compression, level", LEVELS_OK)
def test_compression_levels_in_range_build(codec, compression, level):
    b = codec.BatchBuilder(compression=compression, compression_level=level)
    b.append(b"v" * 100, timestamp=1)
    assert [r.value for r in codec.decode_records(b.build())] == [b"v" * 100]


def test_offset_after_long_max_value_is_refused(codec):
    """MemoryRecordsBuilder: the offset after Long.MAX_VALUE wraps, and 'Illegal offset ... following previous
    offset' is thrown; neither backend may wrap it (nor go past int64)."""
    top = (1 << 63) - 1
    b = codec.BatchBuilder(base_offset=top)
    assert b.append(b"a", timestamp=0) == top
    with pytest.raises(InvalidAppendError, match=f"illegal offset -{1 << 63} following previous offset {top}"):
        b.append(b"b", timestamp=0)
    assert b.last_offset == top and b.records_count == 1
    b = codec.BatchBuilder(base_offset=top - 1)
    assert b.append(b"a", timestamp=0, offset=top) == top
    with pytest.raises(InvalidAppendError):
        b.append(b"b", timestamp=0)
    (batch,) = codec.iter_batches(b.build())
    assert batch.last_offset == top and [r.offset for r in batch] == [top]


@pytest.mark.parametrize("field", ["timestamp", "offset"])
def test_int64_arguments_follow_one_rule(codec, field):
    """Outside int64: OverflowError on both backends; not an integer (a str, a float): TypeError."""
    b = codec.BatchBuilder(base_offset=0)
    for bad, exc in ((1 << 63, OverflowError), (-(1 << 63) - 1, OverflowError), (1 << 70, OverflowError),
                     ("5", TypeError), (1.0, TypeError), (b"5", TypeError), (True, TypeError)):  # fmt: skip
        with pytest.raises(exc, match=field):
            b.append(b"v", **{field: bad, **({} if field == "timestamp" else {"timestamp": 1})})
    # integers of other types (IntEnum, numpy) are integers; a bool is not taken for 0 or 1
    import numpy as np

    kw = {"timestamp": 1} if field == "offset" else {}
    assert b.append(b"v", **{field: np.int64(7)}, **kw) == (0 if field == "timestamp" else 7)
    assert b.append(b"v", **{field: _Small.ONE + 8}, **kw) == (1 if field == "timestamp" else 9)
    assert b.records_count == 2


def test_every_integer_argument_takes_numpy_integers_and_refuses_bools(codec):
    """One rule for the integer arguments of BatchBuilder, append, encode_arrow and encode_marker: anything
    with __index__ but a bool (numpy integers are what a DataFrame hands over)."""
    import numpy as np
    import pyarrow as pa

    from kafkatx.transactions import encode_marker

    i = np.int64
    args = dict(base_offset=i(3), producer_id=i(7), producer_epoch=np.int16(1), base_sequence=np.int32(5),
                partition_leader_epoch=i(2))  # fmt: skip
    b = codec.BatchBuilder(**args, compression="gzip", compression_level=np.int8(6), delete_horizon_ms=i(10))
    b.append(b"v", timestamp=i(20), offset=i(4))
    plain = codec.BatchBuilder(**{k: int(v) for k, v in args.items()}, compression="gzip", compression_level=6,
                               delete_horizon_ms=10)  # fmt: skip
    plain.append(b"v", timestamp=20, offset=4)
    assert b.build() == plain.build()
    assert (type(b.base_offset), type(b.producer_id)) == (int, int)
    table = pa.table({"value": [b"x", b"y"]})
    assert codec.encode_arrow(table, **args, timestamp=i(9)) == codec.encode_arrow(
        table, **{k: int(v) for k, v in args.items()}, timestamp=9)
    assert encode_marker("abort", producer_id=i(7), producer_epoch=np.int16(1), base_offset=i(4), timestamp=i(9),
                         coordinator_epoch=np.int32(2)) == encode_marker(
        "abort", producer_id=7, producer_epoch=1, base_offset=4, timestamp=9, coordinator_epoch=2)  # fmt: skip
    for name in ("base_offset", "producer_id", "producer_epoch", "base_sequence", "partition_leader_epoch",
                 "delete_horizon_ms"):  # fmt: skip
        with pytest.raises(InvalidAppendError, match=name):
            codec.BatchBuilder(**{name: True})
    with pytest.raises(TypeError, match="compression_level"):
        codec.BatchBuilder(compression="gzip", compression_level=True)
    for kw in ({"timestamp": True}, {"timestamp": 1, "offset": True}):
        with pytest.raises(TypeError):
            codec.BatchBuilder().append(b"v", **kw)
    with pytest.raises(TypeError, match="timestamp"):
        encode_marker("abort", producer_id=7, producer_epoch=0, base_offset=4, timestamp=1.5)
    with pytest.raises(OverflowError, match="timestamp"):
        encode_marker("abort", producer_id=7, producer_epoch=0, base_offset=4, timestamp=1 << 63)
    with pytest.raises(InvalidAppendError, match="negative timestamp"):
        encode_marker("abort", producer_id=7, producer_epoch=0, base_offset=4, timestamp=-5)
    for good in (np.int64(1), np.uint64(1), _Small.ONE):
        # (a fixed timestamp: without one both calls stamp the clock, which may tick between them)
        assert codec.encode_arrow(table, records_per_batch=good, timestamp=9) == codec.encode_arrow(
            table, records_per_batch=1, timestamp=9)  # fmt: skip
    for bad in (True, np.bool_(True), 5.0, 1 << 63, 0):
        with pytest.raises(InvalidAppendError, match="records_per_batch"):
            codec.encode_arrow(table, records_per_batch=bad)
    with pytest.raises(InvalidAppendError, match="C-contiguous"):  # numpy refuses with a ValueError of its own
        codec.BatchBuilder().append(np.arange(10, dtype=np.uint8)[::2], timestamp=1)


def test_log_append_time_follows_the_int64_rule(codec):
    with pytest.raises(OverflowError, match="log_append_time"):
        codec.BatchBuilder(timestamp_type="log_append_time", log_append_time=1 << 63)
    with pytest.raises(TypeError, match="log_append_time"):
        codec.BatchBuilder(timestamp_type="log_append_time", log_append_time="5")
    b = codec.BatchBuilder(timestamp_type="log_append_time", log_append_time=5)
    b.append(b"v", timestamp=1)
    assert next(iter(codec.iter_batches(b.build()))).max_timestamp == 5


def test_a_missing_timestamp_is_the_wall_clock_in_milliseconds(codec):
    """As Kafka's producer takes System.currentTimeMillis(): a record appended without a timestamp, a
    log-append-time builder without log_append_time, and encode_arrow without timestamps take the time of
    the call in ms since the epoch (the compiled codec reads the clock in C, not through time.time())."""
    import pyarrow as pa

    def now_ms():
        return time.time_ns() // 1_000_000

    before = now_ms()
    b = codec.BatchBuilder()
    b.append(b"a")
    b.append(b"b", timestamp=7)
    b.append(b"c")
    appended = [r.timestamp for r in codec.decode_records(b.build())]
    stamped = codec.BatchBuilder(timestamp_type="log_append_time")
    stamped.append(b"v", timestamp=1)
    log_append = next(iter(codec.iter_batches(stamped.build()))).max_timestamp
    table = codec.encode_arrow(pa.table({"value": [b"x", b"y"]}))
    from_arrow = [r.timestamp for r in codec.decode_records(table)]
    after = now_ms()
    assert appended[1] == 7
    for ts in appended[0::2] + [log_append] + from_arrow:
        assert before <= ts <= after
    assert appended[0] <= appended[2]


def test_timestamp_deltas_wrap_as_java_longs():
    """A timestamp delta past int64 wraps (Java long arithmetic, as MemoryRecordsBuilder writes it): both
    backends write the same bytes, and both read back the timestamps written."""
    top = (1 << 63) - 1
    outs = []
    for backend in ("cython", "python"):
        codec = load_backend(backend)
        b = codec.BatchBuilder()
        b.append(b"a", timestamp=-1)
        b.append(b"b", timestamp=top)
        outs.append(b.build())
    assert outs[0] == outs[1]
    for backend in ("cython", "python"):
        codec = load_backend(backend)
        assert [r.timestamp for r in codec.decode_records(outs[0])] == [-1, top]
        (batch,) = codec.iter_batches(outs[0])
        assert (batch.base_timestamp, batch.max_timestamp) == (-1, top)


# ints of one, two and three 30-bit digits either side of each boundary: the compiled append reads one- and
# two-digit ints from their digits (_c/pyint.h) and the others through CPython
_DIGIT_EDGES = [0, 1, (1 << 30) - 1, 1 << 30, (1 << 31) + 3, (1 << 60) - 1, 1 << 60, (1 << 62) + 5, (1 << 63) - 1]


def test_timestamps_and_offsets_around_digit_boundaries_read_alike():
    """Every timestamp and explicit offset is written as given by both backends, whatever its size as a
    CPython int; negative timestamps other than -1 are refused by both, with the same message."""
    outs = []
    for backend in ("cython", "python"):
        codec = load_backend(backend)
        built = []
        for ts in _DIGIT_EDGES + [-1]:
            b = codec.BatchBuilder()
            b.append(b"v", timestamp=ts)
            built.append(b.build())
            assert [r.timestamp for r in codec.decode_records(built[-1])] == [ts]
        for base in (0, (1 << 30) - 2, (1 << 60) - 2, (1 << 63) - 3):
            b = codec.BatchBuilder(base_offset=base)
            offsets = sorted({base + d for d in (0, 1, 2)} | {e for e in _DIGIT_EDGES if base < e < base + (1 << 31)})
            assert [b.append(b"v", timestamp=5, offset=o) for o in offsets] == offsets
            built.append(b.build())
            assert [r.offset for r in codec.decode_records(built[-1])] == offsets
        messages = []
        for ts in (-2, -(1 << 30), -(1 << 30) - 1, -(1 << 60), -(1 << 63)):
            with pytest.raises(InvalidAppendError, match=f"invalid negative timestamp {ts}") as info:
                codec.BatchBuilder().append(b"v", timestamp=ts)
            messages.append(str(info.value))
        outs.append((built, messages))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("where", ["value", "key", "header value", "header key"])
def test_non_contiguous_buffers_are_refused_clearly(codec, where):
    strided = memoryview(b"abcdef")[::2]
    kw = {"value": b"v", "timestamp": 1}
    if where == "value":
        kw["value"] = strided
    elif where == "key":
        kw["key"] = strided
    elif where == "header value":
        kw["headers"] = [("h", strided)]
    else:
        kw["headers"] = [(strided, b"x")]
    b = codec.BatchBuilder()
    with pytest.raises(InvalidAppendError, match=f"{where} must be a C-contiguous buffer"):
        b.append(kw.pop("value"), **kw)
    assert b.records_count == 0
    b.append(bytes(strided), timestamp=1)  # the copy is taken
    assert codec.decode_records(b.build())[0].value == b"ace"


def test_builder_fields_are_read_only(codec):
    b = codec.BatchBuilder(base_offset=3, producer_id=1, producer_epoch=0, base_sequence=0)
    for name, value in (("base_offset", 100), ("producer_id", -7), ("producer_epoch", 1), ("base_sequence", 5),
                        ("transactional", True), ("partition_leader_epoch", 2), ("log_append_time", 5),
                        ("delete_horizon_ms", 5), ("records_count", 5), ("last_offset", 9)):  # fmt: skip
        with pytest.raises(AttributeError):
            setattr(b, name, value)
    with pytest.raises(AttributeError):
        b.anything = 1
    b.append(b"v", timestamp=1)
    (batch,) = codec.iter_batches(b.build())
    assert (batch.base_offset, batch.producer_id, batch.is_transactional) == (3, 1, False)


def test_append_after_build_is_refused(codec):
    """MemoryRecordsBuilder refuses appends once closed; build() closes ours (and may be called again)."""
    for compression in ("none", "gzip"):
        b = codec.BatchBuilder(compression=compression)
        b.append(b"a", timestamp=1)
        first = b.build()
        with pytest.raises(InvalidAppendError, match="built"):
            b.append(b"b", timestamp=2)
        assert b.records_count == 1
        assert b.build() == first
        assert [(r.offset, r.value) for r in codec.decode_records(b.build())] == [(0, b"a")]
    empty = codec.BatchBuilder()
    assert empty.build() == b""
    with pytest.raises(InvalidAppendError, match="built"):
        empty.append(b"a", timestamp=1)


def test_header_key_that_utf8_cannot_encode_is_an_invalid_append(codec):
    b = codec.BatchBuilder()
    with pytest.raises(InvalidAppendError, match="header key") as ei:
        b.append(b"v", timestamp=1, headers=[("ok", b"1"), ("\ud800", b"x")])
    assert not isinstance(ei.value, UnicodeError)
    assert b.records_count == 0
    # a surrogate escape (what decoding makes of a key that is not UTF-8) is written back as its byte
    b.append(b"v", timestamp=1, headers=[("k\udcff", b"x")])
    (r,) = codec.decode_records(b.build())
    assert r.headers == (("k\udcff", b"x"),)


def test_headers_in_any_accepted_form_write_the_same_record():
    """The compiled builder writes headers passed as a list or tuple of (str or bytes key, bytes or None
    value) tuples straight into the batch, and encodes any other form first: every form of the same headers
    gives the bytes the pure-Python twin writes for them (null, empty and long values, non-ASCII and bytes
    keys, a count past one varint byte)."""
    cy, py = load_backend("cython"), load_backend("python")
    many = [("h%d" % i, b"%d" % i) for i in range(70)]
    cases = [
        [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")],
        [("", b""), ("null", None), ("long", b"x" * 300), ("clé-ü", b"v"), (b"raw\xff", b"w")],
        many,
    ]
    for headers in cases:
        want = None
        forms = [
            lambda: list(headers),
            lambda: tuple(headers),
            lambda: iter(headers),
            lambda: [list(h) for h in headers],
            lambda: [(k, None if v is None else bytearray(v)) for k, v in headers],
            lambda: [(k, None if v is None else memoryview(v)) for k, v in headers],
        ]
        for codec, form in [(py, forms[0])] + [(cy, f) for f in forms]:
            b = codec.BatchBuilder(base_offset=5, producer_id=9, producer_epoch=1, base_sequence=0)
            b.append(b"v1", b"k1", timestamp=1_700_000_000_000, headers=form())
            b.append(b"v2", timestamp=1_700_000_000_001)
            # a key or value that is not bytes (its buffer taken as the record is written)
            b.append(bytearray(b"v3"), memoryview(b"k3"), timestamp=1_700_000_000_002, headers=form())
            out = b.build()
            want = out if want is None else want
            assert out == want
        (r, _, r3) = cy.decode_records(want)
        assert r3.headers == r.headers
        assert r.headers == tuple((k if isinstance(k, str) else k.decode("utf-8", "surrogateescape"), v)
                                  for k, v in headers)  # fmt: skip


def test_header_keys_decode_alike_as_they_change_from_record_to_record():
    """The compiled decoder reuses the str of a header key equal to the one an earlier record of the batch
    had at the same position: keys that change position, length or content, non-ASCII keys, keys that are
    not UTF-8, empty keys and positions past the ones it keeps decode as the pure-Python twin decodes them."""
    cy, py = load_backend("cython"), load_backend("python")
    rows = [
        [("a", b"1"), ("b", b"2")],
        [("b", b"3"), ("a", None)],
        [("a", b"4"), ("b", b"5")],
        [("ab", b"6"), ("", b"")],
        [("clé", b"7"), ("a", b"8")],
        [("clé", b"9"), ("a\udcff", b"10")],
        [("b", b"11")],
        [("h%d" % i, b"%d" % i) for i in range(12)],
        [("h%d" % (11 - i), b"%d" % i) for i in range(12)],
        [("a", b"12"), ("b", b"13")],
    ]
    b = py.BatchBuilder()
    for i, headers in enumerate(rows):
        b.append(b"v%d" % i, timestamp=1, headers=headers)
    batch = b.build()
    got = [r.headers for r in cy.decode_records(batch)]
    assert got == [r.headers for r in py.decode_records(batch)]
    assert got == [tuple(h) for h in rows]
    assert got[0][0][0] is got[2][0][0] is got[9][0][0]  # the same str, decoded once


def test_a_builder_is_not_reinitialised_while_another_thread_builds_it(codec):
    """build() compresses the records without the GIL (the compiled builder straight from its buffer, which
    a second __init__ and appends would move or free under it); __init__ meanwhile raises RuntimeError, and
    the build returns the batch of the records it was given.  The payload is doubled until the build is
    still running when the main thread tries (level 19 takes seconds a few megabytes)."""
    rnd = random.Random(7)
    for size in (1, 2, 4, 8, 16):
        values = [rnd.randbytes(1024).hex().encode() for _ in range(size * 512)]  # size MB
        b = codec.BatchBuilder(compression="zstd", compression_level=19)
        for v in values:
            b.append(v, timestamp=1)
        started, got = threading.Event(), {}

        def build():
            started.set()
            got["out"] = b.build()

        t = threading.Thread(target=build)
        t.start()
        started.wait()
        time.sleep(0.2)
        running = t.is_alive()
        try:
            b.__init__(compression="none")
        except RuntimeError as e:
            assert "build() runs on another thread" in str(e)
            refused = True
        else:
            refused = False
        t.join()
        if refused:
            assert [r.value for r in codec.decode_records(got["out"])] == values
            b.__init__(compression="none")  # and once built, it may be used again
            b.append(b"x")
            assert [r.value for r in codec.decode_records(b.build())] == [b"x"]
            return
        assert not running  # the build was over: try a larger one
    pytest.fail("a 16 MB build at level 19 ended within 0.2 s")
