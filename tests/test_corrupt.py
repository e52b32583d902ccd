"""Bad input: every truncation, bit flips at every byte, and targeted malformed structures.

The rule under test (design.md): every malformed byte string raises a subclass of KafkaTxError that
says where (``.position`` inside the caller's buffer), or decodes cleanly; a truncated final batch is
reported as trailing bytes, not raised; nothing allocates more than the input can justify.
"""

from __future__ import annotations


import gzip
import os
import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
from conftest import load_backend, load_golden
from kafkatx._common import i64
from kafkatx.transactions import encode_marker
from kafkatx.errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressedSizeError,
    DecompressionError,
    InvalidRecordError,
    KafkaTxError,
    UnsupportedCompressionError,
)

T0 = 1_700_000_000_000


# ------------------------------------------------------------------------------------------ inputs
def _built_segment() -> bytes:
    """A segment written by the (reference) pure-Python builder: every codec, headers, producers."""
    py = load_backend("python")
    out = b""
    base = 0
    for i, compression in enumerate(["none", "gzip", "snappy", "lz4", "zstd", "none"]):
        kw = dict(base_offset=base, compression=compression, partition_leader_epoch=3)
        if i % 2:
            kw.update(producer_id=7000 + i, producer_epoch=1, base_sequence=10 * i, transactional=i == 3)
        if i == 4:
            kw.update(timestamp_type="log_append_time", log_append_time=T0 + 999)
        b = py.BatchBuilder(**kw)
        for j in range(3):
            b.append(
                b"value-%d-%d " % (i, j) * (j + 1),
                key=None if j == 1 else b"k%d" % j,
                timestamp=T0 + 10 * i + j,
                headers=[("h%d" % j, b"x" * j), ("n", None)][: j + 1],
                offset=base + 2 * j,  # offset gaps
            )
        out += b.build()
        base += 10
    return out


def _legacy_segment() -> bytes:
    names = ["legacy_v0_none", "legacy_v0_gzip", "legacy_v0_snappy", "legacy_v0_lz4",
             "legacy_v1_none", "legacy_v1_gzip", "legacy_v1_snappy", "legacy_v1_lz4"]  # fmt: skip
    return b"".join(load_golden(n)[0] for n in names)


SEGMENTS = {
    "segment_mixed": lambda: load_golden("segment_mixed")[0],
    "built_all_codecs": _built_segment,
    "legacy_mixed": _legacy_segment,
}


@pytest.fixture(scope="module", params=sorted(SEGMENTS))
def segment(request):
    return request.param, SEGMENTS[request.param]()


# ----------------------------------------------------------------------------------------- helpers
def check_error(err, data, where=""):
    """A raised error is a KafkaTxError whose position, if about the input, lies inside the input."""
    assert isinstance(err, KafkaTxError), f"{where}: {type(err).__name__}: {err}"
    pos = getattr(err, "position", None)
    assert isinstance(pos, int) and not isinstance(pos, bool), f"{where}: position {pos!r} ({err})"
    if "decompressed" not in str(err):
        assert 0 <= pos <= len(data), f"{where}: position {pos} outside [0, {len(data)}] ({err})"


def snapshot_batches(codec, data, verify=True):
    """('ok', batches, valid, trailing) or ('err', exception); anything but KafkaTxError propagates."""
    it = codec.iter_batches(data, verify_crc=verify)
    out = []
    try:
        for b in it:
            out.append((b.position, b.size_in_bytes, b.base_offset, b.last_offset, b.is_control,
                        [_spec.rec_tuple(r) for r in b.records()]))  # fmt: skip
    except KafkaTxError as exc:
        return ("err", exc)
    return ("ok", out, it.valid_bytes, it.trailing_bytes)


def snapshot_records(codec, data, verify=True):
    try:
        out = codec.decode_records(data, verify_crc=verify)
    except KafkaTxError as exc:
        return ("err", exc)
    return ("ok", [_spec.rec_tuple(r) for r in out], out.next_offset, out.valid_bytes, out.trailing_bytes)


def snapshot_arrow(codec, data, verify=True):
    """decode_arrow's outcome in snapshot_records' shape (header keys as Arrow repairs them)."""
    import pyarrow as pa

    try:
        rb = codec.decode_arrow(data, verify_crc=verify)
    except KafkaTxError as exc:
        return ("err", exc)
    rb.validate(full=True)
    col = rb.column
    ts = [-1 if t is None else t for t in col("timestamp").cast(pa.int64()).to_pylist()]
    headers = [tuple((h["key"], h["value"]) for h in hs) for hs in col("headers").to_pylist()]
    rows = list(zip(col("offset").to_pylist(), ts, col("key").to_pylist(), col("value").to_pylist(), headers,
                    col("sequence").to_pylist()))  # fmt: skip
    meta = rb.schema.metadata
    nxt = meta[b"next_offset"].decode()
    return ("ok", rows, None if nxt == "None" else int(nxt), int(meta[b"valid_bytes"]), int(meta[b"trailing_bytes"]))


def _arrow_key(k):
    return k.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def check_arrow_agrees(codec, data, verify, where):
    """decode_arrow (the GIL-free column path) reaches decode_records' verdict: the same rows and
    metadata, or the same error class at the same position."""
    recs = snapshot_records(codec, data, verify)
    arrow = snapshot_arrow(codec, data, verify)
    assert recs[0] == arrow[0], f"{where}: decode_records {recs[0]} ({recs[1]!r}), decode_arrow {arrow[0]}"
    if recs[0] == "err":
        assert type(arrow[1]) is type(recs[1]), f"{where}: {arrow[1]!r} vs {recs[1]!r}"
        assert arrow[1].position == recs[1].position, f"{where}: {arrow[1]!r} vs {recs[1]!r}"
        return
    want = [(o, t, k, v, tuple((_arrow_key(hk), hv) for hk, hv in h), seq) for o, t, k, v, h, seq in recs[1]]
    assert arrow[1:] == (want, *recs[2:]), where


def _mutated(data, pos, bit):
    b = bytearray(data)
    b[pos] ^= 1 << bit
    return bytes(b)


def _crc_covered(data):
    """Positions covered by a batch's checksum (v2: bytes 21..end; legacy: magic..end)."""
    covered = set()
    for pos, size in _spec.split_batches(data):
        start = pos + (21 if data[pos + 16] >= 2 else 16)
        covered.update(range(start, pos + size))
    return covered


def consumer_view(batches):
    """The data records Kafka's consumer returns from these batches: control records never, and records
    below the next fetch offset (a batch whose offsets were already passed) skipped."""
    out, next_offset = [], None
    for b in batches:
        if not b[4]:
            out += [r for r in b[5] if next_offset is None or r[0] >= next_offset]
        next_offset = b[3] + 1 if next_offset is None else max(next_offset, b[3] + 1)
    return out


