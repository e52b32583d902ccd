"""kafkatx.log.index: Kafka's .index / .timeindex files, segment file names and checkpoint files.

Expected bytes are built here with plain ``struct``; expected lookups with a brute-force search.
"""

from __future__ import annotations

import os
import random
import struct

import pytest

from _log_build import PartitionBuilder, standard_scenario
from kafkatx.errors import CorruptIndexError, KafkaTxError
from kafkatx.log import (
    CheckpointError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    TimeIndex,
    parse_segment_file_name,
    read_checkpoint,
    segment_file_name,
    write_checkpoint,
)


# ------------------------------------------------------------------------------------ file names
def test_segment_file_names():
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(1000, ".timeindex") == "00000000000000001000.timeindex"
    assert segment_file_name(2**63 - 1, ".index") == "09223372036854775807.index"
    for base in (0, 7, 123456789012, 2**63 - 1):
        for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".log.deleted"):
            assert parse_segment_file_name(segment_file_name(base, suffix)) == (base, suffix)
    assert parse_segment_file_name("/a/b/00000000000000000042.index.swap") == (42, ".index.swap")
    for bad in ("leader-epoch-checkpoint", "abc.log", ".log", "00000000000000000042", "-1.log", "٣.log"):
        with pytest.raises(ValueError):
            parse_segment_file_name(bad)
    with pytest.raises(ValueError):
        segment_file_name(-1, ".log")


# ------------------------------------------------------------------------------------ offset index
def _model_lookup(entries, base, target):
    best = (base, 0)
    for off, pos in entries:
        if off <= target:
            best = (off, pos)
    return best


def test_offset_index_append_lookup_and_bytes(tmp_path):
    rng = random.Random(5)
    base = 1_000_000
    path = tmp_path / segment_file_name(base, ".index")
    ix = OffsetIndex(path, base, max_index_size=8 * 300 + 5, writable=True)
    assert os.path.getsize(path) == 8 * 300  # preallocated, rounded down to whole entries
    assert ix.max_entries == 300 and len(ix) == 0 and ix.last_offset == base
    entries = []
    off, pos = base, 0
    for _ in range(200):
        off += rng.randint(1 if entries else 0, 50)
        pos += rng.randint(1, 5000)
        ix.append(off, pos)
        entries.append((off, pos))
    assert ix.entries() == entries and ix.last_offset == entries[-1][0]
    for target in [base - 1, base, *[rng.randint(base, off + 100) for _ in range(500)], 2**62]:
        assert tuple(ix.lookup(target)) == _model_lookup(entries, base, target), target
    ix.flush()
    raw = path.read_bytes()
    assert len(raw) == 8 * 300
    assert raw[: 8 * 200] == b"".join(struct.pack(">ii", o - base, p) for o, p in entries)
    assert raw[8 * 200 :] == bytes(8 * 100)
    ix.close()
    assert path.read_bytes() == raw[: 8 * 200]  # close trims to the entries, as Kafka does
    ro = OffsetIndex(path, base)
    assert ro.entries() == entries and ro.preallocated_bytes == 0
    ro.sanity_check()
    offsets, positions = ro.arrays()
    assert offsets.tolist() == [o for o, _ in entries] and positions.tolist() == [p for _, p in entries]


def test_offset_index_rejects_bad_appends(tmp_path):
    ix = OffsetIndex(tmp_path / "a.index", 100, max_index_size=24, writable=True)
    ix.append(100, 0)
    for off in (100, 99):
        with pytest.raises(InvalidOffsetError, match="no larger than the last offset"):
            ix.append(off, 10)
    with pytest.raises(InvalidOffsetError, match="overflow"):
        ix.append(100 + 2**31, 10)
    ix.append(105, 10)
    ix.append(106, 20)
    with pytest.raises(IndexFullError):
        ix.append(107, 30)
    assert isinstance(IndexFullError("x"), KafkaTxError) and isinstance(InvalidOffsetError("x"), KafkaTxError)
    assert ix.entries() == [(100, 0), (105, 10), (106, 20)]
    ix.close()
    ro = OffsetIndex(tmp_path / "a.index", 100)
    with pytest.raises(ValueError):
        ro.append(200, 1)
    with pytest.raises(ValueError):
        OffsetIndex(tmp_path / "b.index", 0, max_index_size=7, writable=True)
    below = OffsetIndex(tmp_path / "c.index", 100, writable=True)
    with pytest.raises(InvalidOffsetError):
        below.append(99, 0)
    below.close()


