"""kafkatx.producer_state: the leader's idempotence/transaction checks, snapshots and log rebuild,
against Kafka's storage goldens and an independent model of section 11 of kafka-format.md."""

from __future__ import annotations

import hashlib
import json
import pathlib
import struct
import time
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafkatx
from kafkatx.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaTxError,
    OutOfOrderSequenceError,
    ProducerStateError,
    TransactionCoordinatorFencedError,
)
from kafkatx.producer_state import (
    RESULT_APPENDED,
    RESULT_DUPLICATE,
    RESULT_INVALID_PRODUCER_EPOCH,
    RESULT_INVALID_TXN_STATE,
    RESULT_OUT_OF_ORDER_SEQUENCE,
    AppendResult,
    BatchMetadata,
    CompletedTxn,
    ProducerSnapshotEntry,
    ProducerStateManager,
    TxnMetadata,
    encode_snapshot,
    read_snapshot,
    rebuild_from_log,
    write_snapshot,
)
from kafkatx.transactions import encode_marker
from kafkatx.txnindex import AbortedTxn, encode_txnindex, read_txnindex

HERE = pathlib.Path(__file__).parent
STORAGE = HERE / "vectors" / "java-storage"
GOLDEN = HERE / "vectors" / "java-golden"
RECOVER = STORAGE / "recover_segment_mixed"
INT_MAX = 2147483647
SNAP_FIELDS = ("producer_id", "producer_epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
               "coordinator_epoch", "current_txn_first_offset")  # fmt: skip


class Batch(NamedTuple):
    """The header attributes ProducerStateManager.append reads (a stand-in for a RecordBatch)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool = False
    records_count: int = 1


def data(pid, epoch, seq, offset, count=1, ts=1000, txn=False):
    last_seq = kafkatx.increment_sequence(seq, count - 1)
    return Batch(pid, epoch, seq, last_seq, offset, offset + count - 1, ts, txn, False, count)


def marker(kind, pid, epoch, offset, coordinator_epoch=0, ts=2000):
    (b,) = kafkatx.iter_batches(encode_marker(kind, producer_id=pid, producer_epoch=epoch, base_offset=offset,
                                              coordinator_epoch=coordinator_epoch, timestamp=ts))  # fmt: skip
    return b


def state(m):
    """Everything observable about a manager's producer state except the map end offset."""
    return (
        {pid: e._key() for pid, e in m.producers.items()},
        m.ongoing_transactions(),
        m.unreplicated_transactions(),
    )


def _snap_dicts(entries):
    return [dict(zip(SNAP_FIELDS, e)) for e in entries]


# ------------------------------------------------------------------------------ recover golden
def test_recover_segment_mixed_golden(tmp_path):
    rec = json.loads((RECOVER / "recover.json").read_text())
    log = (RECOVER / "00000000000000000000.log").read_bytes()
    assert len(log) == rec["segment_size"] == rec["valid_bytes"]
    assert log == (GOLDEN / "segment_mixed.bin").read_bytes()
    trace = []
    m, aborted = rebuild_from_log(log, on_batch=lambda b, mgr, c: trace.append((b, mgr.first_undecided_offset(), c)))
    # per batch: the batch itself and the first undecided offset after applying it
    assert len(trace) == len(rec["batches"])
    for (b, undecided, _c), exp in zip(trace, rec["batches"]):
        assert (b.base_offset, b.last_offset, b.producer_id, b.is_transactional, b.is_control) == (
            exp["base_offset"], exp["last_offset"], exp["producer_id"], exp["is_transactional"], exp["is_control"]
        )  # fmt: skip
        assert undecided == exp["first_undecided_offset_after"], exp
    completed = [c for _b, _u, c in trace if c is not None]
    assert [c._asdict() for c in completed] == rec["completed_txns"]
    # the transaction index Kafka wrote
    txnindex = RECOVER / rec["txnindex_file"]
    assert aborted == read_txnindex(txnindex)
    assert encode_txnindex(aborted) == txnindex.read_bytes()
    assert [a._asdict() | {"version": 0} for a in aborted] == rec["txnindex"]["entries"]
    assert m.map_end_offset == rec["map_end_offset"] == 18
    # the producers in memory (first_sequence/first_offset come from the whole 5-batch window)
    got = []
    for pid in sorted(m.producers):
        e = m.producers[pid]
        got.append(dict(zip(SNAP_FIELDS, e.to_snapshot_entry()), first_sequence=e.first_seq,
                        first_offset=e.first_data_offset))  # fmt: skip
    assert got == rec["active_producers_sorted"]
    # the snapshot: Kafka's file holds the same entries (HashMap order), and so does ours
    golden_snap = RECOVER / rec["snapshot_file"]
    gbytes = golden_snap.read_bytes()
    assert hashlib.sha256(gbytes).hexdigest() == rec["snapshot"]["sha256"]
    assert struct.unpack_from(">I", gbytes, 2)[0] == rec["snapshot"]["crc"]
    assert set(read_snapshot(golden_snap)) == set(m.snapshot_entries())
    path = m.take_snapshot(tmp_path)
    assert pathlib.Path(path).name == rec["snapshot_file"] == "00000000000000000018.snapshot"
    ours = pathlib.Path(path).read_bytes()
    assert len(ours) == len(gbytes) == rec["snapshot"]["size"]
    assert ours[:2] == gbytes[:2] and ours[6:10] == gbytes[6:10]  # version, count
    chunks = lambda b: {b[i : i + 46] for i in range(10, len(b), 46)}  # noqa: E731
    assert chunks(ours) == chunks(gbytes)
    # in Kafka's entry order our encoder reproduces Kafka's file byte for byte
    assert encode_snapshot(read_snapshot(golden_snap)) == gbytes
    # replaying an iterable of batches gives the same result as replaying the buffer
    m2, aborted2 = rebuild_from_log(list(kafkatx.iter_batches(log)))
    assert aborted2 == aborted and state(m2) == state(m)


def test_recover_golden_snapshot_reload_semantics():
    rec = json.loads((RECOVER / "recover.json").read_text())
    m = ProducerStateManager.from_snapshot(RECOVER / rec["snapshot_file"])
    assert m.map_end_offset == 18  # from the file name
    by_pid = {e["producer_id"]: e for e in rec["snapshot"]["entries"]}
    assert set(m.producers) == set(by_pid)
    for pid, e in m.producers.items():
        exp = by_pid[pid]
        # one retained batch, its timestamp the producer's last timestamp
        (bm,) = e.batch_metadata
        assert bm == BatchMetadata(exp["first_sequence"], exp["last_sequence"], exp["first_offset"],
                                   exp["last_offset"], exp["timestamp"])  # fmt: skip
        assert e.first_seq == exp["first_sequence"] and e.first_data_offset == exp["first_offset"]
    assert m.ongoing_transactions() == []