# ------------------------------------------------------------------------------ every truncation
def test_every_truncation(codec, segment):
    """A prefix decodes to exactly the complete batches in it; the rest is trailing bytes, no error.

    Stricter than "stop cleanly or raise a KafkaTxError": a prefix of valid data is what a Fetch response
    cut at max.partition.fetch.bytes looks like, and Kafka's reader never raises on it (every size field
    it reads is intact, so rules 1-4 of kafka-format.md section 1 only ever stop).
    """
    name, data = segment
    full = snapshot_batches(codec, data)
    assert full[0] == "ok" and full[3] == 0, name
    batches = full[1]
    assert [(b[0], b[1]) for b in batches] == _spec.split_batches(data)
    full_records = snapshot_records(codec, data)
    assert full_records[0] == "ok"
    assert full_records[1] == consumer_view(batches)
    for cut in range(len(data)):
        prefix = data[:cut]
        complete = [b for b in batches if b[0] + b[1] <= cut]
        valid = complete[-1][0] + complete[-1][1] if complete else 0
        got = snapshot_batches(codec, prefix)
        if got[0] == "err":
            pytest.fail(f"{name}: truncation at {cut} raised {type(got[1]).__name__}: {got[1]}")
        assert got == ("ok", complete, valid, cut - valid), f"{name}: truncation at {cut}"
        recs = snapshot_records(codec, prefix)
        if recs[0] == "err":
            pytest.fail(f"{name}: decode_records truncated at {cut} raised {recs[1]!r}")
        check_arrow_agrees(codec, prefix, True, f"{name}: truncation at {cut}")
        want = consumer_view(complete)
        assert recs[1] == want, f"{name}: truncation at {cut}"
        assert recs[2] == (max(b[3] for b in complete) + 1 if complete else None)
        assert (recs[3], recs[4]) == (valid, cut - valid)


# ------------------------------------------------------------------- header scan of a file (pread)
def _scan_outcome(fn):
    try:
        return ("ok", {k: (list(v) if not isinstance(v, int) else v) for k, v in fn().items()})
    except KafkaTxError as exc:
        return ("err", type(exc), str(exc), getattr(exc, "position", None))


def test_file_header_scan_equals_the_buffer_scan(codec, segment, tmp_path):
    """scan_batches_fd (one pread per batch header, what the log reader scans segments with) reaches
    scan_batches' verdict on every range of a segment file: every truncation (from the start and into
    the middle), and a flip of every bit of the headers' length and magic fields and of a byte in every
    other header field: the same columns, or the same error class, message and position."""
    name, data = segment
    path = tmp_path / "seg.log"
    bounds = [(p, p + n) for p, n in _spec.split_batches(data)]
    cases = [(data, 0, cut) for cut in range(len(data) + 1)]
    cases += [(data, a, len(data)) for a, _b in bounds] + [(data, a + 1, b + 30) for a, b in bounds]
    for a, _b in bounds:
        for off in [*range(8, 12), 16, 17, 21, 23, 27, 36, 43, 51, 53, 57]:
            for bit in (0, 3, 7):
                if a + off < len(data):
                    cases.append((_mutated(data, a + off, bit), 0, len(data)))
    current = None
    fd = None
    try:
        for buf, start, end in cases:
            if buf is not current:
                if fd is not None:
                    os.close(fd)
                path.write_bytes(buf)
                fd = os.open(path, os.O_RDONLY)
                current = buf
            end = min(end, len(buf))
            want = _scan_outcome(lambda: codec.scan_batches(buf[start:end]))
            got = _scan_outcome(lambda: codec.scan_batches_fd(fd, start, end))
            assert got == want, f"{name}: bytes [{start}, {end})"
    finally:
        if fd is not None:
            os.close(fd)


def test_file_header_scan_across_read_windows(codec, tmp_path):
    """scan_batches_fd reads windows of several small batches per pread and peeks at the headers of large
    ones: batches of 60 bytes to 40 KiB, markers among them, put every header at many places relative to
    the window edges; every range scanned from the file equals the buffer scan (all columns, markers'
    types included)."""
    sizes = [60 + (i * 7919) % 400 if i % 5 else 20_000 + (i * 104_729) % 20_000 for i in range(220)]
    parts = []
    base = 0
    for i, size in enumerate(sizes):
        if i % 9 == 4:
            parts.append(encode_marker("abort" if i % 2 else "commit", producer_id=9, producer_epoch=0,
                                       base_offset=base, timestamp=T0))  # fmt: skip
            base += 1
            continue
        b = codec.BatchBuilder(base_offset=base, producer_id=9, producer_epoch=0, base_sequence=base,
                               transactional=True)  # fmt: skip
        b.append(_spec.lcg_bytes(size, i), key=b"k", timestamp=T0)
        parts.append(b.build())
        base += 1
    data = b"".join(parts)
    assert len(data) > 8 * 65536
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    starts = [0, *(sum(len(p) for p in parts[:k]) for k in (1, 37, 100))]
    with open(path, "rb") as fh:
        for start in starts:
            for end in (len(data), len(data) - 1, start + 65536 + 13, start + 3 * 65536 - 40):
                end = min(end, len(data))
                for verify in (False, True):
                    want = _scan_outcome(lambda: codec.scan_batches(data[start:end], verify_control=verify))
                    got = _scan_outcome(lambda: codec.scan_batches_fd(fh.fileno(), start, end, verify_control=verify))
                    assert got == want, (start, end, verify)
                    if start == 0 and end == len(data):
                        types = got[1]["control_type"]
                        assert sorted(set(types)) == [-1, 0, 1] and len(got[1]["position"]) == len(parts)


