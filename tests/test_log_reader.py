"""kafkatx.log.reader: partition directories built on disk, read back against an independent model."""

from __future__ import annotations

import json
import os
import platform
import threading
import pathlib
import shutil
import struct
import subprocess
import sys

import pyarrow as pa
import kafkatx
import pytest

from _log_build import PartitionBuilder, rec_tuple, standard_scenario
from kafkatx.errors import CorruptRecordError, CrcMismatchError, KafkaTxError
from kafkatx.log import (
    CheckpointError,
    CorruptSegmentError,
    LogInconsistencyError,
    OffsetOutOfRangeError,
    TruncatedTail,
    open_log_dir,
    open_partition,
    write_checkpoint,
)
from kafkatx.txnindex import AbortedTxn, encode_txnindex, read_txnindex

VECTORS = pathlib.Path(__file__).parent / "vectors"
ISOLATIONS = ["read_committed", "read_uncommitted"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The standard scenario, written once (tests that modify files work on a copy)."""
    b = PartitionBuilder(tmp_path_factory.mktemp("std"))
    standard_scenario(b)
    b.write()
    return b


def _copy(b, tmp_path):
    dst = tmp_path / os.path.basename(b.dir)
    shutil.copytree(b.dir, dst)
    return str(dst)


def _tuples(records):
    return [rec_tuple(r) for r in records]


# ------------------------------------------------------------------------------------ the scenario itself
def test_scenario_has_the_shapes_the_tests_rely_on(built):
    b = built
    assert len(b.segs) >= 3
    aborted_a = b.txns[0]
    assert aborted_a["outcome"] == "abort"
    assert b.segment_of(aborted_a["first"]) < b.segment_of(aborted_a["marker"])  # starts before its ABORT's segment
    committed_c = next(t for t in b.txns if t["pid"] == 102 and t["outcome"] == "commit")
    assert b.segment_of(committed_c["first"]) < b.segment_of(committed_c["marker"])
    open_e = [t for t in b.txns if t["outcome"] is None]
    assert len(open_e) == 1 and b.last_stable_offset() == open_e[0]["first"] < b.log_end_offset
    assert any(r.offset > b.last_stable_offset() and r.txn is None for r in b.records)  # data beyond the LSO
    assert any(s.aborted for s in b.segs) and not all(s.aborted for s in b.segs)
    assert any(r.producer_id >= 0 and r.txn is None for r in b.records)  # idempotent producer


# ------------------------------------------------------------------------------------ offsets
def test_partition_offsets(built, codec):
    p = open_partition(built.dir, codec=codec)
    assert (p.topic, p.partition) == ("t", 0)
    assert [s.base_offset for s in p.segments] == [s.base for s in built.segs]
    assert p.log_start_offset == 0
    assert p.log_end_offset == built.log_end_offset
    assert p.high_watermark == built.log_end_offset
    assert p.last_stable_offset == built.last_stable_offset()
    assert p.open_transactions == {104: built.last_stable_offset()}
    assert p.truncated_tails == []
    assert [s.size for s in p.segments] == [len(s.data) for s in built.segs]
    assert all(s.has_offset_index for s in p.segments)
    assert [s.has_txn_index for s in p.segments] == [bool(s.aborted) for s in built.segs]
    p.close()


# ------------------------------------------------------------------------------------ reads vs the model
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_read_matches_model(built, codec, isolation):
    with open_partition(built.dir, codec=codec) as p:
        r = p.read(isolation=isolation)
        got = list(r)
        assert _tuples(got) == _tuples(built.expected(isolation))
        upper = built.last_stable_offset() if isolation == "read_committed" else built.log_end_offset
        assert r.upper_bound == upper
        assert r.next_offset == upper
        assert r.truncated_tails == [] and r.warnings == []
        offsets = [x.offset for x in got]
        assert offsets == sorted(set(offsets))


def test_read_committed_hides_aborted_and_markers(built, codec):
    with open_partition(built.dir, codec=codec) as p:
        got = {r.offset for r in p.read()}
    markers = {b.base_offset for b in built.batches if b.kind == "marker"}
    assert not got & markers
    for t in built.txns:
        txn_offsets = {r.offset for r in built.records if r.txn is not None and built.txns[r.txn] is t}
        assert txn_offsets
        if t["outcome"] == "commit":
            assert txn_offsets <= got
        else:
            assert not txn_offsets & got


def test_read_uncommitted_shows_aborted_never_markers(built, codec):
    with open_partition(built.dir, codec=codec) as p:
        got = [r.offset for r in p.read(isolation="read_uncommitted")]
    assert got == [r.offset for r in built.records]


def test_aborted_transactions_collected_across_segments(built, codec):
    """Starting inside transaction A (which began in segment 0) in its own segment still hides it."""
    a = built.txns[0]
    first_seg = built.segment_of(a["first"])
    abort_seg = built.segment_of(a["marker"])
    # a start offset in the segment of A's first batch but after it: A's ABORT is segments later
    start = a["first"] + 2
    assert built.segment_of(start) == first_seg < abort_seg
    with open_partition(built.dir, codec=codec) as p:
        r = p.read(start)
        got = list(r)
        assert (
            AbortedTxn(100, a["first"], a["marker"], built.segs[abort_seg].aborted[0].last_stable_offset)
            in r.aborted_transactions
        )
        assert _tuples(got) == _tuples(built.expected("read_committed", start=start))
        assert any(rr.offset > start and rr.txn == 0 for rr in built.records)  # A has data after start


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_every_start_and_end_offset(built, codec, isolation):
    """Every start offset (seeking with the .index) and a few end offsets match the model."""
    leo = built.log_end_offset
    with open_partition(built.dir, codec=codec) as p:
        for start in range(0, leo + 1):
            r = p.read(start, isolation=isolation)
            assert _tuples(r) == _tuples(built.expected(isolation, start=start)), start
            assert r.warnings == []
        for start, end in [(0, 1), (5, 40), (37, 39), (40, 76), (60, 200), (90, 90), (90, 80)]:
            got = _tuples(p.read(start, end, isolation=isolation))
            assert got == _tuples(built.expected(isolation, start=start, end=end)), (start, end)


def test_seek_uses_the_index_and_equals_a_scan(built, codec, tmp_path):
    copy = _copy(built, tmp_path)
    for f in os.listdir(copy):
        if f.endswith(".index"):
            os.remove(os.path.join(copy, f))
    with open_partition(built.dir, codec=codec) as p, open_partition(copy, codec=codec) as q:
        used = 0
        for seg, model in zip(p.segments, built.segs):
            for off, pos in model.index:
                assert pos > 0 and seg.seek(off) == pos  # the entry (batch last offset, batch position)
                used += 1
        assert used >= 10
        assert all(seg.seek(seg.base_offset + 5) == 0 for seg in q.segments)  # no index: segment start
        for start in range(0, built.log_end_offset + 1, 3):
            for iso in ISOLATIONS:
                assert _tuples(p.read(start, isolation=iso)) == _tuples(q.read(start, isolation=iso))


@pytest.mark.parametrize("how", ["mid_batch", "later_batch"])
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_untrusted_index_entry_falls_back_to_a_scan(built, codec, tmp_path, how, isolation):
    copy = _copy(built, tmp_path)
    seg0 = built.segs[0]
    off, pos = seg0.index[2]
    if how == "mid_batch":
        bad = pos + 1
    else:  # a real batch boundary, but of a batch holding later offsets only (a stale entry)
        bad = next(b.position for b in built.batches if b.segment == 0 and b.base_offset > off + 3)
    path = os.path.join(copy, os.path.basename(built.seg_path(0, ".index")))
    with open(path, "r+b") as fh:
        fh.seek(2 * 8)
        fh.write(struct.pack(">ii", off - seg0.base, bad))
    with open_partition(copy, codec=codec) as p:
        r = p.read(off, isolation=isolation)
        assert _tuples(r) == _tuples(built.expected(isolation, start=off))
        if isolation == "read_uncommitted":  # read_committed knows every header already and needs no index
            assert len(r.warnings) == 1 and path in r.warnings[0]
            assert p.segments[0].seek(off) == 0


# ------------------------------------------------------------------------------------ aborted sources
def test_txnindex_removed_same_result_via_scan(built, codec, tmp_path):
    copy = _copy(built, tmp_path)
    removed = [f for f in os.listdir(copy) if f.endswith(".txnindex")]
    assert len(removed) >= 2
    for f in removed:
        os.remove(os.path.join(copy, f))
    expected = _tuples(built.expected("read_committed"))
    with open_partition(copy, codec=codec) as p:
        assert _tuples(p.read()) == expected
        assert _tuples(p.read(aborted_source="scan")) == expected
        # the files really mattered: trusting their absence shows aborted data
        assert len(_tuples(p.read(aborted_source="txnindex"))) > len(expected)
        with pytest.raises(LogInconsistencyError, match="transaction index is missing"):
            p.read(aborted_source="cross-check")
        per_segment = p.aborted_transactions_by_segment("scan")
    assert per_segment == [s.aborted for s in built.segs]  # the broker's entries, LSO fields included


def test_txnindex_files_come_from_the_listing_but_the_last_segments(codec, tmp_path):
    """Which segments have a .txnindex is taken from the directory listing when the partition is opened,
    except for the last segment: a writer still appending to it creates its index file with its first
    abort, after the reader opened the directory, and the reader sees it."""
    from kafkatx import BatchBuilder
    from kafkatx.log.writer import PartitionWriter

    def txn_batch(pid, seq):
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
        b.append(b"v%d" % seq, b"k", timestamp=1_700_000_000_000)
        return b.build()

    d = tmp_path / "t-0"
    w = PartitionWriter(d, segment_bytes=400, codec=codec)
    try:
        w.append(txn_batch(1, 0))
        w.append_marker("abort", producer_id=1, producer_epoch=0, coordinator_epoch=0)
        for seq in range(12):  # committed transactions over a few more segments
            w.append(txn_batch(3, seq))
            w.append_marker("commit", producer_id=3, producer_epoch=0, coordinator_epoch=0)
        assert len(w.segments) >= 4
        with open_partition(d, codec=codec) as p:
            assert not os.path.exists(p.segments[-1].txn_index_path)
            w.append(txn_batch(2, 0))
            w.append_marker("abort", producer_id=2, producer_epoch=0, coordinator_epoch=0)
            w.flush()
            assert w.segments[-1] == p.segments[-1].base_offset  # the abort went to the segment open at listing
            assert p.segments[0].has_txn_index and not any(s.has_txn_index for s in p.segments[1:-1])
            assert p.segments[-1].has_txn_index  # looked up when asked, not from the listing
            entries = p.aborted_transactions_by_segment("txnindex")
            assert [e.producer_id for e in entries[0]] == [1] and [e.producer_id for e in entries[-1]] == [2]
            assert all(not e for e in entries[1:-1])
            assert [r.value for r in p.read()] == [b"v%d" % i for i in range(12)]
    finally:
        w.close()


@pytest.mark.parametrize("lost", ["last entry", "every entry", "the file"])
def test_a_txnindex_lacking_the_newest_aborts_is_completed_from_the_log(codec, tmp_path, lost):
    """The ABORT marker reaches the .log before its entry reaches the .txnindex: a crash between the two
    writes, or a read while a writer is between them, finds the marker (the transaction is closed, the LSO
    has moved past it) but not the entry.  The read must still hide the aborted records."""
    from kafkatx import BatchBuilder
    from kafkatx.log.writer import PartitionWriter

    def txn_batch(pid, value):
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        b.append(value, b"k", timestamp=1_700_000_000_000)
        return b.build()

    src, d = tmp_path / "a" / "t-0", tmp_path / "b" / "t-0"
    with PartitionWriter(src, codec=codec) as w:
        w.append(txn_batch(1, b"aborted-1"))
        w.append_marker("abort", producer_id=1, producer_epoch=0, coordinator_epoch=0)
        w.append(txn_batch(3, b"committed"))
        w.append_marker("commit", producer_id=3, producer_epoch=0, coordinator_epoch=0)
        w.append(txn_batch(2, b"aborted-2"))
        w.append_marker("abort", producer_id=2, producer_epoch=0, coordinator_epoch=0)
        w.flush()
        shutil.copytree(src, d)  # the files as a crash leaves them: no producer snapshot taken at the close
    assert not [f for f in os.listdir(d) if f.endswith(".snapshot")]
    with open_partition(d, codec=codec) as p:
        whole = p.aborted_transactions_by_segment("txnindex")
        assert [e.producer_id for e in whole[0]] == [1, 2]
        expected = [r.value for r in p.read()]
    assert expected == [b"committed"]
    index = d / "00000000000000000000.txnindex"
    keep = {"last entry": 34, "every entry": 0}.get(lost)
    if keep is None:
        index.unlink()
    else:
        with open(index, "r+b") as fh:
            fh.truncate(keep)
    with open_partition(d, codec=codec) as p:
        assert p.last_stable_offset == p.log_end_offset == 6
        assert [r.value for r in p.read()] == expected
        assert p.read_table().column("value").to_pylist() == expected
        assert p.aborted_transactions_by_segment("auto") == whole  # LSO fields included
        if keep is not None:  # the file as it is: what trusting it alone would show
            assert len(p.aborted_transactions_by_segment("txnindex")[0]) == keep // 34
            with pytest.raises(LogInconsistencyError):
                p.read(aborted_source="cross-check")


def test_scan_opens_each_unmapped_segment_once(built, codec, monkeypatch):
    """The replay reads an unmapped segment's headers and its markers through one descriptor, and keeps
    none once it is done."""
    import kafkatx.log.reader as reader_mod

    opened = []
    real_open = reader_mod.os.open
    monkeypatch.setattr(reader_mod.os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with open_partition(built.dir, codec=codec) as p:
        per_segment = p.aborted_transactions_by_segment("scan")
        unmapped = {s.log_path for s in p.segments if s._mmap is None and s.size}
        assert all(s._fd is None for s in p.segments)  # nothing held after the scan
        if fds is not None:
            assert len(os.listdir("/proc/self/fd")) - fds == sum(s._mmap is not None for s in p.segments)
    assert per_segment == [s.aborted for s in built.segs]
    logs = [f for f in opened if f.endswith(".log")]
    assert len(logs) == len(set(logs))  # at most once each
    if os.name == "posix" and hasattr(codec, "scan_batches_fd"):
        assert unmapped and unmapped <= set(logs)  # the unmapped segments were read through a descriptor


@pytest.mark.parametrize("source", ["auto", "txnindex", "scan", "cross-check"])
def test_all_sources_agree_on_a_sound_log(built, codec, source):
    with open_partition(built.dir, codec=codec) as p:
        for start in (0, 5, 40, 80):
            r = p.read(start, aborted_source=source)
            assert _tuples(r) == _tuples(built.expected("read_committed", start=start))


def _doctor(copy, built, seg_index, fn):
    path = os.path.join(copy, os.path.basename(built.seg_path(seg_index, ".txnindex")))
    entries = read_txnindex(path)
    with open(path, "wb") as fh:
        fh.write(encode_txnindex(fn(entries)))
    return path


@pytest.mark.parametrize("how", ["first_offset", "dropped", "producer_id"])
def test_cross_check_detects_a_doctored_txnindex(built, codec, tmp_path, how):
    copy = _copy(built, tmp_path)
    seg_i = next(i for i, s in enumerate(built.segs) if len(s.aborted) >= 2)
    if how == "first_offset":
        path = _doctor(copy, built, seg_i, lambda es: [es[0]._replace(first_offset=es[0].first_offset + 2)] + es[1:])
    elif how == "dropped":
        path = _doctor(copy, built, seg_i, lambda es: es[1:])
    elif how == "producer_id":
        path = _doctor(copy, built, seg_i, lambda es: [es[0]._replace(producer_id=999)] + es[1:])
    with open_partition(copy, codec=codec) as p:
        with pytest.raises(LogInconsistencyError) as ei:
            p.read(aborted_source="cross-check")
        assert isinstance(ei.value, KafkaTxError)
        assert ei.value.file == path and path in str(ei.value)
        # "auto" trusts the doctored file, so the check is what protects the reader
        assert _tuples(p.read()) != _tuples(built.expected("read_committed"))


def test_cross_check_detects_a_wrong_last_stable_offset_field(codec, tmp_path):
    """Transaction X starts in segment 0 and is aborted in segment 2; Y is aborted in segment 1 while X
    is open, so Y's entry has LSO = X's first offset and the broker's search goes on to segment 2.  An
    entry claiming a huge LSO stops the search early and X's data would show."""
    b = PartitionBuilder(tmp_path, segment_bytes=300)
    x_first = b.data(2, pid=1, txn=True)
    b.data(2)
    b.roll()
    b.data(1, pid=2, txn=True)
    b.data(1, pid=1, txn=True)
    b.marker(2, "abort")
    b.roll()
    b.data(1)
    b.marker(1, "abort")
    b.data(1)
    b.write()
    assert [s.aborted for s in b.segs] == [[], [AbortedTxn(2, 4, 6, x_first)], [AbortedTxn(1, x_first, 8, 9)]]
    start = 4
    with open_partition(b.dir, codec=codec) as p:
        assert _tuples(p.read(start, aborted_source="cross-check")) == _tuples(b.expected(start=start))
    path = _doctor(b.dir, b, 1, lambda es: [es[0]._replace(last_stable_offset=10**9)])
    with open_partition(b.dir, codec=codec) as p:
        assert _tuples(p.read(start)) != _tuples(b.expected(start=start))  # the doctored field matters
        with pytest.raises(LogInconsistencyError, match="last_stable_offset"):
            p.read(start, aborted_source="cross-check")
        assert path


# ------------------------------------------------------------------------------------ formats
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_arrow_equals_records(built, codec, isolation):
    with open_partition(built.dir, codec=codec) as p:
        for start, chunk in [(0, None), (0, 300), (41, 1), (77, 4096)]:
            recs = list(p.read(start, isolation=isolation))
            r = p.read(start, isolation=isolation, format="arrow", chunk_bytes=chunk)
            batches = list(r)
            assert all(isinstance(b, pa.RecordBatch) and b.num_rows for b in batches)
            if chunk == 1:  # one batch per log batch with visible records, each within one segment
                assert len(batches) > len(built.segs)
            t = pa.Table.from_batches([b.replace_schema_metadata(None) for b in batches])
            assert t.column("offset").to_pylist() == [x.offset for x in recs]
            assert t.column("key").to_pylist() == [x.key for x in recs]
            assert t.column("value").to_pylist() == [x.value for x in recs]
            assert [int(ts.timestamp() * 1000) for ts in t.column("timestamp").to_pylist()] == [
                x.timestamp for x in recs
            ]
            assert [[(h["key"], h["value"]) for h in hs] for hs in t.column("headers").to_pylist()] == [
                [(k, v) for k, v in x.headers] for x in recs
            ]
            assert r.next_offset == (
                built.last_stable_offset() if isolation == "read_committed" else built.log_end_offset
            )
        table = p.read_table(columns=["offset", "value"])
        assert table.column_names == ["offset", "value"]
        assert table.column("offset").to_pylist() == [x.offset for x in built.expected()]


# ------------------------------------------------------------------------------------ read-ahead, releasing
def _read_everything(path, codec, **kw):
    with open_partition(path, codec=codec) as p:
        out = {}
        for iso in ISOLATIONS:
            for start, chunk in [(0, None), (0, 300), (41, 4096)]:
                recs = list(p.read(start, isolation=iso, **kw))
                t = p.read_table(start, isolation=iso, chunk_bytes=chunk, **kw)
                out[iso, start, chunk] = (_tuples(recs), t.column("offset").to_pylist(), t.column("value").to_pylist())
    return out


def test_read_ahead_changes_nothing(built, codec, monkeypatch):
    """The read-ahead thread (forced on for these small reads) maps pages in and nothing else: every read,
    records and Arrow, any chunking, equals the same read without it; the compiled codec really
    populated pages, the twin (which cannot without the GIL) stopped its thread after one try."""
    from kafkatx.log import reader

    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 1 << 62)
    without = _read_everything(built.dir, codec)
    calls = []
    populate_many = codec.populate_many
    ran = threading.Event()

    class Counting:
        def __getattr__(self, name):
            return getattr(codec, name)

        @staticmethod
        def populate_many(items):
            got = populate_many(items)
            calls.append((len(items), sum(b - a for _m, a, b in items), got))
            ran.set()
            return got

    close = reader._Prefetcher.close

    def close_after_a_step(self):
        # on a busy machine these small reads could end before the thread is first scheduled: let a
        # started thread take its first step (at most 10 s) before the first read closes it
        if self._thread is not None:
            ran.wait(10)
        close(self)

    monkeypatch.setattr(reader._Prefetcher, "close", close_after_a_step)
    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setattr(reader._Prefetcher, "STEP", 512)  # many calls per segment
    with_ = _read_everything(built.dir, Counting())
    assert with_ == without
    assert calls, "the read-ahead thread never ran"
    assert all(0 < n <= 512 for _k, n, _got in calls)
    if codec.BACKEND == "cython":
        assert all(got == k for k, _n, got in calls)
    else:
        # the twin cannot: each read's thread stops after one try (12 reads in _read_everything)
        assert all(got == 0 for _k, _n, got in calls) and len(calls) <= 12