def test_rebuild_start_offset_skips_earlier_batches():
    log = (RECOVER / "00000000000000000000.log").read_bytes()
    m, aborted = rebuild_from_log(log, start_offset=7)
    # 1001's data (3-4) is skipped, so its ABORT at 10 ends no transaction on this replay
    assert aborted == [AbortedTxn(1003, 13, 15, 16)]
    assert 1001 in m.producers and m.producers[1001].is_empty


def test_rebuild_transactional_and_commit_goldens():
    log = (GOLDEN / "transactional_none.bin").read_bytes() + (GOLDEN / "control_commit_none.bin").read_bytes()
    seen = []
    m, aborted = rebuild_from_log(log, on_batch=lambda b, mgr, c: seen.append(c))
    assert aborted == []
    assert seen == [None, CompletedTxn(4242, 200, 204, False, 205)]
    e = m.producers[4242]
    assert (e.producer_epoch, e.coordinator_epoch, e.current_txn_first_offset) == (3, 17, -1)
    assert e.last_timestamp == 1700000000500 and e.last_seq == 3


# ----------------------------------------------------------------------------- snapshot goldens
def _snap_case(name):
    (path,) = STORAGE.glob(f"*.{name}.snapshot")
    return path, json.loads(pathlib.Path(str(path) + ".json").read_text())


@pytest.mark.parametrize("name", ["snapshot_basic", "snapshot_empty"])
def test_snapshot_golden(name, tmp_path):
    path, j = _snap_case(name)
    raw = path.read_bytes()
    assert len(raw) == j["size"] and hashlib.sha256(raw).hexdigest() == j["sha256"]
    version, crc, count = struct.unpack_from(">hIi", raw)
    assert (version, crc, count) == (j["version"], j["crc"], j["entry_count_field"])
    assert kafkatx.crc32c(raw[6:]) == j["crc_computed"] == crc
    entries = read_snapshot(path)
    assert _snap_dicts(entries) == [{k: e[k] for k in SNAP_FIELDS} for e in j["entries"]]
    assert read_snapshot(raw) == entries
    # Kafka's bytes from the spec entries, in the spec's order
    spec = [ProducerSnapshotEntry(**e) for e in j["spec"]["entries"]]
    assert encode_snapshot(spec) == raw
    out = tmp_path / path.name
    write_snapshot(out, spec)
    assert out.read_bytes() == raw
    # reload keeps the file order, so the manager re-encodes the same bytes
    m = ProducerStateManager.from_snapshot(path)
    assert encode_snapshot(m) == raw
    for e in j["entries"]:
        pe = m.producers[e["producer_id"]]
        assert (pe.first_seq, pe.first_data_offset) == (e["first_sequence"], e["first_offset"])
        assert pe.last_timestamp == e["timestamp"]
        if e["last_offset"] >= 0:
            assert [b.timestamp for b in pe.batch_metadata] == [e["timestamp"]]
        else:
            assert pe.batch_metadata == ()


def test_snapshot_basic_reopens_ongoing_txn():
    path, _ = _snap_case("snapshot_basic")
    m = ProducerStateManager.from_snapshot(path)
    assert m.ongoing_transactions() == [TxnMetadata(5555, 12)]
    assert m.first_undecided_offset() == 12 and m.last_stable_offset(100) == 12
    # the reopened transaction continues: seq 42 follows 41, and non-transactional data is refused
    with pytest.raises(InvalidTxnStateError):
        m.check_and_update(5555, 9, 42, 42, 18, 18, 5, False)
    assert m.check_and_update(5555, 9, 42, 42, 18, 18, 5, True) is None
    assert m.producers[5555].current_txn_first_offset == 12
    # 7777 had no batch metadata: its epoch is known, so it must continue at sequence 0
    with pytest.raises(OutOfOrderSequenceError):
        m.check_and_update(7777, 4, 3, 3, 19, 19, 5, False)
    assert m.check_and_update(7777, 4, 0, 0, 19, 19, 5, False) is None
    # 1002 after reload: the single retained batch (seq 2) is still detected as a duplicate
    dup = m.check_and_update(1002, 0, 2, 2, 20, 20, 5, False)
    assert dup == BatchMetadata(2, 2, 11, 11, 1700000000021)


def test_snapshot_expiry_on_load():
    path, _ = _snap_case("snapshot_basic")
    day = 86_400_000  # producer.id.expiration.ms default
    # last timestamps: 1002 ...021, 2000 ...016, 7777 ...005; 5555 has an open transaction
    m = ProducerStateManager.from_snapshot(path, current_time_ms=1700000000021 + day)
    assert set(m.producers) == {5555}
    m = ProducerStateManager.from_snapshot(path, current_time_ms=1700000000016 + day)
    assert set(m.producers) == {1002, 5555}
    m = ProducerStateManager.from_snapshot(path, current_time_ms=1700000000016 + day - 1)
    assert set(m.producers) == {1002, 2000, 5555}
    m = ProducerStateManager.from_snapshot(path)
    assert sorted(m.remove_expired_producers(1700000000016 + day)) == [2000, 7777]
    assert set(m.producers) == {1002, 5555}


def test_snapshot_bad_crc_golden():
    path, j = _snap_case("snapshot_bad_crc")
    with pytest.raises(CorruptSnapshotError) as ei:
        read_snapshot(path)
    err = ei.value
    assert isinstance(err, KafkaTxError)
    assert f"Stored crc: {j['crc']}. Computed crc: {j['crc_computed']}" in str(err)
    assert j["error"].startswith("CorruptSnapshotException: Snapshot is corrupt (CRC is no longer valid)")
    assert err.position == 2 and err.file == str(path)
    with pytest.raises(CorruptSnapshotError):
        ProducerStateManager.from_snapshot(path)


def _with_crc(b: bytes) -> bytes:
    return b[:2] + struct.pack(">I", kafkatx.crc32c(b[6:])) + b[6:]