def test_file_header_scan_of_a_file_that_shrank(codec, tmp_path):
    """A range past the end of the file (cut after the caller sized it) scans what is there; a bad file
    descriptor is an OSError; a bad range a ValueError."""
    data = _built_segment()
    path = tmp_path / "seg.log"
    path.write_bytes(data[: len(data) // 2])
    with open(path, "rb") as fh:
        got = codec.scan_batches_fd(fh.fileno(), 0, len(data))
        want = codec.scan_batches(data[: len(data) // 2])
        assert list(got["position"]) == list(want["position"])
        assert got["valid_bytes"] == want["valid_bytes"]
        with pytest.raises(ValueError):
            codec.scan_batches_fd(fh.fileno(), 10, 5)
    with pytest.raises(OSError):
        codec.scan_batches_fd(fd_closed(), 0, 100)


def fd_closed() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


# ----------------------------------------------------------------------------- every bit flip
def _flip_sweep(codec, name, data, bits):
    covered = _crc_covered(data)
    for pos in range(len(data)):
        for bit in bits:
            bad = _mutated(data, pos, bit)
            where = f"{name}: bit {bit} of byte {pos}"
            for verify in (True, False):
                got = snapshot_batches(codec, bad, verify)  # anything but KafkaTxError escapes
                if got[0] == "err":
                    check_error(got[1], bad, where)
                elif verify:
                    # CRC-32C/CRC-32 detect every single-bit error: a covered flip can never decode
                    assert pos not in covered, f"{where}: flip in a checksummed byte decoded cleanly"
                got = snapshot_records(codec, bad, verify)
                if got[0] == "err":
                    check_error(got[1], bad, where)
                elif verify:
                    assert pos not in covered, f"{where}: decode_records accepted a checksummed flip"
                check_arrow_agrees(codec, bad, verify, where)


@pytest.mark.slow
def test_every_bit_flip(codec, segment):
    name, data = segment
    _flip_sweep(codec, name, data, bits=(0, 7))


def test_bit_flips_in_headers(codec):
    """Quick subset: every bit of every batch header of segment_mixed."""
    data = load_golden("segment_mixed")[0]
    for pos, _size in _spec.split_batches(data):
        for off in range(61):
            for bit in range(8):
                bad = _mutated(data, pos + off, bit)
                for verify in (True, False):
                    got = snapshot_batches(codec, bad, verify)
                    if got[0] == "err":
                        check_error(got[1], bad, f"bit {bit} of byte {pos + off}")
                    elif verify:
                        assert off < 21, f"header byte {off} of batch at {pos} flipped, still valid"


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.binary(max_size=300),
    count=st.integers(-2, 40),
    codec_id=st.integers(0, 4),
    compress=st.booleans(),
)
def test_record_parser_on_garbage(codec, records, count, codec_id, compress):
    """A valid header (CRC fixed) around garbage: only KafkaTxError or a clean decode."""
    payload = _compress(codec_id, records) if compress and codec_id else records
    data = _spec.v2_batch(payload, count=count, attributes=codec_id)
    for verify in (True, False):
        got = snapshot_batches(codec, data, verify)
        if got[0] == "err":
            check_error(got[1], data)
        else:
            assert len(got[1]) == 1 and len(got[1][0][5]) == max(count, 0)
    try:
        batches = list(codec.iter_batches(data, verify_crc=False))
    except KafkaTxError:  # a header that cannot make a batch (checked above): no records to summarise
        batches = []
    for batch in batches:
        summary_agrees_with_records(batch)


def summary_agrees_with_records(batch):
    """record_summary raises what records() raises (type, message, position), or summarises its records."""
    try:
        records = batch.records()
    except KafkaTxError as exc:
        with pytest.raises(type(exc)) as ei:
            batch.record_summary()
        assert (str(ei.value), ei.value.position) == (str(exc), exc.position)
        return
    stamps = [r.timestamp for r in records if r.timestamp != -1]
    base = batch.base_offset
    in_sequence = [r.offset for r in records] == [i64(base + i) for i in range(len(records))]  # (Java's long)
    assert tuple(batch.record_summary()) == (len(records), min(stamps, default=-1), max(stamps, default=-1),
                                             in_sequence)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    records=st.binary(max_size=200),
    count=st.integers(0, 20),
    codec_id=st.integers(0, 4),
    compress=st.booleans(),
    cut=st.integers(0, 400),
)
def test_backends_agree_on_garbage(records, count, codec_id, compress, cut):
    """Both backends give the same records, or the same exception type, on the same garbage."""
    payload = _compress(codec_id, records) if compress and codec_id else records
    data = _spec.v2_batch(payload, count=count, attributes=codec_id)
    data = data + data[:cut]
    outcomes = []
    for backend in ("cython", "python"):
        got = snapshot_batches(load_backend(backend), data, verify=False)
        outcomes.append(got if got[0] == "ok" else ("err", type(got[1]).__name__))
    assert outcomes[0] == outcomes[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_backends_agree_on_bit_flips(name):
    """Cython and pure Python give the same records, or the same exception type, for every flip."""
    data = SEGMENTS[name]()
    cy, py = load_backend("cython"), load_backend("python")

    def outcome(mod, bad, verify, fn):
        try:
            got = fn(mod, bad, verify)
        except Exception as e:  # noqa: BLE001 - a non-KafkaTxError is itself a difference worth showing
            return ("escaped", type(e).__name__, str(e))
        return got if got[0] == "ok" else ("err", type(got[1]).__name__)

    for pos in range(len(data)):
        for bit in (0, 7):
            bad = _mutated(data, pos, bit)
            for verify in (True, False):
                for fn in (snapshot_batches, snapshot_records):
                    a, b = outcome(cy, bad, verify, fn), outcome(py, bad, verify, fn)
                    assert a == b, f"{name}: bit {bit} of byte {pos}, verify={verify}, {fn.__name__}"


def _compress(codec_id, raw):
    if codec_id == 1:
        return gzip.compress(raw, mtime=0)
    if codec_id == 2:
        return bytes(cramjam.snappy.compress_raw(raw))
    if codec_id == 3:
        return lz4.frame.compress(raw, block_linked=False, store_size=False)
    if codec_id == 4:
        return zstandard.ZstdCompressor().compress(raw)
    return raw


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    compression=st.sampled_from(["lz4", "zstd"]),
    values=st.lists(st.binary(max_size=3000), min_size=1, max_size=12),
    edits=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 40),
)
def test_arrow_on_forged_frame_headers(codec, compression, values, edits, cut):
    """decode_arrow sizes its columns from the lz4/zstd frame and block headers before it inflates
    anything: with bytes of those headers overwritten or the payload cut short (the CRC is not checked,
    so the payload is inflated), it reaches decode_records' verdict, rows or the same error."""
    b = codec.BatchBuilder(base_offset=5, compression=compression)
    for i, v in enumerate(values):
        b.append(v, key=b"k%d" % i, timestamp=1_700_000_000_000 + i)
    data = bytearray(b.build())
    for off, byte in edits:
        data[61 + off % (len(data) - 61)] = byte
    del data[max(len(data) - cut, 61) :]  # the payload cut short inside a complete batch
    data[8:12] = struct.pack(">i", len(data) - 12)
    data = bytes(data)
    check_arrow_agrees(codec, data, False, f"{compression} {edits} cut {cut}")


# ---------------------------------------------------------------------------- targeted structures
PREFIX = _spec.v2_batch(_spec.raw_record(value=b"ok"), count=1, base_offset=0)  # a valid batch first


def _expect(codec, data, exc_type, *, batch_pos=None, base_offset=None, verify=True):
    """``data`` (after PREFIX) must raise exc_type; the first batch still decodes; position checked."""
    with pytest.raises(exc_type) as ei:
        for b in codec.iter_batches(data, verify_crc=verify):
            b.records()
    err = ei.value
    check_error(err, data)
    if batch_pos is not None:
        assert batch_pos <= err.position <= len(data), (err.position, str(err))
    if base_offset is not None and getattr(err, "base_offset", None) is not None:
        assert err.base_offset == base_offset
    with pytest.raises(exc_type):
        codec.decode_records(data, verify_crc=verify)
    first = next(iter(codec.iter_batches(data, verify_crc=verify)))
    assert [r.value for r in first.records()] == [b"ok"]
    return err


def _bad_batch(records_bytes, count=1, base_offset=100, **kw):
    return PREFIX + _spec.v2_batch(records_bytes, count=count, base_offset=base_offset, **kw)


def test_varint_fifth_byte_msb(codec):
    # record length varint: five bytes all with the continuation bit
    data = _bad_batch(b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 10)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)
    # the offset delta varint (inside an otherwise sane record)
    body = b"\x00" + b"\x00" + b"\x80\x80\x80\x80\x80\x00" + b"\x01\x01\x00"
    data = _bad_batch(_spec.zigzag(len(body)) + body)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


@pytest.mark.parametrize("flaw", ["record_length", "offset_varint", "header_key"])
def test_bulk_input_errors_raise_from_the_gil_free_loop(codec, flaw):
    """Past NOGIL_THRESHOLD the column decoder runs its batch loop without the GIL; an error deep in it
    (a bad record after megabytes of good ones, CRC intact) still raises the codec's error, at the same
    position as decode_records, and leaves nothing behind."""
    good = b"".join(
        _spec.v2_batch(b"".join(_spec.raw_record(off_delta=j, value=b"v" * 200) for j in range(50)), count=50,
                       base_offset=50 * i, last_offset_delta=49)
        for i in range(40)
    )  # fmt: skip
    assert len(good) > 16384 * 4
    if flaw == "record_length":
        bad = _spec.zigzag(2**20) + b"\x00" * 8
    elif flaw == "offset_varint":
        body = b"\x00\x00\x80\x80\x80\x80\x80\x00\x01\x01\x00"
        bad = _spec.zigzag(len(body)) + body
    else:  # header key longer than the record
        body = b"\x00\x00\x00\x01\x01\x02" + _spec.zigzag(100) + b"k"
        bad = _spec.zigzag(len(body)) + body
    data = good + _spec.v2_batch(bad, count=1, base_offset=2000)
    with pytest.raises(InvalidRecordError) as want:
        codec.decode_records(data)
    with pytest.raises(InvalidRecordError) as got:
        codec.decode_arrow(data)
    assert got.value.position == want.value.position >= len(good)
    assert got.value.base_offset == 2000
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    with pytest.raises(InvalidRecordError):
        f.feed_arrow(data, binary_view=True)