def test_read_ahead_covers_the_read(built, monkeypatch):
    """Left to finish, the read-ahead populates every byte of every segment of a read from its start,
    in order, in calls of at most STEP bytes (the compiled codec; the read itself is not needed)."""
    import time

    from conftest import load_backend
    from kafkatx.log import reader

    codec = load_backend("cython")
    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "PREFETCH_LEAD", 1 << 40)
    monkeypatch.setattr(reader._Prefetcher, "STEP", 1000)
    seen = []

    class Counting:
        def __getattr__(self, name):
            return getattr(codec, name)

        @staticmethod
        def populate_many(items):
            seen.extend((id(m), a, b) for m, a, b in items)
            return codec.populate_many(items)

    with open_partition(built.dir, codec=codec) as p:
        segs = [s for s in p.segments if s.size]
        pf = reader._Prefetcher(Counting(), segs)
        pf.reached(0)
        deadline = time.monotonic() + 30
        while pf._queue and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        pf.close()
        order = [id(s.mmap) for s in segs]
        sizes = {id(s.mmap): s.size for s in segs}
    # each map covered once, [0, size) in order, by pieces of at most STEP bytes; the maps in read order
    assert all(0 < b - a <= 1000 for _m, a, b in seen)
    for m, size in sizes.items():
        pieces = [(a, b) for mm, a, b in seen if mm == m]
        assert pieces[0][0] == 0 and pieces[-1][1] == size
        assert all(pieces[k][1] == pieces[k + 1][0] for k in range(len(pieces) - 1))
    firsts = [m for k, (m, _a, _b) in enumerate(seen) if k == 0 or seen[k - 1][0] != m]
    assert firsts == order