def test_snapshot_corruptions():
    path, _ = _snap_case("snapshot_basic")
    raw = path.read_bytes()
    for n in range(len(raw)):  # every truncation
        with pytest.raises(CorruptSnapshotError):
            read_snapshot(raw[:n])
    for version in (0, 2, -1, 256):
        with pytest.raises(CorruptSnapshotError, match=f"unknown file version {version}") as ei:
            read_snapshot(struct.pack(">h", version) + raw[2:])
        assert ei.value.position == 0
    # a valid CRC but a count the file is too short for (or negative)
    whole = read_snapshot(raw)
    for count in (len(whole) + 1, -1, 1 << 30):
        bad = _with_crc(raw[:6] + struct.pack(">i", count) + raw[10:])
        with pytest.raises(CorruptSnapshotError, match="schema validation") as ei:
            read_snapshot(bad)
    # a smaller count reads that many entries; the rest of the file is ignored as trailing bytes
    assert read_snapshot(_with_crc(raw[:6] + struct.pack(">i", len(whole) - 1) + raw[10:])) == whole[:-1]
    # bytes after the last entry (the CRC covers them) are ignored, as Kafka's Schema.read does
    assert read_snapshot(_with_crc(raw + b"\x00")) == read_snapshot(raw)


def test_snapshot_every_bit_flip_is_caught():
    path, _ = _snap_case("snapshot_basic")
    raw = bytearray(path.read_bytes())
    for i in range(len(raw)):
        for bit in range(8):
            raw[i] ^= 1 << bit
            with pytest.raises(CorruptSnapshotError):
                read_snapshot(bytes(raw))
            raw[i] ^= 1 << bit
    assert len(read_snapshot(bytes(raw))) == 4


def test_snapshot_encode_out_of_range():
    with pytest.raises(KafkaTxError):
        encode_snapshot([ProducerSnapshotEntry(1, 1 << 15, 0, 0, 0, 0, 0, -1)])


# --------------------------------------------------------------------------- idempotence rules
def test_unknown_producer_accepts_any_sequence_then_in_order():
    m = ProducerStateManager()
    r = m.append(data(5, 0, 17, 0, count=3))
    assert r == AppendResult(False, 0, 2, 1000, None)
    assert m.producers[5].last_seq == 19 and m.map_end_offset == 3
    assert not m.append(data(5, 0, 20, 3)).duplicate
    with pytest.raises(OutOfOrderSequenceError) as ei:
        m.append(data(5, 0, 22, 4))
    assert ei.value.producer_id == 5 and ei.value.offset == 4
    assert "22 (incoming seq. number), 20 (current end sequence number)" in str(ei.value)
    with pytest.raises(OutOfOrderSequenceError):
        m.append(data(5, 0, 20, 4, count=2))  # same first sequence as the last batch but not its range
    assert m.append(data(5, 0, 20, 4)).duplicate  # the exact range is a duplicate


def test_duplicate_window_is_five_batches():
    m = ProducerStateManager()
    batches = [data(1, 0, 3 * i, 10 * i, count=3, ts=100 + i) for i in range(6)]
    for b in batches[:5]:
        m.append(b)
    before = state(m)
    for b in batches[:5]:
        retry = b._replace(base_offset=999, last_offset=1001, max_timestamp=7)  # the leader would assign new offsets
        assert m.append(retry) == AppendResult(True, b.base_offset, b.last_offset, b.max_timestamp, None)
    assert state(m) == before
    m.append(batches[5])
    assert len(m.producers[1].batch_metadata) == 5
    # the first batch left the window: a retry of it is now out of order
    with pytest.raises(OutOfOrderSequenceError):
        m.append(batches[0])
    assert m.append(batches[1]).duplicate


def test_epoch_rules():
    m = ProducerStateManager()
    m.append(data(1, 3, 0, 0, count=2))
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 3") as ei:
        m.append(data(1, 2, 2, 2))
    assert ei.value.producer_id == 1 and ei.value.offset == 2
    # a retry of an old-epoch batch is fenced, not a duplicate
    with pytest.raises(InvalidProducerEpochError):
        m.append(data(1, 2, 0, 2, count=2))
    # a new epoch must start at sequence 0
    with pytest.raises(OutOfOrderSequenceError, match="Invalid sequence number for new epoch"):
        m.append(data(1, 4, 2, 2))
    m.append(data(1, 4, 0, 2))
    e = m.producers[1]
    assert e.producer_epoch == 4 and [b.first_seq for b in e.batch_metadata] == [0]
    # the earlier epoch's batch is no longer a duplicate candidate
    with pytest.raises(InvalidProducerEpochError):
        m.append(data(1, 3, 0, 3, count=2))


def test_sequence_wrap():
    m = ProducerStateManager()
    m.append(data(1, 0, INT_MAX - 1, 0, count=2))
    assert m.producers[1].last_seq == INT_MAX
    with pytest.raises(OutOfOrderSequenceError):
        m.append(data(1, 0, 1, 2))
    m.append(data(1, 0, 0, 2))  # 2147483647 -> 0 is in sequence
    assert m.producers[1].last_seq == 0


def test_sequence_wrap_golden_batch():
    raw = (GOLDEN / "idempotent_seq_wrap_none.bin").read_bytes()
    (b,) = kafkatx.iter_batches(raw)
    assert (b.base_sequence, b.last_sequence) == (2147483646, 1)
    m = ProducerStateManager()
    assert m.append(b) == AppendResult(False, 0, 3, b.max_timestamp, None)
    assert m.append(b).duplicate  # the same wrapped range again
    with pytest.raises(OutOfOrderSequenceError):
        m.check_and_update(77, 0, 3, 3, 4, 4, 1, False)
    assert m.check_and_update(77, 0, 2, 2, 4, 4, 1, False) is None


def test_idempotent_golden_duplicate_returns_original():
    raw = (GOLDEN / "idempotent_none.bin").read_bytes()
    (b,) = kafkatx.iter_batches(raw)
    m = ProducerStateManager()
    first = m.append(b)
    assert first == AppendResult(False, 100, 102, 1700000000020, None)
    again = m.append(b)
    assert again == AppendResult(True, 100, 102, 1700000000020, None)


