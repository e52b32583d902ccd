"""kafkatx.log.writer.PartitionWriter: appends like a broker leader, recovers like LogLoader.

Checked against kafkatx's reader (both codec backends), ``producer_state.rebuild_from_log`` on the written
log, Kafka's own storage goldens (``tests/vectors/java-storage/recover_segment_mixed``) and, with
``-m java``, Kafka's record classes (the oracle's ``dump``).
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import signal
import struct
import subprocess
import sys
import threading

import pytest

import kafkatx
from kafkatx import BatchBuilder, iter_batches
from kafkatx.errors import (
    CorruptRecordError,
    CrcMismatchError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTxnStateError,
    KafkaTxError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkatx.log import OffsetIndex, TimeIndex, open_partition, read_checkpoint, write_checkpoint
from kafkatx.log.writer import (
    AppendInfo,
    LogClosedError,
    LogSegmentOffsetOverflowError,
    LogWriterError,
    PartitionWriter,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkatx.producer_state import read_snapshot, rebuild_from_log, write_snapshot
from kafkatx.transactions import encode_marker
from kafkatx.txnindex import encode_txnindex, read_txnindex

HERE = pathlib.Path(__file__).parent
GOLDEN_SEGMENT = HERE / "vectors" / "java-golden" / "segment_mixed.bin"
RECOVER = HERE / "vectors" / "java-storage" / "recover_segment_mixed"
T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now=T0 + 10_000):
        self.now = now

    def __call__(self):
        self.now += 1
        return self.now


def batch(codec=None, *, pid=-1, epoch=-1, seq=-1, txn=False, n=3, ts=T0, compression="none", tag=b"v",
          base_offset=0):  # fmt: skip
    b = (codec.BatchBuilder if codec else BatchBuilder)(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                                        transactional=txn, compression=compression,
                                                        base_offset=base_offset)  # fmt: skip
    for i in range(n):
        b.append(tag + b"-%d" % i, b"k%d" % (i % 2), timestamp=ts + i)
    return b.build()


def log_files(path):
    return sorted(p for p in os.listdir(path) if p.endswith(".log"))


def whole_log(path) -> bytes:
    return b"".join(pathlib.Path(path, f).read_bytes() for f in log_files(path))


def dir_state(path):
    """Every file's bytes (indexes excluded: the active ones are preallocated and rewritten in place)."""
    out = {}
    for name in sorted(os.listdir(path)):
        if name.endswith((".index", ".timeindex")):
            continue
        out[name] = pathlib.Path(path, name).read_bytes()
    return out


def snapshot_set(entries):
    return {tuple(e) for e in entries}


NOW = T0 + 60_000  # "now" of the writers here: the batches below are a minute old, as a producer's would be


@pytest.fixture(autouse=True)
def writer_clock(monkeypatch):
    """Writers without a clock of their own read NOW: the broker rules that look at the time (producer
    expiration on reopen, message.timestamp.after.max.ms) then see the batches as recent."""
    import kafkatx.log.writer as writer_module

    monkeypatch.setattr(writer_module, "_default_clock", lambda: NOW)


@pytest.fixture
def part(tmp_path):
    return tmp_path / "orders-0"


# ------------------------------------------------------------------------------------------ round trip
def test_round_trip_both_backends(tmp_path, codec):
    """Everything written with one backend reads back, with either isolation, through the reader."""
    path = tmp_path / "orders-0"
    clock = Clock()
    with PartitionWriter(path, codec=codec, clock=clock, segment_bytes=700, index_interval_bytes=100) as w:
        assert w.topic_partition == ("orders", 0)
        a = w.append(batch(codec, tag=b"plain"))
        assert (a.first_offset, a.last_offset, a.duplicate) == (0, 2, False)
        w.append(batch(codec, pid=10, epoch=0, seq=0, txn=True, tag=b"t10", compression="gzip"))  # 3..5
        w.append(batch(codec, pid=11, epoch=0, seq=0, tag=b"idem"))  # 6..8
        w.append(batch(codec, pid=12, epoch=0, seq=0, txn=True, tag=b"t12"))  # 9..11
        assert w.append_marker("abort", producer_id=10, producer_epoch=0, coordinator_epoch=1) == 12
        w.append(batch(codec, pid=12, epoch=0, seq=3, txn=True, tag=b"t12b", compression="zstd"))  # 13..15
        assert w.append_marker("commit", producer_id=12, producer_epoch=0, coordinator_epoch=1) == 16
        w.append(batch(codec, pid=13, epoch=0, seq=0, txn=True, tag=b"open"))  # 17..19, left open
        w.append(batch(codec, tag=b"after"))  # 20..22
        assert w.log_end_offset == 23 and w.last_stable_offset == 17
        assert w.ongoing_transactions() == {13: 17}
        assert len(w.segments) > 1
    with open_partition(path, codec=codec) as p:
        committed = [(r.offset, r.value) for r in p.read(isolation="read_committed")]
        uncommitted = [r.offset for r in p.read(isolation="read_uncommitted")]
        lso, leo = p.last_stable_offset, p.log_end_offset
        same = p.aborted_transactions_by_segment("txnindex") == p.aborted_transactions_by_segment("scan")
    assert committed == [(0, b"plain-0"), (1, b"plain-1"), (2, b"plain-2"), (6, b"idem-0"), (7, b"idem-1"),
                         (8, b"idem-2"), (9, b"t12-0"), (10, b"t12-1"), (11, b"t12-2"), (13, b"t12b-0"),
                         (14, b"t12b-1"), (15, b"t12b-2")]  # fmt: skip
    assert uncommitted == [o for o in range(23) if o not in (12, 16)]
    assert lso == 17 and leo == 23 and same


def test_crc_not_recomputed_for_offsets_and_leader_epoch(part):
    """baseOffset and partitionLeaderEpoch are outside the CRC: the written batch differs from the client's
    only there, and its stored CRC (unchanged) is valid."""
    data = batch(pid=5, epoch=0, seq=0, n=4)
    with PartitionWriter(part, leader_epoch=7) as w:
        w.append(batch())  # offsets 0..2 first, so the batch moves
        info = w.append(data)
    written = whole_log(part)[info.position :]
    assert len(written) == len(data) == info.size_in_bytes
    assert written[16:] == data[16:]  # magic, CRC and everything CRC-covered: untouched
    assert written[8:12] == data[8:12]  # batch length
    assert struct.unpack_from(">q", written, 0)[0] == 3 and struct.unpack_from(">i", written, 12)[0] == 7
    assert struct.unpack_from(">q", data, 0)[0] == 0 and struct.unpack_from(">i", data, 12)[0] == -1
    (b,) = iter_batches(written)
    assert b.is_valid and b.crc == struct.unpack_from(">I", data, 17)[0] == b.compute_crc()
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (3, 6, 7)


def test_max_timestamp_and_log_append_time_rewrite_the_crc(part, tmp_path):
    data = bytearray(batch(n=3, ts=T0))  # max timestamp T0 + 2
    struct.pack_into(">q", data, 35, T0 + 100)  # a client that lies about the max timestamp
    struct.pack_into(">I", data, 17, kafkatx.crc32c(memoryview(data)[21:]))
    with PartitionWriter(part) as w:
        info = w.append(bytes(data))
    assert info.max_timestamp == T0 + 2
    (b,) = iter_batches(whole_log(part))
    assert b.max_timestamp == T0 + 2 and b.is_valid  # LogValidator.setMaxTimestamp recomputes the CRC
    lat = tmp_path / "lat-0"
    with PartitionWriter(lat, timestamp_type="log_append_time", clock=lambda: T0 + 5000) as w:
        info = w.append(batch(n=2))
    assert info.log_append_time == T0 + 5000
    (b,) = iter_batches(whole_log(lat))
    assert b.timestamp_type == "log_append_time" and b.max_timestamp == T0 + 5000 and b.is_valid
    assert [r.timestamp for r in b.records()] == [T0 + 5000, T0 + 5000]


# ------------------------------------------------------------------------------------------ rejections
def _rejections():
    def crc(d):
        d = bytearray(d)
        d[-1] ^= 1
        return bytes(d)

    def magic1(d):
        d = bytearray(d)
        d[16] = 1
        return bytes(d)

    def pid_without_sequence():  # the builder refuses it; a broken client might not
        d = bytearray(batch(n=2))
        struct.pack_into(">qhi", d, 43, 5, 0, -1)
        struct.pack_into(">I", d, 17, kafkatx.crc32c(memoryview(d)[21:]))
        return bytes(d)

    ok = batch(n=2)
    gapped = BatchBuilder()
    gapped.append(b"a", timestamp=T0)
    gapped.append(b"b", timestamp=T0, offset=2)
    return [
        ("control batch", encode_marker("commit", producer_id=5, producer_epoch=0, base_offset=0), InvalidRecordError),
        ("two batches", ok + ok, InvalidRecordError),
        ("truncated", ok[:-1], CorruptRecordError),
        ("too short", ok[:40], CorruptRecordError),
        ("bad crc", crc(ok), CrcMismatchError),
        ("magic 1", magic1(ok), InvalidRecordError),
        ("pid without sequence", pid_without_sequence(), InvalidRecordError),
        ("offset gap", gapped.build(), InvalidRecordError),
        ("base offset not 0", batch(n=2, base_offset=7), InvalidRecordError),
        ("timestamp 2 h ahead", batch(n=1, ts=NOW + 2 * 3_600_000), InvalidTimestampError),
        ("not bytes", "text", TypeError),
    ]