@pytest.mark.parametrize("target", [0, 100, 101, 104, 105, 106, 150, 10**6])
def test_offset_index_truncate_to(tmp_path, target):
    entries = [(100, 0), (105, 10), (106, 20), (140, 30)]
    ix = OffsetIndex(tmp_path / "a.index", 100, max_index_size=800, writable=True)
    for e in entries:
        ix.append(*e)
    ix.truncate_to(target)
    keep = [e for e in entries if e[0] < target]
    assert ix.entries() == keep
    ix.append(10**6 + 1, 40)  # appends continue after the kept entries
    ix.flush()
    assert OffsetIndex(tmp_path / "a.index", 100).entries() == keep + [(10**6 + 1, 40)]
    ix.close()


def test_preallocated_zero_tail_after_a_crash(tmp_path):
    """A broker that dies leaves the active index at its preallocated size with a zero tail; Kafka's
    AbstractIndex would count the zeros as entries, we stop at the real ones."""
    path = tmp_path / "00000000000000000500.index"
    ix = OffsetIndex(path, 500, max_index_size=8000, writable=True)
    for i in range(1, 11):
        ix.append(500 + 3 * i, 100 * i)
    ix.flush()
    ix.__del__()  # the process dies: no close(), so no trim
    assert os.path.getsize(path) == 8000
    ro = OffsetIndex(path, 500)
    assert len(ro) == 10 and ro.entries()[-1] == (530, 1000)
    assert ro.preallocated_bytes == 8000 - 80 and ro.invalid_position is None
    ro.sanity_check()
    assert ro.lookup(10**9) == (530, 1000)
    # a first real entry (base, 0) followed by zeros is kept; an all-zero file is empty
    path2 = tmp_path / "00000000000000000000.index"
    path2.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 4, 77) + bytes(80))
    assert OffsetIndex(path2, 0).entries() == [(0, 0), (4, 77)]
    path2.write_bytes(bytes(800))
    assert OffsetIndex(path2, 0).entries() == [] and OffsetIndex(path2, 0).lookup(5) == (0, 0)
    path2.write_bytes(bytes(8))  # a trimmed index with the single entry (base, 0)
    assert OffsetIndex(path2, 0).entries() == [(0, 0)]
    # reopening writable resumes after the real entries, zeroing nothing valid
    w = OffsetIndex(path, 500, max_index_size=8000, writable=True)
    w.append(600, 5000)
    w.close()
    assert OffsetIndex(path, 500).entries()[-2:] == [(530, 1000), (600, 5000)]


