"""Broker rules that kafkatx's writer, producer state and coordinator once applied differently from Kafka 4.x.

Each test states what Kafka's own classes (UnifiedLog, LogValidator, ProducerStateManager,
TransactionCoordinator) do with the same input, and cites the class and rule; all of them failed on the
code before the fix (found by a review against Kafka's sources).
"""

from __future__ import annotations

import gzip
import os
import pathlib
import struct

import pytest

import kafkatx
from kafkatx import BatchBuilder, iter_batches
from kafkatx.errors import (
    IllegalTransitionError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaTxError,
)
from kafkatx.log.writer import PartitionWriter, RecordTooLargeError
from kafkatx.producer_state import ProducerSnapshotEntry, encode_snapshot, read_snapshot
from kafkatx.txncoord import TransactionCoordinator

T0 = 1_700_000_000_000
HOUR = 3_600_000
DAY = 86_400_000


def batch(*, pid=-1, epoch=-1, seq=-1, txn=False, n=3, ts=T0, base_offset=0, compression="none", **kw):
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn,
                     base_offset=base_offset, compression=compression, **kw)  # fmt: skip
    for i in range(n):
        b.append(b"v-%d" % i, b"k%d" % i, timestamp=ts + i)
    return b.build()


def recrc(d: bytearray) -> bytes:
    struct.pack_into(">I", d, 17, kafkatx.crc32c(memoryview(d)[21:]))
    return bytes(d)


def log_bytes(path) -> bytes:
    return b"".join(pathlib.Path(path, f).read_bytes() for f in sorted(os.listdir(path)) if f.endswith(".log"))


def with_record0_offset_delta_1(data: bytes) -> bytearray:
    """Record 0 of an uncompressed batch claims offset delta 1 (header fields stay consistent: count 2, lod 1)."""
    d = bytearray(data)
    assert d[61 + 3] == 0  # length varint, attributes, timestamp delta varint (0), offset delta varint
    d[61 + 3] = 2  # zigzag(1)
    return d


# ------------------------------------------------------------------------------------------ writer
def test_client_batch_with_nonzero_base_offset_is_rejected(tmp_path):
    """UnifiedLog.analyzeAndValidateRecords (Kafka 4.x): for a v2 batch with origin CLIENT,
    ``batch.baseOffset() != 0`` -> InvalidRecordException("The baseOffset of the record batch in the
    append to ... should be 0, but it is N"); the broker never overwrites a client-assigned base offset."""
    with PartitionWriter(tmp_path / "t-0") as w:
        with pytest.raises(InvalidRecordError):
            w.append(batch(n=2, base_offset=7))
        assert w.log_end_offset == 0


def test_uncompressed_record_offset_deltas_are_not_validated(tmp_path):
    """LogValidator.assignOffsetsNonCompressed never looks at record offsets: an uncompressed v2 batch
    whose header is consistent (lastOffsetDelta + 1 == count) is appended in place even if its records'
    offset deltas are not 0..count-1 (only validateBatch's header checks and validateRecord's
    key/timestamp checks can reject it)."""
    data = recrc(with_record0_offset_delta_1(batch(n=2)))
    with PartitionWriter(tmp_path / "t-0") as w:
        info = w.append(data)
        assert (info.first_offset, info.last_offset) == (0, 1)


def test_compressed_record_offset_deltas_are_rewritten_not_rejected(tmp_path):
    """LogValidator.validateMessagesAndAssignOffsetsCompressed: a record whose offset is not the expected
    0,1,2,... only sets ``inPlaceAssignment = false`` ("Some older clients do not implement the V1
    internal offsets correctly ... rewriting the batches rather than rejecting"); the batch is rebuilt
    with offsets assigned by the broker."""
    plain = with_record0_offset_delta_1(batch(n=2))
    records = bytes(plain[61:])
    d = bytearray(plain[:61]) + gzip.compress(records)
    struct.pack_into(">i", d, 8, len(d) - 12)
    (attrs,) = struct.unpack_from(">h", d, 21)
    struct.pack_into(">h", d, 21, attrs | 1)  # gzip
    data = recrc(d)
    with PartitionWriter(tmp_path / "t-0") as w:
        info = w.append(data)
        assert (info.first_offset, info.last_offset) == (0, 1)
    (b,) = iter_batches(log_bytes(tmp_path / "t-0"))
    assert [r.offset for r in b.records()] == [0, 1]