def test_transaction_bookkeeping_and_lso():
    m = ProducerStateManager()
    m.append(data(1, 0, 0, 10, count=2, txn=True))
    m.append(data(2, 0, 0, 12, txn=True))
    m.append(data(1, 0, 2, 13, txn=True))  # later batches do not move the first offset
    assert m.producers[1].current_txn_first_offset == 10
    assert m.ongoing_transactions() == [TxnMetadata(1, 10), TxnMetadata(2, 12)]
    assert m.first_undecided_offset() == 10
    with pytest.raises(InvalidTxnStateError):
        m.append(data(1, 0, 3, 14))
    # ABORT of 1 at 20: the LSO recorded is the first offset of 2's still-open transaction
    r = m.append(marker("abort", 1, 0, 20, coordinator_epoch=4))
    assert r.completed_txn == CompletedTxn(1, 10, 20, True, 12)
    assert r.completed_txn.to_aborted_txn() == AbortedTxn(1, 10, 20, 12)
    assert m.first_undecided_offset() == 12
    # the completed txn stays unstable until the high watermark passes its marker
    assert m.first_unstable_offset() == 10
    assert m.last_stable_offset(15) == 10 and m.last_stable_offset(5) == 5
    m.on_high_watermark_updated(20)
    assert m.first_unstable_offset() == 10
    m.on_high_watermark_updated(21)
    assert m.first_unstable_offset() == 12
    # COMMIT of 2 at 21 with nothing else open: LSO = marker + 1
    assert m.append(marker("commit", 2, 0, 21)).completed_txn == CompletedTxn(2, 12, 21, False, 22)
    assert m.first_undecided_offset() is None and m.ongoing_transactions() == []
    # after the marker, non-transactional data is fine again and the window was kept (same epoch)
    m.append(data(1, 0, 3, 22))
    assert m.producers[1].last_seq == 3


def test_lso_when_the_other_txn_started_first():
    m = ProducerStateManager()
    m.append(data(2, 0, 0, 5, txn=True))
    m.append(data(1, 0, 0, 10, txn=True))
    assert m.append(marker("abort", 1, 0, 11)).completed_txn.last_stable_offset == 5
    assert m.append(marker("abort", 2, 0, 12)).completed_txn.last_stable_offset == 13