def test_sanity_check_reports_file_and_position(tmp_path):
    path = tmp_path / "00000000000000000010.index"
    good = b"".join(struct.pack(">ii", r, p) for r, p in [(1, 10), (5, 50), (9, 90)])
    # stale entries behind the write position (truncateTo only moves it) are not trusted
    path.write_bytes(good + struct.pack(">ii", 2, 20) + struct.pack(">ii", 3, 30))
    ix = OffsetIndex(path, 10)
    assert ix.entries() == [(11, 10), (15, 50), (19, 90)]
    with pytest.raises(CorruptIndexError) as ei:
        ix.sanity_check()
    assert ei.value.position == 24 and ei.value.file == str(path) and str(path) in str(ei.value)
    path.write_bytes(good + b"\x00\x00\x00")  # length not a multiple of 8
    ix = OffsetIndex(path, 10)
    assert len(ix) == 3 and ix.partial_bytes == 3
    with pytest.raises(CorruptIndexError, match="not a multiple of 8") as ei:
        ix.sanity_check()
    assert ei.value.position == 24
    path.write_bytes(struct.pack(">ii", -1, 0) + good)  # an entry below the base offset
    ix = OffsetIndex(path, 10)
    assert len(ix) == 0
    with pytest.raises(CorruptIndexError) as ei:
        ix.sanity_check()
    assert ei.value.position == 0
    missing = OffsetIndex(tmp_path / "nope.index", 10)
    assert not missing.exists and len(missing) == 0 and missing.lookup(50) == (10, 0)
    assert not (tmp_path / "nope.index").exists()  # a reader never creates files
    missing.sanity_check()


# ------------------------------------------------------------------------------------ time index
def test_time_index_maybe_append_rules(tmp_path):
    path = tmp_path / "00000000000000000100.timeindex"
    t = TimeIndex(path, 100, max_index_size=12 * 6 + 11, writable=True)
    assert os.path.getsize(path) == 72 and t.max_entries == 6
    assert t.last_entry() == (-1, 100)
    assert t.append(-1, 100) is False  # NO_TIMESTAMP is never indexed
    assert t.append(1000, 100) is True
    assert t.append(1000, 105) is False  # equal timestamp: ignored (segment roll / close repeat the last)
    assert t.append(1000, 100) is False
    assert t.append(1500, 100) is True  # same offset, larger timestamp: kept
    with pytest.raises(InvalidOffsetError, match="offset"):
        t.append(2000, 99)
    with pytest.raises(InvalidOffsetError, match="timestamp"):
        t.append(1400, 120)
    assert t.append(2000, 130) and t.append(2500, 140) and t.append(3000, 150)
    assert t.is_full()  # the last slot is reserved for the roll
    with pytest.raises(IndexFullError):
        t.append(3500, 160)
    assert t.append(3500, 160, skip_full_check=True)
    assert t.entries() == [(1000, 100), (1500, 100), (2000, 130), (2500, 140), (3000, 150), (3500, 160)]
    with pytest.raises(IndexFullError):
        t.append(4000, 170, skip_full_check=True)
    t.flush()
    expected_bytes = b"".join(struct.pack(">qi", ts, off - 100) for ts, off in t.entries())
    assert path.read_bytes() == expected_bytes
    for target in (-5, 999, 1000, 1499, 1500, 2100, 10**15):
        want = (-1, 100)
        for ts, off in t.entries():
            if ts <= target:
                want = (ts, off)
        assert tuple(t.lookup(target)) == want
    t.truncate_to(140)
    assert t.entries() == [(1000, 100), (1500, 100), (2000, 130)]
    t.truncate_to(100)
    assert t.entries() == [] and t.last_entry() == (-1, 100)
    t.close()
    assert path.read_bytes() == b""


