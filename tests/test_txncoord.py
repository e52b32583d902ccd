"""kafkatx.txncoord: the transaction coordinator over PartitionWriters, its __transaction_state log,
fencing, timeouts, transaction versions 0 and 2, and reload after a restart or a crash."""

from __future__ import annotations

import itertools
import os
import pathlib

import pytest

from _txn_helpers import Clock
from kafkatx import iter_batches
from kafkatx.errors import (
    IllegalTransitionError,
    InvalidProducerEpochError,
    KafkaTxError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkatx.log import open_partition
from kafkatx.log.writer import PartitionWriter
from kafkatx.txncoord import (
    ConcurrentTransactionsError,
    IdempotentProducer,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    TransactionalProducer,
    TransactionCoordinator,
    TransactionMetadata,
    stamp_producer,
)
from kafkatx.txnlog import (
    TransactionState,
    TxnMetadataValue,
    can_transition,
    decode_txn_records,
    encode_txn_records,
    txn_partition_for,
)

S = TransactionState
T0 = 1_700_000_000_000


def log_bytes(path) -> bytes:
    return b"".join(pathlib.Path(path, f).read_bytes() for f in sorted(os.listdir(path)) if f.endswith(".log"))


def markers(path):
    """(offset, control type, producer id, producer epoch, coordinator epoch) of every marker."""
    out = []
    for b in iter_batches(log_bytes(path)):
        if b.is_control:
            c = b.control_record()
            out.append((b.base_offset, c.type.upper(), b.producer_id, b.producer_epoch, c.coordinator_epoch))
    return out


def state_records(coord, tid):
    d = os.path.join(coord.log_dir, f"__transaction_state-{coord.state_partition_for(tid)}")
    return [r for r in decode_txn_records(log_bytes(d)) if r.transactional_id == tid]


def committed_values(path):
    with open_partition(path) as p:
        return [r.value for r in p.read(isolation="read_committed")]


@pytest.fixture
def env(tmp_path):
    clock = Clock()
    coord = TransactionCoordinator(tmp_path, clock=clock, num_partitions=5)
    yield coord, clock, tmp_path
    coord.close()


# ------------------------------------------------------------------------------------------ transitions
def test_every_illegal_transition_is_rejected_before_anything_is_written(tmp_path):
    """All 64 (from, to) pairs under both tables: the legal ones are written, the others raise
    IllegalTransitionError and leave the state log untouched."""
    for tv in (0, 2):
        d = tmp_path / f"tv{tv}"
        with TransactionCoordinator(d, transaction_version=tv, num_partitions=1, clock=Clock()) as coord:
            coord.init_producer_id("tx")
            meta = coord._txns["tx"]
            meta.client_transaction_version = tv  # _apply checks a change under the version it is made with
            writer = coord._state_writer(0)
            checked = 0
            for a, b in itertools.product(S, S):
                meta.state = a
                new = meta.copy()
                new.state = b
                if b is S.Dead:
                    new.state = b  # a tombstone, never a value: the transition alone is checked
                leo = writer.log_end_offset
                if can_transition(a, b, transaction_version=tv):
                    if b is not S.Dead:
                        coord._apply(meta, new)
                        assert writer.log_end_offset == leo + 1
                else:
                    with pytest.raises(IllegalTransitionError):
                        coord._apply(meta, new)
                    assert writer.log_end_offset == leo and meta.state is a
                    checked += 1
            assert checked == (48 if tv == 0 else 45)  # 16 (TV0) / 19 (TV2) legal pairs of 64


def test_requests_in_the_wrong_state(env):
    coord, _clock, path = env
    pid, epoch = coord.init_producer_id("tx", transaction_timeout_ms=1000)
    with pytest.raises(IllegalTransitionError):  # commit with no transaction: Empty -> PrepareCommit
        coord.end_transaction("tx", pid, epoch, commit=True)
    # TV2 lets a client abort when unsure: Empty -> PrepareAbort -> CompleteAbort, no markers, epoch bumped
    assert coord.end_transaction("tx", pid, epoch, commit=False) == (pid, epoch + 1)
    assert coord.describe("tx").state is S.CompleteAbort
    with pytest.raises(InvalidProducerIdMappingError):
        coord.add_partitions("nope", pid, epoch, [("t", 0)])
    with pytest.raises(InvalidProducerIdMappingError):
        coord.add_partitions("tx", pid + 1, epoch + 1, [("t", 0)])
    with pytest.raises(ProducerFencedError):
        coord.add_partitions("tx", pid, epoch, [("t", 0)])  # the epoch moved on
    with pytest.raises(KafkaTxError):
        coord.add_partitions("tx", pid, epoch + 1, [("__transaction_state", 0)])
    with pytest.raises(KafkaTxError):
        coord.add_partitions("tx", pid, epoch + 1, [("t", -1)])
    with pytest.raises(InvalidTransactionTimeoutError):
        coord.init_producer_id("tx", transaction_timeout_ms=0)
    with pytest.raises(InvalidTransactionTimeoutError):
        coord.init_producer_id("tx", transaction_timeout_ms=10**9)
    with pytest.raises(TransactionalIdNotFoundError):
        coord.describe("nope")
    with TransactionCoordinator(path / "tv0", transaction_version=0, clock=Clock()) as c0:
        p0, e0 = c0.init_producer_id("tx")
        with pytest.raises(IllegalTransitionError):  # TV0: no abort from Empty
            c0.end_transaction("tx", p0, e0, commit=False)


def test_end_transaction_of_a_tv0_transaction_follows_end_transaction_with_tv1(tmp_path):
    """endTransactionWithTV1 (TransactionCoordinator.scala): the same result against PrepareX is
    CONCURRENT_TRANSACTIONS, the other result INVALID_TXN_STATE; CompleteX only takes a retry of X; Empty takes
    nothing.  A transaction begun under transaction version 0 keeps those rules when a coordinator with
    version 2 loads it: its transitions are checked under its own version, so it never goes
    CompleteCommit -> PrepareAbort or Empty -> PrepareAbort."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=0, clock=clock) as coord:
        pid, e = coord.init_producer_id("tx")
        coord.add_partitions("tx", pid, e, [("t", 0)])
        coord._txns["tx"].state = S.PrepareCommit  # as if its markers were still being written
        with pytest.raises(ConcurrentTransactionsError):
            coord.end_transaction("tx", pid, e, commit=True)
        with pytest.raises(IllegalTransitionError, match="INVALID_TXN_STATE"):
            coord.end_transaction("tx", pid, e, commit=False)
        coord._txns["tx"].state = S.Ongoing
        assert coord.end_transaction("tx", pid, e, commit=True) == (pid, e)
        coord.init_producer_id("other")
    with TransactionCoordinator(tmp_path, transaction_version=2, clock=clock) as coord:
        leo = coord._state_writer(coord.state_partition_for("tx")).log_end_offset
        assert coord.describe("tx").client_transaction_version == 0
        assert coord.end_transaction("tx", pid, e, commit=True) == (pid, e)  # a retry
        with pytest.raises(IllegalTransitionError, match="INVALID_TXN_STATE"):
            coord.end_transaction("tx", pid, e, commit=False)  # CompleteCommit + ABORT
        p2, e2 = coord.describe("other").producer_id, coord.describe("other").producer_epoch
        for commit in (True, False):  # Empty takes neither from a TV0 client (EndTxn v4 and below)
            with pytest.raises(IllegalTransitionError, match="INVALID_TXN_STATE"):
                coord.end_transaction("other", p2, e2, commit=commit, transaction_version=0)
        meta = coord._txns["tx"]
        new = meta.copy()
        new.state = S.PrepareAbort
        with pytest.raises(IllegalTransitionError):  # checked under the transaction's version, not the coordinator's
            coord._apply(meta, new)
        assert coord._state_writer(coord.state_partition_for("tx")).log_end_offset == leo  # nothing written
        assert coord.describe("tx").state is S.CompleteCommit and coord.describe("other").state is S.Empty
        assert markers(tmp_path / "t-0") == [(0, "COMMIT", pid, e, 0)]


# ------------------------------------------------------------------------------------------ fencing
def test_zombie_fencing(env):
    coord, clock, path = env
    zombie = TransactionalProducer(coord, "app", clock=clock)
    pid, epoch = zombie.producer_id, zombie.producer_epoch
    assert (pid, epoch) == (0, 0)
    zombie.begin_transaction()
    zombie.send("orders", 0, [(b"k", b"zombie-1")])
    zombie.send("orders", 1, [(b"k", b"zombie-2")])
    clock.now += 5
    fresh = TransactionalProducer(coord, "app", clock=clock)  # InitProducerId: fence, abort, bump
    # the fencing epoch (epoch + 1) is the abort's, under transaction version 2 too (Kafka 4.1+, KAFKA-19367:
    # 4.0 bumped it a second time), and the retried InitProducerId gets epoch + 2
    assert (fresh.producer_id, fresh.producer_epoch) == (pid, epoch + 2)
    for p in (0, 1):
        assert markers(path / f"orders-{p}") == [(1, "ABORT", pid, epoch + 1, coord.coordinator_epoch)]
    states = [(r.value.state, r.value.producer_epoch) for r in state_records(coord, "app")]
    assert states == [
        (S.Empty, 0),
        (S.Ongoing, 0),
        (S.Ongoing, 0),
        (S.PrepareAbort, 1),
        (S.CompleteAbort, 1),
        (S.Empty, 2),
    ]  # fmt: skip  (PrepareEpochFence is never written)
    with pytest.raises(InvalidProducerEpochError):  # the zombie writes to a partition of its old transaction
        zombie.send("orders", 0, [(b"k", b"zombie-3")])
    assert zombie.state.name == "FATAL_ERROR"
    zombie2 = TransactionalProducer(coord, "other", clock=clock)
    TransactionalProducer(coord, "other", clock=clock)  # a newer instance (no transaction to abort)
    zombie2.begin_transaction()
    with pytest.raises(ProducerFencedError):  # the stale one reaches the coordinator first: AddPartitions
        zombie2.send("orders", 2, [(b"k", b"v")])
    assert not (path / "orders-2").exists() or markers(path / "orders-2") == []
    with pytest.raises(ProducerFencedError):
        coord.end_transaction("app", pid, epoch, commit=True)
    fresh.begin_transaction()
    fresh.send("orders", 0, [(b"k", b"fresh")])
    fresh.commit_transaction()
    assert committed_values(path / "orders-0") == [b"fresh"]
    assert committed_values(path / "orders-1") == []


def test_timeout_abort(env):
    coord, clock, path = env
    p = TransactionalProducer(coord, "slow", transaction_timeout_ms=1000, clock=clock)
    p.begin_transaction()
    clock.now += 10
    p.send("orders", 0, [(b"k", b"v")])
    start = coord.describe("slow").start_timestamp_ms
    assert coord.abort_timed_out(start + 1000) == []  # start + timeout is not yet past
    assert coord.abort_timed_out(start + 1001) == ["slow"]
    meta = coord.describe("slow")
    assert meta.state is S.CompleteAbort and meta.producer_epoch == p.producer_epoch + 1
    assert markers(path / "orders-0") == [(1, "ABORT", p.producer_id, p.producer_epoch + 1, 0)]
    # the zombie's EndTxn(COMMIT) with its old epoch: under transaction version 2 an epoch one below the
    # current one is a valid retry epoch, and CompleteAbort + COMMIT is INVALID_TXN_STATE
    # (TransactionCoordinator.endTransaction); under 0/1 the epoch no longer matches: PRODUCER_FENCED
    with pytest.raises(IllegalTransitionError if coord.transaction_version >= 2 else ProducerFencedError):
        p.commit_transaction()
    assert coord.abort_timed_out(start + 10**6) == []
    with open_partition(path / "orders-0") as part:
        assert part.last_stable_offset == part.log_end_offset == 2


@pytest.mark.parametrize("tv", [0, 1, 2])
def test_a_timed_out_producer_is_fenced(tmp_path, tv):
    """abort_timed_out is Kafka's abortTimedOutTransactions: prepareFenceProducerEpoch, then
    endTransaction(ABORT, isFromClient=false) with the coordinator's transaction version, at the fencing
    epoch under every version (Kafka 4.1+).  Under 0/1 the producer's old epoch is fenced; under version 2,
    as in Kafka since KAFKA-19367, its late EndTxn(ABORT) is one epoch below the current one and is answered
    as a retry of the abort (its COMMIT is INVALID_TXN_STATE), while its data at the old epoch is fenced."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=tv, clock=clock) as coord:
        pid, e = coord.init_producer_id("app", transaction_timeout_ms=1000)
        coord.add_partitions("app", pid, e, [("t", 0)])
        coord.writer("t", 0).append(stamp_producer(_one_record(), pid, e, 0, True))
        assert coord.abort_timed_out(clock.now + 5000) == ["app"]
        assert markers(tmp_path / "t-0") == [(1, "ABORT", pid, e + 1, coord.coordinator_epoch)]
        recs = [(r.value.state, r.value.producer_epoch) for r in state_records(coord, "app")]
        assert recs[-2:] == [(S.PrepareAbort, e + 1), (S.CompleteAbort, e + 1)]
        with pytest.raises(InvalidProducerEpochError):  # the partition fences its data at the old epoch
            coord.writer("t", 0).append(stamp_producer(_one_record(), pid, e, 1, True))
        if tv >= 2:
            with pytest.raises(IllegalTransitionError, match="INVALID_TXN_STATE"):
                coord.end_transaction("app", pid, e, commit=True)
            assert coord.end_transaction("app", pid, e, commit=False) == (pid, e + 1)  # a retry of the abort
        else:
            for commit in (False, True):
                with pytest.raises(ProducerFencedError):
                    coord.end_transaction("app", pid, e, commit=commit)
        assert coord.describe("app").state is S.CompleteAbort
        assert committed_values(tmp_path / "t-0") == []
        # at the last epoch but one, the fence takes the last (32767) and the next InitProducerId moves to a
        # new producer id
        p2, _e2 = coord.init_producer_id("last", transaction_timeout_ms=1000)
        coord._txns["last"].producer_epoch = 32766
        coord.add_partitions("last", p2, 32766, [("t", 1)])
        assert coord.abort_timed_out(clock.now + 10_000) == ["last"]
        assert coord.describe("last").producer_epoch == 32767
        assert coord.init_producer_id("last")[1] == 0 and coord.describe("last").previous_producer_id == p2


# ------------------------------------------------------------------------------------------ KIP-360
@pytest.mark.parametrize("tv", [0, 2])
def test_init_producer_id_with_the_epoch_held_bumps_it_and_answers_a_retry(tmp_path, tv):
    with TransactionCoordinator(tmp_path, transaction_version=tv, num_partitions=3, clock=Clock()) as coord:
        pid, e = coord.init_producer_id("tx")
        bumped = coord.init_producer_id("tx", producer_id=pid, producer_epoch=e)
        assert bumped == (pid, e + 1)
        assert coord.describe("tx").last_producer_epoch == e
        n = len(state_records(coord, "tx"))
        # the answer was lost and the request is sent again: the same epoch, no second bump (Kafka still
        # writes the Empty transition again)
        assert coord.init_producer_id("tx", producer_id=pid, producer_epoch=e) == (pid, e + 1)
        assert coord.describe("tx").producer_epoch == e + 1
        again = state_records(coord, "tx")[n:]
        assert [(r.value.state, r.value.producer_epoch) for r in again] == [(S.Empty, e + 1)]
        # the bumped epoch works
        coord.add_partitions("tx", pid, e + 1, [("t", 0)])
        coord.writer("t", 0).append(stamp_producer(_one_record(), pid, e + 1, 0, True))
        coord.end_transaction("tx", pid, e + 1, commit=True)
        assert committed_values(tmp_path / "t-0") == [b"v"]
        # an epoch that is neither current nor the last one, a producer id that is not this id's
        cur = coord.describe("tx").producer_epoch
        for bad_pid, bad_epoch in ((pid, cur + 5), (pid, e - 1 if e else cur + 7), (pid + 100, cur)):
            with pytest.raises(ProducerFencedError):
                coord.init_producer_id("tx", producer_id=bad_pid, producer_epoch=bad_epoch)
            assert coord.describe("tx").producer_epoch == cur
        # one of the two given: INVALID_REQUEST
        for kw in ({"producer_id": pid}, {"producer_epoch": cur}):
            with pytest.raises(KafkaTxError, match="INVALID_REQUEST"):
                coord.init_producer_id("tx", **kw)
        # an unknown transactional id (the producer lost its state: UNKNOWN_PRODUCER_ID) is created
        fresh_pid, fresh_epoch = coord.init_producer_id("new", producer_id=pid, producer_epoch=cur)
        assert fresh_pid != pid and fresh_epoch == 0
        # an idempotent producer (no transactional id) gets a new producer id whatever it holds
        other, epoch0 = coord.init_producer_id(None, producer_id=pid, producer_epoch=cur)
        assert epoch0 == 0 and other not in (pid, fresh_pid)


def test_init_producer_id_with_the_epoch_held_after_another_instance_started(env):
    coord, clock, path = env
    a = TransactionalProducer(coord, "app", clock=clock)
    pid, e = a.producer_id, a.producer_epoch
    b = TransactionalProducer(coord, "app", clock=clock)  # a new instance: epoch + 1, last epoch unknown
    assert (b.producer_id, b.producer_epoch) == (pid, e + 1)
    with pytest.raises(ProducerFencedError):  # a's bump must not take the epoch from b
        coord.init_producer_id("app", producer_id=pid, producer_epoch=e)
    assert coord.describe("app").producer_epoch == e + 1
    # b in a transaction, then a bump request with b's own epoch: Kafka fences and aborts the transaction
    # (CONCURRENT_TRANSACTIONS), and the retry with the epoch b held is stale: PRODUCER_FENCED
    b.begin_transaction()
    b.send("orders", 0, [(b"k", b"in-flight")])
    with pytest.raises(ProducerFencedError):
        coord.init_producer_id("app", producer_id=pid, producer_epoch=b.producer_epoch)
    assert coord.describe("app").state is S.CompleteAbort
    assert markers(path / "orders-0") == [(1, "ABORT", pid, e + 2, coord.coordinator_epoch)]
    assert committed_values(path / "orders-0") == []


def test_init_producer_id_with_the_epoch_held_at_the_last_epoch_rotates_the_producer_id(tmp_path):
    n = txn_partition_for("old", 50)
    with PartitionWriter(tmp_path / f"__transaction_state-{n}") as w:
        value = TxnMetadataValue(77, 32766, 60000, S.CompleteCommit, {}, T0, T0, client_transaction_version=2)
        w.append(encode_txn_records([("old", value)], timestamp=T0), origin="coordinator")
    with TransactionCoordinator(tmp_path, clock=Clock(T0 + 1)) as coord:
        new_pid, epoch = coord.init_producer_id("old", producer_id=77, producer_epoch=32766)
        assert new_pid != 77 and epoch == 0
        meta = coord.describe("old")
        assert (meta.previous_producer_id, meta.last_producer_epoch) == (77, 32766)
        # the retry names the old id and its exhausted epoch: answered with the new id, no second rotation
        assert coord.init_producer_id("old", producer_id=77, producer_epoch=32766) == (new_pid, 0)
        # the old id with an epoch that was not exhausted is a zombie
        with pytest.raises(ProducerFencedError):
            coord.init_producer_id("old", producer_id=77, producer_epoch=32765)
        assert coord.describe("old").producer_id == new_pid


@pytest.mark.parametrize("tv", [0, 2])
def test_transactional_producer_recovers_from_out_of_order_sequence_with_an_epoch_bump(tmp_path, tv):
    """KIP-360 end to end: a batch the partition refuses as out of order makes the transaction abortable;
    the producer aborts it, goes on with a bumped epoch (InitProducerId with the epoch held under transaction
    version 0, the EndTxn's own bump under 2), and read_committed sees only what was committed."""
    clock = Clock()
    d = tmp_path
    with TransactionCoordinator(d, transaction_version=tv, num_partitions=3, clock=clock) as coord:
        p = TransactionalProducer(coord, "app", clock=clock)
        pid, e = p.producer_id, p.producer_epoch
        p.begin_transaction()
        p.send("orders", 0, [(b"k", b"lost-with-the-abort")])
        p._sequences[("orders", 0)] += 3  # batches the partition never saw (e.g. expired in the client)
        with pytest.raises(OutOfOrderSequenceError):
            p.send("orders", 0, [(b"k", b"gap")])
        assert p.state.name == "ABORTABLE_ERROR" and p.epoch_bump_required
        with pytest.raises(IllegalTransitionError):  # no commit from an abortable error
            p.commit_transaction()
        assert p.state.name == "ABORTABLE_ERROR"
        assert p.abort_transaction() == (pid, e + 1)
        assert p.state.name == "READY" and not p.epoch_bump_required
        assert p.next_sequence("orders", 0) == 0
        states = [r.value.state for r in state_records(coord, "app")]
        assert states[-1] is (S.Empty if tv == 0 else S.CompleteAbort)
        p.begin_transaction()
        p.send("orders", 0, [(b"k", b"after-the-bump")])
        p.commit_transaction()
        assert markers(d / "orders-0")[0][1:4] == ("ABORT", pid, e if tv == 0 else e + 1)
        assert committed_values(d / "orders-0") == [b"after-the-bump"]
        # a zombie of the same id asking for a bump with its old epoch is fenced
        with pytest.raises(ProducerFencedError):
            coord.init_producer_id("app", producer_id=pid, producer_epoch=e - 1 if e else e + 50)


def test_idempotent_producer_bumps_its_epoch_itself(env):
    coord, clock, path = env
    p = IdempotentProducer(coord, clock=clock)
    pid = p.producer_id
    p.send("orders", 0, [(b"k", b"a")])
    p._sequences[("orders", 0)] += 2
    with pytest.raises(OutOfOrderSequenceError):
        p.send("orders", 0, [(b"k", b"gap")])
    assert p.bump_epoch() == (pid, 1)
    p.send("orders", 0, [(b"k", b"b")])  # epoch 1, sequence 0: accepted
    with open_partition(path / "orders-0") as part:
        got = [(b.producer_epoch, b.base_sequence) for b in part.read(format="batches")]
    assert got == [(0, 0), (1, 0)]
    p.producer_epoch = 32767  # the last epoch: a new producer id
    new_pid, epoch = p.bump_epoch()
    assert new_pid != pid and epoch == 0


# ------------------------------------------------------------------------------------------ versions
@pytest.mark.parametrize("tv", [0, 2])
def test_marker_epochs_and_state_values_by_transaction_version(tmp_path, tv):
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=tv, clock=clock) as coord:
        p = TransactionalProducer(coord, "tx", clock=clock)
        pid, e = p.producer_id, p.producer_epoch
        for round_ in range(3):
            p.begin_transaction()
            p.send("t", 0, [(b"k", b"r%d-a" % round_)])
            p.send("t", 0, [(b"k", b"r%d-b" % round_)])
            clock.now += 1
            got = p.commit_transaction() if round_ != 1 else p.abort_transaction()
            # TV2 bumps the epoch at every end; TV0 keeps it
            assert got == (pid, e + (round_ + 1 if tv == 2 else 0))
        ms = markers(tmp_path / "t-0")
        epochs = [m[3] for m in ms]
        assert [m[1] for m in ms] == ["COMMIT", "ABORT", "COMMIT"]
        assert epochs == ([e + 1, e + 2, e + 3] if tv == 2 else [e, e, e])
        data = [b for b in iter_batches(log_bytes(tmp_path / "t-0")) if not b.is_control]
        # data of a transaction carries the epoch before its marker's (TV2) / the same (TV0), sequences restart
        # at 0 with each new epoch
        assert [(b.producer_epoch, b.base_sequence) for b in data] == (
            [(e, 0), (e, 1), (e + 1, 0), (e + 1, 1), (e + 2, 0), (e + 2, 1)] if tv == 2
            else [(e, 0), (e, 1), (e, 2), (e, 3), (e, 4), (e, 5)])  # fmt: skip
        recs = state_records(coord, "tx")
        # handleInitProducerId creates a new id with TV_0; AddPartitionsToTxn and EndTxn record the client's
        assert [r.value.client_transaction_version for r in recs] == [0] + [tv] * (len(recs) - 1)
        prepare = [r.value for r in recs if r.value.state is S.PrepareCommit]
        assert [v.producer_epoch for v in prepare] == ([e + 1, e + 3] if tv == 2 else [e, e])
        # the value version on disk: 0 under TV0, 1 (flexible, tagged ClientTransactionVersion) under TV2
        d = tmp_path / f"__transaction_state-{coord.state_partition_for('tx')}"
        raw = [r.value for b in iter_batches(log_bytes(d)) for r in b.records()]
        assert {v[:2] for v in raw} == ({b"\x00\x01"} if tv == 2 else {b"\x00\x00"})
    assert committed_values(tmp_path / "t-0") == [b"r0-a", b"r0-b", b"r2-a", b"r2-b"]


