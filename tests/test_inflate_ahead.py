"""``inflate_threads``: compressed payloads inflated on background threads, ahead of the decoder.

Whatever the threads do, a decode must give what the single-threaded one gives -- the same records and
columns, the same error (type, message, position) at the same batch, in log order -- and leave no thread
behind, on both backends.  (The read_committed model test also draws ``inflate_threads`` for its
generated logs; the log reader passes it through.)

Two implementations do the work: ``compression.InflateAhead`` (Python threads, any payload) and, in the
compiled codec, workers in C (``_c/ahead.h``) for calls whose every payload the system's libzstd and liblz4
inflate in C -- lz4 and zstd as producers write them.  The logs below come in two kinds so that both
run: all four codecs (InflateAhead), and lz4 and zstd only (the C workers, where the libraries load).
"""

from __future__ import annotations

import gc
import os
import pathlib
import random
import struct
import threading

import pytest

import kafkatx
from kafkatx import _codec, compression
from kafkatx.errors import CrcMismatchError, DecompressedSizeError, DecompressionError

CODECS = ("gzip", "snappy", "lz4", "zstd")
FAST = ("lz4", "zstd")  # what the compiled codec's C workers take
KINDS = {"all-codecs": CODECS, "lz4-zstd": FAST}
THREADS = (1, 2, 3)
C_WORKERS = bool(_codec.ZSTD_SYSTEM_VERSION and _codec.LZ4_SYSTEM_VERSION)


def _batch(codec, base, n, compression_name, seed=0):
    b = codec.BatchBuilder(base_offset=base, producer_id=7, producer_epoch=0, base_sequence=base,
                           compression=compression_name)  # fmt: skip
    for i in range(n):
        key = None if i % 11 == 0 else b"k%d" % ((i * 7 + seed) % 97)
        value = b"value %d of batch %d " % (i, base) * (1 + (i + seed) % 5)
        headers = (("h", b"%d" % i), ("none", None)) if i % 4 == 0 else ()
        b.append(value, key=key, timestamp=1_700_000_000_000 + base + i, headers=headers)
    return bytes(b.build())


def _log(codec, batches=24, records=120, seed=0, codecs=CODECS):
    """A log whose batches cycle through ``codecs`` (and an uncompressed one every fifth)."""
    parts, offset = [], 0
    for i in range(batches):
        name = "none" if i % 5 == 4 else codecs[(i + seed) % len(codecs)]
        parts.append(_batch(codec, offset, records, name, seed))
        offset += records
    return b"".join(parts)


def _positions(log):
    out, pos = [], 0
    while pos < len(log):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", log, pos + 8)[0]
    return out


def _rows(records):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in records]


def _zstd_spans(n):
    """A log of ``n`` zstd batches and the ``(start, end, codec id)`` spans of their payloads."""
    parts = [_batch(kafkatx, i * 100, 100, "zstd") for i in range(n)]
    log = b"".join(parts)
    return log, [(p + 61, p + len(b), 4) for p, b in zip(_positions(log), parts)]


def _no_inflate_threads():
    return [t.name for t in threading.enumerate() if t.name == "kafkatx-inflate"]


def _expect_workers(codec, log, kind):
    """The compiled codec uses its C workers for the lz4-zstd logs (where the libraries load), else InflateAhead."""
    if codec is _codec:
        assert _codec._ahead_kind(log) == ("c" if kind == "lz4-zstd" and C_WORKERS else "python")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("threads", THREADS)
def test_same_records_and_columns_as_inflating_inline(codec, threads, kind):
    log = _log(codec, codecs=KINDS[kind])
    _expect_workers(codec, log, kind)
    want = codec.decode_records(log, inflate_threads=0)
    assert len(want) == 24 * 120
    got = codec.decode_records(log, inflate_threads=threads)
    assert _rows(got) == _rows(want)
    assert (got.valid_bytes, got.trailing_bytes, got.next_offset) == (len(log), 0, 24 * 120)
    assert codec.decode_arrow(log, inflate_threads=threads).equals(codec.decode_arrow(log))
    # a truncated tail, a fetch offset inside a batch and an LSO inside another
    cut = log[: len(log) - 1000]
    kw = dict(isolation="read_committed", fetch_offset=130, last_stable_offset=2000)
    a = codec.decode_records(cut, inflate_threads=0, **kw)
    b = codec.decode_records(cut, inflate_threads=threads, **kw)
    assert _rows(a) == _rows(b) and a[0].offset == 130 and a[-1].offset == 1999
    assert (a.valid_bytes, a.trailing_bytes, a.next_offset) == (b.valid_bytes, b.trailing_bytes, b.next_offset)
    assert _no_inflate_threads() == []


