"""zstd payloads of ``compression.ZSTD_SPLIT_MIN`` record bytes or more are cut at half their bytes, and the
compiled builders compress the halves at once, the second on a worker thread (``_c/deflate.h``): with
``zstd_frames=2`` as two frames, with one frame (the default) joined into one where the libzstd they load
allows (``_zstd_joins``; python-zstandard's does).

What must hold: the cut depends on the size alone (with or without the C path or a thread, a backend writes
the same bytes; both backends write the same two frames), each frame holds its half, a joined frame is one
frame holding the whole records section, every reader takes the payload (kafkatx's fast path and its
Python path, python-zstandard, cramjam; aiokafka and kafka-python in ``test_differential``; Kafka's own
classes in ``test_oracle``'s ``large_zstd_two_frames`` and ``large_zstd_level_*`` cases), and the worker
thread is shared safely: builders on many threads, after fork(), and a worker that has not started when
the caller is done (the caller compresses the half itself).
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import textwrap

import cramjam
import pytest
import zstandard

import _spec
from conftest import load_backend, run_threads
from kafkatx import compression

CY = load_backend("cython")
PY = load_backend("python")
SPLIT = compression.ZSTD_SPLIT_MIN
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
    if len(records) >= SPLIT and CY._zstd_joins():  # the halves' blocks in one frame: other bytes
        assert cy != py
    elif bundled or not version:  # one pass with the twin's libzstd
        assert cy == py
    want = [_spec.rec_tuple(r) for r in PY.decode_records(py)]
    assert [_spec.rec_tuple(r) for r in CY.decode_records(cy)] == want
    assert [_spec.rec_tuple(r) for r in PY.decode_records(cy)] == want
    assert [_spec.rec_tuple(r) for r in CY.decode_records(cy, inflate_threads=0)] == want
    return cy[61:]


@pytest.mark.parametrize("level", [None, 1, 4, 5, 19, -5])
@pytest.mark.parametrize("size", [SPLIT - 1, SPLIT, 300_000])
def test_one_frame_payloads_are_joined_from_halves_from_split_min_on(size, level):
    """The second half is compressed with the first half as its history (_c/deflate.h): one frame that
    every reader takes."""
    v = _one_record_section(size) if size <= SPLIT else None
    _check_one_frame([v] if v is not None else _values(size), level)


@pytest.mark.parametrize("level, total", [(1, 1_300_000), (5, 3_200_000), (5, 5_000_000)])
def test_joined_frames_of_megabytes_inflate(level, total):
    """Payloads larger than the level's window (512 KiB at level 1, 2 MiB at level 5 for these sizes)."""
    _check_one_frame(_values(total), level)


def _seam_value(first_tail: bytes, second_head: bytes, total: int, seed: int) -> bytes:
    """One record's value whose records section is cut (at half its bytes) between ``first_tail`` and
    ``second_head``, random bytes around them: ``total`` bytes."""
    rnd = random.Random(seed)
    fill = total - len(first_tail) - len(second_head)
    a = fill // 2
    for _ in range(2):
        value = rnd.randbytes(a) + first_tail + second_head + rnd.randbytes(fill - a)
        section = _batch(CY, [value], "none")[61:]
        a += len(section) // 2 - (section.index(first_tail + second_head) + len(first_tail))
    assert section[len(section) // 2 :].startswith(second_head)
    return value


@pytest.mark.parametrize("level", [None, 1])
def test_a_joined_frames_second_half_does_not_use_the_first_halfs_repeat_offsets(level):
    """The decoder carries the repeat offsets of the first half's last sequences into the second half; the
    second half's compressor starts with a new frame's (1, 4, 8) unless they are cleared.  Here the first
    half ends with matches 5 bytes back and the second opens with a run of zeros (a match 1 byte back)."""
    pattern = random.Random(1).randbytes(5)
    _check_one_frame([_seam_value(pattern * 1200, bytes(20_000), 140_000, 3)], level)


@pytest.mark.parametrize("level", [5, 9, 13])
def test_a_joined_frame_of_megabytes_inflates_in_its_window(level):
    """libzstd lets matches reach anywhere in the history it is given, a decoder only a window back (4 MiB
    here), so the second half's history is cut to what fits beside it in the window.  (This libzstd's
    matchers did not reach past the window with the whole first half given, in our trials; the cut keeps
    it so for any.)  The 5 MB value's last 800 KB repeat its first 800 KB, 4.2 MB back; the streamed
    inflation keeps only the window."""
    far = random.Random(4).randbytes(800_000)
    _check_one_frame([far + random.Random(5).randbytes(3_400_000) + far], level)


def test_history_that_opens_like_a_zstd_dictionary_is_not_taken_for_one():
    """The second half's history is given to libzstd as a dictionary; starting with a dictionary's magic
    number it would be parsed as one (and fail): it starts a byte later then.  (A records section cannot
    open with it, a record's length being a varint of at least 0; the history starts inside a payload of
    more than the window, where the second half and the history beside it fill the window.)"""
    base = random.Random(9).randbytes(3_100_000)
    section = _batch(CY, [base], "none")[61:]
    window = zstandard.get_frame_parameters(_batch(CY, [base], zstd_frames=1)[61:]).window_size
    start = len(section) - window - section.index(base)  # where the history starts, in the value
    assert 0 < start < len(base) // 2
    value = base[:start] + bytes.fromhex("37a430ec") + base[start + 4 :]
    assert _batch(CY, [value], "none")[61:][len(section) - window :][:4] == bytes.fromhex("37a430ec")
    _check_one_frame([value])


def test_a_value_repeated_across_the_cut_compresses_as_in_one_pass():
    """The second half's history is the whole first half (within the window), not only its end: a 30 KB
    value sent eight times takes no more room joined than in one pass."""
    value = random.Random(3).randbytes(30_000)
    for level in (1, 3, 19):
        joined = _check_one_frame([value] * 8, level)
        assert len(joined) <= len(compression.compress(compression.ZSTD, _batch(CY, [value] * 8, "none")[61:],
                                                       level)) + 64


def test_a_joined_frame_is_the_same_bytes_whoever_compresses_the_second_half():
    """On one CPU (no worker: the caller compresses both halves in turn) the bytes are the ones written here
    with the worker."""
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