def test_varint_five_bytes_ok(codec):
    """A maximal but legal 5-byte varint (offset delta INT_MAX) decodes."""
    rec = _spec.raw_record(off_delta=2**31 - 1, value=b"max")
    assert len(_spec.zigzag(2**31 - 1)) == 5
    data = _spec.v2_batch(rec, count=1, base_offset=10, last_offset_delta=2**31 - 1)
    (r,) = codec.decode_records(data)
    assert (r.offset, r.value) == (10 + 2**31 - 1, b"max")


def test_varlong_over_ten_bytes(codec):
    body = b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00" + b"\x01\x01\x00"
    data = _bad_batch(_spec.zigzag(len(body)) + body)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_varlong_ten_bytes_ok(codec):
    rec = _spec.raw_record(ts_delta=-(2**63), value=b"min")
    assert len(_spec.zigzag(-(2**63))) == 10
    data = _spec.v2_batch(rec, count=1, base_timestamp=0)
    (r,) = list(codec.iter_batches(data))[0].records()
    assert r.value == b"min" and r.timestamp == -(2**63)


def test_record_length_past_batch(codec):
    rec = _spec.raw_record(value=b"abc")
    data = _bad_batch(_spec.zigzag(len(rec) + 50) + rec[1:])
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_record_length_shorter_than_fields(codec):
    rec = _spec.raw_record(value=b"abcdef")
    data = _bad_batch(_spec.raw_record(value=b"abcdef", length=len(rec) - 1 - 3) + b"\x00" * 3)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_zero_record_length(codec):
    """A record whose length is 0 cannot even hold its attributes byte."""
    data = _bad_batch(_spec.zigzag(0))
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_negative_record_length(codec):
    data = _bad_batch(_spec.zigzag(-5) + b"\x00" * 12)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_negative_header_count(codec):
    body = b"\x00\x00\x00" + b"\x01" + b"\x02v" + _spec.zigzag(-2)
    data = _bad_batch(_spec.zigzag(len(body)) + body)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_header_count_beyond_record(codec):
    body = b"\x00\x00\x00" + b"\x01" + b"\x02v" + _spec.zigzag(2**30)
    data = _bad_batch(_spec.zigzag(len(body)) + body)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_negative_header_key_length(codec):
    body = b"\x00\x00\x00" + b"\x01" + b"\x02v" + _spec.zigzag(1) + _spec.zigzag(-1) + _spec.zigzag(-1)
    data = _bad_batch(_spec.zigzag(len(body)) + body)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_negative_lengths_mean_null(codec):
    """Java: any negative key/value/header-value length is null (not only -1)."""
    body = b"\x00\x00\x00" + _spec.zigzag(-7) + _spec.zigzag(-100) + _spec.zigzag(1) + b"\x04hk" + _spec.zigzag(-3)
    data = _spec.v2_batch(_spec.zigzag(len(body)) + body, count=1)
    (r,) = codec.decode_records(data)
    assert (r.key, r.value, r.headers) == (None, None, (("hk", None),))


@pytest.mark.parametrize("field", ["key", "value", "header_key", "header_value"])
def test_field_length_past_record(codec, field):
    parts = {"key": b"\x02k", "value": b"\x02v", "header_key": b"\x02h", "header_value": b"\x02x"}
    parts[field] = _spec.zigzag(40) + b"abc"
    body = b"\x00\x00\x00" + parts["key"] + parts["value"] + b"\x02" + parts["header_key"] + parts["header_value"]
    data = _bad_batch(_spec.zigzag(len(body)) + body + b"\x00" * 60)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("delta", [+1, -1, +1000])
def test_records_count_mismatch(codec, compression, delta):
    py = load_backend("python")
    b = py.BatchBuilder(base_offset=100, compression=compression)
    for i in range(5):
        b.append(b"v%d" % i * 30, timestamp=T0 + i)
    batch = bytearray(b.build())
    struct.pack_into(">i", batch, 57, 5 + delta)
    data = PREFIX + _spec.fix_crc(batch)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_negative_records_count(codec):
    data = _bad_batch(_spec.raw_record(), count=-1)
    _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=100)


def test_count_zero_batch_ignores_payload(codec):
    """A count-0 batch is valid and its payload is never looked at (even if garbage, even compressed)."""
    for attrs in (0, 4, 0x30):
        data = _spec.v2_batch(b"\xff" * 20, count=0, attributes=attrs, last_offset_delta=4, base_offset=9)
        (batch,) = list(codec.iter_batches(data))
        assert batch.records() == [] and batch.next_offset == 14
        out = codec.decode_records(data)
        assert list(out) == [] and out.next_offset == 14


@pytest.mark.parametrize("size", [-1, 0, 5, 13])
def test_batch_length_below_14(codec, size):
    for tail in (b"", b"\x00" * 100):
        entry = struct.pack(">qi", 0, size) + b"\x00\x00\x00\x00\x02" + b"\x00" * 8 + tail
        data = PREFIX + entry
        with pytest.raises(CorruptRecordError) as ei:
            list(codec.iter_batches(data))
        check_error(ei.value, data)
        assert ei.value.position == len(PREFIX)
    # only the 12-byte entry header is there: still an error (Kafka checks size before magic)
    data = PREFIX + struct.pack(">qi", 0, size)
    with pytest.raises(CorruptRecordError):
        list(codec.iter_batches(data))


@pytest.mark.parametrize("size", [14, 20, 48])
def test_batch_length_too_small_for_v2(codec, size):
    entry = struct.pack(">qii", 5, size, -1) + b"\x02" + b"\x00" * (size - 5)
    assert len(entry) == 12 + size
    for data in (PREFIX + entry, PREFIX + entry + b"\x00" * 100, PREFIX + entry + PREFIX):
        with pytest.raises(CorruptRecordError) as ei:
            for b in codec.iter_batches(data, verify_crc=False):
                b.records()
        check_error(ei.value, data)
        assert len(PREFIX) <= ei.value.position <= len(PREFIX) + 17


@pytest.mark.parametrize("magic", [3, 4, 127, -1, -128])
def test_bad_magic(codec, magic):
    entry = bytearray(PREFIX)
    entry[16] = magic & 0xFF
    data = PREFIX + bytes(entry)
    with pytest.raises(CorruptRecordError) as ei:
        list(codec.iter_batches(data))
    check_error(ei.value, data)
    assert ei.value.position in (len(PREFIX), len(PREFIX) + 16)
    assert "magic" in str(ei.value).lower()


@pytest.mark.parametrize("cid", [5, 6, 7])
def test_unknown_compression_id(codec, cid):
    rec = _spec.raw_record()
    data = _bad_batch(rec, attributes=cid)
    for verify in (True, False):
        with pytest.raises(UnsupportedCompressionError) as ei:
            for b in codec.iter_batches(data, verify_crc=verify):
                b.records()
        check_error(ei.value, data)
        assert len(PREFIX) <= ei.value.position < len(data)
        with pytest.raises(UnsupportedCompressionError):
            codec.decode_records(data, verify_crc=verify)