@pytest.mark.parametrize("kind", KINDS)
def test_aborted_batches_are_skipped_and_the_rest_still_matches(codec, kind):
    # every other producer's transaction aborted: the worker inflates batches the decoder then skips
    parts, offset, aborted = [], 0, []
    codecs = KINDS[kind]
    for i in range(16):
        pid = 100 + i % 2
        b = codec.BatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=0, base_sequence=offset,
                               transactional=True, compression=codecs[i % len(codecs)])  # fmt: skip
        for j in range(50):
            b.append(b"v%d-%d" % (i, j) * 10, key=b"k")
        parts.append(bytes(b.build()))
        if i % 2:
            aborted.append((pid, offset))
        offset += 50
    log = b"".join(parts)
    _expect_workers(codec, log, kind)
    kw = dict(isolation="read_committed", aborted_transactions=aborted)
    want = codec.decode_records(log, inflate_threads=0, **kw)
    assert len(want) == 8 * 50
    for threads in THREADS:
        assert _rows(codec.decode_records(log, inflate_threads=threads, **kw)) == _rows(want)
        assert codec.decode_arrow(log, inflate_threads=threads, **kw).equals(codec.decode_arrow(log, inflate_threads=0, **kw))


@pytest.mark.parametrize("kind", KINDS)
def test_a_filter_fed_in_pieces(codec, kind):
    log = _log(codec, batches=12, codecs=KINDS[kind])
    want = codec.decode_records(log, inflate_threads=0)
    for threads in THREADS:
        f = codec.ReadCommittedFilter(isolation="read_uncommitted", inflate_threads=threads)
        got = []
        for a in range(0, len(log), 7001):
            got += f.feed(log[a : a + 7001])
        assert _rows(got) == _rows(want) and f.pending_bytes == 0


def _corrupt_payload(log, pos):
    """The batch at ``pos`` with its compressed payload overwritten by garbage and a matching CRC: only the
    decompressor can tell."""
    b = bytearray(log)
    size = 12 + struct.unpack_from(">i", b, pos + 8)[0]
    for i in range(pos + 61 + 8, pos + size):
        b[i] = (i * 131 + 7) & 0xFF
    struct.pack_into(">I", b, pos + 17, kafkatx.crc32c(bytes(b[pos + 21 : pos + size])))
    return bytes(b)


def _stale_crc(log, pos):
    b = bytearray(log)
    b[pos + 70] ^= 0x40
    return bytes(b)


def _error(codec, fn, data, **kw):
    with pytest.raises(kafkatx.KafkaTxError) as info:
        fn(codec)(data, **kw)
    e = info.value
    return type(e), str(e), e.position, e.base_offset


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("fn", [lambda c: c.decode_records, lambda c: c.decode_arrow], ids=["records", "arrow"])
def test_errors_are_the_same_and_come_in_log_order(codec, threads, fn):
    log = _log(codec, batches=10)
    pos = _positions(log)
    assert [log[p + 22] & 7 for p in pos[:4]] == [1, 2, 3, 4]  # gzip, snappy, lz4, zstd
    cases = [
        _corrupt_payload(log, pos[3]),  # a zstd payload that does not inflate
        _corrupt_payload(log, pos[2]),  # an lz4 one
        _corrupt_payload(_corrupt_payload(log, pos[6]), pos[8]),  # two: the first one counts
        _corrupt_payload(_stale_crc(log, pos[2]), pos[6]),  # a CRC mismatch before a bad payload
        _stale_crc(_corrupt_payload(log, pos[2]), pos[6]),  # a bad payload before a CRC mismatch
    ]
    kinds = [DecompressionError, DecompressionError, DecompressionError, CrcMismatchError, DecompressionError]
    for data, kind in zip(cases, kinds):
        want = _error(codec, fn, data)
        assert issubclass(want[0], kind)
        assert _error(codec, fn, data, inflate_threads=threads) == want
    # the inflation limit
    want = _error(codec, fn, log, max_decompressed_size=2000)
    assert want[0] is DecompressedSizeError and want[2] == pos[0] + 61
    assert _error(codec, fn, log, max_decompressed_size=2000, inflate_threads=threads) == want
    assert _no_inflate_threads() == []