@pytest.mark.parametrize("what,data,error", _rejections(), ids=[r[0] for r in _rejections()])
def test_invalid_client_batches_write_nothing(part, what, data, error):
    with PartitionWriter(part) as w:
        w.append(batch())
        before = dir_state(part)
        with pytest.raises(error):
            w.append(data)
        assert dir_state(part) == before and w.log_end_offset == 3
    if error is not TypeError:
        assert issubclass(error, KafkaTxError)


def test_size_limits(part):
    big = batch(n=200)
    with PartitionWriter(part, max_message_bytes=len(big) - 1) as w:
        with pytest.raises(RecordTooLargeError):
            w.append(big)
    with PartitionWriter(part, max_message_bytes=None, segment_bytes=len(big) - 1) as w:
        with pytest.raises(RecordBatchTooLargeError):
            w.append(big)
        assert w.log_end_offset == 0 and w.size_in_bytes == 0
    assert issubclass(RecordTooLargeError, KafkaTxError) and issubclass(RecordBatchTooLargeError, KafkaTxError)


def test_producer_state_checks_run_before_anything_is_written(part):
    w = PartitionWriter(part, clock=Clock())

    def snapshot():
        return dir_state(part), snapshot_set(w.producer_state.snapshot_entries()), w.log_end_offset

    first = w.append(batch(pid=7, epoch=3, seq=0, n=2))
    w.append(batch(pid=7, epoch=3, seq=2, n=2))
    w.append(batch(pid=8, epoch=0, seq=0, txn=True, n=1))
    before = snapshot()
    # a retry of an earlier batch: the original offsets, nothing written
    dup = w.append(batch(pid=7, epoch=3, seq=0, n=2))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (first.first_offset, first.last_offset)
    assert dup.size_in_bytes == 0 and dup.position == -1
    assert snapshot() == before
    rejected = [
        (batch(pid=7, epoch=3, seq=5, n=1), OutOfOrderSequenceError),  # gap after 3
        (batch(pid=7, epoch=2, seq=4, n=1), InvalidProducerEpochError),  # fenced epoch
        (batch(pid=7, epoch=4, seq=1, n=1), OutOfOrderSequenceError),  # new epoch must start at 0
        (batch(pid=8, epoch=0, seq=1, n=1), InvalidTxnStateError),  # non-transactional inside a transaction
    ]
    for data, error in rejected:
        with pytest.raises(error):
            w.append(data)
        assert snapshot() == before
    with pytest.raises(InvalidProducerEpochError):
        w.append_marker("commit", producer_id=8, producer_epoch=-1, coordinator_epoch=0)
    assert snapshot() == before
    w.append_marker("abort", producer_id=8, producer_epoch=0, coordinator_epoch=5)
    before = snapshot()
    with pytest.raises(TransactionCoordinatorFencedError):
        w.append_marker("commit", producer_id=8, producer_epoch=0, coordinator_epoch=4)
    assert snapshot() == before
    w.append(batch(pid=8, epoch=0, seq=1, txn=True, n=1))
    before = snapshot()
    with pytest.raises(InvalidProducerEpochError):  # TV2: the marker must carry a bumped epoch
        w.append_marker("commit", producer_id=8, producer_epoch=0, coordinator_epoch=5, transaction_version=2)
    assert snapshot() == before
    assert w.append_marker("commit", producer_id=8, producer_epoch=1, coordinator_epoch=5, transaction_version=2)
    state = snapshot_set(w.producer_state.snapshot_entries())
    leo = w.log_end_offset
    w.close()
    # the same state comes back from the log alone
    m, _ = rebuild_from_log(whole_log(part))
    assert snapshot_set(m.snapshot_entries()) == state
    w = PartitionWriter(part)
    assert snapshot_set(w.producer_state.snapshot_entries()) == state and w.log_end_offset == leo
    assert w.append(batch(pid=7, epoch=3, seq=2, n=2)).duplicate  # the dedup window survived the reopen
    w.close()
    with pytest.raises(LogClosedError):
        w.append(batch())


def test_replication_keeps_offsets_and_rejects_going_back(part):
    with PartitionWriter(part) as w:
        info = w.append(batch(base_offset=10, n=2), origin="replication")
        assert (info.first_offset, info.last_offset) == (10, 11) and w.log_end_offset == 12
        with pytest.raises(UnexpectedAppendOffsetError):
            w.append(batch(base_offset=11, n=1), origin="replication")
        two = batch(base_offset=12, n=1) + batch(base_offset=20, n=2)  # several batches, a gap (compaction)
        assert w.append(two, origin="replication").last_offset == 21
        assert w.log_end_offset == 22
        with pytest.raises(ValueError):
            w.append(batch(), origin="elsewhere")
    assert [(b.base_offset, b.last_offset) for b in iter_batches(whole_log(part))] == [(10, 11), (12, 12), (20, 21)]


def test_a_replicated_append_is_checked_whole_before_anything_is_written(part):
    """UnifiedLog.append runs analyzeAndValidateProducerState over every batch before writing: a later batch
    that breaks a producer-state rule (a non-transactional batch inside the producer's open transaction)
    leaves the directory, the log end and the producer state as they were -- the earlier batches of the
    append included."""
    with PartitionWriter(part, clock=Clock()) as w:
        w.append(batch(base_offset=0, pid=9, epoch=0, seq=0, n=1), origin="replication")
        before = dir_state(part), snapshot_set(w.producer_state.snapshot_entries()), w.log_end_offset
        payload = (batch(base_offset=1, pid=1, epoch=0, seq=0, txn=True, n=1)
                   + batch(base_offset=2, pid=9, epoch=0, seq=1, n=1)
                   + batch(base_offset=3, pid=1, epoch=0, seq=1, n=1))  # fmt: skip
        with pytest.raises(InvalidTxnStateError):
            w.append(payload, origin="replication")
        assert (dir_state(part), snapshot_set(w.producer_state.snapshot_entries()), w.log_end_offset) == before
        assert w.ongoing_transactions() == {} and w.size_in_bytes == len(batch(n=1))
        # the same batches without the offending one go in whole, in one segment, with one AppendInfo
        info = w.append(payload[: 2 * len(batch(n=1))], origin="replication")
        assert (info.first_offset, info.last_offset, info.records_count, info.size_in_bytes, info.position) == (
            1, 2, 2, 2 * len(batch(n=1)), len(batch(n=1)))  # fmt: skip
        assert w.ongoing_transactions() == {1: 1}
    # a follower append larger than a segment is refused whole (RecordBatchTooLargeException)
    with PartitionWriter(part.parent / "t-1", segment_bytes=len(payload) - 1) as w:
        with pytest.raises(RecordBatchTooLargeError):
            w.append(payload[: 2 * len(batch(n=1))] + batch(base_offset=3, n=1), origin="replication")
        assert w.log_end_offset == 0 and w.size_in_bytes == 0


def test_replicated_offsets_far_past_a_segment_base(part):
    """LogSegment.shouldRoll rolls for an offset too far past the base for an index entry even when the active
    segment is empty, and LogSegment.append checks the range before writing: an append at 3,000,000,000 into
    a new log starts a segment there (it does not go into segment 0, which a reopen would cut), and one whose
    batches span more than 2^31 offsets is refused with nothing written."""
    far = 3_000_000_000
    with PartitionWriter(part) as w:
        info = w.append(batch(base_offset=far, n=2) + batch(base_offset=far + 2, n=1), origin="replication")
        assert (info.first_offset, info.last_offset, info.segment_base_offset) == (far, far + 2, far)
        assert w.segments == [far] and log_files(part) == [f"{far:020d}.log"]
        before = dir_state(part), w.log_end_offset, w.segments
        with pytest.raises(LogSegmentOffsetOverflowError) as caught:
            w.append(batch(base_offset=far + 3, n=1) + batch(base_offset=far + 3 + (1 << 31), n=1),
                     origin="replication")  # fmt: skip
        assert isinstance(caught.value, KafkaTxError)
        # (rolled first, as Kafka's maybeRoll does before the segment refuses the append: an empty segment)
        logs = {k: v for k, v in dir_state(part).items() if k.endswith(".log")}
        assert logs == {f"{far:020d}.log": before[0][f"{far:020d}.log"], f"{far + 3:020d}.log": b""}
        assert w.log_end_offset == before[1]
        w.append(batch(base_offset=far + 3, n=1), origin="replication")
        leo = w.log_end_offset
    w = PartitionWriter(part)
    try:
        assert w.recovery.truncated_bytes == 0 and w.log_end_offset == leo == far + 4
    finally:
        w.close()
    with open_partition(part) as p:
        assert [r.offset for r in p.read()] == [far, far + 1, far + 2, far + 3]


def test_a_replicated_append_gets_a_segment_with_index_room_for_its_batches(part):
    """A follower's append of several batches may add an index entry a batch: the active segment is rolled
    first if its indexes have no room for them, and an append no segment's indexes could take is refused
    before anything is written (not after its bytes are in the file)."""
    one = len(batch(n=1))
    with PartitionWriter(part, index_interval_bytes=0, max_index_size=36) as w:  # 3 offset, 2 time entries
        with pytest.raises(LogWriterError, match="index entries"):
            w.append(b"".join(batch(base_offset=i, n=1) for i in range(8)), origin="replication")
        assert w.log_end_offset == 0 and whole_log(part) == b""
        w.append(batch(base_offset=0, n=1) + batch(base_offset=1, n=1), origin="replication")
        assert w.segments == [0]
        info = w.append(batch(base_offset=2, n=1) + batch(base_offset=3, n=1), origin="replication")
        assert w.segments == [0, 2] and (info.segment_base_offset, info.position) == (2, 0)
        w.append(batch(), origin="client")
        assert w.log_end_offset == 7 and os.path.getsize(part / f"{2:020d}.log") == 2 * one + len(batch())
    w = PartitionWriter(part)
    try:
        assert w.recovery.truncated_bytes == 0 and w.log_end_offset == 7
    finally:
        w.close()
    with open_partition(part) as p:
        assert [r.offset for r in p.read()] == list(range(7))