def test_compressed_batch_kept_only_with_inner_offsets_from_zero(tmp_path):
    """LogValidator keeps a compressed batch as sent only if its records' offsets are 0, 1, 2, ...
    (expectedInnerOffset starts at 0): a coordinator's batch (no base-offset-0 rule for it) whose base
    offset is 5 has offsets 5, 6 and is rebuilt, its payload compressed anew; the same records at base
    offset 0 keep the payload as sent."""
    plain = batch(n=2)
    kept = {}
    for base in (0, 5):
        d = bytearray(plain[:61]) + gzip.compress(bytes(plain[61:]), mtime=12345)  # (not what kafkatx writes)
        struct.pack_into(">q", d, 0, base)
        struct.pack_into(">i", d, 8, len(d) - 12)
        struct.pack_into(">h", d, 21, struct.unpack_from(">h", d, 21)[0] | 1)  # gzip
        with PartitionWriter(tmp_path / f"t-{base}") as w:
            w.append(recrc(d), origin="coordinator")
        (b,) = iter_batches(log_bytes(tmp_path / f"t-{base}"))
        assert [r.value for r in b.records()] == [r.value for r in next(iter_batches(plain)).records()]
        kept[base] = b.tobytes()[61:] == bytes(d[61:])
    assert kept == {0: True, 5: False}


@pytest.mark.parametrize("origin", ["client", "coordinator"])
@pytest.mark.parametrize("last_offset_delta", [-5, 0, 999])
def test_a_batch_whose_offset_range_is_not_its_record_count_is_refused(tmp_path, origin, last_offset_delta):
    """LogValidator.validateBatch refuses a client's v2 batch whose lastOffsetDelta + 1 is not its count; a
    coordinator's batch gets its last offset from its records as they are given offsets (setLastOffset), so
    the log end never follows the header there either.  Here both are refused with nothing written: a header
    saying -5 or 999 for 2 records must not move the log end back (the next append would reuse offsets) or
    ahead."""
    d = bytearray(batch(n=2))
    struct.pack_into(">i", d, 23, last_offset_delta)
    with PartitionWriter(tmp_path / "t-0") as w:
        w.append(batch(n=3))
        with pytest.raises(kafkatx.InvalidRecordError) as caught:
            w.append(recrc(d), origin=origin)
        assert caught.value.position == 23
        assert w.log_end_offset == 3 and w.size_in_bytes == len(batch(n=3))
        assert w.append(batch(n=2), origin=origin).first_offset == 3
    assert [b.base_offset for b in iter_batches(log_bytes(tmp_path / "t-0"))] == [0, 3]


def test_log_append_time_batch_from_client_rejected_on_log_append_time_topic(tmp_path):
    """LogValidator.validateTimestamp: with a LogAppendTime topic, a batch whose own timestamp type is
    LOG_APPEND_TIME is an INVALID_TIMESTAMP record error ("Producer should not set timestamp type to
    LogAppendTime"), thrown by processRecordErrors as InvalidTimestampException; nothing is appended."""
    data = batch(n=2, timestamp_type="log_append_time", log_append_time=T0)
    with PartitionWriter(tmp_path / "t-0", timestamp_type="log_append_time", clock=lambda: T0 + 5000) as w:
        with pytest.raises(KafkaTxError):
            w.append(data)
        assert w.log_end_offset == 0


def test_log_append_time_batch_from_client_is_stored_as_create_time_on_create_time_topic(tmp_path):
    """LogValidator.assignOffsetsNonCompressed ends with ``batch.setMaxTimestamp(timestampType,
    maxBatchTimestamp)`` using the *topic's* type: on a CreateTime topic DefaultRecordBatch.setMaxTimestamp
    rewrites the attributes to CreateTime (and recomputes the CRC) when the client sent LogAppendTime."""
    data = batch(n=2, timestamp_type="log_append_time", log_append_time=T0)
    with PartitionWriter(tmp_path / "t-0") as w:
        w.append(data)
    (b,) = iter_batches(log_bytes(tmp_path / "t-0"))
    assert b.timestamp_type == "create_time"


def test_timestamp_more_than_an_hour_ahead_is_rejected_by_default(tmp_path):
    """LogValidator.validateTimestamp / recordHasInvalidTimestamp: on a CreateTime topic a record with
    ``timestamp - now > message.timestamp.after.max.ms`` is rejected (InvalidTimestampException); since
    Kafka 4.0 (KIP-1030) the default of log.message.timestamp.after.max.ms is 3600000 (1 hour)."""
    with PartitionWriter(tmp_path / "t-0", clock=lambda: T0) as w:
        with pytest.raises(KafkaTxError):
            w.append(batch(n=1, ts=T0 + 2 * HOUR))
        assert w.log_end_offset == 0