def test_time_index_zero_tail_and_stale_entries(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    t = TimeIndex(path, 0, max_index_size=1200, writable=True)
    for i in range(5):
        t.append(10_000 + i, 2 * i)
    t.flush()
    t.__del__()  # crash: no trim
    ro = TimeIndex(path, 0)
    assert len(ro) == 5 and ro.preallocated_bytes == 1200 - 60
    ro.sanity_check()
    raw = bytearray(path.read_bytes())
    raw[60:72] = struct.pack(">qi", 5, 1)  # a stale entry with a smaller timestamp behind the real ones
    path.write_bytes(bytes(raw))
    ro = TimeIndex(path, 0)
    assert len(ro) == 5
    with pytest.raises(CorruptIndexError) as ei:
        ro.sanity_check()
    assert ei.value.position == 60


# ------------------------------------------------------------------------------------ indexes of a real log
def test_indexes_written_for_a_log_point_at_batches(tmp_path):
    b = PartitionBuilder(tmp_path)
    standard_scenario(b)
    b.write()
    by_pos = {(x.segment, x.position): x for x in b.batches}
    checked = 0
    for i, seg in enumerate(b.segs):
        ix = OffsetIndex(b.seg_path(i, ".index"), seg.base)
        ix.sanity_check()
        assert ix.entries() == seg.index
        for off, pos in ix.entries():
            batch = by_pos[(i, pos)]
            assert batch.last_offset == off  # Kafka indexes a batch's last offset at its position
            checked += 1
        tix = TimeIndex(b.seg_path(i, ".timeindex"), seg.base)
        tix.sanity_check()
        assert tix.entries() == seg.time
        active = i == len(b.segs) - 1
        assert (tix.preallocated_bytes > 0) == active and (ix.preallocated_bytes > 0) == active
    assert checked >= 10


# ------------------------------------------------------------------------------------ checkpoints
def test_checkpoint_round_trip_and_bytes(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    offsets = {("orders", 0): 1234, ("orders", 1): 0, ("__transaction_state", 17): 2**40, ("a.b_c-d", 3): 7}
    write_checkpoint(path, offsets)
    text = path.read_text()
    lines = text.split("\n")
    assert lines[0] == "0" and lines[1] == "4" and lines[-1] == "" and len(lines) == 7
    assert sorted(lines[2:6]) == sorted(f"{t} {p} {o}" for (t, p), o in offsets.items())
    assert read_checkpoint(path) == offsets
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()
    write_checkpoint(path, [("x", 1, 5)])  # replaces atomically
    assert read_checkpoint(path) == {("x", 1): 5}
    write_checkpoint(path, {})
    assert path.read_text() == "0\n0\n" and read_checkpoint(path) == {}
    with pytest.raises(ValueError):
        write_checkpoint(path, {("has space", 0): 1})


@pytest.mark.parametrize(
    "text, line",
    [
        ("1\n0\n", 1),
        ("x\n", 1),
        ("0\ntwo\n", 2),
        ("0\n1\nt 0\n", 3),
        ("0\n1\nt zero 5\n", 3),
        ("0\n2\nt 0 5\nu 1 x\n", 4),
        ("0\n2\nt 0 5\n", None),
        ("0\n1\nt 0 5\nu 1 6\n", None),
        # what Java's Integer.parseInt / Long.parseLong refuse and Python's int() takes
        ("0\n1\nt 0 1_000\n", 3),
        ("0\n1\nt 0 99999999999999999999\n", 3),
        ("0\n1\nt 4294967296 5\n", 3),
        ("0\n1\nt 0 \u0665\n", 3),
        ("0\n1\n t 0 5\n", 3),  # a leading space: Kafka's split("\\s+") gives an empty first field
        ("0\n1_0\nt 0 5\n", 2),
    ],
)
def test_malformed_checkpoints(tmp_path, text, line):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError) as ei:
        read_checkpoint(path)
    assert isinstance(ei.value, KafkaTxError)
    assert ei.value.file == str(path) and str(path) in str(ei.value)
    assert ei.value.line == line


def test_checkpoint_lenient_cases(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    assert read_checkpoint(path) == {}  # missing: the broker writes them lazily
    with pytest.raises(FileNotFoundError):
        read_checkpoint(path, missing_ok=False)
    path.write_text("")
    assert read_checkpoint(path) == {}
    path.write_text("0\n")
    assert read_checkpoint(path) == {}
    path.write_text("0\n1\nt\t0   9\n")  # fields split on any whitespace, as Kafka's "\\s+"
    assert read_checkpoint(path) == {("t", 0): 9}
    path.write_text("0\n1\nt 0 -9 \n")  # a sign; trailing empty fields dropped, as Java's split drops them
    assert read_checkpoint(path) == {("t", 0): -9}