def test_marker_rules():
    m = ProducerStateManager()
    m.append(data(1, 2, 0, 0, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        m.append(marker("commit", 1, 1, 1, coordinator_epoch=5))
    r = m.append(marker("commit", 1, 2, 1, coordinator_epoch=5, ts=77))
    assert r == AppendResult(False, 1, 1, 77, CompletedTxn(1, 0, 1, False, 2))
    e = m.producers[1]
    assert (e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset) == (5, 77, -1)
    before = state(m)
    with pytest.raises(TransactionCoordinatorFencedError) as ei:
        m.append(marker("abort", 1, 2, 2, coordinator_epoch=4))
    assert ei.value.producer_id == 1 and ei.value.offset == 2
    assert state(m) == before
    # a marker with no open transaction ends nothing, but records the coordinator epoch and timestamp
    assert m.append(marker("abort", 1, 2, 2, coordinator_epoch=5, ts=80)).completed_txn is None
    # a marker with a higher epoch (TV2 bump) clears the window: the next batch starts at 0
    m.append(marker("abort", 1, 3, 3, coordinator_epoch=6))
    assert m.producers[1].producer_epoch == 3 and m.producers[1].is_empty
    with pytest.raises(OutOfOrderSequenceError):
        m.append(data(1, 3, 1, 4))
    m.append(data(1, 3, 0, 4))


def test_marker_for_unknown_producer_and_tv2_rule():
    m = ProducerStateManager()
    assert m.append_marker(9, 4, control_type=1, coordinator_epoch=8, offset=0, timestamp=5) is None
    assert m.producers[9].to_snapshot_entry() == ProducerSnapshotEntry(9, 4, -1, -1, 0, 5, 8, -1)
    m.check_and_update(9, 4, 0, 0, 1, 1, 6, True)
    # TV2: a marker must carry a higher epoch than the open transaction's data
    with pytest.raises(InvalidProducerEpochError):
        m.append_marker(9, 4, control_type=0, coordinator_epoch=8, offset=2, timestamp=7, transaction_version=2)
    c = m.append_marker(9, 5, control_type=0, coordinator_epoch=8, offset=2, timestamp=7, transaction_version=2)
    assert c == CompletedTxn(9, 1, 2, True, 3)
    # an equal epoch with no open transaction is an accepted retry
    assert m.append_marker(9, 5, control_type=0, coordinator_epoch=8, offset=3, timestamp=8,
                           transaction_version=2) is None  # fmt: skip
    # under the TV0/TV1 rule an equal epoch with an open transaction is fine
    m.check_and_update(9, 5, 0, 0, 4, 4, 9, True)
    assert m.append_marker(9, 5, control_type=1, coordinator_epoch=8, offset=5, timestamp=9).is_aborted is False
    with pytest.raises(InvalidRecordError):
        m.append_marker(9, 5, control_type=2, coordinator_epoch=8, offset=6, timestamp=9)


def test_control_batches_via_append():
    m = ProducerStateManager()
    # an empty control batch (transaction cleaned away) applies nothing, but an unknown producer gets an
    # empty entry (Kafka: prepareUpdate starts from ProducerStateEntry.empty, and update adds it)
    empty = Batch(3, 0, -1, -1, 0, 0, 5, True, True, records_count=0)
    assert m.append(empty) == AppendResult(False, 0, 0, 5, None)
    e = m.producers[3]
    assert (e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset) == (-1, -1, -1, -1)
    assert e.batch_metadata == () and m.map_end_offset == 1
    assert m.append(empty._replace(base_offset=1, last_offset=1)).completed_txn is None  # and nothing else
    assert m.producers[3].batch_metadata == ()
    staged = ProducerStateManager()  # the same through prepare_update / update
    info = staged.prepare_update(3, origin="replication")
    assert info.append(empty) is None
    assert staged.update(info) == [] and staged.producers[3].producer_epoch == -1 and staged.map_end_offset == 1
    # a control batch of another type (leader change) from a producer is not a marker
    raw = bytearray(encode_marker("abort", producer_id=3, producer_epoch=0, base_offset=1, timestamp=1))
    struct.pack_into(">h", raw, 61 + 7, 2)  # key type: LEADER_CHANGE
    struct.pack_into(">I", raw, 17, kafkatx.crc32c(bytes(raw[21:])))
    (b,) = kafkatx.iter_batches(bytes(raw))
    assert b.first_control_type() == 2
    with pytest.raises(InvalidRecordError):
        m.append(b)
    # batches without a producer id leave no state
    assert m.append(Batch(-1, -1, -1, -1, 2, 4, 9, False)) == AppendResult(False, 2, 4, 9, None)
    assert len(m) == 1 and m.map_end_offset == 5  # (producer 3's empty entry only)


def test_replication_origin_skips_checks():
    m = ProducerStateManager()
    m.append(data(1, 5, 0, 0, count=2))
    m.append(data(1, 5, 7, 2), origin="replication")  # out of order: logged by Kafka, applied
    assert m.producers[1].last_seq == 7
    m.append(data(1, 5, 7, 3), origin="replication")  # not de-duplicated either
    assert len(m.producers[1].batch_metadata) == 3
    m.append(data(1, 4, 0, 4), origin="replication")  # stale epoch: applied, epoch goes back
    assert m.producers[1].producer_epoch == 4 and len(m.producers[1].batch_metadata) == 1
    with pytest.raises(ValueError):
        m.append(data(1, 4, 1, 5), origin="leader")


def test_origin_is_compared_by_value():
    """An origin equal to "client" but not the interned constant (read from a file, built at run time) takes
    the same checks: a known producer continuing its epoch is appended, an out-of-order one rejected."""
    from kafkatx.producer_state import ORIGIN_CLIENT

    origin = "".join(["cli", "ent"])
    assert origin == "client" and origin is not ORIGIN_CLIENT
    m = ProducerStateManager()
    assert m.check_and_update(1, 0, 0, 0, 0, 0, 1, False, origin) is None
    assert m.check_and_update(1, 0, 1, 1, 1, 1, 2, False, origin) is None
    assert m.append(data(1, 0, 2, 2), origin=origin) == AppendResult(False, 2, 2, 1000, None)
    assert m.producers[1].last_seq == 2 and m.map_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        m.check_and_update(1, 0, 5, 5, 3, 3, 3, False, origin)
    assert m.check_and_update(1, 0, 1, 1, 1, 1, 2, False, origin).first_offset == 1  # a duplicate


def test_coordinator_origin_checks_epoch_not_sequence():
    m = ProducerStateManager()
    m.check_and_update(1, 2, 0, 0, 0, 0, 1, False)
    assert m.check_and_update(1, 2, 9, 9, 1, 1, 1, False, "coordinator") is None
    with pytest.raises(InvalidProducerEpochError):
        m.check_and_update(1, 1, 10, 10, 2, 2, 1, False, "coordinator")


# ------------------------------------------------------------------------------ two-step API
def test_prepare_commit_and_discard():
    m = ProducerStateManager()
    m.append(data(1, 0, 0, 0, txn=True))
    before = state(m)
    info = m.prepare_update(1)
    with pytest.raises(OutOfOrderSequenceError):
        info.append_data_batch(0, 5, 5, 10, 1, 1, True)
    assert info.append_data_batch(0, 1, 1, 10, 1, 1, True) is None
    assert info.append_data_batch(0, 2, 3, 11, 2, 3, True) is None  # staged batches chain on each other
    assert state(m) == before  # nothing committed yet
    dup = m.prepare_update(1).append_data_batch(0, 0, 0, 10, 7, 7, True)
    assert dup == BatchMetadata(0, 0, 0, 0, 1000)
    assert m.update(info) == []
    assert m.producers[1].last_seq == 3 and m.map_end_offset == 4
    with pytest.raises(ProducerStateError, match="already committed"):
        m.update(info)
    # a marker staged and committed yields the completed txn with its LSO
    info = m.prepare_update(1, origin="coordinator")
    c = info.append_end_txn_marker(0, 1, 0, 4, 12)
    assert c == CompletedTxn(1, 0, 4, True, -1)
    assert m.update(info) == [CompletedTxn(1, 0, 4, True, 5)]


def test_update_many_commits_one_append_as_unified_log_does():
    """UnifiedLog.append: every producer of the append is updated, then each completed transaction gets the
    LSO of that state (a transaction opened later in the same append by another producer counts) and is
    completed, in marker order; nothing is committed unless every info can be."""
    m = ProducerStateManager()
    m.append(data(1, 0, 0, 0, txn=True))
    m.append(data(3, 0, 0, 1, txn=True))
    a = m.prepare_update(1, origin="replication")
    a.append_end_txn_marker(0, 0, 0, 2, 10)  # ABORT at 2
    c = m.prepare_update(3, origin="replication")
    c.append_end_txn_marker(1, 0, 0, 4, 10)  # COMMIT at 4
    b = m.prepare_update(2, origin="replication")
    b.append_data_batch(0, 0, 0, 10, 3, 3, True)  # opened at 3, between the two markers
    stale = m.prepare_update(1)
    with pytest.raises(ProducerStateError, match="two append infos"):
        m.update_many([a, stale])
    m.append(data(9, 0, 0, 5))
    other = m.prepare_update(9)
    m.append(data(9, 0, 1, 6))  # makes ``other`` stale
    before = state(m)
    with pytest.raises(ProducerStateError, match="changed after"):
        m.update_many([c, b, a, other])
    assert state(m) == before
    # pid 1's abort: pid 3's transaction (first offset 1) is still open; pid 3's commit: pid 2's (3) is open
    assert m.update_many([c, b, a]) == [CompletedTxn(1, 0, 2, True, 1), CompletedTxn(3, 1, 4, False, 3)]
    assert [t.producer_id for t in m.ongoing_transactions()] == [2] and m.map_end_offset == 5


def test_stale_append_info_is_refused():
    m = ProducerStateManager()
    m.append(data(1, 0, 0, 0))
    info = m.prepare_update(1)
    info.append_data_batch(0, 1, 1, 5, 1, 1, False)
    m.append(data(1, 0, 1, 1))  # someone else appended in between
    with pytest.raises(ProducerStateError, match="changed after"):
        m.update(info)
    other = ProducerStateManager()
    with pytest.raises(ProducerStateError):
        other.update(m.prepare_update(1))


# ----------------------------------------------------- random legal histories and single mutations
class Model:
    """An independent model of the leader's rules for the histories generated below."""

    def __init__(self):
        self.p = {}  # pid -> dict(epoch, next_seq, txn_first, coord, window[(first_seq,last_seq,fo,lo,ts)])
        self.offset = 0
        self.ts = 0
        self.ongoing = {}  # first offset -> pid

    def next(self, n=1):
        off = self.offset
        self.offset += n
        self.ts += 1
        return off, self.ts


def _legal_step(draw, mdl, pids):
    """One legal operation: (callable on a manager, expected result, description)."""
    pid = draw(st.sampled_from(pids))
    p = mdl.p.get(pid)
    kinds = ["data"]
    if p is not None:
        kinds += ["bump", "marker"]
        if p["window"]:
            kinds.append("retry")
    kind = draw(st.sampled_from(kinds))
    if kind == "retry":
        b = draw(st.sampled_from(p["window"][-5:]))
        batch = Batch(pid, p["epoch"], b[0], b[1], 0, 0, 0, p["txn_first"] >= 0 or draw(st.booleans()))
        return batch, AppendResult(True, b[2], b[3], b[4], None)
    if kind == "marker":
        epoch = p["epoch"] + draw(st.sampled_from([0, 0, 1]))
        coord = max(p["coord"], 0) + draw(st.integers(0, 2))
        ctype = draw(st.sampled_from(["abort", "commit"]))
        off, ts = mdl.next()
        completed = None
        if p["txn_first"] >= 0:
            others = [f for f, q in sorted(mdl.ongoing.items()) if q != pid]
            lso = others[0] if others else off + 1
            completed = CompletedTxn(pid, p["txn_first"], off, ctype == "abort", lso)
            del mdl.ongoing[p["txn_first"]]
            p["txn_first"] = -1
        if epoch != p["epoch"]:
            p["epoch"], p["window"], p["next_seq"] = epoch, [], 0
        p["coord"] = coord
        return ("marker", ctype, pid, epoch, off, coord, ts), AppendResult(False, off, off, ts, completed)
    if kind == "data" and p is None:
        epoch = draw(st.integers(0, 3))
        seq = draw(st.one_of(st.integers(0, 50), st.integers(INT_MAX - 3, INT_MAX)))
        p = mdl.p[pid] = {"epoch": epoch, "next_seq": seq, "txn_first": -1, "coord": -1, "window": []}
    elif kind == "bump":
        p["epoch"] += draw(st.integers(1, 2))
        p["window"], p["next_seq"] = [], 0
    count = draw(st.integers(1, 3))
    txn = True if p["txn_first"] >= 0 else draw(st.booleans())
    seq = p["next_seq"]
    last_seq = kafkatx.increment_sequence(seq, count - 1)
    off, ts = mdl.next(count)
    if txn and p["txn_first"] < 0:
        p["txn_first"] = off
        mdl.ongoing[off] = pid
    p["window"].append((seq, last_seq, off, off + count - 1, ts))
    p["next_seq"] = kafkatx.increment_sequence(last_seq, 1)
    return Batch(pid, p["epoch"], seq, last_seq, off, off + count - 1, ts, txn, False, count), AppendResult(
        False, off, off + count - 1, ts, None
    )


def _apply(m, op):
    if isinstance(op, tuple) and op and op[0] == "marker":
        _, ctype, pid, epoch, off, coord, ts = op
        return m.append(marker(ctype, pid, epoch, off, coordinator_epoch=coord, ts=ts))
    return m.append(op)


@st.composite
def legal_history(draw):
    mdl = Model()
    pids = draw(st.lists(st.integers(0, 1 << 40), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(1, 40))
    return mdl, [_legal_step(draw, mdl, pids) for _ in range(n)]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legal_history())
def test_random_legal_histories_are_accepted(hist):
    mdl, steps = hist
    m = ProducerStateManager()
    for op, expected in steps:
        assert _apply(m, op) == expected, op
    # the model's view of every producer agrees with the manager's
    for pid, p in mdl.p.items():
        e = m.producers[pid]
        assert e.producer_epoch == p["epoch"]
        assert e.current_txn_first_offset == p["txn_first"]
        assert [tuple(b) for b in e.batch_metadata] == p["window"][-5:]
    assert m.ongoing_transactions() == [TxnMetadata(q, f) for f, q in sorted(mdl.ongoing.items())]


MUTATIONS = ["seq_gap", "stale_epoch", "new_epoch_nonzero", "non_txn_in_txn", "stale_marker_epoch",
             "fenced_coordinator", "old_retry"]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legal_history(), st.sampled_from(MUTATIONS), st.data())
def test_random_single_mutation_is_rejected(hist, mutation, dr):
    mdl, steps = hist
    m = ProducerStateManager()
    for op, _expected in steps:
        _apply(m, op)
    pid = dr.draw(st.sampled_from(sorted(mdl.p)))
    p = mdl.p[pid]
    off, ts = mdl.next()
    seq = p["next_seq"]
    txn = p["txn_first"] >= 0
    if mutation == "seq_gap":
        k = dr.draw(st.integers(1, 5))
        op, exc = Batch(pid, p["epoch"], kafkatx.increment_sequence(seq, k), kafkatx.increment_sequence(seq, k),
                        off, off, ts, txn), OutOfOrderSequenceError  # fmt: skip
    elif mutation == "stale_epoch":
        if p["epoch"] == 0:
            p["epoch"] = 1
            m.append_marker(pid, 1, control_type=0, coordinator_epoch=max(p["coord"], 0), offset=off, timestamp=ts)
            off, ts = mdl.next()
            txn = False
        op, exc = Batch(pid, p["epoch"] - 1, 0, 0, off, off, ts, txn), InvalidProducerEpochError
    elif mutation == "new_epoch_nonzero":
        s = dr.draw(st.integers(1, 100))
        op, exc = Batch(pid, p["epoch"] + 1, s, s, off, off, ts, txn), OutOfOrderSequenceError
    elif mutation == "non_txn_in_txn":
        if not txn:
            m.append(Batch(pid, p["epoch"], seq, seq, off, off, ts, True))
            seq = kafkatx.increment_sequence(seq, 1)
            off, ts = mdl.next()
        op, exc = Batch(pid, p["epoch"], seq, seq, off, off, ts, False), InvalidTxnStateError
    elif mutation == "stale_marker_epoch":
        if p["epoch"] == 0:
            m.append(Batch(pid, 1, 0, 0, off, off, ts, txn))
            off, ts = mdl.next()
            p["epoch"] = 1
        op, exc = ("marker", "commit", pid, p["epoch"] - 1, off, 10**6, ts), InvalidProducerEpochError
    elif mutation == "fenced_coordinator":
        coord = p["coord"]
        if coord < 0:
            m.append_marker(pid, p["epoch"], control_type=1, coordinator_epoch=3, offset=off, timestamp=ts)
            off, ts = mdl.next()
            coord = 3
        op, exc = ("marker", "abort", pid, p["epoch"], off, coord - 1, ts), TransactionCoordinatorFencedError
    else:  # old_retry: a batch that left the 5-batch window
        s = p["next_seq"]
        window = []
        for _ in range(6):
            b = Batch(pid, p["epoch"], s, s, off, off, ts, txn)
            assert m.append(b) == AppendResult(False, off, off, ts, None)
            window.append(b)
            s = kafkatx.increment_sequence(s, 1)
            off, ts = mdl.next()
        assert m.append(window[1]).duplicate  # still in the window
        op, exc = window[0]._replace(base_offset=off, last_offset=off), OutOfOrderSequenceError
    before = state(m)
    with pytest.raises(exc):
        _apply(m, op)
    assert state(m) == before  # a rejected batch changes nothing


# -------------------------------------------------------- the fast paths agree with the staged one
ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(["data", "data", "data", "marker"]),
        st.integers(0, 2),  # pid
        st.integers(0, 3),  # epoch
        st.integers(0, 6),  # seq
        st.integers(1, 3),  # count
        st.booleans(),  # transactional / abort
        st.integers(0, 3),  # coordinator epoch
        st.sampled_from(["client", "client", "replication", "coordinator"]),
    ),
    max_size=40,
)