def test_a_read_in_one_piece_scans_later_segments_from_the_last_back(built, codec, tmp_path, monkeypatch):
    """With the read-ahead thread running (forced on here), read_table scans the batch headers of the
    segments after the first from the last one back, so that it and the read-ahead (which maps pages in
    from the first segment on) meet in the middle; the tables equal chunked reads (which scan in order).
    Not for records, which a reader may stop taking before the last segment.  Two segments damaged: the
    error names the earlier one, where a read in order meets damage first."""
    from kafkatx.log import reader

    copy = _copy(built, tmp_path)
    want = {}
    with open_partition(copy, codec=codec) as p:
        for iso in ISOLATIONS:
            want[iso] = p.read_table(isolation=iso, chunk_bytes=1 << 20)
    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 0)
    scanned = []
    scan_from = reader.Segment._scan_from

    def spying(self, position, verify_crc=None):
        scanned.append((self.base_offset, position, verify_crc))
        return scan_from(self, position, verify_crc)

    monkeypatch.setattr(reader.Segment, "_scan_from", spying)
    threaded = codec.BACKEND == "cython"  # (the twin cannot populate: its thread may have ended already)
    for iso in ISOLATIONS:
        with open_partition(copy, codec=codec) as p:
            bases = [s.base_offset for s in p.segments]
            assert len(bases) == 3
            scanned.clear()
            got = p.read_table(isolation=iso)
            assert got.equals(want[iso])
            # each segment's headers scanned once (besides the last one's tail, found at open from its .index
            # entry); with the thread running, the later ones last to first
            fresh = [b for b, pos, crc in scanned if crc is False and pos == 0]
            assert sorted(fresh) == sorted(set(fresh))
            if threaded and iso == "read_uncommitted":  # (read_committed: its LSO, found before the read
                assert fresh == [bases[2], bases[1], bases[0]]  # starts, replays these segments in order)
    # records (even unchunked) are yielded as their segments are met: the first comes before any later
    # segment is scanned
    with open_partition(copy, codec=codec) as p:
        scanned.clear()
        r = p.read(isolation="read_uncommitted", format="records", chunk_bytes=None)
        assert next(r).offset == 0
        assert [b for b, pos, crc in scanned if pos == 0] == [bases[0]]
        r.close()
    logs = {}
    for seg in (1, 2):
        data_batches = [b for b in built.batches if b.segment == seg and b.kind == "data"]
        batch = data_batches[len(data_batches) // 2]
        logs[seg] = os.path.join(copy, os.path.basename(built.seg_path(seg)))
        data = bytearray(pathlib.Path(logs[seg]).read_bytes())
        data[batch.position + 7] ^= 0x5A  # its base offset: the header scan sees the offsets break
        pathlib.Path(logs[seg]).write_bytes(data)
    for iso in ISOLATIONS:
        scanned.clear()
        with open_partition(copy, codec=codec) as p:
            with pytest.raises(CorruptSegmentError) as ei:
                p.read_table(isolation=iso)
        assert ei.value.file == logs[1], str(ei.value)
        if threaded and iso == "read_uncommitted":
            assert [b for b, pos, crc in scanned if crc is False and pos == 0][:2] == [bases[2], bases[1]]


def test_read_ahead_stops_with_an_abandoned_read(built, codec, monkeypatch):
    """A read dropped half-way, or its partition closed under it, ends its read-ahead thread (nothing hangs,
    nothing is raised, no thread is left behind)."""
    import threading

    from kafkatx.log import reader

    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 0)
    monkeypatch.setattr(reader._Prefetcher, "STEP", 64)
    p = open_partition(built.dir, codec=codec)
    r = p.read(format="arrow", chunk_bytes=64)
    next(r)
    r.close()
    r = p.read(chunk_bytes=64)
    next(r)
    p.close()
    del r
    import gc

    gc.collect()
    reader.wait_for_release()
    assert not [t for t in threading.enumerate() if t.name == "kafkatx-log-prefetch"]