@pytest.mark.parametrize("cid", [5, 6, 7])
def test_unknown_legacy_compression_id(codec, cid):
    entry = bytearray(load_golden("legacy_v1_none")[0][:40])
    entry[17] = cid
    entry[12:16] = struct.pack(">I", zlib.crc32(bytes(entry[16:])) & 0xFFFFFFFF)
    data = PREFIX + bytes(entry)
    with pytest.raises(UnsupportedCompressionError) as ei:
        for b in codec.iter_batches(data):
            b.records()
    check_error(ei.value, data)


def test_attribute_high_byte_ignored(codec):
    """Bits 8-15 of attributes are ignored on read (they are CRC-covered, so fix the CRC)."""
    plain = bytearray(load_golden("transactional_none")[0])
    want = [_spec.rec_tuple(r) for r in codec.decode_records(bytes(plain))]
    plain[21] = 0xFF
    data = _spec.fix_crc(plain)
    (batch,) = list(codec.iter_batches(data))
    assert batch.compression == "none" and batch.is_transactional and not batch.is_control
    assert [_spec.rec_tuple(r) for r in batch.records()] == want


def test_legacy_v0_wrapper_offset_far_from_inner_offsets(codec):
    """v0 inner offsets are absolute; the wrapper offset (the batch's last offset) is not CRC-covered.

    Kafka reads such an entry (baseOffset = first inner offset, lastOffset = wrapper offset), so must we,
    whatever the distance between the two (it does not fit an int32 here).
    """
    data = bytearray(load_golden("legacy_v0_gzip")[0])
    struct.pack_into(">q", data, 0, 1 << 40)
    (batch,) = list(codec.iter_batches(bytes(data)))
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (10, 1 << 40, (1 << 40) + 1)
    assert [r.offset for r in batch.records()] == [10, 11, 12]
    out = codec.decode_records(bytes(data))
    assert [r.offset for r in out] == [10, 11, 12] and out.next_offset == (1 << 40) + 1


def _java_increment_sequence(seq, inc):
    """DefaultRecordBatch.incrementSequence with Java's wrapping int arithmetic."""

    def i32(x):
        return (x + (1 << 31)) % (1 << 32) - (1 << 31)

    if seq > i32(2**31 - 1 - inc):
        return i32(inc - i32(2**31 - 1 - seq) - 1)
    return i32(seq + inc)


@pytest.mark.parametrize("base_sequence", [0, 5, 30, 2**31 - 1])
def test_negative_offset_delta_sequence_matches_java(codec, base_sequence):
    """Offsets are not checked on read: a record below the base offset still gets Java's sequence."""
    recs = _spec.raw_record(off_delta=-1, value=b"a") + _spec.raw_record(off_delta=3, value=b"b")
    data = _spec.v2_batch(recs, count=2, base_offset=50, last_offset_delta=3, producer_id=9,
                          producer_epoch=0, base_sequence=base_sequence)  # fmt: skip
    (batch,) = list(codec.iter_batches(data))
    got = [(r.offset, r.sequence) for r in batch.records()]
    assert got == [
        (49, _java_increment_sequence(base_sequence, -1)),
        (53, _java_increment_sequence(base_sequence, 3)),
    ]
    assert _java_increment_sequence(2**31 - 1, 1) == 0  # sanity: the emulation wraps like Kafka


# -------------------------------------------------------------------------------- no huge allocation
def _peak_alloc(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


HUGE = [
    ("batch_length", lambda: struct.pack(">qii", 0, 2**31 - 1, -1) + b"\x02" + b"\x00" * 100, None),
    ("record_length", lambda: _bad_batch(_spec.zigzag(2**30) + b"\x00" * 20), InvalidRecordError),
    ("key_length", lambda: _bad_batch(_spec.zigzag(30) + b"\x00\x00\x00" + _spec.zigzag(2**30) + b"\x00" * 24),
     InvalidRecordError),
    ("header_count", lambda: _bad_batch(_spec.zigzag(12) + b"\x00\x00\x00\x01\x01" + _spec.zigzag(2**30) + b"\x00" * 4),
     InvalidRecordError),
    ("records_count", lambda: _bad_batch(_spec.raw_record(), count=2**31 - 1), InvalidRecordError),
    ("records_count_zstd", lambda: _bad_batch(zstandard.ZstdCompressor().compress(_spec.raw_record()),
                                              count=2**31 - 1, attributes=4), InvalidRecordError),
    ("raw_snappy_length", lambda: _bad_batch(b"\xff\xff\xff\xff\x0f" + b"\x00" * 10, attributes=2),
     (DecompressedSizeError, DecompressionError)),
    ("xerial_chunk_length", lambda: _bad_batch(b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 2**31 - 1) + b"\x00" * 8,
                                               attributes=2), DecompressionError),
    ("lz4_block_length", lambda: _bad_batch(lz4.frame.compress(b"x", block_linked=False, store_size=False)[:7]
                                            + struct.pack("<I", 0x7FFFFFF0) + b"\x00" * 8, attributes=3),
     DecompressionError),
    ("zstd_content_size", lambda: _bad_batch(_zstd_lying_content_size(), attributes=4),
     (DecompressionError, DecompressedSizeError)),
]  # fmt: skip


def _zstd_lying_content_size():
    """A zstd frame header declaring a 1 TiB content size, followed by one tiny raw block."""
    fhd = 0xC0  # 8-byte content size, not single segment
    window = 0x00
    return b"\x28\xb5\x2f\xfd" + bytes([fhd, window]) + struct.pack("<Q", 1 << 40) + b"\x09\x00\x00x"


@pytest.mark.parametrize("name,make,exc", HUGE, ids=[h[0] for h in HUGE])
def test_huge_declared_lengths_do_not_allocate(codec, name, make, exc):
    data = make()
    state = {}

    def run():
        try:
            state["out"] = snapshot_batches(codec, data)
        except Exception as e:  # noqa: BLE001 - reported below
            state["out"] = ("escaped", e)

    peak = _peak_alloc(run)
    out = state["out"]
    assert out[0] != "escaped", f"{name}: {out[1]!r}"
    if exc is None:  # a truncated entry: stop cleanly
        assert out[0] == "ok" and out[1] == [] and out[3] == len(data)
    else:
        assert out[0] == "err" and isinstance(out[1], exc), f"{name}: {out}"
        check_error(out[1], data, name)
    assert peak < 1 << 20, f"{name}: peak allocation {peak} bytes for a {len(data)}-byte input"


@pytest.mark.parametrize("name,make,exc", HUGE, ids=[h[0] for h in HUGE])
def test_huge_declared_lengths_do_not_allocate_arrow(codec, name, make, exc):
    """decode_arrow sizes its columns from the batch headers: a forged count or length must not reserve
    what it claims (measured on a pyarrow pool that counts only this call's allocations)."""
    import pyarrow as pa

    data = make()
    old = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(old)
    _ARROW_POOLS.append(pool)  # buffers may outlive the test (in a kept traceback): so must their pool
    pa.set_memory_pool(pool)
    try:
        if exc is None:
            rb = codec.decode_arrow(data)
            assert rb.num_rows == 0 and rb.schema.metadata[b"trailing_bytes"] == str(len(data)).encode()
        else:
            with pytest.raises(exc) as err:
                codec.decode_arrow(data)
            check_error(err.value, data, name)
    finally:
        pa.set_memory_pool(old)
    assert pool.max_memory() < 1 << 20, f"{name}: {pool.max_memory()} bytes of Arrow buffers"