def test_client_transaction_version_is_recorded_as_kafka_records_it(tmp_path):
    """handleInitProducerId creates a new id with TV_0, and InitProducerId (prepareIncrementProducerEpoch,
    prepareProducerIdRotation) carries the recorded version as it finds it; prepareAddPartitions and
    prepareAbortOrCommit record the request's.  A new id's first value therefore holds no ClientTransactionVersion
    (its tagged field left out), and the InitProducerId after a transaction the version of that transaction."""
    with TransactionCoordinator(tmp_path, transaction_version=2, clock=Clock()) as coord:
        pid, e = coord.init_producer_id("a")
        coord.add_partitions("a", pid, e, [("t", 0)])
        pid, e = coord.end_transaction("a", pid, e, commit=True)
        coord.init_producer_id("a")
        recs = state_records(coord, "a")
        assert [(r.value.state, r.value.client_transaction_version) for r in recs] == [
            (S.Empty, 0), (S.Ongoing, 2), (S.PrepareCommit, 2), (S.CompleteCommit, 2), (S.Empty, 2)]  # fmt: skip
        d = tmp_path / f"__transaction_state-{coord.state_partition_for('a')}"
        first = next(r.value for b in iter_batches(log_bytes(d)) for r in b.records())
        # version 1 value, tagged fields: PreviousProducerId (tag 0) only
        assert first[:2] == b"\x00\x01" and first[-11:-8] == b"\x01\x00\x08"