def test_framing_errors_of_a_replicated_append_name_their_position_in_it(part):
    first = batch(base_offset=0, n=1)
    second = bytearray(batch(base_offset=1, n=1))
    at = len(first)
    for name, where, value, cls, pos in (("magic", 16, 1, InvalidRecordError, 16),
                                         ("batch length", 8, 10, CorruptRecordError, 8)):  # fmt: skip
        bad = bytearray(second)
        if name == "magic":
            bad[where] = value
        else:
            struct.pack_into(">i", bad, where, value)
        with PartitionWriter(part) as w:
            with pytest.raises(cls) as caught:
                w.append(first + bytes(bad), origin="replication")
            assert caught.value.position == at + pos, name
            with pytest.raises(CorruptRecordError) as caught:
                w.append(first + bytes(second[:40]), origin="replication")  # too short for a header
            assert caught.value.position == at


def test_last_stable_offset_of_a_replicated_abort_counts_the_whole_append(part):
    """UnifiedLog.append updates every producer of the append, then gives each completed transaction the LSO
    of the producer state at that point (ProducerStateManager.lastStableOffset) before completing it: a
    transaction opened by another producer later in the same append counts, one opened by a later append
    does not."""
    marker = encode_marker("abort", producer_id=1, producer_epoch=0, base_offset=1, coordinator_epoch=0,
                           timestamp=T0)  # fmt: skip
    with PartitionWriter(part, clock=Clock()) as w:
        w.append(batch(base_offset=0, pid=1, epoch=0, seq=0, txn=True, n=1), origin="replication")
        info = w.append(marker + batch(base_offset=2, n=1) + batch(base_offset=3, pid=2, epoch=0, seq=0, txn=True, n=1),
                        origin="replication")  # fmt: skip
        assert info.completed_txn == (1, 0, 1, True, 3)  # pid 2's transaction (first offset 3), not 1 + 1
        w.append(batch(base_offset=4, pid=2, epoch=0, seq=1, txn=True, n=1), origin="replication")
        w.append_marker("abort", producer_id=2, producer_epoch=0, coordinator_epoch=0)
        w.append(batch(base_offset=6, pid=3, epoch=0, seq=0, txn=True, n=1), origin="replication")
    def entries(aborted):
        return [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in aborted]

    assert entries(read_txnindex(part / "00000000000000000000.txnindex")) == [(1, 0, 1, 3), (2, 3, 5, 6)]
    # LogSegment.recover replays batch by batch, so a recovery would give the per-batch LSO instead
    assert entries(rebuild_from_log(whole_log(part))[1]) == [(1, 0, 1, 2), (2, 3, 5, 6)]


# ------------------------------------------------------------------------------------------ txnindex
def _txn_workload(w, clock_ts=T0):
    """Interleaved transactions of three producers over several segments."""
    seqs = {}

    def send(pid, txn=True, n=2):
        s = seqs.get(pid, 0)
        seqs[pid] = s + n
        return w.append(batch(pid=pid, epoch=0, seq=s, txn=txn, n=n, tag=b"p%d" % pid))

    send(100)
    send(200)
    send(300, n=4)
    w.append_marker("abort", producer_id=200, producer_epoch=0, coordinator_epoch=2)  # LSO: 100's first offset
    send(100)
    w.append_marker("abort", producer_id=100, producer_epoch=0, coordinator_epoch=2)  # LSO: 300's first offset
    w.append_marker("abort", producer_id=100, producer_epoch=0, coordinator_epoch=2)  # nothing open: no entry
    send(200)
    w.append_marker("commit", producer_id=300, producer_epoch=0, coordinator_epoch=2)
    send(400, txn=False, n=3)
    w.append_marker("abort", producer_id=200, producer_epoch=0, coordinator_epoch=3)  # nothing else open
    send(100)
    send(300)


def test_txnindex_entries_are_the_brokers(part):
    with PartitionWriter(part, segment_bytes=400, clock=Clock()) as w:
        _txn_workload(w)
        assert w.ongoing_transactions() == {100: w.ongoing_transactions()[100], 300: w.ongoing_transactions()[300]}
    m, aborted = rebuild_from_log(whole_log(part))
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in aborted] == [
        (200, 2, 8, 0), (100, 0, 11, 4), (200, 13, 19, 20)]  # fmt: skip
    # each entry sits in the .txnindex of the segment holding its marker, byte for byte
    bases = [int(f[:-4]) for f in log_files(part)]
    assert len(bases) > 2
    for i, base in enumerate(bases):
        end = bases[i + 1] if i + 1 < len(bases) else 1 << 62
        mine = [a for a in aborted if base <= a.last_offset < end]
        f = part / f"{base:020d}.txnindex"
        if mine:
            assert f.read_bytes() == encode_txnindex(mine)
            assert read_txnindex(f) == mine
        else:
            assert not f.exists() or f.read_bytes() == b""
    with open_partition(part) as p:
        assert p.aborted_transactions_by_segment("txnindex") == p.aborted_transactions_by_segment("scan")


def test_golden_replay_matches_kafka_storage(part):
    """segment_mixed replayed with origin=replication gives Kafka's .txnindex bytes and snapshot."""
    data = GOLDEN_SEGMENT.read_bytes()
    with PartitionWriter(part) as w:
        for b in iter_batches(data):
            w.append(b.tobytes(), origin="replication")
        assert w.log_end_offset == 18
    assert (part / "00000000000000000000.log").read_bytes() == (RECOVER / "00000000000000000000.log").read_bytes()
    assert (part / "00000000000000000000.txnindex").read_bytes() == (
        RECOVER / "00000000000000000000.txnindex").read_bytes()  # fmt: skip
    golden = read_snapshot(RECOVER / "00000000000000000018.snapshot")
    ours = read_snapshot(part / "00000000000000000018.snapshot")
    assert snapshot_set(ours) == snapshot_set(golden) and len(ours) == len(golden) == 4
    expected = json.loads((RECOVER / "recover.json").read_text())["txnindex"]["entries"]
    assert [tuple(e.values())[1:] for e in expected] == [tuple(a)[:4] for a in read_txnindex(
        part / "00000000000000000000.txnindex")]  # fmt: skip


# ------------------------------------------------------------------------------------------ indexes
def _expected_indexes(batches_meta, interval):
    """LogSegment.append's rule, restated: (offset entries, time entries before the final one, max ts, its offset)."""
    since = 0
    max_ts, off_max = -1, None
    idx, tidx = [], []
    for pos, size, last, mts in batches_meta:
        if mts > max_ts:
            max_ts, off_max = mts, last
        if since > interval:
            idx.append((last, pos))
            if not tidx or max_ts > tidx[-1][0]:
                tidx.append((max_ts, off_max))
            since = 0
        since += size
    return idx, tidx, max_ts, off_max


def test_index_entries_at_kafkas_intervals(part):
    interval = 300
    timestamps = [T0 + 50, T0 + 10, T0 + 70, T0 + 70, T0 + 20, T0 + 200, T0 + 5, T0 + 300, T0 + 250, T0 + 90]
    with PartitionWriter(part, index_interval_bytes=interval) as w:
        for i, ts in enumerate(timestamps * 3):
            w.append(batch(n=1 + (i * 7) % 9, ts=ts, tag=b"x" * (i % 40)))
    cols = kafkatx.scan_batches(whole_log(part))
    meta = list(zip(cols["position"], cols["size_in_bytes"], cols["last_offset"], cols["max_timestamp"]))
    idx, tidx, max_ts, off_max = _expected_indexes(meta, interval)
    assert len(idx) > 5
    oi = OffsetIndex(part / "00000000000000000000.index", 0)
    assert [tuple(e) for e in oi.entries()] == idx
    assert os.path.getsize(part / "00000000000000000000.index") == 8 * len(idx)  # trimmed at close
    ti = TimeIndex(part / "00000000000000000000.timeindex", 0)
    final = [] if tidx and tidx[-1][0] >= max_ts else [(max_ts, off_max)]
    assert [tuple(e) for e in ti.entries()] == tidx + final  # + the entry written when the segment closes
    for off, pos in idx:  # every entry points at the batch that holds its offset
        (b,) = [b for b in iter_batches(whole_log(part)) if b.position == pos]
        assert b.base_offset <= off <= b.last_offset