_ARROW_POOLS: list = []


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_small_batches_allocate_little(codec, compression):
    """Decoding a ~100-byte batch with the default max_decompressed_size must not reserve that limit."""
    py = load_backend("python")
    b = py.BatchBuilder(compression=compression)
    for i in range(3):
        b.append(b"small value %d" % i, key=b"k", timestamp=T0 + i)
    data = b.build()
    assert len(data) < 200
    state = {}
    peak = _peak_alloc(lambda: state.update(out=codec.decode_records(data, verify_crc=False)))
    assert [r.value for r in state["out"]] == [b"small value %d" % i for i in range(3)]
    assert peak < 1 << 20, f"{compression}: peak allocation {peak} bytes to decode a {len(data)}-byte batch"


# ------------------------------------------------------------------------------------ zip bombs
BOMB_SIZE = 24 << 20
LIMIT = 1 << 20


def _bomb_payload(compression, raw):
    if compression == "gzip":
        return gzip.compress(raw, compresslevel=9, mtime=0)
    if compression == "snappy-xerial":  # as snappy-java writes it: 32 KiB chunks
        out = [b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)]
        for i in range(0, len(raw), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(raw[i : i + 32 * 1024]))
            out.append(struct.pack(">i", len(block)) + block)
        return b"".join(out)
    if compression == "snappy-raw":
        return bytes(cramjam.snappy.compress_raw(raw))
    if compression == "lz4":
        return lz4.frame.compress(raw, block_linked=False, store_size=False)
    if compression == "zstd":
        return zstandard.ZstdCompressor(write_content_size=False).compress(raw)
    if compression == "zstd-sized":
        return zstandard.ZstdCompressor(write_content_size=True).compress(raw)
    raise AssertionError(compression)


BOMBS = ["gzip", "snappy-xerial", "snappy-raw", "lz4", "zstd", "zstd-sized"]


@pytest.fixture(scope="module")
def bomb_records():
    return _spec.raw_record(value=bytes(BOMB_SIZE))


@pytest.mark.parametrize("compression", BOMBS)
def test_zip_bomb(codec, compression, bomb_records):
    cid = _spec.CODEC_IDS[compression.split("-")[0]]
    payload = _bomb_payload(compression, bomb_records)
    assert len(payload) < BOMB_SIZE // 8
    data = PREFIX + _spec.v2_batch(payload, count=1, attributes=cid, base_offset=100)
    state = {}

    def run():
        try:  # no CRC check here: tracemalloc makes the pure-Python CRC loop very slow
            codec.decode_records(data, max_decompressed_size=LIMIT, verify_crc=False)
        except DecompressedSizeError as e:
            state["err"] = e

    peak = _peak_alloc(run)
    err = state.get("err")
    assert err is not None, f"{compression}: no DecompressedSizeError"
    check_error(err, data, compression)
    assert len(PREFIX) <= err.position <= len(data)
    assert peak < 8 * LIMIT + 4 * len(data), f"{compression}: peak {peak} bytes with a {LIMIT}-byte limit"
    with pytest.raises(DecompressedSizeError):
        list(codec.iter_batches(data, max_decompressed_size=LIMIT))[1].records()
    out = codec.decode_records(data, max_decompressed_size=2 * BOMB_SIZE)
    assert [len(r.value) for r in out] == [2, BOMB_SIZE]
    assert out[1].value == bytes(BOMB_SIZE)


def test_limit_is_inclusive(codec):
    records = _spec.raw_record(value=b"z" * 5000)
    data = _spec.v2_batch(zstandard.ZstdCompressor().compress(records), count=1, attributes=4)
    assert len(codec.decode_records(data, max_decompressed_size=len(records))) == 1
    with pytest.raises(DecompressedSizeError):
        codec.decode_records(data, max_decompressed_size=len(records) - 1)


def test_legacy_wrapper_bomb(codec):
    """A legacy v1 gzip wrapper whose inner message set inflates past the limit."""
    inner_msg = struct.pack(">bbq", 1, 0, T0) + struct.pack(">i", -1) + struct.pack(">i", 4 << 20) + bytes(4 << 20)
    inner = struct.pack(">qiI", 0, 4 + len(inner_msg), zlib.crc32(inner_msg)) + inner_msg
    value = gzip.compress(inner, mtime=0)
    msg = struct.pack(">bbq", 1, 1, T0) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    entry = struct.pack(">qiI", 0, 4 + len(msg), zlib.crc32(msg)) + msg
    with pytest.raises(DecompressedSizeError) as ei:
        for b in codec.iter_batches(entry, max_decompressed_size=LIMIT):
            b.records()
    check_error(ei.value, entry)
    (r,) = codec.decode_records(entry, max_decompressed_size=8 << 20)
    assert r.value == bytes(4 << 20) and r.timestamp == T0


# ------------------------------------------------------------------------ errors carry their batch
def test_crc_error_names_the_second_batch(codec):
    good = load_golden("plain_none")[0]
    bad = bytearray(load_golden("idempotent_none")[0])
    bad[-1] ^= 0x40
    data = good + bytes(bad)
    it = codec.iter_batches(data)
    assert next(iter(it)).position == 0
    with pytest.raises(CrcMismatchError) as ei:
        next(iter(it))
    assert ei.value.position == len(good)
    assert ei.value.base_offset == struct.unpack_from(">q", bad)[0]
    assert it.valid_bytes == len(good)


# ------------------------------------------------------------------------------- legacy wrappers
def _legacy_msg(magic, attributes, ts, key, value):
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", ts) if magic == 1 else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">I", zlib.crc32(body)) + body


def _legacy_entry(offset, msg):
    return struct.pack(">qi", offset, len(msg)) + msg


def _wrapper(wrapper_offset, inner, magic=1, attributes=1, ts=T0 + 99):
    """A legacy gzip wrapper (``attributes`` 1, | 8 for LOG_APPEND_TIME) around ``inner`` entries."""
    return _legacy_entry(wrapper_offset, _legacy_msg(magic, attributes, ts, None, gzip.compress(inner, mtime=0)))


def _inner(offsets, magic=1):
    return b"".join(_legacy_entry(o, _legacy_msg(magic, 0, T0 + i, b"k%d" % i, b"v%d" % i))
                    for i, o in enumerate(offsets))  # fmt: skip


@pytest.mark.parametrize("wrapper_offset, last_inner", [(1, 2), (5, 7), (99, 100)])
def test_legacy_v1_wrapper_offset_below_its_last_inner_offset(codec, wrapper_offset, last_inner):
    """AbstractLegacyRecordBatch.DeepRecordsIterator: "Found invalid wrapper offset in compressed v1 message
    set, wrapper offset '...' is less than the last inner message offset '...' and it is not zero"."""
    data = PREFIX + _wrapper(wrapper_offset, _inner(range(last_inner - 2, last_inner + 1)))
    err = _expect(codec, data, InvalidRecordError, batch_pos=len(PREFIX), base_offset=wrapper_offset)
    assert err.position == len(PREFIX)
    assert (f"wrapper offset '{wrapper_offset}' is less than the last inner message offset '{last_inner}' "
            "and it is not zero") in str(err)  # fmt: skip
    with pytest.raises(InvalidRecordError):
        codec.decode_arrow(data)