def _wrong_crc(log, pos):
    """The batch at ``pos`` with a bit of its stored CRC flipped (its payload intact)."""
    b = bytearray(log)
    b[pos + 17] ^= 0x01
    return bytes(b)


def _garble_inside(log, pos):
    """The lz4 or zstd batch at ``pos`` with bytes in the middle of its compressed payload changed (and a
    matching CRC) where the frame's structure survives: the C workers take it, and the library rejects it
    or inflates something else, which the decoder then rejects."""
    b = bytearray(log)
    size = 12 + struct.unpack_from(">i", b, pos + 8)[0]
    start, cid = pos + 61, b[pos + 22] & 7
    payload = bytes(b[start : pos + size])
    for mid in range(len(payload) // 2, len(payload) - 16):
        garbled = payload[:mid] + bytes((i * 131 + 7) & 0xFF for i in range(8)) + payload[mid + 8 :]
        if _codec._fast_path_bound(garbled, cid) > 0:
            break
    else:  # pragma: no cover - the payloads below are long enough
        raise AssertionError("no place to garble that keeps the frame's structure")
    b[start : pos + size] = garbled
    struct.pack_into(">I", b, pos + 17, kafkatx.crc32c(bytes(b[pos + 21 : pos + size])))
    return bytes(b)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("fn", [lambda c: c.decode_records, lambda c: c.decode_arrow], ids=["records", "arrow"])
def test_errors_of_payloads_the_c_workers_take(codec, threads, fn):
    log = _log(codec, batches=10, codecs=FAST)
    pos = _positions(log)
    assert [log[p + 22] & 7 for p in pos[:5]] == [3, 4, 3, 4, 0]  # lz4, zstd, lz4, zstd, none
    cases = [
        _garble_inside(log, pos[1]),  # zstd
        _garble_inside(log, pos[2]),  # lz4
        _garble_inside(_garble_inside(log, pos[6]), pos[8]),  # two: the first one counts
        _garble_inside(_wrong_crc(log, pos[2]), pos[6]),  # a CRC mismatch before a bad payload
        _wrong_crc(_garble_inside(log, pos[3]), pos[7]),  # a bad payload before a CRC mismatch
    ]
    for data in cases:
        _expect_workers(codec, data, "lz4-zstd")
        want = _error(codec, fn, data)
        assert _error(codec, fn, data, inflate_threads=threads) == want
    assert _error(codec, fn, cases[3])[0] is CrcMismatchError
    assert _error(codec, fn, cases[0])[0] is not CrcMismatchError
    assert pos[6] <= _error(codec, fn, cases[2])[2] < pos[7]  # in the first garbled batch


@pytest.mark.skipif(not C_WORKERS, reason="the system's libzstd or liblz4 cannot be loaded here")
def test_which_calls_the_c_workers_take():
    fast = _log(kafkatx, batches=6, codecs=FAST)
    assert _codec._ahead_kind(fast, threads=1) == "c"
    assert _codec._ahead_kind(fast, threads=3) == "c"
    # binary views keep every payload: InflateAhead hands out payloads of their own
    assert _codec._ahead_kind(fast, keep=True) == "python"
    # one payload the libraries would not take in C (gzip here; or over the inflation limit): all go to
    # InflateAhead, which inflates anything
    assert _codec._ahead_kind(_log(kafkatx, batches=6, codecs=("lz4", "zstd", "gzip"))) == "python"
    assert _codec._ahead_kind(fast, max_size=2000) == "python"
    # fewer than two compressed data batches: no threads at all
    one = _log(kafkatx, batches=1, codecs=FAST)
    assert _codec._ahead_kind(one) is None
    assert _codec._ahead_kind(one + _log(kafkatx, batches=3, codecs=("none",))) is None


@pytest.mark.skipif(not C_WORKERS, reason="the system's libzstd or liblz4 cannot be loaded here")
def test_the_c_workers_end_with_their_call():
    """Each C worker's libzstd context is freed when its thread ends: after the calls, no more are live
    than before (a worker left running, or a context leaked per call, would show here)."""
    log = _log(kafkatx, batches=40, codecs=("zstd",))
    want = kafkatx.decode_arrow(log, inflate_threads=0)
    before = _codec._thread_resources()[0]
    for threads in (1, 2, 3) * 5:
        assert kafkatx.decode_arrow(log, inflate_threads=threads).equals(want)
    assert _codec._thread_resources()[0] == before


@pytest.mark.parametrize("bad", [-1, 65, 1.5, True, "2", "auto"])
def test_inflate_threads_must_be_a_small_int(codec, bad):
    with pytest.raises(ValueError, match="inflate_threads"):
        codec.decode_records(b"", inflate_threads=bad)
    with pytest.raises(ValueError, match="inflate_threads"):
        codec.ReadCommittedFilter(inflate_threads=bad)


def test_binary_views_outlive_the_ring_buffers(codec):
    # views point into the inflated payloads: with threads those must be payloads of their own, not the
    # ring's reusable buffers, which the next decode overwrites
    log = _log(codec, batches=16)
    want = codec.decode_arrow(log, inflate_threads=0)
    got = codec.decode_arrow(bytearray(log), binary_view=True, inflate_threads=2)
    codec.decode_records(_log(codec, batches=16, seed=3), inflate_threads=2)  # other payloads, same slots
    codec.decode_arrow(_log(codec, batches=16, seed=5), inflate_threads=1)
    gc.collect()
    assert got.column("value").to_pylist() == want.column("value").to_pylist()
    assert got.column("key").to_pylist() == want.column("key").to_pylist()


def test_the_lookahead_is_bounded():
    log, spans = _zstd_spans(20)
    depth = 5
    ahead = compression.InflateAhead(memoryview(log), spans, 1 << 20, threads=2, depth=depth)
    try:
        first = bytes(ahead.take(spans[0][0]))
        assert first == compression.decompress(4, log[spans[0][0] : spans[0][1]])
        with ahead._cond:  # the workers stop `depth` spans past the one the decoder holds
            assert ahead._cond.wait_for(lambda: ahead._claimed == depth and len(ahead._results) == depth - 1, 120)
            assert ahead._claimed == depth
        third = bytes(ahead.take(spans[3][0]))  # 1 and 2 skipped: dropped, and the window moves on
        assert third == compression.decompress(4, log[spans[3][0] : spans[3][1]])
        with ahead._cond:
            assert ahead._cond.wait_for(lambda: ahead._claimed == 3 + depth, 120)
            assert set(ahead._results) <= set(range(4, 3 + depth))
        assert ahead.take(spans[3][0] + 1) is None  # no span starts there: the caller inflates it
    finally:
        ahead.close()
    assert _no_inflate_threads() == []


def test_a_waiting_decoder_inflates_what_no_worker_took():
    """When no worker has taken the span the decoder needs, the decoder inflates it itself instead of
    waiting, with the same result, or the same error at the same span, as a worker would give.  (Here the
    workers cannot take anything: before the first take they stop within ``depth`` spans of the start, well
    before the ones asked for, and then the test holds the lock; the Condition's lock is re-entrant, and a
    decoder that inflates never waits on it.)"""
    log, spans = _zstd_spans(12)
    log = bytearray(log)
    log[spans[9][0] : spans[9][0] + 4] = b"\x00\x00\x00\x00"  # span 9: no zstd frame magic
    ahead = compression.InflateAhead(memoryview(bytes(log)), spans, 1 << 20, threads=2, depth=5)
    try:
        with ahead._cond:  # spans 0..3 inflated (the window before the first take), then nothing
            assert ahead._cond.wait_for(lambda: ahead._claimed == 4 and len(ahead._results) == 4, 120)
            for j in (7, 8):
                got = bytes(ahead.take(spans[j][0]))
                assert got == compression.decompress(4, log[spans[j][0] : spans[j][1]])
            with pytest.raises(DecompressionError, match="bad frame magic"):
                ahead.take(spans[9][0])
            assert ahead.caller_inflated == 3
            assert ahead._claimed == 10  # nothing further: the decoder inflates only what it waits on
        for j in (10, 11):  # the workers go on from there
            got = bytes(ahead.take(spans[j][0]))
            assert got == compression.decompress(4, log[spans[j][0] : spans[j][1]])
    finally:
        ahead.close()
    assert _no_inflate_threads() == []


def test_no_span_is_inflated_into_a_slot_still_being_written():
    """A span whose batch the decoder skipped may still be inflating into its ring slot when the decoder
    asks for a later span sharing that slot: neither a worker nor the decoder may take the later one until
    the slot is free (both writing one buffer would hand the decoder the other's bytes).  The test marks a
    slot as being written, as such a worker would leave it, and frees it later from another thread."""
    log, spans = _zstd_spans(12)
    depth = 4
    ahead = compression.InflateAhead(memoryview(log), spans, 1 << 20, threads=1, depth=depth)
    seen = []

    def free_slot():
        with ahead._cond:
            seen.append((ahead._claimed, 6 in ahead._results))
            ahead._inflight.discard(6 % depth)
            ahead._cond.notify_all()

    try:
        with ahead._cond:  # spans 0..2 inflated (the window before the first take), then nothing
            assert ahead._cond.wait_for(lambda: ahead._claimed == depth - 1 and len(ahead._results) == 3, 120)
            ahead._inflight.add(6 % depth)  # as if span 2 (skipped below) were still being inflated
        timer = threading.Timer(0.3, free_slot)
        timer.start()
        got = bytes(ahead.take(spans[6][0]))  # 0..5 skipped
        timer.join()
        assert seen == [(6, False)]  # nobody took span 6 while its slot was busy
        assert got == compression.decompress(4, log[spans[6][0] : spans[6][1]])
    finally:
        ahead.close()
    assert _no_inflate_threads() == []


@pytest.mark.parametrize("compression_name", ["mixed", "zstd"])
def test_reader_passes_it_through(tmp_path, compression_name):
    from kafkatx.log import generate, open_partition

    generate(tmp_path / "d", partitions=1, records=4000, compression=compression_name, seed=2,
             segment_bytes=256 << 10, workers=0)  # fmt: skip
    part = open_partition(next(p for p in (tmp_path / "d").iterdir() if p.name.startswith("orders-")))
    if compression_name == "zstd" and C_WORKERS:  # the compiled codec's C workers take every segment
        kinds = [_codec._ahead_kind(pathlib.Path(seg.log_path).read_bytes()) for seg in part.segments]
        assert "c" in kinds and set(kinds) <= {"c", None}
    with part:
        want = list(part.read(inflate_threads=0))
        got = list(part.read(inflate_threads=1))
        assert _rows(got) == _rows(want) and len(want) > 1000
        assert part.read_table(inflate_threads=2).equals(part.read_table(inflate_threads=0))
        with pytest.raises(ValueError, match="inflate_threads"):
            part.read(inflate_threads=-1)


# ------------------------------------------------------------------ inflate_threads=None (the default)
def _big_log(codec, compression_name, batches, records=1000, seed=11, random_values=False):
    """``batches`` batches of ``records`` records: 100-byte values of a 12-letter alphabet (compressible, as
    text is: zstd codes their literals with Huffman) or 1,000 random bytes (stored blocks, inflated at the
    speed of a copy)."""
    rnd = random.Random(seed)
    parts, offset = [], 0
    for _ in range(batches):
        b = codec.BatchBuilder(base_offset=offset, compression=compression_name)
        for i in range(records):
            value = rnd.randbytes(1000) if random_values else bytes(rnd.choices(b"abcdefghij ,", k=100))
            b.append(value, key=b"key-%06d" % i, timestamp=1_700_000_000_000 + offset + i)
        parts.append(bytes(b.build()))
        offset += records
    return b"".join(parts)


def test_none_is_auto_where_two_cpus_may_be_used(monkeypatch):
    if hasattr(os, "sched_getaffinity"):
        assert compression.usable_cpus() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(compression, "usable_cpus", lambda: 1)
    assert compression.check_inflate_threads(None) == 0
    monkeypatch.setattr(compression, "usable_cpus", lambda: 2)
    assert compression.check_inflate_threads(None) == compression.INFLATE_AUTO
    assert compression.check_inflate_threads(0) == 0 and compression.check_inflate_threads(3) == 3


@pytest.mark.skipif(not C_WORKERS, reason="the system's libzstd or liblz4 cannot be loaded here")
def test_which_calls_auto_hands_to_a_c_worker():
    auto = compression.INFLATE_AUTO
    zstd = _big_log(kafkatx, "zstd", 8)  # 8 x ~60 KB of zstd with Huffman-coded literals: worth a thread
    assert _codec._ahead_kind(zstd, threads=auto) == "c"
    assert _codec._ahead_kind(zstd[: len(zstd) // 4], threads=auto) is None  # two batches: inline
    lz4 = _big_log(kafkatx, "lz4", 24)  # 24 x ~95 KB of lz4; six of them are not
    assert _codec._ahead_kind(lz4, threads=auto) == "c"
    assert _codec._ahead_kind(lz4[: len(lz4) // 4], threads=auto) is None
    # Kafka's 16 KiB batches of random values (stored, or literals only): inflated at the speed of a copy,
    # each costs less than handing it over to a thread
    stored = _big_log(kafkatx, "zstd", 128, 16, random_values=True) + _big_log(kafkatx, "lz4", 128, 16,
                                                                                random_values=True)  # fmt: skip
    assert len(stored) > 4_000_000 and _codec._ahead_kind(stored, threads=1) == "c"
    assert _codec._ahead_kind(stored, threads=auto) is None
    # never the Python workers: not for binary views, not for a codec the C workers do not take
    assert _codec._ahead_kind(zstd, threads=auto, keep=True) is None
    assert _codec._ahead_kind(_big_log(kafkatx, "gzip", 2) + zstd, threads=auto) is None
    assert _codec._ahead_kind(_log(kafkatx, batches=6, codecs=FAST), threads=auto) is None  # small: inline
    # an uncompressed log is taken for one after 64 batches: a compressed one further on is inflated inline
    plain = [_log(kafkatx, batches=n, records=5, codecs=("none",)) for n in (64, 63)]
    assert _codec._ahead_kind(plain[0] + zstd, threads=auto) is None
    assert _codec._ahead_kind(plain[1] + zstd, threads=auto) == "c"


@pytest.mark.parametrize("compression_name", FAST)
def test_the_default_decodes_what_inlining_does(codec, compression_name):
    batches = 12 if compression_name == "zstd" else 48  # ~0.5 MB of zstd, ~1.4 MB of lz4
    log = _big_log(codec, compression_name, batches, records=400)
    if codec is _codec and C_WORKERS and compression.usable_cpus() >= 2:
        assert _codec._ahead_kind(log, threads=compression.INFLATE_AUTO) == "c"
    inline = codec.decode_records(log, inflate_threads=0)
    assert _rows(codec.decode_records(log)) == _rows(inline) and len(inline) == batches * 400
    assert codec.decode_arrow(log).equals(codec.decode_arrow(log, inflate_threads=0))
    f = codec.ReadCommittedFilter(isolation="read_committed", last_stable_offset=4321)
    assert _rows(f.feed(log)) == _rows(inline[:4321])
    assert _no_inflate_threads() == []


def test_parallel_decodes_filling_the_cpus_inflate_inline(codec, monkeypatch):
    from kafkatx import arrow

    seen = []
    real = arrow.decode_arrow
    monkeypatch.setattr(arrow, "decode_arrow", lambda c, **kw: seen.append(kw.get("inflate_threads", "-")) or real(c, **kw))
    chunks = [_log(codec, batches=4, codecs=FAST, seed=s) for s in range(4)]
    cpus = compression.usable_cpus()
    want = [real(c) for c in chunks]
    assert all(a.equals(b) for a, b in zip(arrow.decode_arrow_parallel(chunks, max_workers=cpus), want))
    assert seen == [0] * 4  # the workers fill the CPUs: no inflater threads beside them
    seen.clear()
    arrow.decode_arrow_parallel(chunks, max_workers=cpus, inflate_threads=None)  # the default, given
    assert seen == [0] * 4
    seen.clear()
    arrow.decode_arrow_parallel(chunks[:1])  # one chunk, decoded on this thread: the default stays
    assert seen == ["-"]
    seen.clear()
    arrow.decode_arrow_parallel(chunks, max_workers=cpus, inflate_threads=2)  # as given
    assert seen == [2] * 4


def test_buffers_of_signed_chars(codec):
    """pyarrow's buffers (and array('b')) export signed chars: their bytes must still read as 0-255, inline,
    through the inflate-ahead threads and in compression.decompress (the twin once read the lz4 header
    checksum byte 0x82 as -0x7e there)."""
    import pyarrow as pa

    log = _log(codec, batches=12)
    view = memoryview(pa.py_buffer(log))
    assert view.format == "b"
    want = _rows(codec.decode_records(log, inflate_threads=0))
    for threads in (0, 1, 2, None):
        assert _rows(codec.decode_records(view, inflate_threads=threads)) == want
        assert codec.decode_arrow(view, inflate_threads=threads).equals(codec.decode_arrow(log, inflate_threads=0))
    payload = b"signed chars " * 300
    for cid in (compression.SNAPPY, compression.LZ4, compression.ZSTD, compression.GZIP):
        packed = compression.compress(cid, payload)
        if cid == compression.LZ4:
            assert packed[6] >= 0x80  # the header checksum byte: negative as a signed char
        assert compression.decompress(cid, memoryview(pa.py_buffer(packed))) == payload