def test_the_requests_transaction_version_picks_the_end_transaction_path(tmp_path):
    """The version an AddPartitionsToTxn or EndTxn carries: named by the caller; else the one recorded for the
    transaction in progress (a client does not switch inside one, also across a reopen of the coordinator), and
    the coordinator's own for an id in Empty."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=2, clock=clock) as coord:
        pid, e = coord.init_producer_id("old-client")
        coord.add_partitions("old-client", pid, e, [("t", 0)], transaction_version=0)
        assert coord.end_transaction("old-client", pid, e, commit=True) == (pid, e)  # its TV0 transaction: no bump
        assert {r.value.client_transaction_version for r in state_records(coord, "old-client")} == {0}
        pid_b, e_b = coord.init_producer_id("b")
        coord.add_partitions("b", pid_b, e_b, [("t", 1)])
        with pytest.raises(ValueError, match="transaction_version"):
            coord.end_transaction("b", pid_b, e_b, commit=True, transaction_version=3)
        pid_c, e_c = coord.init_producer_id("c")
    with TransactionCoordinator(tmp_path, transaction_version=0, clock=clock) as coord:
        assert coord.end_transaction("b", pid_b, e_b, commit=True) == (pid_b, e_b + 1)  # TV2 inside its transaction
        with pytest.raises(IllegalTransitionError, match="INVALID_TXN_STATE"):
            coord.end_transaction("c", pid_c, e_c, commit=False)  # Empty: the coordinator's version 0
        # a TV2 client aborting a transaction with nothing in it (KIP-890): the epoch is bumped
        assert coord.end_transaction("c", pid_c, e_c, commit=False, transaction_version=2) == (pid_c, e_c + 1)


def test_value_version_is_the_coordinators_and_fences_use_its_transaction_version(tmp_path):
    """TransactionLog.valueToBytes writes the coordinator's transactionLogValueVersion (0 under
    transaction.version 0, 1 above), whatever version the transaction's client uses; a fencing abort
    (isFromClient=false) runs under the coordinator's version and records it as the ClientTransactionVersion."""

    def raw_values(coord, tid):
        d = tmp_path / f"__transaction_state-{coord.state_partition_for(tid)}"
        return [r.value for b in iter_batches(log_bytes(d)) for r in b.records() if r.key.endswith(tid.encode())]

    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=0, clock=clock) as coord:
        pid, e = coord.init_producer_id("a")
        pid_b, e_b = coord.init_producer_id("b", transaction_timeout_ms=1000)
        coord.add_partitions("b", pid_b, e_b, [("t", 1)])
        assert {v[:2] for v in raw_values(coord, "a") + raw_values(coord, "b")} == {b"\x00\x00"}
    with TransactionCoordinator(tmp_path, transaction_version=2, clock=clock) as coord:
        n = len(raw_values(coord, "a"))
        coord.add_partitions("a", pid, e, [("t", 0)], transaction_version=0)  # a TV0 client goes on under its own
        assert coord.end_transaction("a", pid, e, commit=True, transaction_version=0) == (pid, e)  # no bump: TV0
        new = raw_values(coord, "a")[n:]
        assert len(new) == 3 and {v[:2] for v in new} == {b"\x00\x01"}  # but the values are version 1
        assert {r.value.client_transaction_version for r in state_records(coord, "a")[n:]} == {0}
        # the TV0 transaction of "b" times out: fenced and aborted under the coordinator's version 2, at the
        # fencing epoch
        assert coord.abort_timed_out(clock.now + 5000) == ["b"]
        assert markers(tmp_path / "t-1") == [(0, "ABORT", pid_b, e_b + 1, coord.coordinator_epoch)]
        last = state_records(coord, "b")[-2:]
        assert [(r.value.state, r.value.producer_epoch, r.value.client_transaction_version) for r in last] == [
            (S.PrepareAbort, e_b + 1, 2), (S.CompleteAbort, e_b + 1, 2)]  # fmt: skip
        pid_c, e_c = coord.init_producer_id("c", transaction_timeout_ms=1000)
        coord.add_partitions("c", pid_c, e_c, [("t", 2)])
    with TransactionCoordinator(tmp_path, transaction_version=0, clock=clock) as coord:
        # a TV2 transaction timed out by a version 0 coordinator: the same fencing epoch, recorded as version 0
        n = len(raw_values(coord, "c"))
        assert coord.abort_timed_out(clock.now + 10_000) == ["c"]
        assert markers(tmp_path / "t-2") == [(0, "ABORT", pid_c, e_c + 1, coord.coordinator_epoch)]
        assert [(r.value.state, r.value.client_transaction_version) for r in state_records(coord, "c")[n:]] == [
            (S.PrepareAbort, 0), (S.CompleteAbort, 0)]  # fmt: skip
        assert {v[:2] for v in raw_values(coord, "c")[n:]} == {b"\x00\x00"}