def test_a_one_piece_read_starts_its_read_ahead_before_the_first_decode(built, codec, monkeypatch):
    """``chunk_bytes=None`` (``read_table``): the read-ahead thread starts in ``read()`` itself, so pages are
    mapped in while the aborted transactions are collected; a read closed or dropped before it is iterated
    leaves no thread behind, and the records are those of a chunked read."""
    import gc
    import threading

    from kafkatx.log import reader

    monkeypatch.setattr(reader, "PREFETCH_MIN_BYTES", 0)

    def prefetchers():
        return [t for t in threading.enumerate() if t.name == "kafkatx-log-prefetch"]

    p = open_partition(built.dir, codec=codec)
    try:
        r = p.read(format="arrow", chunk_bytes=None)
        if codec.BACKEND == "cython":  # (the twin cannot populate pages: its thread ends by itself)
            assert len(prefetchers()) == 1  # started, not yet iterated
        r.close()
        assert not prefetchers()
        r = p.read(format="arrow", chunk_bytes=None)
        del r
        gc.collect()
        assert not prefetchers()
        whole = p.read_table()
        chunked = p.read_table(chunk_bytes=64)
        assert whole.num_rows == chunked.num_rows > 0 and whole.equals(chunked)
        assert not prefetchers()
    finally:
        p.close()


def test_close_unmaps_in_the_background(built, codec):
    """``close`` hands the maps over; wait_for_release returns once every one is unmapped.  A partition
    read again after closing maps its segments afresh.  A segment holds no descriptor but its map's."""
    from kafkatx.log import wait_for_release

    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    p = open_partition(built.dir, codec=codec)
    want = _tuples(p.read())
    maps = [s.mmap for s in p.segments if s.size]
    assert maps and not any(m.closed for m in maps)
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds + len(maps)
    p.close()
    wait_for_release()
    assert all(m.closed for m in maps)
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds
    assert all(s._mmap is None for s in p.segments)
    assert _tuples(p.read()) == want
    p.close()
    wait_for_release()


def test_release_in_a_forked_child(built, codec):
    """A child forked while the release thread exists (Spark's Python workers fork) gets a thread of its
    own: reading, closing and waiting for the release there does not hang."""
    import multiprocessing as mp

    from kafkatx.log import wait_for_release

    with open_partition(built.dir, codec=codec) as p:
        want = len(list(p.read()))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child_reads, args=(built.dir, codec.BACKEND, q))
    child.start()
    child.join(60)
    assert child.exitcode == 0, "the child hung or failed"
    assert q.get(timeout=5) == want
    wait_for_release()


def _child_reads(path, backend, q):
    from conftest import load_backend
    from kafkatx.log import wait_for_release

    with open_partition(path, codec=load_backend(backend)) as p:
        n = len(list(p.read()))
    wait_for_release()
    q.put(n)


def test_populate_is_a_hint_only(codec, tmp_path):
    """populate on any buffer (bytes, bytearray, a file map, a slice of a map) leaves it unchanged and
    returns whether the kernel populated the pages; bounds are clipped, not errors."""
    import mmap

    data = bytes(range(256)) * 4096
    f = tmp_path / "seg.log"
    f.write_bytes(data)
    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for buf, start, end in [(m, 0, -1), (m, 4095, 8193), (m, 10, 5), (m, -5, 1 << 40), (data, 0, -1),
                                (bytearray(data), 3, 100), (memoryview(m)[4096:], 0, -1)]:  # fmt: skip
            got = codec.populate(buf, start, end)
            assert got is (codec.BACKEND == "cython"), (type(buf), start, end)
            if isinstance(buf, memoryview):
                buf.release()
        assert m[:] == data
    with pytest.raises(TypeError):
        codec.populate("not a buffer")
    # several ranges in one call; a closed map among them is skipped, not an error
    with open(f, "rb") as fh:
        m1 = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        m2 = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        m2.close()
        got = codec.populate_many([(m1, 0, -1), (m2, 0, -1), (data, 5, 4), (bytearray(8), 0, 8)])
        assert got == (2 if codec.BACKEND == "cython" else 0)  # (the empty range counts as nothing)
        assert m1[:] == data
        m1.close()
    assert codec.populate_many([]) == 0