def test_roll_snapshots_and_trimmed_indexes(part):
    seg = 600
    with PartitionWriter(part, segment_bytes=seg, index_interval_bytes=50, clock=Clock()) as w:
        _txn_workload(w)
        bases = w.segments
    assert bases == [int(f[:-4]) for f in log_files(part)] and len(bases) >= 3
    data = whole_log(part)
    batches = list(iter_batches(data))
    for i, base in enumerate(bases):
        size = os.path.getsize(part / f"{base:020d}.log")
        assert 0 < size <= seg
        first = next(b for b in iter_batches((part / f"{base:020d}.log").read_bytes()))
        assert first.base_offset == base
        if i:  # <base>.snapshot: the producer state of everything before the new segment
            prefix = [b for b in batches if b.last_offset < base]
            m, _ = rebuild_from_log(prefix)
            assert snapshot_set(read_snapshot(part / f"{base:020d}.snapshot")) == snapshot_set(m.snapshot_entries())
        for suffix, size_ in ((".index", 8), (".timeindex", 12)):
            f = part / f"{base:020d}{suffix}"
            assert os.path.getsize(f) % size_ == 0 and os.path.getsize(f) < 10 << 20  # trimmed, not preallocated
        OffsetIndex(part / f"{base:020d}.index", base).sanity_check()
    # the close snapshot, named after the log end offset, holds the final state
    leo = batches[-1].last_offset + 1
    m, _ = rebuild_from_log(data)
    assert snapshot_set(read_snapshot(part / f"{leo:020d}.snapshot")) == snapshot_set(m.snapshot_entries())


# ------------------------------------------------------------------------------------------ held writes
def _files(path):
    """The bytes of every file in ``path`` (not below it)."""
    return {f.name: f.read_bytes() for f in sorted(pathlib.Path(path).iterdir()) if f.is_file()}


def _varied_workload(w, codec):
    """Client batches (one compressed), markers, a replicated append of two batches and a roll."""
    _txn_workload(w)
    w.append(batch(codec, pid=700, epoch=0, seq=0, txn=True, n=40, tag=b"gz" * 20, compression="gzip"))
    w.append_marker("commit", producer_id=700, producer_epoch=0, coordinator_epoch=4)
    leo = w.log_end_offset
    w.append(batch(codec, base_offset=leo, n=2) + batch(codec, base_offset=leo + 2, n=5), origin="replication")
    w.roll()
    w.append(batch(codec, n=4, tag=b"after the roll"))


@pytest.mark.parametrize("chunk", [1, 100, 4096, 1 << 20])
def test_held_writes_make_the_same_files(tmp_path, codec, chunk):
    """write_buffer_bytes changes when bytes reach the files, never which bytes: every file (logs, trimmed
    indexes, snapshots, .txnindex, checkpoints) is the write-through writer's, at any piece size."""
    kw = dict(segment_bytes=600, index_interval_bytes=50, codec=codec)
    with PartitionWriter(tmp_path / "a" / "orders-0", clock=Clock(), **kw) as w:
        _varied_workload(w, codec)
    with PartitionWriter(tmp_path / "b" / "orders-0", clock=Clock(), write_buffer_bytes=chunk, **kw) as w:
        _varied_workload(w, codec)
        assert len(w.segments) >= 3
    assert _files(tmp_path / "b") == _files(tmp_path / "a")
    assert _files(tmp_path / "b" / "orders-0") == _files(tmp_path / "a" / "orders-0")


def test_held_writes_end_on_multiples_of_the_piece_size(part):
    """Until the segment is rolled, flushed or closed, its file ends at the last multiple of
    write_buffer_bytes the appends have passed (so every write but a segment's last covers whole pieces at
    multiples of it: a 2 MiB one can be cached as one huge page)."""
    chunk = 1000
    w = PartitionWriter(part, write_buffer_bytes=chunk, segment_bytes=1 << 20, clock=Clock())
    log = part / log_files(part)[0]
    for i in range(60):
        w.append(batch(n=1 + i % 7, tag=b"x" * (i % 50)))
        logical = w.size_in_bytes
        assert os.path.getsize(log) == logical - logical % chunk
    assert w.size_in_bytes > 5 * chunk
    w.flush()  # what is held reaches the file (and the disk)
    assert os.path.getsize(log) == w.size_in_bytes
    w.close()
    assert whole_log(part) and [b.last_offset for b in iter_batches(whole_log(part))][-1] == w.log_end_offset - 1


def test_held_bytes_reach_the_file_at_a_roll_and_when_an_open_writer_is_collected(tmp_path):
    import gc

    path = tmp_path / "orders-0"
    w = PartitionWriter(path, write_buffer_bytes=1 << 20, clock=Clock())
    w.append(batch(n=3, tag=b"first"))
    first = path / log_files(path)[0]
    assert os.path.getsize(first) == 0  # held
    w.roll()
    assert os.path.getsize(first) == w.size_in_bytes  # written when the segment rolled
    w.append(batch(n=2, tag=b"second"))
    leo = w.log_end_offset
    del w  # never closed: the writer's collection writes what it holds
    gc.collect()
    with open_partition(path) as p:
        assert [r.value for r in p.read()] == [b"first-0", b"first-1", b"first-2", b"second-0", b"second-1"]
    w = PartitionWriter(path, clock=Clock())
    assert w.log_end_offset == leo and w.recovery.truncated_bytes == 0
    w.close()


def test_a_held_write_that_fails_drops_only_the_append_being_made(tmp_path):
    """A piece that cannot be written (ENOSPC, from /dev/full) fails the append that completed it, which
    is then not made, as a write-through append that fails is not; the bytes held before it stay held and
    reach the file later: the log ends as a writer that never saw the failure leaves it."""
    kw = dict(write_buffer_bytes=4096, segment_bytes=1 << 20)
    with PartitionWriter(tmp_path / "a" / "orders-0", clock=Clock(), **kw) as w:
        for i in range(40):
            w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=b"r%d" % i))
    with PartitionWriter(tmp_path / "b" / "orders-0", clock=Clock(), **kw) as w:
        seg = w._active
        real = seg.fd
        i = 0
        while (w.size_in_bytes + len(batch(n=3, tag=b"r%d" % i))) // 4096 == 0:
            w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=b"r%d" % i))
            i += 1
        held, leo = seg.size - seg.written, w.log_end_offset
        assert held == w.size_in_bytes > 0 and os.path.getsize(seg.log_path) == 0
        seg.fd = os.open("/dev/full", os.O_WRONLY)
        try:
            with pytest.raises(OSError):
                w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=b"r%d" % i))
        finally:
            os.close(seg.fd)
            seg.fd = real
        assert seg.size - seg.written == held and w.log_end_offset == leo and w.size_in_bytes == held
        for j in range(i, 40):  # the failed append is retried, as a producer would
            w.append(batch(pid=9, epoch=0, seq=3 * j, n=3, tag=b"r%d" % j))
    assert _files(tmp_path / "b" / "orders-0") == _files(tmp_path / "a" / "orders-0")


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE and SIGXFSZ (POSIX)")
@pytest.mark.parametrize("held", [0, 4096])
def test_a_write_that_fails_part_way_leaves_no_torn_append_behind(tmp_path, held):
    """A write that stops part way through an append (here the file size limit: the write is short, the next
    one fails with EFBIG; a disk filling up does the same) fails the append, which is then not made, and
    the bytes of it that reached the file are cut off: the appends after it go where it would have, and the
    log ends as a writer that never saw the failure leaves it (write-through, and holding appends)."""
    import resource

    kw = dict(write_buffer_bytes=held, segment_bytes=1 << 20)
    tags = [b"r%d" % i for i in range(60)]
    with PartitionWriter(tmp_path / "a" / "orders-0", clock=Clock(), **kw) as w:
        for i, tag in enumerate(tags):
            w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=tag))
    with PartitionWriter(tmp_path / "b" / "orders-0", clock=Clock(), **kw) as w:
        seg = w._active

        def written_now(i):  # the bytes of append i written by its own write (all of them write-through)
            n = len(batch(n=3, tag=tags[i]))
            return n if not held else (w.size_in_bytes + n) // held * held - w.size_in_bytes

        i = 0
        while i < 10 or written_now(i) < 2:  # up to an append whose write reaches the file
            w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=tags[i]))
            i += 1
        leo, size = w.log_end_offset, w.size_in_bytes
        limit = size + written_now(i) // 2  # the file may take half of what the append writes
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            with pytest.raises(OSError) as err:
                w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=tags[i]))
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, old)
        assert err.value.errno == errno.EFBIG
        assert w.log_end_offset == leo and w.size_in_bytes == size
        assert os.path.getsize(seg.log_path) == size and (not held or seg.written == size)
        for j in range(i, len(tags)):  # the failed append is retried, as a producer would
            w.append(batch(pid=9, epoch=0, seq=3 * j, n=3, tag=tags[j]))
    assert _files(tmp_path / "b" / "orders-0") == _files(tmp_path / "a" / "orders-0")
    w = PartitionWriter(tmp_path / "b" / "orders-0", clock=Clock())
    assert w.recovery.truncated_bytes == 0 and w.log_end_offset == 3 * len(tags)
    w.close()


def test_a_crash_of_a_holding_writer_loses_only_what_it_held(tmp_path):
    """The files of a writer that holds appends, copied while it is open (as a crash leaves them: the
    active segment ending at a piece boundary, mid-batch, index entries past its end, no close snapshot),
    reopen as the broker recovers them: the log is the writer's up to the last whole batch on disk."""
    src = tmp_path / "a" / "orders-0"
    w = PartitionWriter(src, write_buffer_bytes=4096, index_interval_bytes=50, segment_bytes=20_000, clock=Clock())
    for i in range(300):
        w.append(batch(pid=7, epoch=0, seq=3 * i, txn=True, tag=b"x%d" % i))
        if i % 40 == 39:
            w.append_marker("commit" if i % 80 else "abort", producer_id=7, producer_epoch=0, coordinator_epoch=1)
    active = w._active
    assert len(w.segments) >= 2 and active.size - active.written > 0
    crashed = tmp_path / "b" / "orders-0"
    shutil.copytree(src, crashed)
    w.close()
    on_disk = os.path.getsize(crashed / os.path.basename(active.log_path))
    assert on_disk % 4096 == 0 and on_disk < active.size
    whole = [b for b in iter_batches(pathlib.Path(active.log_path).read_bytes())
             if b.position + b.size_in_bytes <= on_disk]  # fmt: skip
    w2 = PartitionWriter(crashed, clock=Clock())
    assert w2.log_end_offset == whole[-1].next_offset < w.log_end_offset
    assert w2.recovery.truncated_bytes == on_disk - (whole[-1].position + whole[-1].size_in_bytes)
    assert any(name.endswith(".index") for name in w2.recovery.rebuilt_indexes)
    w2.close()
    kept = whole_log(crashed)
    assert kept == whole_log(src)[: len(kept)]
    with open_partition(crashed) as p, open_partition(src) as q:
        got = [(r.offset, r.value) for r in p.read(isolation="read_committed")]
        want = [(r.offset, r.value) for r in q.read(isolation="read_committed") if r.offset < p.last_stable_offset]
        assert got == want and p.log_end_offset == w2.log_end_offset