def test_epoch_exhaustion_rotates_the_producer_id(tmp_path):
    # a state log whose transactional id is at epoch 32765
    n = txn_partition_for("old", 50)
    with PartitionWriter(tmp_path / f"__transaction_state-{n}") as w:
        value = TxnMetadataValue(77, 32765, 60000, S.CompleteCommit, {}, T0, T0, client_transaction_version=2)
        w.append(encode_txn_records([("old", value)], timestamp=T0), origin="coordinator")
    clock = Clock(T0 + 1)
    with TransactionCoordinator(tmp_path, clock=clock) as coord:
        assert coord.describe("old").producer_epoch == 32765
        assert coord.init_producer_id("old") == (77, 32766)  # the last usable epoch
        pid2, e2 = coord.init_producer_id("old")  # exhausted: a new producer id
        assert (pid2, e2) == (78, 0) and coord.describe("old").previous_producer_id == 77
        # TV2 at the last epoch: the end bumps to 32767 for the markers and rotates the id on completion
        coord._txns["old"].producer_epoch = 32766
        coord._txns["old"].state = S.Empty
        coord.add_partitions("old", pid2, 32766, [("t", 0)])
        w = coord.writer("t", 0)
        w.append(stamp_producer(_one_record(), pid2, 32766, 0, True))
        assert coord.end_transaction("old", pid2, 32766, commit=True) == (79, 0)
        assert markers(tmp_path / "t-0") == [(1, "COMMIT", pid2, 32767, coord.coordinator_epoch)]
        meta = coord.describe("old")
        assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (79, 0, 78)
        # a retry of that EndTxn with the old producer id is answered with the new one
        assert coord.end_transaction("old", pid2, 32766, commit=True) == (79, 0)