_POPULATE_CHILD = """
import mmap, os, sys
import {module} as codec
try:  # a non-buffer among the items: a TypeError, and nothing released that was not had
    codec.populate_many([(b"abc", 0, -1), (42, 0, -1)] + [(b"x", 0, -1)] * 64)
except TypeError:
    print("TypeError")
path = sys.argv[1]
with open(path, "wb") as fh:
    fh.write(bytes(1 << 20))
with open(path, "rb") as fh:
    m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
os.truncate(path, 4096)  # the file shrinks under the map (a follower's truncation, a recovery's cut)
print(codec.populate(m, 0, len(m)), codec.populate_many([(m, 0, -1)]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or tuple(map(int, platform.release().split(".")[:2])) < (5, 14),
                    reason="MADV_POPULATE_READ (Linux 5.14) reports pages past a file's end; touching them raises SIGBUS")  # fmt: skip
def test_populate_survives_bad_items_and_a_file_that_shrank(codec, tmp_path):
    """Run in a child (a crash would take the test run with it), its allocator filling fresh memory with
    garbage: populate_many releases only the buffers it got, and populating pages past the end of a file
    that shrank after it was mapped is a hint not taken (the read-ahead thread must not die of SIGBUS on
    pages the decoder may never read)."""
    module = "kafkatx._codec" if codec.BACKEND == "cython" else "kafkatx._codec_py"
    env = dict(os.environ, MALLOC_PERTURB_="165")
    done = subprocess.run([sys.executable, "-c", _POPULATE_CHILD.format(module=module), str(tmp_path / "f")],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["TypeError", "False", "0"]


def test_batches_format_is_the_raw_fetch(built, codec):
    with open_partition(built.dir, codec=codec) as p:
        r = p.read(format="batches")
        got = [(b.base_offset, b.last_offset, b.is_control) for b in r]
        lso = built.last_stable_offset()
        assert got == [(b.base_offset, b.last_offset, b.kind == "marker") for b in built.batches if b.base_offset < lso]
        assert r.next_offset == lso
        assert {(a.producer_id, a.first_offset) for a in r.aborted_transactions} == {
            (t["pid"], t["first"]) for t in built.txns if t["outcome"] == "abort" and t["first"] < lso
        }


def test_bad_arguments(built, codec):
    with open_partition(built.dir, codec=codec) as p:
        with pytest.raises(OffsetOutOfRangeError):
            p.read(built.log_end_offset + 1)
        with pytest.raises(OffsetOutOfRangeError):
            p.read(-1)
        for kwargs in [
            dict(isolation="x"),
            dict(format="x"),
            dict(aborted_source="x"),
            dict(chunk_bytes=0),
            dict(columns=["offset"]),
        ]:
            with pytest.raises(ValueError):
                p.read(**kwargs)
        assert list(p.read(built.log_end_offset)) == []


# ------------------------------------------------------------------------------------ checkpoints, log dir
def test_checkpoints_bound_the_reads(built, codec, tmp_path):
    root = tmp_path / "logdir"
    root.mkdir()
    pdir = shutil.copytree(built.dir, root / "t-0")
    shutil.copytree(built.dir, root / "t-0.abc123-delete")
    (root / "other-7").mkdir()
    a = built.txns[0]
    hw = a["marker"]  # A's ABORT marker is not below the high watermark: A is still unstable
    start = 2
    write_checkpoint(root / "replication-offset-checkpoint", {("t", 0): hw, ("other", 7): 0})
    write_checkpoint(root / "log-start-offset-checkpoint", {("t", 0): start})
    with open_log_dir(root, codec=codec) as logs:
        assert sorted(logs) == [("other", 7), ("t", 0)]
        p = logs[("t", 0)]
        assert p.high_watermark == hw and p.log_start_offset == start
        assert p.last_stable_offset == built.last_stable_offset(hw) == a["first"]
        assert _tuples(p.read(isolation="read_uncommitted")) == _tuples(
            built.expected("read_uncommitted", start=start, high_watermark=hw)
        )
        assert _tuples(p.read()) == _tuples(built.expected("read_committed", start=start, high_watermark=hw))
        with pytest.raises(OffsetOutOfRangeError):
            p.read(start - 1)
        assert logs[("other", 7)].segments == [] and logs[("other", 7)].log_end_offset == 0
    q = open_partition(pdir, codec=codec)
    assert q.high_watermark == hw
    q.close()


def test_damaged_log_start_and_recovery_point_checkpoints_are_ignored_with_a_warning(built, codec, tmp_path):
    """LogManager.loadLogs resets an unreadable log-start or recovery-point checkpoint and goes on; the reader
    does too, and says so.  An unreadable high-watermark checkpoint still raises: every read's bound would be
    lost."""
    root = tmp_path / "logdir"
    root.mkdir()
    shutil.copytree(built.dir, root / "t-0")
    for name in ("log-start-offset-checkpoint", "recovery-point-offset-checkpoint"):
        (root / name).write_text("0\n2\nt 0 5\n")  # says two entries, has one
    expected = _tuples(built.expected("read_committed"))
    with open_partition(root / "t-0", codec=codec) as p:
        assert p.log_start_offset == built.segs[0].base and _tuples(p.read()) == expected
        assert len(p.warnings) == 2 and all("Expected [2] entries" in w for w in p.warnings)
    with open_log_dir(root, codec=codec) as logs:
        assert _tuples(logs[("t", 0)].read()) == expected and len(logs[("t", 0)].warnings) == 2
    (root / "replication-offset-checkpoint").write_text("0\n1\nt 0 1_0\n")
    for opener in (lambda: open_partition(root / "t-0", codec=codec), lambda: open_log_dir(root, codec=codec)):
        with pytest.raises(CheckpointError, match="replication-offset-checkpoint"):
            opener()


def test_a_log_start_checkpoint_past_the_log_end(built, codec, tmp_path):
    """LogLoader deletes every segment when the log start checkpoint lies past the log end and starts the log
    empty there: the log end, high watermark and LSO are the log start, and a read from it is empty."""
    root = tmp_path / "logdir"
    root.mkdir()
    shutil.copytree(built.dir, root / "t-0")
    start = built.log_end_offset + 100
    write_checkpoint(root / "log-start-offset-checkpoint", {("t", 0): start})
    with open_partition(root / "t-0", codec=codec) as p:
        assert p.log_start_offset == p.log_end_offset == p.high_watermark == p.last_stable_offset == start
        r = p.read()
        assert list(r) == [] and r.next_offset == start
        assert list(p.read(start, isolation="read_uncommitted")) == []


@pytest.mark.parametrize("vector", ["legacy_v0_gzip", "legacy_v1_gzip"])
def test_an_end_offset_inside_a_compressed_legacy_wrapper(codec, tmp_path, vector):
    """A compressed legacy wrapper's header has only its last offset: a records or Arrow read that ends inside
    it returns its records below the end and moves next_offset to the end (it returned nothing and stayed
    put, so a loop reading on from next_offset never got past it).  Raw batches end before it, as the
    broker's read ends at the position of the batch holding its bound."""
    d = tmp_path / "old-0"
    d.mkdir()
    data = (VECTORS / "java-golden" / f"{vector}.bin").read_bytes()  # one wrapper: offsets 10..12
    (d / "00000000000000000010.log").write_bytes(data)
    with open_partition(d, codec=codec) as p:
        for start, end, offsets in ((10, 12, [10, 11]), (11, 12, [11]), (10, 11, [10]), (10, 13, [10, 11, 12]),
                                    (11, 13, [11, 12])):  # fmt: skip
            r = p.read(start, end, isolation="read_uncommitted")
            assert [x.offset for x in r] == offsets and r.next_offset == end, (start, end)
            t = p.read_table(start, end, isolation="read_uncommitted")
            assert t.column("offset").to_pylist() == offsets
        r = p.read(10, 12, isolation="read_uncommitted", format="batches")
        assert list(r) == [] and r.next_offset == 10
        assert [b.last_offset for b in p.read(10, 13, isolation="read_uncommitted", format="batches")] == [12]


def test_names_with_other_scripts_digits_are_not_segments_or_snapshots(built, codec, tmp_path):
    d = _copy(built, tmp_path)
    for odd in ("\u0660" * 20 + ".log", "0" * 19 + "\u00b2.snapshot", "0" * 19 + "\u0661.log"):
        pathlib.Path(d, odd).write_bytes(b"")
    with open_partition(d, codec=codec) as p:
        assert [s.base_offset for s in p.segments] == [s.base for s in built.segs]
        assert _tuples(p.read()) == _tuples(built.expected("read_committed"))