def test_legacy_v1_wrapper_offsets_zero_or_at_least_the_last_inner(codec):
    inner = _inner([0, 1, 2])
    assert [r.offset for r in codec.decode_records(_wrapper(0, inner))] == [0, 1, 2]  # librdkafka's zero
    assert [r.offset for r in codec.decode_records(_wrapper(2, inner))] == [0, 1, 2]
    assert [r.offset for r in codec.decode_records(_wrapper(102, inner))] == [100, 101, 102]
    assert [r.offset for r in codec.decode_records(_wrapper(7, _inner([5, 6, 7])))] == [5, 6, 7]


def test_legacy_inner_magic_need_not_match_the_wrapper(codec):
    """Kafka's consumer reads a v0 message in a v1 wrapper and a v1 message in a v0 wrapper (its deep
    iterator passes ensureMatchingMagic=false; only the broker's LogValidator refuses them).  A v0 message
    has no timestamp, and only v1 messages take a LOG_APPEND_TIME wrapper's."""
    mixed = _legacy_entry(0, _legacy_msg(0, 0, None, b"k", b"v0")) + _legacy_entry(1, _legacy_msg(1, 0, T0, b"k", b"v1"))
    for attributes, want in ((1, [(9, -1, b"v0"), (10, T0, b"v1")]), (1 | 8, [(9, -1, b"v0"), (10, T0 + 99, b"v1")])):
        data = _wrapper(10, mixed, magic=1, attributes=attributes)
        assert [(r.offset, r.timestamp, r.value) for r in codec.decode_records(data)] == want
        (batch,) = codec.iter_batches(data)
        assert [(r.offset, r.timestamp, r.value) for r in batch] == want
        assert codec.decode_arrow(data).column("value").to_pylist() == [b"v0", b"v1"]
    data = _wrapper(10, mixed, magic=0)  # v0: absolute inner offsets, no wrapper timestamp
    assert [(r.offset, r.timestamp) for r in codec.decode_records(data)] == [(0, -1), (1, T0)]
    # a magic that is no legacy magic is still refused
    bad = _legacy_entry(0, _legacy_msg(1, 0, T0, b"k", b"v"))
    bad = bad[:16] + b"\x02" + bad[17:]
    with pytest.raises(CorruptRecordError, match="magic"):
        codec.decode_records(_wrapper(0, bad))


# ------------------------------------------------------------------------ RecordBatch(verify_crc)
def test_record_batch_checks_its_crc_when_asked(codec):
    """RecordBatch(data, position, verify_crc=True) (the default) checks the v2 CRC-32C, and a legacy entry's
    outer CRC-32, as it is opened; verify_crc=False opens the damaged batch (is_valid says so)."""
    good = load_golden("plain_none")[0]
    bad = bytearray(good)
    bad[-1] ^= 0x20
    legacy = bytearray(load_golden("legacy_v1_gzip")[0][: _spec.split_batches(load_golden("legacy_v1_gzip")[0])[0][1]])
    legacy[38] ^= 0x01  # the gzip header's mtime, in the wrapper's value: only the wrapper's CRC covers it
    for damaged in (bytes(bad), bytes(legacy)):
        data = good + damaged
        with pytest.raises(CrcMismatchError) as ei:
            codec.RecordBatch(data, len(good))
        assert ei.value.position == len(good)
        with pytest.raises(CrcMismatchError):
            codec.RecordBatch(data, len(good), len(damaged), verify_crc=True)
        opened = codec.RecordBatch(data, len(good), verify_crc=False)
        assert not opened.is_valid
        with pytest.raises(CrcMismatchError):
            opened.validate_crc()
        with pytest.raises(CrcMismatchError) as ei:
            list(codec.iter_batches(data))
        assert ei.value.position == len(good)
    assert codec.RecordBatch(good + good, len(good)).is_valid


def test_record_batch_errors_are_positioned_in_the_callers_buffer(codec):
    """The README promises positions in the buffer passed in, also for a batch opened at ``position``."""
    good = load_golden("plain_none")[0]
    at = len(good)
    magic = bytearray(good)
    magic[16] = 7
    small = bytearray(good)
    small[8:12] = struct.pack(">i", 3)
    count = bytearray(good)
    count[57:61] = struct.pack(">i", -1)
    wrapper = _wrapper(1, _inner([0, 1, 2]))
    cases = [(bytes(magic), CorruptRecordError, at + 16), (bytes(small), CorruptRecordError, at),
             (_spec.fix_crc(bytes(count)), InvalidRecordError, at + 57), (good[:30], CorruptRecordError, at),
             (wrapper, InvalidRecordError, at)]  # fmt: skip
    for entry, exc, where in cases:
        with pytest.raises(exc) as ei:
            codec.RecordBatch(good + entry, at).records()
        assert ei.value.position == where, (entry[:20], str(ei.value))


# ------------------------------------------------------------------- offsets and timestamps at int64
def test_record_at_long_max_value_is_returned(codec):
    """Kafka's consumer returns a record at offset 2^63-1 like any other; after it the next offset stays at
    2^63-1 (Java's lastOffset + 1 would wrap)."""
    top = (1 << 63) - 1
    data = _spec.v2_batch(_spec.raw_record(value=b"a", off_delta=0) + _spec.raw_record(value=b"b", off_delta=1),
                          count=2, base_offset=top - 1, last_offset_delta=1)
    out = codec.decode_records(data)
    assert [(r.offset, r.value) for r in out] == [(top - 1, b"a"), (top, b"b")]
    assert (out.next_offset, out.valid_bytes, out.trailing_bytes) == (top, len(data), 0)
    (batch,) = codec.iter_batches(data)
    assert (batch.last_offset, batch.next_offset) == (top, top + 1)
    assert [r.offset for r in batch.records()] == [top - 1, top]
    rb = codec.decode_arrow(data)
    assert rb.column("offset").to_pylist() == [top - 1, top]
    assert rb.schema.metadata[b"valid_bytes"] == str(len(data)).encode()
    f = codec.ReadCommittedFilter()
    assert [r.offset for r in f.feed(data)] == [top - 1, top] and f.next_offset == top
    committed = codec.decode_records(data, isolation="read_committed", last_stable_offset=top)
    assert [r.offset for r in committed] == [top - 1] and committed.valid_bytes == 0  # straddles the LSO


def test_decoded_offsets_and_timestamps_wrap_as_java_longs(codec):
    """base_offset + offset delta, base_timestamp + timestamp delta and the last offset are Java long sums:
    past int64 they wrap, on both backends, for records, Arrow columns and the header scan."""
    import pyarrow as pa

    top, bottom = (1 << 63) - 1, -(1 << 63)
    recs = _spec.raw_record(value=b"a", off_delta=0, ts_delta=0) + \
        _spec.raw_record(value=b"b", off_delta=2, ts_delta=top)
    data = _spec.v2_batch(recs, count=2, base_offset=top - 1, last_offset_delta=2, base_timestamp=5, max_timestamp=5)
    want = [(top - 1, 5, b"a"), (bottom, 5 + top - (1 << 64), b"b")]
    assert [(r.offset, r.timestamp, r.value) for r in codec.decode_records(data)] == want
    (batch,) = codec.iter_batches(data)
    assert batch.last_offset == bottom
    assert [(r.offset, r.timestamp, r.value) for r in batch] == want
    rb = codec.decode_arrow(data)
    assert rb.column("offset").to_pylist() == [top - 1, bottom]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [5, 5 + top - (1 << 64)]
    assert list(codec.scan_batches(data)["last_offset"]) == [bottom]