def _one_record():
    from kafkatx import BatchBuilder

    b = BatchBuilder()
    b.append(b"v", b"k", timestamp=T0)
    return b.build()


# ------------------------------------------------------------------------------------------ previous / next producer id
def ids_written(coord, tid, since=0):
    """(state, producer id, previous producer id, next producer id) of each value written for ``tid`` (None
    for a tombstone)."""
    return [None if r.value is None else
            (r.value.state, r.value.producer_id, r.value.previous_producer_id, r.value.next_producer_id)
            for r in state_records(coord, tid)[since:]]  # fmt: skip


def ids_held(coord, tid):
    m = coord.describe(tid)
    return m.state, m.producer_id, m.previous_producer_id, m.next_producer_id


def _state_log_with(tmp_path, tid, value):
    with PartitionWriter(tmp_path / f"__transaction_state-{txn_partition_for(tid, 50)}") as w:
        w.append(encode_txn_records([(tid, value)], timestamp=T0), origin="coordinator")


@pytest.mark.parametrize("tv", [1, 2])
def test_every_transition_records_the_producer_id_it_leaves(tmp_path, tv):
    """TransactionMetadata.prepareTransitionTo (Kafka 4.1+): every transition's prevProducerId is the producer
    id held before it -- the new id's first InitProducerId (prepareIncrementProducerEpoch), a new instance's
    epoch bump, AddPartitions, PrepareCommit/PrepareAbort (endTransactionWithTV1 or a TV2 EndTxn, an empty TV2
    abort, a fencing abort) and prepareComplete -- and TransactionLog.valueToBytes writes it (and
    nextProducerId, -1 throughout here) into every version 1 value (KAFKA-20310).  A reload reads both back;
    the expiry is a tombstone (prepareDead is never written)."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=tv, num_partitions=3, clock=clock) as coord:
        pid, e = coord.init_producer_id("tx", transaction_timeout_ms=1000)
        assert ids_held(coord, "tx") == (S.Empty, pid, pid, -1)
        pid, e = coord.init_producer_id("tx", transaction_timeout_ms=1000)  # a new instance
        coord.add_partitions("tx", pid, e, [("t", 0)])
        coord.add_partitions("tx", pid, e, [("t", 1)])
        assert ids_held(coord, "tx") == (S.Ongoing, pid, pid, -1)
        pid, e = coord.end_transaction("tx", pid, e, commit=True)
        if tv >= 2:
            pid, e = coord.end_transaction("tx", pid, e, commit=False)  # TV2: an abort with nothing in it
        coord.add_partitions("tx", pid, e, [("t", 0)])
        timed_out = coord.abort_timed_out(clock.now + 5000)  # PrepareEpochFence (never written), then the abort
        expected = ([(S.Empty, pid, pid, -1)] * 2 + [(S.Ongoing, pid, pid, -1)] * 2
                    + [(S.PrepareCommit, pid, pid, -1), (S.CompleteCommit, pid, pid, -1)]
                    + [(S.PrepareAbort, pid, pid, -1), (S.CompleteAbort, pid, pid, -1)] * (tv >= 2)
                    + [(S.Ongoing, pid, pid, -1), (S.PrepareAbort, pid, pid, -1), (S.CompleteAbort, pid, pid, -1)])  # fmt: skip
        got = timed_out, ids_held(coord, "tx"), ids_written(coord, "tx")
        assert got == (["tx"], (S.CompleteAbort, pid, pid, -1), expected)
    with TransactionCoordinator(tmp_path, transaction_version=tv, num_partitions=3, clock=clock) as coord:
        assert ids_held(coord, "tx") == (S.CompleteAbort, pid, pid, -1)  # TransactionLog.read
        expired = coord.expire_transactional_ids(clock.now + 10, expiration_ms=0)
        assert (expired, ids_written(coord, "tx", len(expected) - 1)) == (["tx"], [(S.CompleteAbort, pid, pid, -1),
                                                                                    None])  # fmt: skip


def test_previous_producer_id_is_written_by_the_value_version_not_the_clients(tmp_path):
    """Under transaction.version 0 (value version 0) the ids are held in memory but never written; a
    coordinator with version 2 writes them (value version 1) for a transaction whose client uses version 0."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=0, clock=clock) as coord:
        pid, e = coord.init_producer_id("a")
        coord.add_partitions("a", pid, e, [("t", 0)])
        assert (ids_held(coord, "a"), ids_written(coord, "a")) == (
            (S.Ongoing, pid, pid, -1), [(S.Empty, pid, -1, -1), (S.Ongoing, pid, -1, -1)])  # fmt: skip
    with TransactionCoordinator(tmp_path, transaction_version=2, clock=clock) as coord:
        done = coord.end_transaction("a", pid, e, commit=True)  # endTransactionWithTV1
        client_versions = {r.value.client_transaction_version for r in state_records(coord, "a")}
        assert (done, client_versions, ids_written(coord, "a", 2)) == (
            (pid, e), {0}, [(S.PrepareCommit, pid, pid, -1), (S.CompleteCommit, pid, pid, -1)])  # fmt: skip