@pytest.mark.parametrize("held", [0, 256])
def test_the_files_are_the_same_without_the_positional_and_vector_writes(tmp_path, monkeypatch, held):
    """Where the OS has no os.pwrite / os.pread / os.writev (Windows), kafkatx._fileio's seek-and-write,
    seek-and-read and one-write-per-buffer stand in: forced here, every file of a workload (indexes
    written at offsets, preallocated, trimmed, read back on reopen) is the same."""
    import kafkatx._fileio as fileio
    import kafkatx.log.index as index_module
    import kafkatx.log.writer as writer_module

    def run(path):
        kw = dict(segment_bytes=600, index_interval_bytes=50, write_buffer_bytes=held)
        with PartitionWriter(path, clock=Clock(), **kw) as w:
            _varied_workload(w, None)
        with PartitionWriter(path, clock=Clock(), **kw) as w:  # reopened: the indexes read back
            rec = w.recovery
            w.append(batch(n=2, tag=b"reopened"))
        assert rec.truncated_bytes == 0 and rec.segments >= 3
        return _files(path), [os.path.basename(p) for p in rec.rebuilt_indexes], w.log_end_offset

    native = run(tmp_path / "a" / "orders-0")
    monkeypatch.setattr(writer_module, "writev", fileio._writev_each)
    monkeypatch.setattr(index_module, "pwrite", fileio._pwrite_seek)
    monkeypatch.setattr(index_module, "pread", fileio._pread_seek)
    assert run(tmp_path / "b" / "orders-0") == native
    f = tmp_path / "positional"
    fd = os.open(f, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 12)
        assert fileio._pwrite_seek(fd, b"cd", 2) == 2 and fileio._pwrite_seek(fd, b"ab", 0) == 2
        assert fileio._pwrite_seek(fd, b"z", 11) == 1
        assert fileio._pread_seek(fd, 3, 1) == b"bcd" and fileio._pread_seek(fd, 5, 10) == b"\0z"
        os.lseek(fd, 0, os.SEEK_END)
        assert fileio._writev_each(fd, [memoryview(b"12"), b"", bytearray(b"345")]) == 5
    finally:
        os.close(fd)
    assert f.read_bytes() == b"abcd" + bytes(7) + b"z12345"
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError):  # nothing written: the error itself
            fileio._writev_each(fd, [memoryview(b"x" * 10)])
    finally:
        os.close(fd)


@pytest.mark.parametrize("kw", [dict(write_buffer_bytes=-1), dict(write_buffer_bytes=True),
                                dict(write_buffer_bytes=2.0), dict(write_buffer_bytes=4096, fsync=True)])
def test_write_buffer_bytes_is_checked(part, kw):
    with pytest.raises(ValueError, match="write_buffer_bytes"):
        PartitionWriter(part, **kw)


# ------------------------------------------------------------------------------------------ recovery
def _written(part, **kw):
    w = PartitionWriter(part, segment_bytes=500, index_interval_bytes=60, max_index_size=4096, clock=Clock(), **kw)
    _txn_workload(w)
    return w


def test_reopen_after_torn_tail_at_every_byte(tmp_path):
    src = tmp_path / "src" / "orders-0"
    w = _written(src)
    w.append(batch(pid=500, epoch=0, seq=0, txn=True, n=5, tag=b"last" * 3))  # the batch that gets torn
    w.close()
    last_file = src / log_files(src)[-1]
    seg_bytes = last_file.read_bytes()
    last = list(iter_batches(seg_bytes))[-1]
    start, end = last.position, last.position + last.size_in_bytes
    full = whole_log(src)
    for cut in range(start, end):
        d = tmp_path / f"cut{cut}" / "orders-0"
        shutil.copytree(src, d)
        with open(d / last_file.name, "r+b") as fh:
            fh.truncate(cut)
        w = PartitionWriter(d, segment_bytes=500, index_interval_bytes=60, max_index_size=4096)
        try:
            assert w.recovery.truncated_bytes == cut - start and w.recovery.truncated_at == start
            assert w.log_end_offset == last.base_offset
            kept = whole_log(d)
            assert kept == full[: len(kept)] and len(kept) == len(full) - last.size_in_bytes  # no complete batch lost
            m, aborted = rebuild_from_log(kept)
            assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
            assert w.ongoing_transactions() == {t.producer_id: t.first_offset for t in m.ongoing_transactions()}
            assert not (d / f"{last.last_offset + 1:020d}.snapshot").exists()  # beyond the log end: deleted
            for base in w.segments:
                OffsetIndex(d / f"{base:020d}.index", base).sanity_check()
                for off, pos in OffsetIndex(d / f"{base:020d}.index", base).entries():
                    assert pos < os.path.getsize(d / f"{base:020d}.log")
            if cut == start + 1:  # the writer goes on where the log ends
                again = w.append(batch(pid=500, epoch=0, seq=0, txn=True, n=5, tag=b"last" * 3))
                assert (again.first_offset, again.duplicate) == (last.base_offset, False)
                w.append_marker("commit", producer_id=500, producer_epoch=0, coordinator_epoch=9)
        finally:
            w.close()
        with open_partition(d) as p:
            assert p.truncated_tails == [] and p.log_end_offset == w.log_end_offset
            assert p.aborted_transactions_by_segment("txnindex") == p.aborted_transactions_by_segment("scan")
        shutil.rmtree(d.parent)


@pytest.mark.parametrize("magic", [0, 1])
def test_recovery_cuts_a_tail_batch_whose_magic_byte_rotted(tmp_path, magic):
    """LogSegment.recover truncates at the first batch that fails ensureValid: a v2 batch whose magic byte
    now says 0 or 1 is read as a legacy entry, whose CRC-32 does not match, and is cut (not raised while the
    producer state is rebuilt, which left the log unopenable).  A sound legacy entry at the end is kept."""
    src = tmp_path / "src" / "t-0"
    with PartitionWriter(src, clock=Clock()) as w:
        for _ in range(3):
            w.append(batch(n=1))
        last = w.append(batch(n=1, tag=b"last"))
    name = log_files(src)[-1]
    rotted = tmp_path / "rotted" / "t-0"
    shutil.copytree(src, rotted)
    with open(rotted / name, "r+b") as fh:
        fh.seek(last.position + 16)
        fh.write(bytes([magic]))
    w = PartitionWriter(rotted, recovery_point=0)
    try:
        assert (w.recovery.truncated_at, w.recovery.truncated_bytes) == (last.position, last.size_in_bytes)
        assert w.log_end_offset == 3
    finally:
        w.close()
    legacy = tmp_path / "legacy" / "t-0"
    shutil.copytree(src, legacy)
    entries = (HERE / "vectors" / "java-golden" / f"legacy_v{magic}_none.bin").read_bytes()  # offsets 10-12
    with open(legacy / name, "ab") as fh:
        fh.write(entries)
    w = PartitionWriter(legacy, recovery_point=0)
    try:
        assert w.recovery.truncated_bytes == 0 and w.log_end_offset == 13
    finally:
        w.close()


def test_reopen_after_crash_without_close(tmp_path):
    """A writer that never closed: preallocated indexes, no close snapshot, a half-written batch and a
    missing .txnindex entry (crash between the marker and its index entry) -- all repaired."""
    src = tmp_path / "a" / "orders-0"
    w = _written(src)
    w.append(batch(pid=600, epoch=0, seq=0, txn=True, n=2))
    w.append_marker("abort", producer_id=600, producer_epoch=0, coordinator_epoch=9)
    expected_state = snapshot_set(w.producer_state.snapshot_entries())
    leo = w.log_end_offset
    crashed = tmp_path / "b" / "orders-0"
    shutil.copytree(src, crashed)  # the files as they are while the writer is still open
    w.close()
    active = crashed / log_files(crashed)[-1]
    txn_file = active.with_suffix(".txnindex")
    entries = read_txnindex(txn_file)
    with open(txn_file, "r+b") as fh:  # the marker reached the log, its index entry did not
        fh.truncate(34 * (len(entries) - 1) + 5)
    with open(active, "ab") as fh:
        fh.write(batch(n=3)[:-7])  # a torn append
    assert os.path.getsize(active.with_suffix(".index")) == 4096  # preallocated
    w2 = PartitionWriter(crashed, segment_bytes=500, index_interval_bytes=60, max_index_size=4096)
    assert w2.log_end_offset == leo and w2.recovery.truncated_bytes == len(batch(n=3)) - 7
    assert snapshot_set(w2.producer_state.snapshot_entries()) == expected_state
    assert read_txnindex(txn_file) == entries and str(txn_file) in w2.recovery.repaired_txn_indexes
    w2.close()
    assert whole_log(crashed) == whole_log(src)
    assert read_txnindex(txn_file) == read_txnindex(src / txn_file.name)