def test_size_limit_is_checked_before_batch_validation_and_crc(tmp_path):
    """UnifiedLog.analyzeAndValidateRecords checks, per batch and in this order: baseOffset == 0 (client),
    ``batchSize > maxMessageSize`` -> RecordTooLargeException, then ``!batch.isValid()`` (CRC) ->
    CorruptRecordException; LogValidator.validateBatch (count/offset range/control/sequence) runs only
    afterwards.  So an oversized batch is MESSAGE_TOO_LARGE even if its CRC or count is also bad."""
    big = batch(n=50)
    bad_crc = bytearray(big)
    bad_crc[-1] ^= 1
    zero_count = bytearray(big)
    struct.pack_into(">i", zero_count, 57, 0)
    for data in (bytes(bad_crc), recrc(zero_count)):
        with PartitionWriter(tmp_path / "t-0", max_message_bytes=len(big) - 1) as w:
            with pytest.raises(RecordTooLargeError):
                w.append(data)


def test_duplicate_batch_still_rolls_a_full_segment(tmp_path):
    """UnifiedLog.append calls ``maybeRoll(validRecords.sizeInBytes(), appendInfo)`` *before*
    ``analyzeAndValidateProducerState``: a retried batch that turns out to be a duplicate (or is rejected
    by the producer-state checks) still rolls a full active segment (new segment + producer snapshot)."""
    a = batch(pid=1, epoch=0, seq=0, n=3)
    with PartitionWriter(tmp_path / "t-0", segment_bytes=2 * len(a) - 1) as w:
        w.append(a)
        info = w.append(a)
        assert info.duplicate
        assert w.segments == [0, 3]


def test_replicated_roll_across_offset_gap_starts_segment_at_batch_base_offset(tmp_path):
    """UnifiedLog.maybeRoll rolls at ``appendInfo.firstOffset()`` (the base offset of the first v2 batch)
    and LocalLog.roll uses ``max(expectedNextOffset, logEndOffset)``: a follower append whose batch starts
    past the log end (offsets removed by compaction on the leader) opens the new segment at the batch's
    base offset, not at the old log end offset; the roll snapshot is named after it."""
    first = batch(n=1)
    later = batch(n=1, base_offset=10)
    path = tmp_path / "t-0"
    with PartitionWriter(path, segment_bytes=len(first) + len(later) - 1) as w:
        w.append(first, origin="replication")
        w.append(later, origin="replication")
        assert w.segments == [0, 10]


def test_marker_on_log_append_time_topic_gets_the_log_append_time(tmp_path):
    """WriteTxnMarkers appends through UnifiedLog.appendAsLeader(origin COORDINATOR), so the marker goes
    through LogValidator.assignOffsetsNonCompressed, which on a LogAppendTime topic calls
    ``batch.setMaxTimestamp(LOG_APPEND_TIME, now)``: the stored marker batch is LogAppendTime-stamped."""
    path = tmp_path / "t-0"
    with PartitionWriter(path, timestamp_type="log_append_time", clock=lambda: T0 + 5000) as w:
        w.append_marker("abort", producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=T0)
    (b,) = iter_batches(log_bytes(path))
    assert b.timestamp_type == "log_append_time" and b.max_timestamp == T0 + 5000


def test_reopen_drops_producers_expired_at_load(tmp_path):
    """ProducerStateManager.loadFromSnapshot filters ``!isProducerExpired(currentTime, entry)`` (no open
    transaction and ``currentTime - lastTimestamp >= producer.id.expiration.ms``, default 1 day); LogLoader
    always ends with rebuildProducerState -> truncateAndReload -> loadFromSnapshot at the log end (the
    close snapshot, or the one recoverSegment just took).  The expired producer is unknown afterwards, so
    its next batch is accepted whatever its sequence."""
    path = tmp_path / "t-0"
    with PartitionWriter(path, clock=lambda: T0) as w:
        w.append(batch(pid=1, epoch=0, seq=0, n=3, ts=T0))
    with PartitionWriter(path, clock=lambda: T0 + DAY + 10) as w:
        assert 1 not in w.producer_state.producers
        w.append(batch(pid=1, epoch=0, seq=7, n=1, ts=T0 + DAY))