def test_previous_producer_id_after_a_rotation_at_init_producer_id(tmp_path):
    """prepareProducerIdRotation records the old id; the retry of that InitProducerId (prepareIncrementProducerEpoch
    with the last epoch) records the new one, so a second retry naming the old id is fenced (isValidProducerId)."""
    _state_log_with(tmp_path, "old", TxnMetadataValue(77, 32766, 60000, S.CompleteCommit, {}, T0, T0,
                                                      client_transaction_version=2))  # fmt: skip
    with TransactionCoordinator(tmp_path, clock=Clock(T0 + 1)) as coord:
        new_pid, epoch = coord.init_producer_id("old", producer_id=77, producer_epoch=32766)
        retried = coord.init_producer_id("old", producer_id=77, producer_epoch=32766)  # answered, not bumped
        assert (retried, ids_held(coord, "old"), ids_written(coord, "old", 1)) == ((new_pid, epoch), (
            S.Empty, new_pid, new_pid, -1), [(S.Empty, new_pid, 77, -1), (S.Empty, new_pid, new_pid, -1)])  # fmt: skip
        with pytest.raises(ProducerFencedError):
            coord.init_producer_id("old", producer_id=77, producer_epoch=32766)


def test_next_producer_id_through_a_rotation_at_completion(tmp_path):
    """TV2 at the last epoch: prepareAbortOrCommit takes the next producer id, prepareComplete moves to it and
    records the old id as the previous one; once another transition has recorded the new id, a late EndTxn
    naming the old id is no longer a retry (INVALID_PRODUCER_ID_MAPPING)."""
    _state_log_with(tmp_path, "old", TxnMetadataValue(77, 32765, 60000, S.CompleteCommit, {}, T0, T0,
                                                      client_transaction_version=2))  # fmt: skip
    with TransactionCoordinator(tmp_path, clock=Clock(T0 + 1)) as coord:
        begun = coord.init_producer_id("old")
        coord.add_partitions("old", 77, 32766, [("t", 0)])
        done = coord.end_transaction("old", 77, 32766, commit=True)
        assert (begun, done, ids_held(coord, "old"), ids_written(coord, "old", 1)) == (
            (77, 32766), (78, 0), (S.CompleteCommit, 78, 77, -1), [
                (S.Empty, 77, 77, -1), (S.Ongoing, 77, 77, -1), (S.PrepareCommit, 77, 77, 78),
                (S.CompleteCommit, 78, 77, -1)])  # fmt: skip
        coord.add_partitions("old", 78, 0, [("t", 0)])
        with pytest.raises(InvalidProducerIdMappingError):
            coord.end_transaction("old", 77, 32766, commit=True)