@pytest.mark.parametrize("damage", ["crc", "magic", "size", "offsets"])
def test_reopen_cuts_the_last_segment_at_its_first_invalid_batch(tmp_path, damage):
    """As LogSegment.recover: everything from the first batch that fails validation on is cut."""
    d = tmp_path / "orders-0"
    w = PartitionWriter(d)
    for i in range(6):
        w.append(batch(pid=9, epoch=0, seq=3 * i, n=3, tag=b"b%d" % i))
    w.close()
    f = d / "00000000000000000000.log"
    batches = list(iter_batches(f.read_bytes()))
    victim = batches[3]
    data = bytearray(f.read_bytes())
    if damage == "crc":
        data[victim.position + 70] ^= 0xFF
    elif damage == "magic":
        data[victim.position + 16] = 7
    elif damage == "size":
        struct.pack_into(">i", data, victim.position + 8, 5)
    else:  # a batch whose offsets go backwards
        struct.pack_into(">q", data, victim.position, 1)
    f.write_bytes(bytes(data))
    w = PartitionWriter(d)
    try:
        assert w.recovery.truncated_at == victim.position
        assert w.recovery.truncated_bytes == len(data) - victim.position
        assert w.log_end_offset == victim.base_offset == 9
        m, _ = rebuild_from_log(bytes(data[: victim.position]))
        assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
        info = w.append(batch(pid=9, epoch=0, seq=9, n=3))  # the producer continues where the log ends
        assert (info.first_offset, info.duplicate) == (9, False)
    finally:
        w.close()
    assert f.read_bytes()[: victim.position] == bytes(data[: victim.position])


def _damage_batch(path, k, at=70):
    """Flip a byte inside the ``k``-th batch of a log file (CRC-covered); returns that batch."""
    data = bytearray(path.read_bytes())
    victim = list(iter_batches(bytes(data)))[k]
    data[victim.position + min(at, victim.size_in_bytes - 1)] ^= 0xFF
    path.write_bytes(bytes(data))
    return victim


def test_reopen_recovers_from_the_recovery_point(tmp_path):
    """LogLoader.recoverLog: every segment from the one holding the recovery point on is validated; a
    damaged batch in a middle segment cuts the log there and deletes the later segments."""
    src = tmp_path / "src" / "orders-0"
    opts = {"segment_bytes": 300, "index_interval_bytes": 60, "max_index_size": 4096}
    with PartitionWriter(src, clock=Clock(), **opts) as w:
        _txn_workload(w)
    bases = [int(f[:-4]) for f in log_files(src)]
    assert len(bases) >= 5
    full = whole_log(src)

    def damaged(name, seg_index):
        d = tmp_path / name / "orders-0"
        shutil.copytree(src, d)
        f = d / f"{bases[seg_index]:020d}.log"
        victim = _damage_batch(f, 1 if len(list(iter_batches(f.read_bytes()))) > 1 else 0)
        return d, victim

    # by default (no checkpoint beside it) only the last segment is recovered: a damaged middle one is not seen
    d, _victim = damaged("default", 1)
    with PartitionWriter(d, **opts) as w:
        assert w.recovery.recovered_from == bases[-1] and w.segments == bases
    # recovery_point=0: the damage is found, the log ends before the damaged batch
    d, victim = damaged("explicit", 1)
    (d / f"{bases[0]:020d}.index").write_bytes(b"")  # an index of a recovered segment is rebuilt
    w = PartitionWriter(d, recovery_point=0, **opts)
    try:
        assert w.recovery.recovered_from == bases[0]
        assert w.segments == bases[:2] and w.log_end_offset == victim.base_offset
        assert w.recovery.truncated_at == victim.position
        for later in bases[2:]:
            for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                assert not (d / f"{later:020d}{suffix}").exists()
            assert str(d / f"{later:020d}.log") in w.recovery.deleted_files
        kept = whole_log(d)
        assert kept == full[: len(kept)] and len(kept) == len(full[: len(kept)])
        m, _aborted = rebuild_from_log(kept)
        assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
        assert [f for f in os.listdir(d) if f.endswith(".snapshot") and int(f[:20]) > w.log_end_offset] == []
        assert OffsetIndex(d / f"{bases[0]:020d}.index", bases[0]).entries()  # rebuilt, not empty
        w.append(batch(pid=700, epoch=0, seq=0, n=2))  # and the log goes on
    finally:
        w.close()
    with open_partition(d) as p:
        assert p.truncated_tails == [] and p.log_end_offset == victim.base_offset + 2
        assert p.aborted_transactions_by_segment("txnindex") == p.aborted_transactions_by_segment("scan")

    for bad in (-1, "0", 1.5, True):
        with pytest.raises(ValueError, match="recovery_point"):
            PartitionWriter(d, recovery_point=bad, **opts)
    # the broker's checkpoint in the parent directory: recovery starts at the segment holding its entry
    def with_checkpoint(name, seg_index, text, *, clean=False):
        d, victim = damaged(name, seg_index)
        if text is not None:
            (d.parent / "recovery-point-offset-checkpoint").write_text(text)
        if clean:
            (d.parent / ".kafka_cleanshutdown").write_text("{}")
        with PartitionWriter(d, **opts) as w:
            return w.recovery.recovered_from, w.log_end_offset, victim

    listed = f"0\n2\norders 0 {bases[2] + 1}\nother 3 5\n"
    assert with_checkpoint("cp-before", 1, listed)[:2] == (bases[2], whole_log_end(src))
    got, leo, victim = with_checkpoint("cp-after", 3, listed)
    assert got == bases[2] and leo == victim.base_offset
    got, leo, victim = with_checkpoint("cp-unlisted", 1, "0\n1\nother 0 50\n")  # not listed: from 0
    assert got == bases[0] and leo == victim.base_offset
    got, leo, victim = with_checkpoint("cp-bad", 1, "0\n1\norders 0 x\n")  # unreadable: from 0
    assert got == bases[0] and leo == victim.base_offset
    got, leo, _victim = with_checkpoint("cp-clean", 1, "0\n1\nother 0 50\n", clean=True)
    assert got == bases[-1] and leo == whole_log_end(src)


def test_recovery_from_the_start_after_damage_anywhere_in_a_middle_segment(tmp_path):
    """Every byte of a middle segment's first two batches flipped in turn (and a sample of the rest):
    reopening with recovery_point=0 never raises, keeps a prefix of the damaged log that ends at a batch
    boundary at or before the damaged batch -- or everything, when the flipped byte is one the broker's
    checks do not cover (base offset, partition leader epoch) -- and rebuilds the producer state of what
    it kept."""
    src = tmp_path / "src" / "orders-0"
    opts = {"segment_bytes": 300, "index_interval_bytes": 60, "max_index_size": 4096}
    with PartitionWriter(src, clock=Clock(), **opts) as w:
        _txn_workload(w)
    bases = [int(f[:-4]) for f in log_files(src)]
    name = f"{bases[1]:020d}.log"
    seg = (src / name).read_bytes()
    batches = list(iter_batches(seg))
    assert len(batches) >= 2
    before = sum(len((src / f).read_bytes()) for f in log_files(src)[:1])  # bytes of the segments before it
    ends = {b.position + b.size_in_bytes for b in iter_batches(whole_log(src))} | {before}
    first_two = batches[1].position + batches[1].size_in_bytes
    positions = list(range(first_two)) + list(range(first_two, len(seg), 5))
    outcomes = set()
    for pos in positions:
        d = tmp_path / "x" / "orders-0"
        shutil.copytree(src, d)
        damaged = bytearray(seg)
        damaged[pos] ^= 0x5A
        (d / name).write_bytes(bytes(damaged))
        full = whole_log(d)
        with PartitionWriter(d, recovery_point=0, **opts) as w:
            kept = whole_log(d)
            assert kept == full[: len(kept)]
            hit = max((b for b in batches if b.position <= pos), key=lambda b: b.position)
            rel = pos - hit.position  # where in the damaged batch
            if len(kept) < len(full):
                # cut at a batch boundary, at the latest after the damaged batch (a base offset made larger
                # is seen only at the next batch, whose offsets then go backwards)
                assert len(kept) in ends and len(kept) <= before + hit.position + hit.size_in_bytes
                assert w.segments == bases[:2]
                outcomes.add("cut")
            else:  # undetectable by the broker's checks: the base offset or the partition leader epoch
                assert rel < 8 or 12 <= rel < 16
                outcomes.add("kept")
            m, _aborted = rebuild_from_log(kept)
            assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
        shutil.rmtree(d.parent)
    assert outcomes == {"cut", "kept"}


def _segment_holding(bases, offset):
    return max(b for b in bases if b <= offset)