# ------------------------------------------------------------------------------------ damage
def test_a_zero_filled_tail_is_a_cut(codec, tmp_path):
    """Zeros past the last batch -- what log.preallocate leaves in a broker's active segment, and what a crash
    leaves where the file system had not written the data yet -- are a cut tail (reported, the log end and
    reads as without them), not a corrupt batch; a non-zero byte among them is damage again."""
    full, _prefix, _last = _cut_builder(tmp_path)
    log = pathlib.Path(full.seg_path(len(full.segs) - 1))
    size = log.stat().st_size
    with open(log, "ab") as fh:
        fh.write(bytes(5000))
    for isolation in ISOLATIONS:
        with open_partition(full.dir, codec=codec) as p:
            assert p.log_end_offset == full.log_end_offset
            assert _tuples(p.read(isolation=isolation)) == _tuples(full.expected(isolation))
            assert p.read_table(isolation=isolation).num_rows == len(full.expected(isolation))
            assert p.truncated_tails == [TruncatedTail(str(log), size, 5000)]
    with open(log, "r+b") as fh:
        fh.seek(size + 4000)
        fh.write(b"\x01")
    with open_partition(full.dir, codec=codec) as p:
        with pytest.raises(CorruptRecordError) as caught:
            p.read_table()
        assert caught.value.file == str(log) and caught.value.position == size


def _cut_builder(tmp_path):
    full = PartitionBuilder(tmp_path / "full")
    n = standard_scenario(full)
    full.write()
    prefix = PartitionBuilder(tmp_path / "prefix")
    standard_scenario(prefix, upto=n - 1)
    last = full.batches[-1]
    assert last.segment == len(full.segs) - 1 == len(prefix.segs) - 1  # no roll at the last batch
    assert bytes(prefix.segs[-1].data) == bytes(full.segs[-1].data[: last.position])
    return full, prefix, last


def test_truncating_the_last_batch_at_every_byte(codec, tmp_path):
    full, prefix, last = _cut_builder(tmp_path)
    log = full.seg_path(len(full.segs) - 1)
    original = pathlib.Path(log).read_bytes()
    exp = {iso: _tuples(prefix.expected(iso)) for iso in ISOLATIONS}
    assert exp["read_uncommitted"] != _tuples(full.expected("read_uncommitted"))
    for cut in range(0, last.size):
        with open(log, "wb") as fh:
            fh.write(original[: last.position + cut])
        with open_partition(full.dir, codec=codec) as p:
            want = [TruncatedTail(log, last.position, cut)] if cut else []
            assert p.truncated_tails == want
            assert p.log_end_offset == prefix.log_end_offset
            for iso in ISOLATIONS:
                r = p.read(isolation=iso)
                assert _tuples(r) == exp[iso], (cut, iso)
                assert r.truncated_tails == want
            assert list(p.read(last.base_offset, isolation="read_uncommitted")) == []


def test_a_cut_inside_a_compressed_batch(codec, tmp_path):
    b = PartitionBuilder(tmp_path)
    b.data(3)
    b.data(6, compression="zstd", value_size=30)
    b.write()
    last = b.batches[-1]
    log = b.seg_path(0)
    data = pathlib.Path(log).read_bytes()
    for cut in (1, 11, 12, 61, last.size - 1):
        with open(log, "wb") as fh:
            fh.write(data[: last.position + cut])
        with open_partition(b.dir, codec=codec) as p:
            r = p.read(isolation="read_uncommitted", format="arrow")
            assert pa.Table.from_batches(list(r)).column("offset").to_pylist() == [0, 1, 2]
            assert r.truncated_tails == [TruncatedTail(log, last.position, cut)]