# ---------------------------------------------------------------------------------- producer state
def test_snapshot_with_trailing_bytes_is_read_like_kafka(tmp_path):
    """ProducerStateManager.readSnapshot parses with Schema.read (which stops after the declared entries
    and does not require the buffer to be consumed) and checks the CRC over [6, EOF); a version-1 file
    with a valid CRC and bytes after its last entry is therefore loaded, not CorruptSnapshotException."""
    e = ProducerSnapshotEntry(1000, 3, 1, 41, 1, T0, 5, -1)
    good = encode_snapshot([e])
    body = bytearray(good[6:]) + b"\x00\x00\x00"
    data = struct.pack(">hI", 1, kafkatx.crc32c(bytes(body))) + bytes(body)
    assert read_snapshot(data) == [e]


# ------------------------------------------------------------------------------------- coordinator
def _committed_tv2(tmp_path):
    c = TransactionCoordinator(tmp_path / "logs", transaction_version=2, clock=lambda: T0)
    pid, epoch = c.init_producer_id("tx", transaction_timeout_ms=60000)
    c.add_partitions("tx", pid, epoch, [("orders", 0)])
    new = c.end_transaction("tx", pid, epoch, commit=True)
    assert new == (pid, epoch + 1)
    return c, pid, epoch, new


def test_tv2_end_txn_retry_after_coordinator_reload_succeeds(tmp_path):
    """TransactionCoordinator.endTransaction (TV2): ``retryOnEpochBump = txnMetadata.producerEpoch ==
    producerEpoch + 1`` needs no in-memory lastProducerEpoch, so an EndTxn(COMMIT) retried with the old
    epoch after the coordinator reloaded CompleteCommit from __transaction_state is answered NONE with
    the current producer id and epoch (table: CompleteCommit / Commit / Retry -> NONE)."""
    c, pid, epoch, new = _committed_tv2(tmp_path)
    c.close()
    with TransactionCoordinator(tmp_path / "logs", transaction_version=2, clock=lambda: T0 + 1) as c2:
        assert c2.end_transaction("tx", pid, epoch, commit=True) == new


def test_tv2_end_txn_retry_with_other_result_is_invalid_txn_state(tmp_path):
    """TransactionCoordinator.endTransaction (TV2) table: CompleteCommit + Abort with the retry epoch
    (current - 1) is a valid epoch (retryOnEpochBump) and answers INVALID_TXN_STATE
    (logInvalidStateTransitionAndReturnError), not PRODUCER_FENCED."""
    c, pid, epoch, _new = _committed_tv2(tmp_path)
    with c:
        with pytest.raises((IllegalTransitionError, InvalidTxnStateError)):
            c.end_transaction("tx", pid, epoch, commit=False)


def test_timestamp_limits_before_and_after_and_no_timestamp(tmp_path):
    """LogValidator.validateTimestamp: on a CreateTime topic every record with a timestamp must lie within
    [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; records without one
    (NO_TIMESTAMP, -1) are not checked.  With validate_records=False the header's timestamps stand in."""
    from kafkatx.errors import InvalidTimestampError

    now = T0 + DAY
    for validate in (True, False):
        with PartitionWriter(tmp_path / f"t-{int(validate)}", clock=lambda: now, validate_records=validate,
                             message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=HOUR) as w:  # fmt: skip
            with pytest.raises(InvalidTimestampError, match="out of range"):
                w.append(batch(n=2, ts=now - HOUR - 10))  # too old
            with pytest.raises(InvalidTimestampError, match="out of range"):
                w.append(batch(n=2, ts=now + HOUR + 10))  # too far ahead
            w.append(batch(n=2, ts=now - HOUR))  # at the limits
            w.append(batch(n=2, ts=now + HOUR - 1))
            b = BatchBuilder()
            b.append(b"no timestamp", timestamp=-1)
            w.append(b.build())
            assert w.log_end_offset == 5


def test_max_timestamp_starts_at_no_timestamp(tmp_path):
    """LogValidator's max timestamp starts at NO_TIMESTAMP (-1) and takes the record timestamps above it:
    records without timestamps leave it at -1; one record with a timestamp among records without sets it
    (the header's claim is replaced)."""
    with PartitionWriter(tmp_path / "t-0", clock=lambda: T0) as w:
        b = BatchBuilder()
        for ts in (-1, -1):
            b.append(b"x", timestamp=ts)
        assert w.append(b.build()).max_timestamp == -1
        b = BatchBuilder()
        for ts in (-1, T0 - 3, -1):
            b.append(b"x", timestamp=ts)
        data = bytearray(b.build())
        struct.pack_into(">q", data, 35, T0 + 100)  # a client that lies about the max timestamp
        struct.pack_into(">I", data, 17, kafkatx.crc32c(memoryview(data)[21:]))
        assert w.append(bytes(data)).max_timestamp == T0 - 3


