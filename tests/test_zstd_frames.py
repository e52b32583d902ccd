"""Large zstd payloads are compressed in pieces on two cores by the compiled builders, some pieces on a
worker thread (``_c/deflate.h``): with ``zstd_frames=2`` as two frames cut at half the record bytes from
``compression.ZSTD_SPLIT_MIN`` on; with one frame (the default), where the libzstd they load allows
(``_zstd_joins``; python-zstandard's does), as one frame joined from pieces (``_zstd_join_layout``: parts
of 64 KiB, then as long as the records before them up to one pass's window at the level, then the rest in
one piece or two halves), each compressed with the records before it (up to as many) as history, so that
every byte reaches at least as far back as in one pass, which a BatchBuilder queues for the
worker while it is still appending; the frame's header, written last, gives its content size.

What must hold: the cuts depend on the size alone (with or without the C path, a thread or a builder's
queue, a backend writes the same bytes; both backends write the same two frames), each frame holds its
half, a joined frame is one frame holding the whole records section, every reader takes the payload
(kafkatx's fast path and its Python path, python-zstandard, cramjam; aiokafka and kafka-python in
``test_differential``; Kafka's own classes in ``test_oracle``'s ``large_zstd*`` cases), and the worker
thread is shared safely: builders on many threads, builders dropped with parts queued, after fork(), and
a worker that has not started when the caller is done (the caller compresses the piece itself).
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import textwrap
import time

import cramjam
import pytest
import zstandard

import _spec
from conftest import load_backend, run_threads
from kafkatx import compression

CY = load_backend("cython")
PY = load_backend("python")
SPLIT = compression.ZSTD_SPLIT_MIN
JOINS = bool(CY._zstd_compressor()[0] and CY._zstd_joins())
PART, BIG = CY._zstd_join_layout() if JOINS else (64 << 10, 1 << 20)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _batch(codec, values, compression_name="zstd", zstd_frames=2, **kw):
    b = codec.BatchBuilder(base_offset=7, producer_id=3, producer_epoch=1, base_sequence=0, transactional=True,
                           compression=compression_name, zstd_frames=zstd_frames, **kw)
    for i, v in enumerate(values):
        b.append(v, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i, headers=[("i", b"%d" % i)])
    return b.build()


def _values(total: int, seed: int = 1) -> list:
    """Values of about ``total`` bytes in all: text with some repetition, as records are."""
    out, n, i = [], 0, 0
    while n < total:
        v = b"event=%d user=u%d " % (i, (i * 7919) % 1000) + _spec.lcg_bytes(20 + i % 60, seed + i)
        out.append(v)
        n += len(v)
        i += 1
    return out


def _frames(payload: bytes) -> list:
    """The payload's zstd frames, each inflated on its own."""
    d = zstandard.ZstdDecompressor()
    return [d.decompressobj().decompress(payload[start:stop])
            for start, stop, _ in compression._zstd_frames(memoryview(payload))]


def _one_record_section(size: int) -> bytes:
    """A value whose one-record batch has a records section of exactly ``size`` bytes."""
    for n in range(size - 30, size):
        v = _spec.lcg_bytes(n, 5)
        if len(_batch(CY, [v], "none")) - 61 == size:
            return v
    raise AssertionError(size)