def test_flipped_byte_in_a_middle_batch_raises_naming_file_and_position(built, codec, tmp_path):
    copy = _copy(built, tmp_path)
    mid_seg = 1
    candidates = [b for b in built.batches if b.segment == mid_seg and b.kind == "data"]
    batch = candidates[len(candidates) // 2]
    nxt = next(b for b in built.batches if b.segment == mid_seg and b.position > batch.position)
    log = os.path.join(copy, os.path.basename(built.seg_path(mid_seg)))
    original = pathlib.Path(log).read_bytes()
    checked = 0
    # base offset (0-7), magic (16), CRC (17-20) and everything the CRC covers (21-)
    for rel in list(range(0, 8)) + list(range(16, batch.size)):
        data = bytearray(original)
        data[batch.position + rel] ^= 0x5A
        with open(log, "wb") as fh:
            fh.write(data)
        for iso in ISOLATIONS:
            with open_partition(copy, codec=codec) as p:
                with pytest.raises(KafkaTxError) as ei:
                    list(p.read(isolation=iso))
            err = ei.value
            assert log in str(err), (rel, str(err))
            assert err.file == log
            assert batch.position <= err.position < nxt.position + nxt.size, (rel, err.position)
            assert f"at byte {err.position}" in str(err)
            if 17 <= rel < 21:
                assert isinstance(err, CrcMismatchError) and err.position == batch.position
            if rel < 8:
                assert isinstance(err, CorruptSegmentError)
            checked += 1
    assert checked == 2 * (8 + batch.size - 16)


def test_flipped_length_field_raises_or_is_reported(built, codec, tmp_path):
    """A length field is not covered by the CRC: it either breaks the framing (raised) or, pointing past
    the end of the file, looks like a cut (reported) -- never a silent success."""
    copy = _copy(built, tmp_path)
    batch = next(b for b in built.batches if b.segment == 1 and b.kind == "data" and b.position > 0)
    log = os.path.join(copy, os.path.basename(built.seg_path(1)))
    original = pathlib.Path(log).read_bytes()
    for rel in range(8, 12):
        for bit in (0x01, 0x40):
            data = bytearray(original)
            data[batch.position + rel] ^= bit
            with open(log, "wb") as fh:
                fh.write(data)
            with open_partition(copy, codec=codec) as p:
                try:
                    r = p.read(isolation="read_uncommitted")
                    list(r)
                except KafkaTxError as exc:
                    assert log in str(exc)
                else:
                    assert r.truncated_tails and r.truncated_tails[0].file == log
                    assert r.truncated_tails[0].valid_bytes == batch.position


# ------------------------------------------------------------------------------------ java golden
def test_java_golden_segment(codec, tmp_path):
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    data = (VECTORS / "java-golden" / "segment_mixed.bin").read_bytes()
    (pdir / "00000000000000000000.log").write_bytes(data)
    storage = VECTORS / "java-storage" / "recover_segment_mixed"
    shutil.copy(storage / "00000000000000000000.txnindex", pdir)
    recorded = read_txnindex(storage / "00000000000000000000.txnindex")
    desc = json.loads((VECTORS / "java-golden" / "segment_mixed.json").read_text())["description"]
    assert "(1001, first 3, last 10, LSO 5), (1003, first 13, last 15, LSO 16)" in desc
    assert [tuple(a)[:4] for a in recorded] == [(1001, 3, 10, 5), (1003, 13, 15, 16)]
    expected = codec.decode_records(
        data, isolation="read_committed", aborted_transactions=[(a.producer_id, a.first_offset) for a in recorded]
    )
    with open_partition(pdir, codec=codec) as p:
        assert p.log_end_offset == 18 == json.loads((storage / "recover.json").read_text())["map_end_offset"]
        assert p.aborted_transactions_by_segment("scan") == [recorded]  # the scan rebuilds Kafka's index
        for source in ("auto", "txnindex", "scan", "cross-check"):
            r = p.read(aborted_source=source)
            got = list(r)
            assert _tuples(got) == _tuples(expected)
            assert sorted(r.aborted_transactions) == sorted(recorded)
        t = p.read_table()
        assert t.column("offset").to_pylist() == [x.offset for x in expected]
        assert t.column("value").to_pylist() == [x.value for x in expected]
    os.remove(pdir / "00000000000000000000.txnindex")
    with open_partition(pdir, codec=codec) as p:
        assert _tuples(p.read()) == _tuples(expected)


def test_empty_and_missing(codec, tmp_path):
    d = tmp_path / "empty-0"
    d.mkdir()
    with open_partition(d, codec=codec) as p:
        assert p.segments == [] and p.log_end_offset == 0 and p.last_stable_offset == 0
        assert list(p.read()) == []
    b = PartitionBuilder(tmp_path / "x", topic="a-b-c", partition=12)
    b.data(2)
    b.roll()
    b.write()
    open(b.seg_path(1), "wb").close()  # an empty active segment
    with open_partition(b.dir, codec=codec) as p:
        assert (p.topic, p.partition) == ("a-b-c", 12)
        assert p.log_end_offset == 2 and [x.offset for x in p.read()] == [0, 1]
    with pytest.raises(ValueError):
        open_partition(tmp_path / "x", codec=codec)


def test_legacy_entries_before_a_format_upgrade(codec, tmp_path):
    """Magic 0/1 entries (whose CRC the header scan does not check) followed by v2 batches."""
    pdir = tmp_path / "old-0"
    pdir.mkdir()
    legacy = (VECTORS / "java-golden" / "legacy_v1_none.bin").read_bytes()  # offsets 10..12, three entries
    wrapped = (VECTORS / "java-golden" / "legacy_v0_gzip.bin").read_bytes()  # offsets 10..12, one wrapper
    b = kafkatx.BatchBuilder(base_offset=13, compression="gzip")
    for i in range(3):
        b.append(b"new-%d" % i, timestamp=1_700_000_000_000 + i)
    data = legacy + b.build()
    log = pdir / "00000000000000000010.log"
    log.write_bytes(data)
    expected = codec.decode_records(data)
    assert [r.offset for r in expected] == [10, 11, 12, 13, 14, 15]
    with open_partition(pdir, codec=codec) as p:
        assert p.log_start_offset == 10 and p.log_end_offset == 16
        for iso in ISOLATIONS:
            assert _tuples(p.read(isolation=iso)) == _tuples(expected)
            assert _tuples(p.read(11, isolation=iso)) == _tuples(expected[1:])
        t = p.read_table()
        assert t.column("offset").to_pylist() == [10, 11, 12, 13, 14, 15]
        assert t.column("timestamp_type").to_pylist() == [0, 0, 0, 0, 0, 0]
    bad = bytearray(data)
    bad[77 + 35] ^= 0x01  # inside the value of the third legacy message (covered by its CRC-32)
    log.write_bytes(bytes(bad))
    for iso in ISOLATIONS:
        for fmt in ("records", "arrow"):
            with open_partition(pdir, codec=codec) as p:
                with pytest.raises(CrcMismatchError) as ei:
                    list(p.read(isolation=iso, format=fmt))
            assert ei.value.file == str(log) and str(log) in str(ei.value) and ei.value.position == 77
    log.write_bytes(wrapped)  # a compressed legacy wrapper
    with open_partition(pdir, codec=codec) as p:
        assert _tuples(p.read(isolation="read_uncommitted")) == _tuples(codec.decode_records(wrapped))
        assert p.log_end_offset == 13


# ------------------------------------------------------------------------------------------ damaged markers
def _marker_of_an_aborted_transaction(built):
    """(segment index, BatchInfo) of an ABORT marker closing a transaction with data."""
    aborts = {t["marker"] for t in built.txns if t.get("outcome") == "abort"}
    return next(b for b in built.batches if b.kind == "marker" and b.base_offset in aborts)


def test_a_damaged_marker_stops_the_replay_naming_file_and_position(built, codec, tmp_path):
    """A marker decides what is aborted: one whose CRC does not match raises from the replay (the header
    scan reads markers whole and checks them), naming the file and the marker's position; with
    ``verify_crc=False`` its type is taken as read."""
    copy = _copy(built, tmp_path)
    m = _marker_of_an_aborted_transaction(built)
    log = os.path.join(copy, os.path.basename(built.seg_path(m.segment)))
    data = bytearray(pathlib.Path(log).read_bytes())
    with open_partition(copy, codec=codec) as p:
        want = p.aborted_transactions_by_segment("scan")
    data[m.position + m.size - 2] ^= 0x01  # the coordinator epoch (before the header count): CRC only
    pathlib.Path(log).write_bytes(bytes(data))
    with open_partition(copy, codec=codec) as p:
        with pytest.raises(CrcMismatchError) as ei:
            p.aborted_transactions_by_segment("scan")
    assert ei.value.file == log and ei.value.position == m.position and log in str(ei.value)
    with open_partition(copy, codec=codec, verify_crc=False) as p:
        assert p.aborted_transactions_by_segment("scan") == want


# ------------------------------------------------------------------------------------------ snapshots vs replays
_TS = 1_700_000_000_000


def _txn_data(offsets, pid=-1, seq=-1, txn=False):
    b = kafkatx.BatchBuilder(base_offset=offsets[0], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=seq, transactional=txn)  # fmt: skip
    for o in offsets:
        b.append(b"v%d" % o, b"k%d" % o, timestamp=_TS + o, offset=o)
    return b.build()


def _written(path, items, rolls):
    """A partition written by PartitionWriter as a follower appends (``origin="replication"``), rolled
    before the items whose index is in ``rolls``: a producer snapshot at every roll."""
    from kafkatx.log import PartitionWriter

    with PartitionWriter(path, checkpoint_recovery_point=False, clock=lambda: _TS) as w:
        for i, item in enumerate(items):
            if i in rolls:
                w.roll()
            w.append(item, origin="replication")
    return str(path)


def test_lso_after_retention_does_not_depend_on_what_was_read_first(codec, tmp_path):
    """Retention deleted the segment where producer 5's transaction began; the snapshot at the new log
    start holds it.  Kafka's LSO is max(first unstable offset, log start) = 2 whatever was asked first,
    and a replay of the whole log starts from that snapshot (the ABORT's .txnindex entry names the
    transaction's real first offset, 0, as the broker wrote it)."""
    from kafkatx.transactions import encode_marker

    items = [_txn_data([0, 1], 5, 0, True), _txn_data([2, 3]), _txn_data([4], 5, 2, True), _txn_data([5, 6]),
             encode_marker("abort", producer_id=5, producer_epoch=0, base_offset=7, timestamp=_TS)]  # fmt: skip
    path = _written(tmp_path / "t-0", items, rolls={1, 3})
    for f in os.listdir(path):
        if f.startswith("0" * 20 + "."):
            os.remove(os.path.join(path, f))  # retention: segment 0 and its files
    with open_partition(path, codec=codec, checkpoints=False) as p:
        written = p.aborted_transactions(2, 8, source="txnindex")
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in written] == [(5, 0, 7)]
    firsts = ["lso", "open", "scan", "read", "cross-check"]
    for first in firsts:
        with open_partition(path, codec=codec, checkpoints=False) as p:
            if first == "open":
                assert p.open_transactions == {}
            elif first == "scan":
                assert p.aborted_transactions(2, 8, source="scan") == written
            elif first == "read":
                assert [r.offset for r in p.read()] == [2, 3, 5, 6]
            elif first == "cross-check":
                assert p.aborted_transactions(2, 8, source="cross-check") == written
            assert (p.log_start_offset, p.last_stable_offset, p.open_transactions) == (2, 8, {}), first
    # the same directory before the ABORT: the transaction is still open, from offset 0
    path2 = _written(tmp_path / "u-0", items[:4], rolls={1, 3})
    for f in os.listdir(path2):
        if f.startswith("0" * 20 + "."):
            os.remove(os.path.join(path2, f))
    for first in firsts[:4]:
        with open_partition(path2, codec=codec, checkpoints=False) as p:
            if first == "open":
                assert p.open_transactions == {5: 0}
            elif first == "scan":
                assert p.aborted_transactions(2, 7, source="scan") == []
            elif first == "read":
                assert [r.offset for r in p.read()] == []
            assert (p.last_stable_offset, p.open_transactions) == (2, {5: 0}), first