def _outcome(fn):
    try:
        return ("ok", fn())
    except KafkaTxError as exc:
        return ("err", type(exc).__name__)


@settings(max_examples=200, deadline=None)
@given(ops_strategy)
def test_hot_path_equals_two_step_api(ops):
    a, b = ProducerStateManager(), ProducerStateManager()
    offset = 0
    for kind, pid, epoch, seq, count, flag, coord, origin in ops:
        if kind == "marker":
            origin = "replication" if origin == "replication" else "coordinator"
            ra = _outcome(lambda: a.append_marker(pid, epoch, control_type=int(flag), coordinator_epoch=coord,
                                                  offset=offset, timestamp=offset, origin=origin))  # fmt: skip

            def staged():
                info = b.prepare_update(pid, origin=origin)
                info.append_end_txn_marker(int(flag), coord, epoch, offset, offset)
                done = b.update(info)
                return done[0] if done else None

            rb = _outcome(staged)
            offset += 1
        else:
            last = offset + count - 1
            lseq = seq + count - 1
            ra = _outcome(lambda: a.check_and_update(pid, epoch, seq, lseq, offset, last, offset, flag, origin))

            def staged():
                info = b.prepare_update(pid, origin=origin)
                dup = info.append_data_batch(epoch, seq, lseq, offset, offset, last, flag)
                if dup is None:
                    b.update(info)
                return dup

            rb = _outcome(staged)
            offset += count
        assert ra == rb
        assert state(a) == state(b)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from([0, 0, 0, 1, 2, -3, -7]), st.integers(1, 3),
                  st.sampled_from([False, False, True])),  # fmt: skip
        max_size=80,
    ),
    # producer ids close together (sorted as 16-bit keys) or far apart (sorted as int64)
    st.sampled_from([(0, 1, 2, 3), (7, 70_000, 1 << 40, (1 << 62) + 3)]),
)
def test_validate_arrays_equals_row_by_row(rows, ids):
    """Per-row outcomes and final state of the bulk path equal calling check_and_update row by row."""
    cols = {k: [] for k in ("pid", "epoch", "bseq", "lseq", "first", "last", "ts", "txn")}
    nxt = {}
    offset = 0
    for k, epoch, jump, count, txn in rows:
        pid = ids[k]
        seq = max(0, nxt.get((pid, epoch), 0) + jump)  # mostly in sequence; some gaps and retries
        if seq > INT_MAX - 3:
            seq = 0
        lseq = kafkatx.increment_sequence(seq, count - 1)
        nxt[(pid, epoch)] = lseq + 1
        for k, v in zip(cols, (pid, epoch, seq, lseq, offset, offset + count - 1, offset * 10, txn)):
            cols[k].append(v)
        offset += count
    ref = ProducerStateManager()
    expect = []
    for i in range(len(rows)):
        r = _outcome(lambda: ref.check_and_update(cols["pid"][i], cols["epoch"][i], cols["bseq"][i], cols["lseq"][i],
                                                  cols["first"][i], cols["last"][i], cols["ts"][i], cols["txn"][i]))  # fmt: skip
        code = {
            ("ok", None): RESULT_APPENDED,
            ("err", "OutOfOrderSequenceError"): RESULT_OUT_OF_ORDER_SEQUENCE,
            ("err", "InvalidProducerEpochError"): RESULT_INVALID_PRODUCER_EPOCH,
            ("err", "InvalidTxnStateError"): RESULT_INVALID_TXN_STATE,
        }.get(r, RESULT_DUPLICATE if r[0] == "ok" else None)
        expect.append(code)
        if code == RESULT_APPENDED:
            ref.update_map_end_offset(cols["last"][i] + 1)
    bulk = ProducerStateManager()
    got = bulk.validate_arrays(*(np.array(cols[k], dtype=np.int64 if k != "txn" else bool) for k in cols))
    assert got.tolist() == expect
    assert state(bulk) == state(ref)
    assert bulk.map_end_offset == ref.map_end_offset