def test_flush_and_close_record_the_recovery_point(tmp_path):
    """UnifiedLog.flush and LogManager's checkpoint: flush syncs what was written since the recovery point
    (segments rolled since included), moves it to the log end and records it in the parent directory's
    recovery-point-offset-checkpoint beside the other partitions' lines; after a crash of the machine the
    next open recovers from the segment holding it, so damage in a segment rolled after the flush is found."""
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    cp = logdir / "recovery-point-offset-checkpoint"
    write_checkpoint(cp, {("other", 3): 5})
    d = logdir / "orders-0"
    opts = {"segment_bytes": 300, "index_interval_bytes": 60, "max_index_size": 4096}
    w = PartitionWriter(d, clock=Clock(), **opts)
    assert w.recovery_point == 0
    _txn_workload(w)
    assert w.recovery_point == 0 and read_checkpoint(cp) == {("other", 3): 5}  # appends alone do not move it
    w.flush()
    flushed = w.log_end_offset
    at_flush = len(w.segments)
    assert w.recovery_point == flushed and read_checkpoint(cp) == {("orders", 0): flushed, ("other", 3): 5}
    for i in range(12):
        w.append(batch(pid=800, epoch=0, seq=3 * i, n=3, tag=b"late"))
    bases = w.segments
    assert len(bases) >= at_flush + 3 and w.recovery_point == flushed
    crashed = tmp_path / "crashed" / "orders-0"
    shutil.copytree(d, crashed)  # the files while the writer is open (a crash of the machine: no close)
    shutil.copy(cp, crashed.parent / cp.name)
    damaged_base = bases[-2]  # rolled after the flush, so never synced: the page cache may have lost it
    victim = _damage_batch(crashed / f"{damaged_base:020d}.log", 0)
    w2 = PartitionWriter(crashed, **opts)
    try:
        assert w2.recovery.recovered_from == _segment_holding(bases, flushed) < damaged_base
        assert w2.log_end_offset == victim.base_offset and w2.segments == bases[:-1]
        assert w2.recovery_point == flushed  # min(checkpoint, log end), as LogLoader: not moved by the load
    finally:
        w2.close()
    assert read_checkpoint(crashed.parent / cp.name)[("orders", 0)] == victim.base_offset
    # close syncs the rest and records the log end; the next open recovers the last segment only
    w.close()
    leo = w.log_end_offset
    assert w.recovery_point == leo and read_checkpoint(cp) == {("orders", 0): leo, ("other", 3): 5}
    with PartitionWriter(d, **opts) as w3:
        assert w3.recovery.recovered_from == bases[-1] and w3.recovery_point == leo
    # a clean shutdown marker: everything counts as flushed
    (logdir / ".kafka_cleanshutdown").write_text("{}")
    write_checkpoint(cp, {("orders", 0): 0})
    with PartitionWriter(d, **opts) as w4:
        assert w4.recovery.recovered_from == bases[-1] and w4.recovery_point == leo
    (logdir / ".kafka_cleanshutdown").unlink()


def test_recovery_point_without_a_checkpoint_and_with_fsync(tmp_path):
    opts = {"segment_bytes": 300, "index_interval_bytes": 60, "max_index_size": 4096}
    # no checkpoint beside it: what is before the last segment counts as flushed (only it is recovered)
    d = tmp_path / "a" / "orders-0"
    with PartitionWriter(d, clock=Clock(), checkpoint_recovery_point=False, **opts) as w:
        _txn_workload(w)
        assert w.recovery_point == 0
    assert w.recovery_point == w.log_end_offset and os.listdir(d.parent) == ["orders-0"]
    with PartitionWriter(d, checkpoint_recovery_point=False, **opts) as w:
        assert w.recovery_point == w.segments[-1] == w.recovery.recovered_from
        w.flush()
        assert w.recovery_point == w.log_end_offset
    assert os.listdir(d.parent) == ["orders-0"]  # checkpoint_recovery_point=False: the parent is left alone
    # fsync=True (flush.messages=1): every append is on disk when it returns
    e = tmp_path / "b" / "orders-0"
    with PartitionWriter(e, clock=Clock(), fsync=True, **opts) as w:
        for i in range(8):
            w.append(batch(pid=9, epoch=0, seq=3 * i, n=3))
            assert w.recovery_point == w.log_end_offset
        assert len(w.segments) > 2
    # a directory not named <topic>-<partition>: no checkpoint line can name it
    f = tmp_path / "c" / "plain"
    with PartitionWriter(f, **opts) as w:
        w.append(batch(n=2))
        w.flush()
        assert w.recovery_point == 2
    assert os.listdir(f.parent) == ["plain"]
    # an unreadable checkpoint is replaced by one the broker can read (the partitions it lost recover from 0)
    g = tmp_path / "d" / "orders-1"
    g.parent.mkdir()
    (g.parent / "recovery-point-offset-checkpoint").write_text("0\n2\nbroken\n")
    with PartitionWriter(g, **opts) as w:
        w.append(batch(n=2))
    assert read_checkpoint(g.parent / "recovery-point-offset-checkpoint") == {("orders", 1): 2}


_FLUSHER = """
import sys
from kafkatx import BatchBuilder
from kafkatx.log import PartitionWriter
path, rounds = sys.argv[1], int(sys.argv[2])
with PartitionWriter(path, segment_bytes=400) as w:
    for i in range(rounds):
        b = BatchBuilder()
        b.append(b"v%d" % i, b"k")
        w.append(b.build())
        w.flush()
"""


def test_concurrent_writers_of_one_log_dir_keep_every_line(tmp_path):
    """Writers of different partitions in one log dir, in threads of this process and in other processes,
    flush over and over: no partition's line is lost to another's read-modify-write."""
    logdir = tmp_path / "logdir"
    rounds = 25
    procs = [subprocess.Popen([sys.executable, "-c", _FLUSHER, str(logdir / f"procs-{p}"), str(rounds)])
             for p in range(2)]  # fmt: skip
    errors = []

    def flusher(p):
        try:
            with PartitionWriter(logdir / f"threads-{p}", segment_bytes=400) as w:
                for i in range(rounds):
                    w.append(batch(n=1, tag=b"t%d" % i))
                    w.flush()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=flusher, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert errors == []
    expected = {("threads", p): rounds for p in range(3)} | {("procs", p): rounds for p in range(2)}
    assert read_checkpoint(logdir / "recovery-point-offset-checkpoint") == expected


def whole_log_end(path) -> int:
    return list(iter_batches(whole_log(path)))[-1].last_offset + 1


def test_reopen_loads_the_producer_state_a_snapshot_at_the_log_end_holds(tmp_path):
    """UnifiedLog.rebuildProducerState: the producer state of a loaded log is the newest snapshot at or below
    the log end (ProducerStateManager.truncateAndReload) plus the batches after it.  After a clean close that
    is the snapshot close() wrote at the log end, taken as it is; after a crash the broker's recovery writes
    one there from its replay.  A snapshot keeps one batch per producer, so after a reopen a retry of the
    last batch is still a duplicate while a retry of an older one is OUT_OF_ORDER_SEQUENCE."""

    def fill(d, **kw):
        w = PartitionWriter(d, clock=Clock(), segment_bytes=300, **kw)
        for i in range(6):
            w.append(batch(pid=7, epoch=0, seq=2 * i, n=2))
        return w

    for name, kw in (("clean/orders-0", {}), ("plain/plain", {}), ("unlisted/orders-0", {"checkpoint_recovery_point": False})):
        d = tmp_path / name
        w = fill(d, **kw)
        leo, bases = w.log_end_offset, w.segments
        assert len(bases) > 1 and len(w.producer_state.last_entry(7).batch_metadata) > 1
        w.close()
        assert (d / f"{leo:020d}.snapshot").exists()
        with PartitionWriter(d, clock=Clock(), segment_bytes=300, **kw) as w:
            # only a partition whose recovery point reached the log end counts as cleanly closed
            assert w.recovery.state_snapshot_offset == (leo if name.startswith("clean") else None)
            assert w.recovery.snapshot_offset == bases[-1]  # the last segment is still recovered from its snapshot
            assert len(w.producer_state.last_entry(7).batch_metadata) == 1
            assert w.append(batch(pid=7, epoch=0, seq=10, n=2)).duplicate
            with pytest.raises(OutOfOrderSequenceError):
                w.append(batch(pid=7, epoch=0, seq=8, n=2))
    # after a crash (no close, no snapshot at the log end) the state is the recovery replay's, as a snapshot at
    # the log end holds it
    d = tmp_path / "crash" / "orders-0"
    w = fill(d)
    w.flush()
    crashed = tmp_path / "crashed" / "orders-0"
    shutil.copytree(d.parent, crashed.parent)
    w.close()
    with PartitionWriter(crashed, clock=Clock(), segment_bytes=300) as w2:
        assert w2.recovery.state_snapshot_offset is None
        assert len(w2.producer_state.last_entry(7).batch_metadata) == 1
        with pytest.raises(OutOfOrderSequenceError):
            w2.append(batch(pid=7, epoch=0, seq=8, n=2))
    # the snapshot at the log end of a cleanly closed log is taken as it is, as the broker takes it (here one
    # that says producer 7 is at epoch 3); the replay of an unclean load would not see it
    d = tmp_path / "trust" / "orders-0"
    with fill(d) as w:
        leo = w.log_end_offset
        assert leo not in w.segments
    entries = read_snapshot(d / f"{leo:020d}.snapshot")
    write_snapshot(d / f"{leo:020d}.snapshot", [e._replace(producer_epoch=3) for e in entries])
    with PartitionWriter(d, clock=Clock(), segment_bytes=300) as w:
        assert w.producer_state.last_entry(7).producer_epoch == 3
    write_snapshot(d / f"{leo:020d}.snapshot", [e._replace(producer_epoch=3) for e in entries])
    (d.parent / "recovery-point-offset-checkpoint").unlink()
    with PartitionWriter(d, clock=Clock(), segment_bytes=300) as w:
        assert w.recovery.state_snapshot_offset is None and w.producer_state.last_entry(7).producer_epoch == 0