@pytest.mark.parametrize("damage", ["removed", "cut"])
def test_a_segment_missing_between_snapshot_and_log_is_reported(codec, tmp_path, damage):
    """A backup lost (or cut) the segment that holds the ABORT of producer 5's transaction.  The newest
    snapshot (written after the ABORT) has no open transaction, while the remaining segments show its data
    with no marker.  A read goes on as the broker would, trusting the snapshot (the LSO does not move
    because of the replay), and says what it found in its warnings; aborted_source="cross-check" raises
    it, naming the snapshot."""
    from kafkatx.transactions import encode_marker

    items = [_txn_data([0, 1], 5, 0, True), _txn_data([2, 3]),
             encode_marker("abort", producer_id=5, producer_epoch=0, base_offset=4, timestamp=_TS),
             _txn_data([5, 6]), _txn_data([7, 8])]  # fmt: skip
    path = _written(tmp_path / "t-0", items, rolls={1, 3, 4})
    seg2 = os.path.join(path, f"{2:020d}.log")
    with open_partition(path, codec=codec, checkpoints=False) as p:
        r = p.read()
        assert [x.offset for x in r] == [2, 3, 5, 6, 7, 8] and r.warnings == []  # sound: it was aborted
    if damage == "removed":
        os.remove(seg2)
    else:
        with open(seg2, "r+b") as fh:
            fh.truncate(os.path.getsize(seg2) - 5)  # the ABORT marker torn
    snapshot = os.path.join(path, f"{9:020d}.snapshot")
    with open_partition(path, codec=codec, checkpoints=False) as p:
        lso = p.last_stable_offset
        r = p.read()
        # the removed segment's .txnindex, left without its .log, is not read (a broker deletes such a file);
        # the cut one's still names the aborted transaction
        assert [x.offset for x in r] == ([0, 1, 5, 6, 7, 8] if damage == "removed" else [2, 3, 5, 6, 7, 8])
        assert p.last_stable_offset == lso == 9 and r.last_stable_offset == 9
        assert len(r.warnings) == 1 and "producer 5" in r.warnings[0] and "open from offset 0" in r.warnings[0]
        assert snapshot in r.warnings[0] and r.warnings[0] in p.warnings
        assert [e.file for e in p.inconsistencies] == [snapshot]
        assert p.read().warnings == r.warnings  # every read_committed read that relies on it says so
        assert p.read(isolation="read_uncommitted").warnings == []
    with open_partition(path, codec=codec, checkpoints=False) as p:
        with pytest.raises(LogInconsistencyError) as ei:
            p.read(aborted_source="cross-check")
    assert ei.value.file == snapshot and "producer 5" in str(ei.value)
    with open_partition(path, codec=codec, checkpoints=False) as p:
        p.aborted_transactions_by_segment("scan")
        assert len(p.inconsistencies) == 1


def test_entries_named_like_segments_that_are_not_files_are_ignored(built, codec, tmp_path):
    """A directory or a dangling symlink named like a segment is not one (Kafka's LogLoader lists files
    only): the partition reads as before, with a warning naming the entry, never an OSError."""
    copy = _copy(built, tmp_path)
    with open_partition(copy, codec=codec) as p:
        want = (p.log_end_offset, _tuples(p.read()))
    os.mkdir(os.path.join(copy, f"{99999:020d}.log"))
    os.symlink(os.path.join(copy, "nowhere"), os.path.join(copy, f"{199999:020d}.log"))
    with open_partition(copy, codec=codec) as p:
        assert (p.log_end_offset, _tuples(p.read())) == want
        assert sorted(w.split(":")[0] for w in p.warnings) == [
            os.path.join(copy, f"{99999:020d}.log"), os.path.join(copy, f"{199999:020d}.log")]


# ------------------------------------------------------------------------------------------ huge pages
def _vm_flags_of(address: int) -> list[str] | None:
    """The ``VmFlags`` of this process's mapping holding ``address`` (Linux ``/proc/self/smaps``)."""
    with open("/proc/self/smaps") as fh:
        inside = False
        for line in fh:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    return None


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="mapping flags are read from Linux's /proc")
def test_segments_of_2_mib_and_more_are_mapped_asking_for_huge_pages(codec, tmp_path):
    """A segment map of 2 MiB or more is advised MADV_HUGEPAGE (its pages read in from disk then come
    into the page cache as 2 MiB folios, mapped 2 MiB at a time); a smaller one is not; the records read
    the same."""
    import numpy as np
    from kafkatx._fileio import HUGE_MAP_MIN
    from kafkatx.log import PartitionWriter

    records = []
    with PartitionWriter(tmp_path / "t-0", segment_bytes=8 << 20, checkpoint_recovery_point=False,
                         codec=codec) as w:  # fmt: skip
        while w.log_end_offset < 40_000:  # ~3 MiB in the first segment, then a small second one
            b = kafkatx.BatchBuilder()
            for i in range(1000):
                value = b"%d" % (w.log_end_offset + i) * 12
                b.append(value, timestamp=_TS)
                records.append(value)
            w.append(b.build())
            if w.log_end_offset == 38_000:
                w.roll()
    with open_partition(tmp_path / "t-0", codec=codec) as p:
        big, small = p.segments
        assert big.size >= HUGE_MAP_MIN > small.size
        flags = []
        for seg in (big, small):
            view = np.frombuffer(seg.mmap, dtype=np.uint8)
            flags.append(_vm_flags_of(view.ctypes.data))
            del view
        if flags == [None, None]:
            pytest.skip("this kernel's /proc/self/smaps shows no VmFlags (gVisor)")
        huge_pages = getattr(__import__("mmap"), "MADV_HUGEPAGE", None) is not None and os.path.exists(
            "/sys/kernel/mm/transparent_hugepage/enabled")  # fmt: skip
        assert ("hg" in flags[0]) is huge_pages, flags[0]
        assert "hg" not in flags[1], flags[1]
        assert [r.value for r in p.read()] == records


# ------------------------------------------------------------------------------------ offsets by timestamp
def _timestamp_model(d: pathlib.Path):
    """Every record of every segment file (control records too) as ``(offset, timestamp)``, segment by segment,
    decoded from the files with the codec alone."""
    return [[(r.offset, r.timestamp) for b in kafkatx.iter_batches(f.read_bytes()) for r in b.records()]
            for f in sorted(d.glob("*.log"))]  # fmt: skip


@pytest.mark.parametrize("drop_time_index", [False, True])
def test_offset_for_timestamp_is_the_brokers_list_offsets_answer(codec, tmp_path, drop_time_index):
    """ListOffsets for a timestamp (UnifiedLog.fetchOffsetByTimestamp): in the first segment whose largest
    timestamp reaches it, the first record at or after it from the log start on, then the isolation bound.
    With a well-formed .timeindex the search from its entry finds what a search from the segment start finds
    (the records before an entry are older than it), so the model searches from the start; without the
    file the reader does too.  Timestamps here are not monotonic, and the log ends in an open transaction."""
    from kafkatx.log import generate

    generate(tmp_path, topics=("t",), partitions=1, records=3_000, seed=5, workers=0, segment_bytes=32 << 10,
             batch_records=(5, 40), open_transactions=1)  # fmt: skip
    d = tmp_path / "t-0"
    if drop_time_index:
        for f in d.glob("*.timeindex"):
            f.unlink()
    segs = _timestamp_model(d)
    assert len(segs) >= 3
    stamps = [t for s in segs for _, t in s]
    assert any(b < a for a, b in zip(stamps, stamps[1:]))  # out of order somewhere
    with open_partition(d, codec=codec) as p:
        bounds = {"read_committed": p.last_stable_offset, "read_uncommitted": p.high_watermark}
        assert bounds["read_committed"] < bounds["read_uncommitted"]
        log_start = p.log_start_offset
        targets = sorted(set(stamps))[::7] + [min(stamps) - 1, max(stamps), max(stamps) + 1, 0]
        for target in targets:
            seg = next((s for s in segs if s and max(t for _, t in s) >= target), None)
            want = None if seg is None else next((o for o, t in seg if t >= target and o >= log_start), None)
            for isolation, bound in bounds.items():
                got = p.offset_for_timestamp(target, isolation=isolation)
                assert got == (want if want is not None and want < bound else None), (target, isolation)
        assert p.offset_for_timestamp(-2) == log_start
        assert p.offset_for_timestamp(-1) == p.high_watermark
        assert p.offset_for_timestamp(-1, isolation="read_committed") == p.last_stable_offset
        for bad in (-3, 1.5, "1"):
            with pytest.raises(ValueError, match="timestamp must be"):
                p.offset_for_timestamp(bad)
        with pytest.raises(ValueError, match="isolation"):
            p.offset_for_timestamp(0, isolation="read_dirty")