def test_validate_arrays_leaves_the_map_end_offset_as_append_does():
    """Rows out of log order (offsets going back) and a manager already further on: the map end offset ends
    where append() row by row leaves it, the last appended row's last offset + 1 (a rejected row's is not
    taken)."""
    rows = [data(1, 0, 0, 20, count=2), data(2, 0, 0, 3), data(1, 0, 9, 30)]  # the last is out of sequence
    ref = ProducerStateManager()
    ref.update_map_end_offset(1000)
    for b in rows[:2]:
        ref.append(b)
    with pytest.raises(OutOfOrderSequenceError):
        ref.append(rows[2])
    bulk = ProducerStateManager()
    bulk.update_map_end_offset(1000)
    cols = [np.array(c) for c in zip(*(b[:8] for b in rows))]
    got = bulk.validate_arrays(*cols)
    assert got.tolist() == [RESULT_APPENDED, RESULT_APPENDED, RESULT_OUT_OF_ORDER_SEQUENCE]
    assert bulk.map_end_offset == ref.map_end_offset == 4
    assert state(bulk) == state(ref)


def test_validate_arrays_long_runs_use_bulk_path_and_agree():
    rng = np.random.default_rng(3)
    producers = 50
    nxt = [0] * producers
    recent = [[] for _ in range(producers)]
    rows = []  # (pid, seq, count, txn)
    for i in range(20_000):
        pid = int(rng.integers(0, producers))
        r = rng.random()
        if r < 0.002:  # a gap: rejected, the producer carries on in sequence afterwards
            rows.append((pid, nxt[pid] + 3, 1, pid % 3 == 0))
        elif r < 0.004 and recent[pid]:  # a retry of a recent batch: a duplicate
            rows.append(recent[pid][int(rng.integers(0, len(recent[pid])))])
        else:
            count = int(rng.integers(1, 5))
            row = (pid, nxt[pid], count, pid % 3 == 0)
            rows.append(row)
            recent[pid] = (recent[pid] + [row])[-5:]
            nxt[pid] += count
    n = len(rows)
    pid = np.array([r[0] for r in rows], dtype=np.int64)
    seq = np.array([r[1] for r in rows], dtype=np.int64)
    counts = np.array([r[2] for r in rows], dtype=np.int64)
    txn = np.array([r[3] for r in rows], dtype=bool)
    lseq = seq + counts - 1
    first = np.cumsum(counts) - counts
    last = first + counts - 1
    ts = np.arange(n, dtype=np.int64)
    bulk = ProducerStateManager()
    got = bulk.validate_arrays(pid, np.zeros(n, dtype=np.int64), seq, lseq, first, last, ts, txn)
    ref = ProducerStateManager()
    expect = []
    for i in range(n):
        try:
            d = ref.check_and_update(int(pid[i]), 0, int(seq[i]), int(lseq[i]), int(first[i]), int(last[i]),
                                     int(ts[i]), bool(txn[i]))  # fmt: skip
            expect.append(RESULT_DUPLICATE if d is not None else RESULT_APPENDED)
        except OutOfOrderSequenceError:
            expect.append(RESULT_OUT_OF_ORDER_SEQUENCE)
    assert got.tolist() == expect
    assert expect.count(RESULT_OUT_OF_ORDER_SEQUENCE) > 10 and expect.count(RESULT_DUPLICATE) > 10
    assert expect.count(RESULT_APPENDED) > n * 0.99
    assert state(bulk) == state(ref)
    assert bulk.map_end_offset == int(last[np.flatnonzero(got == RESULT_APPENDED)[-1]]) + 1