def test_reopen_rebuilds_broken_indexes_and_uses_snapshots(tmp_path):
    d = tmp_path / "orders-0"
    _written(d).close()
    bases = [int(f[:-4]) for f in log_files(d)]
    first_index = d / f"{bases[0]:020d}.index"
    good = first_index.read_bytes()
    first_index.write_bytes(good[:-3])  # not a whole number of entries
    (d / f"{bases[1]:020d}.timeindex").unlink()
    (d / "00000000000000000999.index").write_bytes(b"\0" * 8)  # an orphan: no .log
    (d / f"{bases[-1]:020d}.snapshot.tmp").write_bytes(b"partial")  # an interrupted snapshot write
    w = PartitionWriter(d, segment_bytes=500, index_interval_bytes=60, max_index_size=4096)
    try:
        assert str(first_index) in w.recovery.rebuilt_indexes
        assert first_index.read_bytes() == good
        assert (d / f"{bases[1]:020d}.timeindex").exists()
        assert not (d / "00000000000000000999.index").exists()
        assert not (d / f"{bases[-1]:020d}.snapshot.tmp").exists()
        assert w.recovery.snapshot_offset == bases[-1]  # the roll snapshot; only the last segment replayed
        assert w.recovery.replayed_from == bases[-1]
    finally:
        w.close()
    # a corrupt snapshot is deleted and an older one (or none) is used instead
    snap = d / f"{bases[-1]:020d}.snapshot"
    snap.write_bytes(snap.read_bytes()[:-1] + b"\x00")
    w = PartitionWriter(d, segment_bytes=500, index_interval_bytes=60, max_index_size=4096)
    try:
        assert str(snap) in w.recovery.deleted_files
        assert w.recovery.snapshot_offset == bases[-2]
        m, _ = rebuild_from_log(whole_log(d))
        assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
    finally:
        w.close()


@pytest.mark.parametrize("damage", ["magic", "crc"])
def test_an_earlier_segment_whose_index_is_rebuilt_is_recovered_as_the_broker_does(tmp_path, codec, damage):
    """A segment before the recovery point whose index is missing is recovered as LogLoader.loadSegmentFiles
    does (LogSegment.recover): every batch validated, the segment cut at its first invalid one -- a broken
    magic byte or a CRC mismatch -- the segments after it kept, its indexes and .txnindex made from what is
    left, the producer state replayed from before the cut.  With the pure-Python codec too, whose view of
    the mapped file an error's traceback holds (closing the map raised BufferError over it)."""
    d = tmp_path / "orders-0"
    _written(d).close()
    bases = [int(f[:-4]) for f in log_files(d)]
    mid = bases[len(bases) // 2]
    (d / f"{mid:020d}.index").unlink()
    log = d / f"{mid:020d}.log"
    data = bytearray(log.read_bytes())
    victim = list(iter_batches(bytes(data)))[1]
    data[victim.position + (16 if damage == "magic" else 70)] ^= 0xF0
    log.write_bytes(bytes(data))
    later = {f: (d / f).read_bytes() for f in log_files(d) if int(f[:-4]) > mid}
    with PartitionWriter(d, codec=codec, segment_bytes=500, index_interval_bytes=60, max_index_size=4096) as w:
        assert w.recovery.cut_segments == ((str(log), victim.position, len(data) - victim.position),)
        assert str(d / f"{mid:020d}.index") in w.recovery.rebuilt_indexes
        assert log.stat().st_size == victim.position
        assert {f: (d / f).read_bytes() for f in log_files(d) if int(f[:-4]) > mid} == later
        assert w.segments == bases
        m, aborted = rebuild_from_log(whole_log(d))
        assert snapshot_set(w.producer_state.snapshot_entries()) == snapshot_set(m.snapshot_entries())
    with open_partition(d, codec=codec) as p:
        assert p.aborted_transactions(p.log_start_offset, p.log_end_offset, source="cross-check") == \
            p.aborted_transactions(p.log_start_offset, p.log_end_offset, source="scan")
        rows = p.read_table().num_rows
        assert rows == len(list(p.read(format="records")))


def test_an_earlier_damaged_txnindex_is_remade_without_touching_later_segments(tmp_path, codec):
    """A damaged .txnindex of an earlier segment is made again from the producer state at that segment, as
    LogLoader.recoverSegment does, and the later segments keep the state of the newest snapshot.  Here the
    segment between them was lost (emptied), taking the start of a transaction that a later segment's
    .txnindex aborts: replaying from the earlier segment's snapshot through the gap dropped that entry, and
    the next open, starting at the newer snapshot, wrote it back -- the directory was repaired on every
    other open.  Found by scripts/fuzz.py logdir."""
    from kafkatx.log import generate

    generate(tmp_path, records=3000, partitions=1, segment_bytes=32 << 10, batch_records=(5, 60), seed=11,
             workers=0, txn_state_partitions=1)  # fmt: skip
    d = tmp_path / "orders-0"
    bases = [int(f[:-4]) for f in log_files(d)]
    txn = {b: read_txnindex(d / f"{b:020d}.txnindex", base_offset=b) for b in bases
           if (d / f"{b:020d}.txnindex").exists()}  # fmt: skip
    # a segment aborting a transaction begun in the segment before it, and an earlier segment with aborts
    later, gap = next((b, bases[i - 1]) for i, b in enumerate(bases[2:], 2)
                      if any(bases[i - 1] <= e.first_offset < b for e in txn.get(b, [])))  # fmt: skip
    earlier = max(b for b in txn if b < gap)
    with open_partition(d, codec=codec) as p:
        want_earlier = p.aborted_transactions_by_segment("scan")[bases.index(earlier)]
    (d / f"{gap:020d}.log").write_bytes(b"")
    damaged = d / f"{earlier:020d}.txnindex"
    damaged.write_bytes(damaged.read_bytes()[:14])
    with PartitionWriter(d, codec=codec) as w:
        assert w.recovery.repaired_txn_indexes == (str(damaged),)
    assert read_txnindex(damaged, base_offset=earlier) == want_earlier
    assert read_txnindex(d / f"{later:020d}.txnindex", base_offset=later) == txn[later]
    with PartitionWriter(d, codec=codec) as w:
        assert w.recovery.repaired_txn_indexes == ()


def test_leader_epoch_checkpoint(part):
    with PartitionWriter(part, leader_epoch=3) as w:
        w.append(batch())
        w.leader_epoch = 5
        w.append(batch())
        assert w.leader_epochs == [(3, 0), (5, 3)]
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n5 3\n"


def test_append_info_is_a_named_tuple():
    assert AppendInfo._fields[:4] == ("first_offset", "last_offset", "log_append_time", "duplicate")


# ------------------------------------------------------------------------------------------ Kafka reads it
@pytest.mark.java
def test_java_oracle_accepts_the_written_logs(tmp_path, oracle_dump):
    d = tmp_path / "orders-0"
    with PartitionWriter(d, segment_bytes=700, clock=Clock(), leader_epoch=4) as w:
        _txn_workload(w)
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            w.append(batch(n=20, compression=codec, tag=codec.encode()))
    files = log_files(d)
    everything = tmp_path / "all.log"
    everything.write_bytes(whole_log(d))  # segments back to back: one JVM call
    lines = oracle_dump(everything)
    java_batches = [x for x in lines if x["type"] == "batch"]
    ours = list(iter_batches(everything.read_bytes()))
    assert len(java_batches) == len(ours) and len(files) > 1
    for j, b in zip(java_batches, ours):
        assert j["crc_valid"] is True and j["ensure_valid"] == "ok"
        assert (j["base_offset"], j["last_offset"], j["producer_id"], j["is_control"], j["partition_leader_epoch"]) == (
            b.base_offset, b.last_offset, b.producer_id, b.is_control, 4)  # fmt: skip


def test_a_segment_cut_to_nothing_loses_its_txnindex_entries(tmp_path):
    """The active segment holds only an ABORT (its .txnindex one entry); a crash tears the marker, so the
    recovery cuts the segment to nothing.  Its .txnindex must then hold nothing either (LogSegment.recover
    rebuilds it from the batches left), or a cross-check, and the marker the coordinator sends again, would
    meet an entry for an abort the log does not have."""
    d = tmp_path / "orders-0"
    w = PartitionWriter(d, checkpoint_recovery_point=False)
    w.append(batch(pid=7, epoch=0, seq=0, txn=True, n=2))
    w.roll()
    w.append_marker("abort", producer_id=7, producer_epoch=0, coordinator_epoch=1)
    w.flush()
    crashed = tmp_path / "crashed" / "orders-0"
    shutil.copytree(d, crashed)  # as the files are while the writer is open: no clean shutdown
    w.close()
    seg, txn = crashed / f"{2:020d}.log", crashed / f"{2:020d}.txnindex"
    assert len(read_txnindex(txn)) == 1
    with open(seg, "r+b") as fh:
        fh.truncate(os.path.getsize(seg) - 7)
    w = PartitionWriter(crashed, checkpoint_recovery_point=False)
    try:
        assert w.log_end_offset == 2 and w.recovery.truncated_at == 0
        assert str(txn) in w.recovery.repaired_txn_indexes
        assert not txn.exists() or read_txnindex(txn) == []
        with open_partition(crashed) as p:
            assert p.aborted_transactions(0, 2, source="cross-check") == []
            assert p.open_transactions == {7: 0} and p.last_stable_offset == 0
        w.append_marker("abort", producer_id=7, producer_epoch=0, coordinator_epoch=1)  # sent again
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in read_txnindex(txn)] == [(7, 0, 2)]
    finally:
        w.close()