@pytest.mark.parametrize("tv", [1, 2])
def test_next_producer_id_is_carried_until_an_end_transaction_sets_it(tmp_path, tv):
    """prepareIncrementProducerEpoch and prepareAddPartitions carry nextProducerId as they find it;
    prepareAbortOrCommit replaces it with its caller's (-1 below the last epoch), so the completion does not
    move to a stale id."""
    _state_log_with(tmp_path, "x", TxnMetadataValue(77, 5, 60000, S.CompleteCommit, {}, T0, T0, next_producer_id=500,
                                                    client_transaction_version=tv))  # fmt: skip
    with TransactionCoordinator(tmp_path, transaction_version=tv, clock=Clock(T0 + 1)) as coord:
        pid, e = coord.init_producer_id("x")
        coord.add_partitions("x", pid, e, [("t", 0)])
        done = coord.end_transaction("x", pid, e, commit=True)
        assert (done, ids_written(coord, "x", 1)) == ((77, 6 + (tv >= 2)), [
            (S.Empty, 77, 77, 500), (S.Ongoing, 77, 77, 500), (S.PrepareCommit, 77, 77, -1),
            (S.CompleteCommit, 77, 77, -1)])  # fmt: skip


@pytest.mark.parametrize("tv", [1, 2])
def test_a_fencing_abort_at_the_last_epoch_sets_no_next_producer_id(tmp_path, tv):
    """A fencing abort passes no next producer id to prepareAbortOrCommit (TransactionCoordinator.endTransaction's
    !isEpochFence guard; KAFKA-20090 drops it on trunk, not followed here): the fence takes epoch 32767 and the
    next InitProducerId rotates the id (prepareProducerIdRotation), recording the old one."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, transaction_version=tv, clock=clock) as coord:
        pid, _ = coord.init_producer_id("last", transaction_timeout_ms=1000)
        coord._txns["last"].producer_epoch = 32766
        coord.add_partitions("last", pid, 32766, [("t", 0)])
        n = len(state_records(coord, "last"))
        timed_out = coord.abort_timed_out(clock.now + 5000)
        new_pid, epoch = coord.init_producer_id("last")
        assert (timed_out, new_pid != pid, epoch, ids_written(coord, "last", n)) == (["last"], True, 0, [
            (S.PrepareAbort, pid, pid, -1), (S.CompleteAbort, pid, pid, -1), (S.Empty, new_pid, pid, -1)])  # fmt: skip


# ------------------------------------------------------------------------------------------ reload
def test_reload_from_the_state_log(tmp_path):
    clock = Clock()
    coord = TransactionCoordinator(tmp_path, clock=clock, num_partitions=7)
    c = TransactionalProducer(coord, "c", clock=clock)
    clock.now += 10**6
    a = TransactionalProducer(coord, "a", clock=clock)
    b = TransactionalProducer(coord, "b", transaction_timeout_ms=5000, clock=clock)
    idem = IdempotentProducer(coord, clock=clock)
    idem.send("t", 1, [(b"k", b"idem")])
    for p in (a, b):
        p.begin_transaction()
        p.send("t", 0, [(b"k", p.transactional_id.encode())])
    a.commit_transaction()
    clock.now += 10
    assert coord.expire_transactional_ids(clock.now, expiration_ms=10**6 // 2) == ["c"]  # idle c: a tombstone
    before = {tid: coord.describe(tid) for tid in coord.transactional_ids()}
    assert sorted(before) == ["a", "b"] and before["b"].state is S.Ongoing
    assert coord.coordinator_epoch == 0
    coord.close()
    reopened = TransactionCoordinator(tmp_path, clock=clock, num_partitions=7)
    try:
        assert reopened.coordinator_epoch == 1  # a new leader epoch for the state partitions
        assert sorted(reopened.transactional_ids()) == ["a", "b"]
        for tid, meta in before.items():
            got = reopened.describe(tid)
            meta.last_producer_epoch = got.last_producer_epoch = -1  # not persisted, as in Kafka
            assert got == meta
        # new producer ids do not collide with any seen before (including the idempotent producer's)
        assert reopened.init_producer_id(None)[0] > max(a.producer_id, b.producer_id, c.producer_id, idem.producer_id)
        # the open transaction survived and times out like any other
        assert reopened.abort_timed_out(clock.now + 10**6) == ["b"]
        ms = markers(tmp_path / "t-0")
        assert ms[-1][1:] == ("ABORT", b.producer_id, b.producer_epoch + 1, 1)
        # a marker of the previous coordinator (epoch 0) is now fenced by the partition
        with pytest.raises(TransactionCoordinatorFencedError):
            reopened.writer("t", 0).append_marker("abort", producer_id=b.producer_id,
                                                  producer_epoch=b.producer_epoch + 1, coordinator_epoch=0)  # fmt: skip
    finally:
        reopened.close()
    used = [int(n.rsplit("-", 1)[1]) for n in os.listdir(tmp_path) if n.startswith("__transaction_state-")]
    with pytest.raises(KafkaTxError):
        TransactionCoordinator(tmp_path, num_partitions=max(used))  # ids would map to other partitions


def test_producer_ids_are_never_handed_out_twice(tmp_path):
    """ProducerIdManager: ids come from blocks of 1000 reserved durably before the first is used, so a
    coordinator restarted after a crash -- idempotent producers are never in __transaction_state, and no
    snapshot exists before a roll or a close -- starts after the reserved block, and a new producer's first
    batch is not taken as a duplicate of an old producer's."""
    import json

    from kafkatx.txncoord import PRODUCER_ID_BLOCK_FILE

    clock = Clock()
    coord = TransactionCoordinator(tmp_path, clock=clock)
    first = IdempotentProducer(coord, clock=clock)
    assert first.producer_id == 0
    block = json.loads((tmp_path / PRODUCER_ID_BLOCK_FILE).read_text())
    assert block == {"version": 1, "block_start": 0, "block_end": 999}
    assert first.send("t", 0, [(b"k", b"order-1")]).first_offset == 0
    coord.writer("t", 0).flush()  # durable and acknowledged; then the process dies (no close, no snapshot)
    assert not [f for f in os.listdir(tmp_path / "t-0") if f.endswith(".snapshot")]
    again = TransactionCoordinator(tmp_path, clock=clock)
    try:
        second = IdempotentProducer(again, clock=clock)
        assert second.producer_id == 1000  # the rest of the crashed coordinator's block is skipped
        info = second.send("t", 0, [(b"k", b"order-2")])
        assert not info.duplicate and info.first_offset == 1
    finally:
        again.close()
    assert committed_values(tmp_path / "t-0") == [b"order-1", b"order-2"]
    # data partitions kept elsewhere (writers=) are not scanned: the block file alone keeps the ids apart
    elsewhere = tmp_path / "data"

    def factory(topic, p):
        return PartitionWriter(elsewhere / f"{topic}-{p}", clock=clock)

    coord = TransactionCoordinator(tmp_path / "coord", clock=clock, writers=factory)
    pids = [coord.init_producer_id(None)[0] for _ in range(1001)]  # a second block is reserved at the 1001st
    assert pids == list(range(1001))
    assert json.loads((tmp_path / "coord" / PRODUCER_ID_BLOCK_FILE).read_text())["block_start"] == 1000
    coord.writer("t", 0).append(stamp_producer(_one_record(), 1000, 0, 0, False))
    again = TransactionCoordinator(tmp_path / "coord", clock=clock, writers=factory)
    assert again.init_producer_id(None) == (2000, 0)
    # an unreadable block file is an error, not a reason to start again from 0
    for bad in (b"", b"{", b'{"version": 1, "block_start": 5}', b'{"version": 2, "block_start": 0, "block_end": 9}'):
        (tmp_path / "coord" / PRODUCER_ID_BLOCK_FILE).write_bytes(bad)
        with pytest.raises(KafkaTxError, match=PRODUCER_ID_BLOCK_FILE):
            TransactionCoordinator(tmp_path / "coord", clock=clock, writers=factory)
    # a log dir written before the block file: the ids in its state log and snapshots still count
    with PartitionWriter(tmp_path / "old" / "t-0", clock=clock) as w:
        w.append(stamp_producer(_one_record(), 500, 0, 0, False))
    assert TransactionCoordinator(tmp_path / "old", clock=clock).init_producer_id(None) == (501, 0)