# ------------------------------------------------------------------------ what Kafka's readers let pass
def _with_payload(payload, cid, n=5):
    """A v2 batch of ``n`` records whose records are replaced by ``payload``, compressed with codec ``cid``."""
    b = load_backend("python").BatchBuilder()
    for i in range(n):
        b.append(b"value-%d" % i, b"k%d" % i, timestamp=T0 + i)
    plain = b.build()
    out = bytearray(plain[:61]) + bytes(payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, cid)
    struct.pack_into(">I", out, 17, load_backend("python").crc32c(bytes(out[21:])))
    return bytes(out), plain[61:]


@pytest.mark.parametrize("extra, ok", [
    (b"\x1f\x8b", True),  # GZIPInputStream tries a following member only past 18 bytes after the trailer
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", True),
    (b"\x1f\x8b\x07" + bytes(20), True),  # a malformed member header: ignored
    (b"\x1f\x8b\x08\x02" + bytes(20), True),  # a header CRC that does not match: malformed
    (b"\x1f\x8b\x08\x08" + bytes(6) + b"name-without-its-zero" * 2, True),  # a name cut short
    (gzip.compress(b"more", mtime=0)[:-4] + bytes(12), False),  # a sound header: its member is inflated
])  # fmt: skip
def test_bytes_after_a_gzip_member(codec, extra, ok):
    _, records = _with_payload(b"", 1)
    data, _ = _with_payload(gzip.compress(bytes(records), mtime=0) + extra, 1)
    if ok:
        assert [r.value for r in codec.decode_records(data)] == [b"value-%d" % i for i in range(5)]
    else:
        with pytest.raises(DecompressionError):
            codec.decode_records(data)
    two, _ = _with_payload(gzip.compress(bytes(records[:40]), mtime=0) + gzip.compress(bytes(records[40:])), 1)
    assert len(codec.decode_records(two)) == 5  # (a second member proper is still read)


@pytest.mark.parametrize("extra, ok", [
    (b"\x00", True), (b"\x00\x00\x00", True),  # snappy-java's reader stops where fewer than 4 bytes are left
    (b"\x82SNA" + bytes(12), True),  # the magic's head, then no valid header: the end
    (b"\x82SNA" + bytes(4), False),  # the magic's head and too few bytes for a header
    (b"\x82SNAPPY\x00" + bytes(8), True),  # a concatenated header with nothing after it
    (b"\x00\x00\x00\x09", False),  # a chunk running past the end
])  # fmt: skip
def test_bytes_after_xerial_snappy_chunks(codec, extra, ok):
    _, records = _with_payload(b"", 2)
    chunk = bytes(cramjam.snappy.compress_raw(bytes(records)))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(chunk)) + chunk
    data, _ = _with_payload(framed + extra, 2)
    if ok:
        assert [r.value for r in codec.decode_records(data)] == [b"value-%d" % i for i in range(5)]
    else:
        with pytest.raises(DecompressionError):
            codec.decode_records(data)


def test_an_lz4_end_mark_with_the_stored_bit(codec):
    """Kafka's Lz4BlockInputStream masks the stored-block bit before it looks for the end mark (0)."""
    _, records = _with_payload(b"", 3)
    frame = lz4.frame.compress(bytes(records), block_linked=False, content_checksum=False)
    assert frame[-4:] == bytes(4)
    data, _ = _with_payload(frame[:-4] + b"\x00\x00\x00\x80", 3)
    assert [r.value for r in codec.decode_records(data)] == [b"value-%d" % i for i in range(5)]
    assert codec.decode_arrow(data).num_rows == 5


def test_a_zstd_frame_needing_a_window_past_128_mib_is_refused(codec):
    """Kafka's zstd reader streams with libzstd's default window limit (windowLogMax 27): a frame whose window
    descriptor asks for more is refused, whichever library inflates it (a one-shot call would not look)."""
    _, records = _with_payload(b"", 4)
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=False).compress(bytes(records)))
    assert not frame[4] & 0x20  # not single-segment: byte 5 is the window descriptor
    for exponent, mantissa, ok in ((17, 0, True), (17, 1, False), (18, 0, False)):
        frame[5] = exponent << 3 | mantissa
        data, _ = _with_payload(bytes(frame), 4)
        if ok:
            assert len(codec.decode_records(data)) == 5
        else:
            with pytest.raises(DecompressionError, match="window"):
                codec.decode_records(data)
            with pytest.raises(DecompressionError, match="window"):
                codec.decode_arrow(data)


def test_legacy_messages_read_as_kafka_reads_them(codec):
    """DataLogInputStream.nextBatch ends a compressed wrapper's messages where the inflated bytes end inside an
    entry's header or message (only a size below the minimum raises), and LegacyRecord reads key and value
    from where they start, so bytes after the value are not looked at."""
    inner = _inner([0, 1, 2])
    for tail in (b"\x00" * 5, _inner([3])[:-4]):
        data = _wrapper(2, inner + tail)
        assert [r.offset for r in codec.decode_records(data)] == [0, 1, 2]
    bad_size = _wrapper(2, inner + struct.pack(">qi", 3, 13) + bytes(13))
    err = _expect(codec, PREFIX + bad_size, CorruptRecordError, batch_pos=len(PREFIX), base_offset=2)
    assert "size 13" in str(err)
    msg = _legacy_msg(1, 0, T0, b"k", b"v")
    body = msg[4:] + b"??"
    padded = struct.pack(">I", zlib.crc32(body)) + body
    assert [(r.key, r.value) for r in codec.decode_records(_legacy_entry(7, padded))] == [(b"k", b"v")]
    data = _wrapper(0, _legacy_entry(0, padded))
    assert [(r.key, r.value) for r in codec.decode_records(data)] == [(b"k", b"v")]
    # a key running past its message names the entry's offset
    short = msg[4:14] + struct.pack(">i", 9)
    with pytest.raises(CorruptRecordError, match="base offset 42"):
        codec.decode_records(_legacy_entry(42, struct.pack(">I", zlib.crc32(short)) + short))


def test_an_error_of_feed_carries_the_records_before_it(codec):
    """Kafka's consumer hands out the records before a corrupt batch: a filter's feed() raising at one puts them
    in the error's ``records`` (next_offset is past them), and holds the damaged batch and the rest back."""
    good = b""
    for base in (0, 2):
        b = codec.BatchBuilder(base_offset=base)
        b.append(b"v%d" % base, b"k", timestamp=T0)
        b.append(b"v%d" % (base + 1), b"k", timestamp=T0)
        good += b.build()
    b = codec.BatchBuilder(base_offset=4)
    b.append(b"v4", b"k", timestamp=T0)
    bad = bytearray(b.build())
    bad[-1] ^= 1
    f = codec.ReadCommittedFilter(isolation="read_uncommitted")
    with pytest.raises(CrcMismatchError) as caught:
        f.feed(good + bytes(bad))
    got = caught.value.records
    assert [r.value for r in got] == [b"v0", b"v1", b"v2", b"v3"]
    assert got.valid_bytes == len(good) and got.trailing_bytes == len(bad) and got.next_offset == 4
    assert f.next_offset == 4 and f.pending_bytes == len(bad)