def _stamped(n, ts, base_offset=0):
    """An uncompressed client batch of ``n`` records, all with timestamp ``ts`` (-1: none)."""
    b = BatchBuilder(base_offset=base_offset)
    for i in range(n):
        b.append(b"v%d" % i, timestamp=ts)
    return b.build()


def test_time_based_roll_by_batch_timestamps(tmp_path):
    """LogSegment.shouldRoll: with ``log.roll.ms`` the active segment rolls once the incoming batch's max
    timestamp is more than ``segment.ms`` past the max timestamp of the segment's first batch (strictly
    more; the clock plays no part while the batches carry timestamps)."""
    t = 1_700_000_000_000
    with PartitionWriter(tmp_path / "t-0", segment_ms=1000, clock=lambda: t + 10**9) as w:
        w.append(_stamped(2, t))
        w.append(_stamped(1, t + 1000))  # waited 1000, not more
        assert w.segments == [0]
        w.append(_stamped(1, t + 1001))
        assert w.segments == [0, 3]
        w.append(_stamped(1, t + 1500))  # the new segment counts from its own first batch
        assert w.segments == [0, 3]
    with PartitionWriter(tmp_path / "u-0", clock=lambda: t, message_timestamp_after_max_ms=None) as w:  # off by default
        w.append(_stamped(1, t))
        w.append(_stamped(1, t + 10**9))
        assert w.segments == [0]


def test_time_based_roll_with_jitter(tmp_path):
    """log.roll.jitter.ms: each segment rolls once the wait is more than ``segment_ms`` minus a jitter drawn
    for it, below ``min(segment_jitter_ms, segment_ms)``; the same seed gives the same segments."""
    t = 1_700_000_000_000

    def run(name, seed, jitter_ms):
        jitters = []
        with PartitionWriter(tmp_path / f"{name}-0", segment_ms=1000, segment_jitter_ms=jitter_ms, seed=seed,
                             clock=lambda: t + 10**9) as w:  # fmt: skip
            first, jit = t, w._active.roll_jitter_ms
            jitters.append(jit)
            w.append(_stamped(1, t))
            for i in range(1, 700):
                ts = t + 10 * i
                n = len(w.segments)
                w.append(_stamped(1, ts))
                if len(w.segments) > n:  # rolled: this wait is past the jittered limit, the previous one was not
                    assert ts - first > 1000 - jit >= ts - 10 - first
                    first, jit = ts, w._active.roll_jitter_ms
                    jitters.append(jit)
                else:
                    assert ts - first <= 1000 - jit
            return w.segments, jitters

    segments, jitters = run("a", 3, 800)
    assert all(0 <= j < 800 for j in jitters) and len(set(jitters)) > 3
    assert len(segments) > 7  # 7 seconds of batches: seven segments without jitter, more with it
    assert run("b", 3, 800) == (segments, jitters)
    capped_segments, capped = run("c", 4, 10**6)  # the jitter never reaches segment_ms
    assert all(0 <= j < 1000 for j in capped) and len(capped_segments) < 70
    plain, zeros = run("d", 5, 0)
    assert set(zeros) == {0} and len(plain) == 7
    with pytest.raises(ValueError):
        PartitionWriter(tmp_path / "e-0", segment_ms=1000, segment_jitter_ms=-1)


def test_time_based_roll_without_timestamps_uses_the_segment_age(tmp_path):
    """LogSegment.timeWaitedForRoll: when the segment's first batch has no timestamp (-1), the wait is
    measured by the clock since the segment object was created -- at a roll, or when the log was loaded."""
    now = [5_000]
    clock = lambda: now[0]  # noqa: E731
    path = tmp_path / "t-0"
    with PartitionWriter(path, segment_ms=1000, clock=clock, message_timestamp_after_max_ms=None) as w:
        w.append(_stamped(2, -1))
        now[0] = 6_000  # 1000 since creation: not more
        w.append(_stamped(1, -1))
        assert w.segments == [0]
        now[0] = 6_001
        w.append(_stamped(1, -1))
        assert w.segments == [0, 3]
        now[0] = 6_500
        w.append(_stamped(1, -1))
        assert w.segments == [0, 3]
    now[0] = 20_000  # reopened: the loaded segment's age starts again (Kafka's LogSegment.created)
    with PartitionWriter(path, segment_ms=1000, clock=clock, message_timestamp_after_max_ms=None) as w:
        w.append(_stamped(1, -1))
        assert w.segments == [0, 3]
        now[0] = 21_001
        w.append(_stamped(1, -1))
        assert w.segments == [0, 3, 6]