def test_validate_arrays_length_mismatch():
    with pytest.raises(ValueError):
        ProducerStateManager().validate_arrays([1, 2], [0], [0], [0], [0], [0], [0], [False])


# ---------------------------------------------------------------------------------- performance
def test_hot_path_throughput_smoke():
    n, producers = 200_000, 100
    rows = [(i % producers, 0, (i // producers) * 4, (i // producers) * 4 + 3, 4 * i, 4 * i + 3, i, False)
            for i in range(n)]  # fmt: skip
    m = ProducerStateManager()
    f = m.check_and_update
    t = time.perf_counter()
    for r in rows:
        f(*r)
    rate = n / (time.perf_counter() - t)
    assert all(len(e.batch_metadata) == 5 for e in m.producers.values())
    # about 2 M batches/s on the project's machines; a loose floor so a busy box does not fail it
    assert rate > 200_000, rate


def test_validate_arrays_duplicate_of_a_replicated_window():
    # a window written by replication need not be one sequence chain; a client batch that continues
    # the chain can still repeat the range of an older retained batch, which makes it a duplicate
    def fresh():
        m = ProducerStateManager()
        m.check_and_update(1, 0, 10, 12, 0, 2, 1, False, "replication")
        m.check_and_update(1, 0, 5, 5, 3, 3, 2, False, "replication")
        return m

    seqs = [(6, 7), (8, 9), (10, 12), (10, 10), (11, 11), (12, 12), (13, 13), (14, 14), (15, 15), (16, 16)]
    rows = [(1, 0, f, lst, 10 + i, 10 + i, 100 + i, False) for i, (f, lst) in enumerate(seqs)]
    bulk = fresh()
    got = bulk.validate_arrays(*(np.array(c) for c in zip(*rows)))
    ref = fresh()
    expect = [RESULT_APPENDED if ref.check_and_update(*r) is None else RESULT_DUPLICATE for r in rows]
    assert expect[2] == RESULT_DUPLICATE and expect.count(RESULT_DUPLICATE) == 1
    assert got.tolist() == expect
    assert state(bulk) == state(ref)


def _bulk_vs_rows(rows, setup=None):
    def fresh():
        m = ProducerStateManager()
        if setup:
            setup(m)
        return m

    ref = fresh()
    expect = []
    for r in rows:
        out = _outcome(lambda: ref.check_and_update(*r))
        expect.append({("ok", None): RESULT_APPENDED, ("err", "InvalidTxnStateError"): RESULT_INVALID_TXN_STATE,
                       ("err", "OutOfOrderSequenceError"): RESULT_OUT_OF_ORDER_SEQUENCE}.get(out, RESULT_DUPLICATE))  # fmt: skip
    bulk = fresh()
    got = bulk.validate_arrays(*(np.array(c) for c in zip(*rows)))
    assert got.tolist() == expect
    assert state(bulk) == state(ref)
    return expect


def test_validate_arrays_txn_flip_inside_a_long_run():
    flags = [False] * 8 + [True] * 3 + [False] + [True] * 4
    rows = [(4, 1, i, i, i, i, i, t) for i, t in enumerate(flags)]
    expect = _bulk_vs_rows(rows)
    assert expect[11] == RESULT_INVALID_TXN_STATE
    # the rejected row left a gap in the sequence, so the rows after it are out of order
    assert expect[12:] == [RESULT_OUT_OF_ORDER_SEQUENCE] * 4 and expect[:11] == [RESULT_APPENDED] * 11


def test_validate_arrays_huge_batches_wrapping_the_sequence_space():
    # two batches of 2^30 records wrap the 2^31 sequence space, so the next in-sequence batch repeats
    # the range of one still in the window: Kafka answers with a duplicate
    big = 1 << 30
    seqs = [(i, i) for i in range(5)]
    seqs += [(5, 5 + big - 1), (5 + big, kafkatx.increment_sequence(5 + big, big - 1)), (5, 5 + big - 1)]
    rows, off = [], 0
    for f, lst in seqs:
        width = (lst - f) % (1 << 31)
        rows.append((8, 0, f, lst, off, off + width, off, False))
        off += width + 1
    expect = _bulk_vs_rows(rows)
    assert expect == [RESULT_APPENDED] * 7 + [RESULT_DUPLICATE]


def test_rebuild_of_a_corrupt_log_raises_kafkatx_error():
    raw = (GOLDEN / "corrupt_crc_none.bin").read_bytes()
    with pytest.raises(kafkatx.CrcMismatchError):
        rebuild_from_log(raw)
    rebuild_from_log(raw, verify_crc=False)  # the header fields are still readable