@pytest.mark.parametrize("size, frames", [(SPLIT - 1, 1), (SPLIT, 2), (SPLIT + 1, 2)])
def test_the_cut_is_at_half_the_records_bytes_from_split_min_on(codec, size, frames):
    v = _one_record_section(size)
    records = _batch(codec, [v], "none")[61:]
    assert len(records) == size
    parts = _frames(_batch(codec, [v])[61:])
    assert len(parts) == frames
    if frames == 2:
        assert parts == [records[: size // 2], records[size // 2 :]]
    else:
        assert parts == [records]


def test_one_frame_is_the_default(codec):
    values = _values(300_000)
    b = codec.BatchBuilder(compression="zstd")
    for i, v in enumerate(values):
        b.append(v, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i, headers=[("i", b"%d" % i)])
    default = b.build()
    assert len(_frames(default[61:])) == 1
    assert default[61:] == _batch(codec, values, zstd_frames=1)[61:]
    assert _frames(default[61:]) == [b"".join(_frames(_batch(codec, values)[61:]))]


@pytest.mark.parametrize("bad, error", [(0, ValueError), (3, ValueError), (-1, ValueError), (True, TypeError),
                                        (2.0, TypeError), ("2", TypeError), (None, TypeError)])
def test_zstd_frames_other_than_1_or_2_is_refused_alike(codec, bad, error):
    import pyarrow as pa

    with pytest.raises(error, match="zstd_frames must be (the integer )?1 or 2"):
        codec.BatchBuilder(compression="zstd", zstd_frames=bad)
    with pytest.raises(error, match="zstd_frames must be (the integer )?1 or 2"):
        codec.encode_arrow(pa.table({"value": [b"v"]}), compression="zstd", zstd_frames=bad)


def test_zstd_frames_takes_any_integer_type(codec):
    """As the other integer arguments do: numpy integers and other ``__index__`` types."""
    import numpy as np

    values = _values(100_000)
    want = _batch(codec, values, zstd_frames=2)
    assert _batch(codec, values, zstd_frames=np.int64(2)) == want
    assert _batch(codec, values, zstd_frames=np.int8(1)) == _batch(codec, values, zstd_frames=1)


def test_encode_arrow_writes_the_builders_frames(codec):
    import pyarrow as pa

    values = _values(200_000)
    table = pa.table({"value": values})
    for frames in (1, 2):
        b = codec.BatchBuilder(compression="zstd", zstd_frames=frames)
        for v in values:
            b.append(v, timestamp=5)
        built = b.build()
        encoded = codec.encode_arrow(table, records_per_batch=len(values), compression="zstd", timestamp=5,
                                     zstd_frames=frames)
        assert encoded == built
        assert len(_frames(encoded[61:])) == frames


@pytest.mark.parametrize("level", [None, 1, 19, -5])
def test_both_backends_write_the_same_frames(level):
    values = _values(300_000)
    cy, py = _batch(CY, values, compression_level=level), _batch(PY, values, compression_level=level)
    version, bundled = CY._zstd_compressor()
    if bundled or not version:  # python-zstandard's own libzstd (or none in C): the same bytes
        assert cy == py
    else:  # the system's: another libzstd version may choose other matches, in the same frames
        assert _frames(cy[61:]) == _frames(py[61:])
    assert [_spec.rec_tuple(r) for r in CY.decode_records(cy)] == [_spec.rec_tuple(r) for r in PY.decode_records(py)]


def test_the_python_path_writes_what_the_c_path_writes():
    """KAFKATX_SYSTEM_LIBS=0 keeps the compiled codec off every loaded library: compression._zstd writes the
    two frames, one after the other, with python-zstandard."""
    script = textwrap.dedent("""
        import sys, kafkatx._codec as c
        sys.path.insert(0, sys.argv[1])
        from test_zstd_frames import _batch, _values
        sys.stdout.write(_batch(c, _values(200_000)).hex() + " %d %d" % c._zstd_compressor())
    """)
    env = dict(os.environ, KAFKATX_SYSTEM_LIBS="0", PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"),
                                                                               os.path.join(ROOT, "tests")]))
    r = subprocess.run([sys.executable, "-c", script, os.path.join(ROOT, "tests")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    hexed, version, bundled = r.stdout.split()
    assert (version, bundled) == ("0", "0")  # no library in C: the Python path wrote it
    here = _batch(CY, _values(200_000))
    assert len(_frames(here[61:])) == 2
    if CY._zstd_compressor()[1]:
        assert bytes.fromhex(hexed) == here
    else:
        assert _frames(bytes.fromhex(hexed)[61:]) == _frames(here[61:])


def test_two_frame_payloads_take_the_fast_path_and_decode_alike():
    data = _batch(CY, _values(500_000))
    payload = data[61:]
    assert len(list(compression._zstd_frames(memoryview(payload)))) == 2
    if CY.ZSTD_SYSTEM_VERSION:
        assert CY._fast_path_bound(payload, 4) >= 500_000
    want = [_spec.rec_tuple(r) for r in PY.decode_records(data)]
    for kw in ({}, {"inflate_threads": 0}, {"inflate_threads": 1}):
        assert [_spec.rec_tuple(r) for r in CY.decode_records(data, **kw)] == want
        assert CY.decode_arrow(data, **kw).num_rows == len(want)


@pytest.mark.parametrize("frames", [1, 2])
def test_the_worker_compresses_second_halves_where_two_cpus_may_be_used(frames):
    before = CY._zstd_worker_jobs()
    values = _values(2_000_000)  # a ~1 ms half: a worker that can run has started on it by then
    for _ in range(20):
        _batch(CY, values, zstd_frames=frames)
        if CY._zstd_worker_jobs() > before:
            break
    if CY._zstd_compressor()[0] and compression.usable_cpus() >= 2 and (frames == 2 or CY._zstd_joins()):
        assert CY._zstd_worker_jobs() > before
    else:
        assert CY._zstd_worker_jobs() == before


@pytest.mark.parametrize("frames", [1, 2])
def test_builders_on_many_threads_share_the_worker(frames):
    sets = [_values(150_000 + 20_000 * i, seed=i) for i in range(6)]
    want = [_batch(PY, v, zstd_frames=frames) for v in sets]
    got = [None] * len(sets)

    def work(i):
        for _ in range(5):
            out = _batch(CY, sets[i], zstd_frames=frames)
            assert got[i] is None or got[i] == out
            got[i] = out

    assert run_threads(work, len(sets)) == []
    for g, w in zip(got, want):
        assert _frames(g[61:]) == _frames(w[61:])
        assert [_spec.rec_tuple(r) for r in CY.decode_records(g)] == [_spec.rec_tuple(r) for r in PY.decode_records(w)]


# ----------------------------------------------------------------------------------- one joined frame
def _inflations(payload: bytes) -> list:
    """The payload inflated by python-zstandard in one call and as a stream read 4 KiB at a time (the
    decoder keeping only the frame's window), and by cramjam."""
    d = zstandard.ZstdDecompressor()
    streamed = []
    with d.stream_reader(io.BytesIO(payload), read_size=4096) as r:
        while chunk := r.read(4096):
            streamed.append(chunk)
    return [d.decompressobj().decompress(payload), b"".join(streamed), bytes(cramjam.zstd.decompress(payload))]


def _pieces(n: int, big: int = BIG) -> list:
    """The pieces ``(start, length, history)`` of a joined frame of ``n`` record bytes, as _c/deflate.h
    cuts them (written out here from its description, to check it against)."""
    def part(s):
        return PART if s == 0 else min(s, big)

    rest = 0
    while rest + part(rest) < n:
        rest += part(rest)
    out, s = [], 0
    while s < n:
        length = part(s) if s < rest else (n - rest) // 2 if s == rest and n - rest > PART else n - s
        out.append((s, length, min(s, big)))
        s += length
    return out


def _block_ends(payload: bytes) -> list:
    """Where the blocks of the one frame ``payload`` end in its content: the payload fed to a streaming
    decoder a block at a time (python-zstandard gives out each block's content as it is read whole)."""
    fhd = payload[4]
    single, fcs_flag, did = (fhd >> 5) & 1, fhd >> 6, fhd & 3
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[did] + ((1 if single else 0), 2, 4, 8)[fcs_flag]
    d = zstandard.ZstdDecompressor().decompressobj()
    ends, total, fed = [], 0, 0
    while True:
        header = int.from_bytes(payload[pos : pos + 3], "little")
        size = 1 if (header >> 1) & 3 == 1 else header >> 3
        pos += 3 + size
        total += len(d.decompress(payload[fed:pos]))  # (the frame header with the first block)
        ends.append(total)
        fed = pos
        if header & 1:
            return ends


def _check_one_frame(values, level=None) -> bytes:
    """Build ``values`` into one-frame zstd batches on both backends and check them; the compiled payload."""
    records = _batch(CY, values, "none")[61:]
    cy, py = _batch(CY, values, zstd_frames=1, compression_level=level), _batch(PY, values, zstd_frames=1,
                                                                                compression_level=level)
    for payload in (cy[61:], py[61:]):
        assert len(_frames(payload)) == 1
        assert _inflations(payload) == [records] * 3
    assert py[61:] == compression.compress(compression.ZSTD, records, level)  # one pass
    version, bundled = CY._zstd_compressor()
    if len(records) > PART and CY._zstd_joins():  # the pieces' blocks in one frame: other bytes
        assert cy != py
        # the header gives the content size; every piece ends a block
        assert zstandard.get_frame_parameters(cy[61:]).content_size == len(records)
        big = CY._zstd_join_layout(level)[1]
        assert {s + n for s, n, _ in _pieces(len(records), big)} <= set(_block_ends(cy[61:]))
    elif bundled or not version:  # one pass with the twin's libzstd
        assert cy == py
    want = [_spec.rec_tuple(r) for r in PY.decode_records(py)]
    assert [_spec.rec_tuple(r) for r in CY.decode_records(cy)] == want
    assert [_spec.rec_tuple(r) for r in PY.decode_records(cy)] == want
    assert [_spec.rec_tuple(r) for r in CY.decode_records(cy, inflate_threads=0)] == want
    return cy[61:]


@pytest.mark.parametrize("level", [None, 1, 4, 5, 19, -5])
@pytest.mark.parametrize("size", [PART, PART + 1, 300_000])
def test_one_frame_payloads_past_the_part_size_are_joined_from_parts(size, level):
    """Each part is compressed with the bytes before it as its history (_c/deflate.h): one frame that every
    reader takes."""
    v = _one_record_section(size) if size <= PART + 1 else None
    _check_one_frame([v] if v is not None else _values(size), level)


@pytest.mark.parametrize("level, total", [(1, 1_300_000), (5, 3_200_000), (22, 2_000_000)])
def test_joined_frames_of_megabytes_inflate(level, total):
    """Many pieces, at levels whose one-pass window would be 512 KiB to 128 MiB: a joined frame's window is
    its largest piece's (history and piece), never more than twice one pass's (a piece and its history
    each as long as one pass's window), or the content when that is less."""
    payload = _check_one_frame(_values(total), level)
    one_pass = compression.compress(compression.ZSTD, _batch(CY, _values(total), "none")[61:], level)
    window = zstandard.get_frame_parameters(payload).window_size
    assert window <= 2 * zstandard.get_frame_parameters(one_pass).window_size
    if CY._zstd_joins():
        big = CY._zstd_join_layout(level)[1]
        assert window == _content_size(payload) or window <= 2 * big


def _content_size(payload: bytes) -> int:
    return zstandard.get_frame_parameters(payload).content_size


def test_the_pieces_as_described():
    """The layout _c/deflate.h describes, on sizes around its cuts at level 3 (a 2 MiB window) and level 1
    (a 512 KiB window)."""
    assert _pieces(PART + 1) == [(0, PART, 0), (PART, 1, PART)]
    assert _pieces(400_000) == [(0, PART, 0), (PART, PART, PART), (2 * PART, 2 * PART, 2 * PART),
                                (4 * PART, 68_928, 4 * PART), (4 * PART + 68_928, 68_928, 4 * PART + 68_928)]
    assert [s for s, _, _ in _pieces(5 << 20)] == [0, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20, 2 << 20,
                                                   4 << 20, 9 << 19]
    assert [s for s, _, _ in _pieces(2 << 20, 1 << 19)] == [0, 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20,
                                                           3 << 19, 7 << 18]
    assert all(keep == min(s, 1 << 19) for s, _, keep in _pieces(3 << 20, 1 << 19))
    if CY._zstd_joins():
        assert [CY._zstd_join_layout(level)[1] for level in (-5, 1, None, 3, 9, 19, 22)] == [
            1 << 19, 1 << 19, 2 << 20, 2 << 20, 4 << 20, 8 << 20, 64 << 20]


def _seam_value(first_tail: bytes, second_head: bytes, total: int, seed: int) -> bytes:
    """One record's value whose records section is cut (at the end of the first part) between
    ``first_tail`` and ``second_head``, random bytes around them: ``total`` bytes."""
    rnd = random.Random(seed)
    fill = total - len(first_tail) - len(second_head)
    a = PART - len(first_tail)
    for _ in range(2):
        value = rnd.randbytes(a) + first_tail + second_head + rnd.randbytes(fill - a)
        section = _batch(CY, [value], "none")[61:]
        a += PART - (section.index(first_tail + second_head) + len(first_tail))
    assert section[PART:].startswith(second_head)
    return value


@pytest.mark.parametrize("level", [None, 1])
def test_a_joined_frames_parts_do_not_use_the_repeat_offsets_before_them(level):
    """The decoder carries the repeat offsets of a part's last sequences into the next part; the next part's
    compressor starts with a new frame's (1, 4, 8) unless they are cleared.  Here the first part ends with
    matches 5 bytes back and the second opens with a run of zeros (a match 1 byte back)."""
    pattern = random.Random(1).randbytes(5)
    _check_one_frame([_seam_value(pattern * 1200, bytes(20_000), 140_000, 3)], level)


@pytest.mark.parametrize("level", [5, 9, 13])
def test_a_joined_frame_of_megabytes_inflates_in_its_window(level):
    """libzstd lets matches reach anywhere in the history it is given, a decoder only a window back, so a
    part's history and the part must fit in the frame's window.  The 5 MB value's last 800 KB repeat its
    first 800 KB, 4.2 MB back; the streamed inflation keeps only the window."""
    far = random.Random(4).randbytes(800_000)
    _check_one_frame([far + random.Random(5).randbytes(3_400_000) + far], level)


def test_history_that_opens_like_a_zstd_dictionary_is_not_taken_for_one():
    """A piece's history is given to libzstd as a dictionary; starting with a dictionary's magic number it
    would be parsed as one (and fail): it starts a byte later then.  (A records section cannot open with
    it, a record's length being a varint of at least 0; only a history cut at one pass's window (2 MiB at
    level 3) starts inside the section.)  Here every history that starts inside the section opens with it:
    three of 7 MB's."""
    base = random.Random(9).randbytes(7_000_000)
    plain = _batch(CY, [base], "none")[61:]
    offset = plain.index(base)  # the value's place in the records section
    value = bytearray(base)
    starts = [s - keep for s, _, keep in _pieces(len(plain)) if s > keep]
    assert len(starts) == 3
    for start in starts:
        value[start - offset : start - offset + 4] = bytes.fromhex("37a430ec")
    section = _batch(CY, [bytes(value)], "none")[61:]
    assert len(section) == len(plain)
    assert all(section[start : start + 4] == bytes.fromhex("37a430ec") for start in starts)
    _check_one_frame([bytes(value)])


@pytest.mark.parametrize("level", [1, 3, 19])
def test_values_repeated_far_apart_compress_about_as_in_one_pass(level):
    """Repeats reach as far back as in one pass, up to the history.  45 KB JSON documents, each one number
    apart from the one before, sent forty times: one pass finds each document in the one before, and so
    does a piece, its history being all the records before it (with 64 KiB parts and 32 KiB of history
    this came out 57 times one pass's size).  A random 200 KB value sent eight times: at the fast levels
    the match finder skips ever faster through the piece's fresh random bytes and misses some of the next
    copy (one pass, the whole first copy compressed in the same stream, misses less), so the bound is
    looser there; at level 19 it finds them all."""
    rnd = random.Random(10)
    doc = json.dumps([{"k%d" % j: rnd.random() for j in range(20)} for _ in range(100)]).encode()
    documents = [doc.replace(b"0.1", b"0.%d" % i, 1) for i in range(40)]
    copies = [random.Random(3).randbytes(200_000)] * 8
    for values, bound in ((documents, 1.05), (copies, 1.02 if level == 19 else 1.6)):
        joined = _check_one_frame(values, level)
        one_pass = compression.compress(compression.ZSTD, _batch(CY, values, "none")[61:], level)
        assert len(joined) <= len(one_pass) * bound + 256


@pytest.mark.parametrize("level, documents", [(5, 6), (9, 8)])
def test_documents_recurring_a_megabyte_and_more_apart_compress_as_in_one_pass(level, documents):
    """200 KB documents sent in turn, each back 1.2 or 1.6 MB after it was last sent: within one pass's
    window (2 MiB at level 5, 4 MiB at level 9), and so within each piece's history (with histories of
    1 MiB these came out 1.55 and 2.46 times one pass's size)."""
    rnd = random.Random(5)
    docs = [rnd.randbytes(100_000).hex().encode() for _ in range(documents)]
    values = [docs[i % documents] for i in range(4 * documents)]
    joined = _check_one_frame(values, level)
    one_pass = compression.compress(compression.ZSTD, _batch(CY, values, "none")[61:], level)
    assert len(joined) <= len(one_pass) * 1.05


def test_a_joined_frame_is_the_same_bytes_whoever_compresses_the_parts():
    """On one CPU (no worker, no parts queued while appending: the caller compresses every part in turn)
    the bytes are the ones written here with the worker."""
    script = textwrap.dedent("""
        import os, sys
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        sys.path.insert(0, sys.argv[1])
        import kafkatx._codec as c
        from kafkatx import compression
        from test_zstd_frames import _batch, _values
        before = c._zstd_worker_jobs()
        out = _batch(c, _values(400_000), zstd_frames=1)
        sys.stdout.write(out.hex() + " %d %d" % (compression.usable_cpus(), c._zstd_worker_jobs() - before))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), os.path.join(ROOT, "tests")]))
    r = subprocess.run([sys.executable, "-c", script, os.path.join(ROOT, "tests")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    hexed, cpus, jobs = r.stdout.split()
    assert (cpus, jobs) == ("1", "0")
    assert bytes.fromhex(hexed) == _batch(CY, _values(400_000), zstd_frames=1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_starts_its_own_worker():
    script = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, sys.argv[1])
        import kafkatx._codec as c
        from test_zstd_frames import _batch, _values
        values = _values(300_000)
        first = _batch(c, values)  # the parent's worker is running now
        pid = os.fork()
        if pid == 0:
            ok = all(_batch(c, values) == first for _ in range(10))
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), _batch(c, values) == first)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), os.path.join(ROOT, "tests")]))
    r = subprocess.run([sys.executable, "-c", script, os.path.join(ROOT, "tests")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"]


def test_encode_arrow_checks_its_arguments_in_one_order_on_both_backends():
    import pyarrow as pa

    table = pa.table({"value": [b"v"]})
    for kw in (dict(timestamp_type="bogus", zstd_frames=3), dict(compression="bogus", timestamp_type="bogus"),
               dict(compression="zstd", compression_level=99, zstd_frames=0),
               dict(compression="gzip", zstd_frames="2", timestamp_type="bogus")):
        errors = []
        for codec in (CY, PY):
            with pytest.raises(Exception) as ei:
                codec.encode_arrow(table, **kw)
            errors.append((type(ei.value), str(ei.value)))
        assert errors[0] == errors[1], kw


# ------------------------------------------------------------------- parts queued while appending
STREAMS = bool(CY._zstd_compressor()[0] and CY._zstd_joins() and compression.usable_cpus() >= 2)


def _sized_values(size: int, seed: int) -> list:
    """Values whose BatchBuilder records section (keys, timestamps, headers as ``_batch`` writes them) is
    exactly ``size`` bytes."""
    values = []
    b = CY.BatchBuilder(base_offset=7, producer_id=3, producer_epoch=1, base_sequence=0, transactional=True)
    for i, v in enumerate(_values(size, seed)):
        if b.size_in_bytes() + len(v) + 200 > size:
            break
        b.append(v, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i, headers=[("i", b"%d" % i)])
        values.append(v)
    have = len(_batch(CY, values, "none")) - 61
    for n in range(size - have - 60, size - have + 1):
        last = _spec.lcg_bytes(n, seed)
        if len(_batch(CY, values + [last], "none")) - 61 == size:
            return values + [last]
    raise AssertionError(size)


@pytest.mark.parametrize("size", [PART - 1, PART, PART + 1, 2 * PART - 1, 2 * PART, 2 * PART + 1, 4 * PART + 1,
                                  5 * PART, 5 * PART + 1, 8 * PART + 1, 20 * PART + 7])
def test_a_builder_writes_the_same_joined_frame_with_or_without_its_queue(size, monkeypatch):
    """Sizes around the pieces' ends (a rest of one byte, of a part, of a part and a byte: two halves): a
    builder that queued parts while appending (two CPUs), encode_arrow
    (which never queues: it cuts the whole payload at once) and a builder on one CPU (no worker, no queue)
    write the same bytes, and building again gives them once more."""
    import pyarrow as pa

    values = _sized_values(size, size)
    records = _batch(CY, values, "none")[61:]
    assert len(records) == size
    b = CY.BatchBuilder(base_offset=7, producer_id=3, producer_epoch=1, base_sequence=0, transactional=True,
                        compression="zstd")
    for i, v in enumerate(values):
        b.append(v, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i, headers=[("i", b"%d" % i)])
    queued = b.build()
    assert b.build() == queued
    assert _inflations(queued[61:]) == [records] * 3
    assert len(_frames(queued[61:])) == 1
    plain = [v for v in values]
    table = pa.table({"value": plain})
    b = CY.BatchBuilder(compression="zstd")
    for v in plain:
        b.append(v, timestamp=5)
    assert CY.encode_arrow(table, records_per_batch=len(plain), compression="zstd", timestamp=5) == b.build()
    monkeypatch.setattr(compression, "usable_cpus", lambda: 1)
    assert _batch(CY, values, zstd_frames=1) == queued
    if size > PART and CY._zstd_joins():
        assert queued[61:] != compression.compress(compression.ZSTD, records, None)


@pytest.mark.skipif(not STREAMS, reason="needs python-zstandard's libzstd and two usable CPUs")
def test_the_worker_takes_a_builders_parts_before_it_is_built():
    """No wait on build(): the worker has compressed parts while the records were still being appended."""
    before = CY._zstd_worker_jobs()
    b = CY.BatchBuilder(compression="zstd")
    for v in _values(10 * PART):
        b.append(v, timestamp=5)
    deadline = time.monotonic() + 60
    while CY._zstd_worker_jobs() == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert CY._zstd_worker_jobs() > before
    assert len(_frames(b.build()[61:])) == 1


def test_builders_dropped_or_reset_with_parts_queued():
    """A builder dropped (or initialised again) while its parts wait in the queue or are being compressed
    takes them out or waits for them: no freed part is compressed, and the next builders are unharmed."""
    values = _values(20 * PART)
    want = _batch(CY, values[:100], zstd_frames=1)
    for _ in range(20):
        b = CY.BatchBuilder(compression="zstd")
        for v in values:
            b.append(v, timestamp=5)
        del b
        b = CY.BatchBuilder(compression="zstd")
        for v in values:
            b.append(v, timestamp=5)
        b.__init__(base_offset=7, producer_id=3, producer_epoch=1, base_sequence=0, transactional=True,
                   compression="zstd")
        for i, v in enumerate(values[:100]):
            b.append(v, key=b"key-%d" % i, timestamp=1_700_000_000_000 + i, headers=[("i", b"%d" % i)])
        assert b.build() == want
    assert [r.value for r in CY.decode_records(_batch(CY, values, zstd_frames=1))] == values


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_child_forked_while_parts_are_queued_builds_the_same_bytes():
    """The child has no worker: the part the parent's worker was compressing is queued again in the child,
    whose builder (or new worker) compresses it."""
    script = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, sys.argv[1])
        import kafkatx._codec as c
        from test_zstd_frames import _values
        values = _values(3_000_000)
        def fill(b, vs):
            for v in vs:
                b.append(v, timestamp=5)
        want = c.BatchBuilder(compression="zstd")
        fill(want, values)
        want = want.build()
        ok = True
        for _ in range(5):
            b = c.BatchBuilder(compression="zstd")
            fill(b, values[: len(values) // 2])  # parts queued, the worker on one of them
            pid = os.fork()
            if pid == 0:
                fill(b, values[len(values) // 2 :])
                os._exit(0 if b.build() == want else 3)
            fill(b, values[len(values) // 2 :])
            _, status = os.waitpid(pid, 0)
            ok = ok and os.waitstatus_to_exitcode(status) == 0 and b.build() == want
        print(ok)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), os.path.join(ROOT, "tests")]))
    r = subprocess.run([sys.executable, "-c", script, os.path.join(ROOT, "tests")], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True"]