def _open_files_under(path) -> list:
    """The files under ``path`` this process holds open (Linux's /proc/self/fd)."""
    root = os.path.realpath(path) + os.sep
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.startswith(root):
            out.append(target)
    return sorted(out)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="lists open files with Linux's /proc/self/fd")
def test_a_coordinator_that_fails_to_open_leaves_no_file_open(tmp_path):
    """The state log's writers opened before a later step of the constructor fails (here the producer id
    block file, read after them) are closed before the error propagates, not left to the garbage collector
    while the exception and its traceback are alive."""
    from kafkatx.txncoord import PRODUCER_ID_BLOCK_FILE

    clock = Clock()
    with TransactionCoordinator(tmp_path, num_partitions=3, clock=clock) as coord:
        p = TransactionalProducer(coord, "tx", clock=clock)
        p.begin_transaction()
        p.send("t", 0, [(b"k", b"v")])
        p.commit_transaction()
    assert any(n.startswith("__transaction_state-") for n in os.listdir(tmp_path))
    assert _open_files_under(tmp_path) == []
    (tmp_path / PRODUCER_ID_BLOCK_FILE).write_bytes(b"{")
    with pytest.raises(KafkaTxError, match=PRODUCER_ID_BLOCK_FILE) as caught:
        TransactionCoordinator(tmp_path, num_partitions=3, clock=clock)
    assert caught.value.__traceback__ is not None  # the frames (and the coordinator in them) are still alive
    assert _open_files_under(tmp_path) == []


def test_reload_completes_a_transaction_a_crash_left_prepared(tmp_path, monkeypatch):
    clock = Clock()
    coord = TransactionCoordinator(tmp_path, clock=clock)
    p = TransactionalProducer(coord, "tx", clock=clock)
    p.begin_transaction()
    p.send("t", 0, [(b"k", b"v0")])
    p.send("t", 1, [(b"k", b"v1")])
    calls = []

    def crash(self, *args, **kwargs):
        calls.append(self.path)
        if len(calls) == 2:
            raise OSError("disk gone")  # the second partition's marker never gets written
        return real(self, *args, **kwargs)

    real = PartitionWriter.append_marker
    monkeypatch.setattr(PartitionWriter, "append_marker", crash)
    with pytest.raises(OSError):
        p.commit_transaction()
    monkeypatch.setattr(PartitionWriter, "append_marker", real)
    assert coord.describe("tx").state is S.PrepareCommit
    coord.close()
    with TransactionCoordinator(tmp_path, clock=clock) as again:
        meta = again.describe("tx")
        assert meta.state is S.CompleteCommit and meta.partitions == set()
        assert [m[1:] for m in markers(tmp_path / "t-0")] == [("COMMIT", 0, 1, 0), ("COMMIT", 0, 1, 1)]  # resent
        assert [m[1:] for m in markers(tmp_path / "t-1")] == [("COMMIT", 0, 1, 1)]
    assert committed_values(tmp_path / "t-0") == [b"v0"] and committed_values(tmp_path / "t-1") == [b"v1"]


def test_concurrent_transactions_and_metadata_round_trip(env):
    coord, clock, _path = env
    pid, epoch = coord.init_producer_id("x")
    coord.add_partitions("x", pid, epoch, [("t", 0), ("t", 1)])
    coord._txns["x"].state = S.PrepareCommit  # as if markers were still being written
    with pytest.raises(ConcurrentTransactionsError):
        coord.init_producer_id("x")
    with pytest.raises(ConcurrentTransactionsError):
        coord.add_partitions("x", pid, epoch, [("t", 2)])
    meta = coord.describe("x")
    assert TransactionMetadata.from_value("x", meta.to_value()).partitions == {("t", 0), ("t", 1)}


def test_producer_helpers(env):
    coord, clock, path = env
    idem = IdempotentProducer(coord, clock=clock)
    first = idem.send("t", 0, [(b"k1", b"a"), (b"k2", b"b", T0 + 7)])
    assert (first.first_offset, first.last_offset) == (0, 1)
    again = idem.resend_last("t", 0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 1)
    assert idem.next_sequence("t", 0) == 2
    with pytest.raises(KafkaTxError):
        idem.resend_last("t", 9)
    with pytest.raises(KafkaTxError):
        idem.send("t", 0, [])
    with pytest.raises(KafkaTxError):
        stamp_producer(b"\x00" * 70, 1, 0, 0, False)
    tp = TransactionalProducer(coord, "h", clock=clock)
    with pytest.raises(KafkaTxError):  # no transaction begun
        tp.send("t", 0, [(b"k", b"v")])
    with pytest.raises(IllegalTransitionError):  # the client's own table: commit before begin
        tp.commit_transaction()
