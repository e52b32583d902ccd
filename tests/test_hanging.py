"""kafkatx.log.audit: hanging transactions found from the files of a log directory (KIP-664's find-hanging),
and Partition.producer_state (what DescribeProducers reports) from snapshots plus the log after them."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from _txn_helpers import Clock
from kafkatx import BatchBuilder
from kafkatx.log import find_hanging_transactions, open_log_dir, open_partition, transaction_states
from kafkatx.log.audit import DEFAULT_MAX_TRANSACTION_TIMEOUT_MS
from kafkatx.producer_state import rebuild_from_log
from kafkatx.txncoord import TransactionalProducer, TransactionCoordinator, stamp_producer
from kafkatx.txnlog import TransactionState

T0 = 1_700_000_000_000
MIN = 60_000


def _batch(ts, value=b"v"):
    b = BatchBuilder()
    b.append(value, b"k", timestamp=ts)
    return b.build()


@pytest.fixture
def log_dir(tmp_path):
    """orders-0..3 with: an Ongoing transaction the coordinator knows (not hanging), a producer that wrote to
    a partition it never added before committing (hanging: the marker went only to the added one), one that
    did the same and is still Ongoing (hanging), a transactional write from a producer id no transactional
    id has (hanging), and the same from a recent one (not old enough to be a candidate)."""
    clock = Clock()
    with TransactionCoordinator(tmp_path, clock=clock, num_partitions=3, writer_options={"segment_bytes": 400}) as c:
        good = TransactionalProducer(c, "good", clock=clock)
        good.begin_transaction()
        good.send("orders", 0, [(b"k", b"good")])

        sneaky = TransactionalProducer(c, "sneaky", clock=clock)
        sneaky.begin_transaction()
        sneaky.send("orders", 0, [(b"k", b"added")])
        c.writer("orders", 1).append(stamp_producer(_batch(clock()), sneaky.producer_id, sneaky.producer_epoch,
                                                    0, True))  # fmt: skip
        sneaky.commit_transaction()

        stuck = TransactionalProducer(c, "stuck", clock=clock)
        stuck.begin_transaction()
        stuck.send("orders", 0, [(b"k", b"stuck-added")])
        c.writer("orders", 2).append(stamp_producer(_batch(clock()), stuck.producer_id, stuck.producer_epoch,
                                                    0, True))  # fmt: skip

        c.writer("orders", 3).append(stamp_producer(_batch(clock()), 999, 0, 0, True))
        for i in range(30):  # later plain writes: several segments, snapshots at every roll
            c.writer("orders", 3).append(_batch(clock() + i, b"plain-%d" % i))
        clock.now = T0 + 20 * MIN
        c.writer("orders", 3).append(stamp_producer(_batch(clock()), 998, 0, 0, True))
        ids = {"good": good.producer_id, "sneaky": sneaky.producer_id, "stuck": stuck.producer_id}
    return tmp_path, ids


def test_hanging_transactions_are_the_ones_no_coordinator_will_end(log_dir):
    path, ids = log_dir
    found = find_hanging_transactions(path)
    got = {(h.topic, h.partition, h.producer_id): h for h in found}
    assert set(got) == {("orders", 1, ids["sneaky"]), ("orders", 2, ids["stuck"]), ("orders", 3, 999)}
    sneaky = got[("orders", 1, ids["sneaky"])]
    assert sneaky.transactional_id == "sneaky"  # its producer id is still the id's (TV2 bumped only the epoch)
    assert sneaky.reason == "transactional id 'sneaky' is CompleteCommit: no marker will come"
    assert (sneaky.producer_epoch, sneaky.coordinator_epoch) == (0, -1)  # no marker ever reached orders-1
    stuck = got[("orders", 2, ids["stuck"])]
    assert stuck.transactional_id == "stuck" and "Ongoing without orders-2" in stuck.reason
    orphan = got[("orders", 3, 999)]
    assert orphan.transactional_id is None and orphan.reason == "no transactional id has producer id 999"
    assert orphan.duration_ms == 20 * MIN and orphan.last_timestamp == T0
    assert all(h.start_offset >= 0 for h in found)
    with open_partition(path / "orders-3") as p:
        assert orphan.start_offset == p.open_transactions[999] == 0
        assert p.last_stable_offset == 0  # what a hanging transaction does to read_committed consumers
    # judged later, the recent orphan is old enough too; judged with a long timeout, nothing is
    later = find_hanging_transactions(path, now_ms=T0 + 60 * MIN)
    assert {(h.topic, h.partition, h.producer_id) for h in later} == set(got) | {("orders", 3, 998)}
    assert find_hanging_transactions(path, max_transaction_timeout_ms=60 * MIN) == []
    with pytest.raises(ValueError):
        find_hanging_transactions(path, max_transaction_timeout_ms=-1)


def test_transaction_states_are_the_coordinators(log_dir):
    path, ids = log_dir
    states = transaction_states(path)
    assert {tid: (v.producer_id, v.state) for tid, v in states.items()} == {
        "good": (ids["good"], TransactionState.Ongoing),
        "sneaky": (ids["sneaky"], TransactionState.CompleteCommit),
        "stuck": (ids["stuck"], TransactionState.Ongoing),
    }
    assert states["stuck"].partitions == {"orders": [0]}


def test_producer_state_from_the_newest_snapshot_equals_a_full_replay(log_dir):
    path, _ids = log_dir
    with open_log_dir(path) as d:
        for (topic, _n), part in d.items():
            if topic == "__transaction_state":
                continue
            data = b"".join(pathlib.Path(s.log_path).read_bytes() for s in part.segments)
            full, _aborted = rebuild_from_log(data)
            assert part.producer_state().snapshot_entries() == full.snapshot_entries()
    # without the snapshot taken at close (a crash), with the newest one damaged, without any: the same state
    d = path / "orders-3"
    snaps = sorted(f for f in os.listdir(d) if f.endswith(".snapshot"))
    assert len(snaps) >= 3
    data = b"".join((d / f).read_bytes() for f in sorted(os.listdir(d)) if f.endswith(".log"))
    expected = rebuild_from_log(data)[0].snapshot_entries()
    (d / snaps[-1]).unlink()  # the newest left is a roll snapshot, with batches after it
    with open_partition(d) as p:
        assert p.producer_state().snapshot_entries() == expected
    raw = bytearray((d / snaps[-2]).read_bytes())
    raw[-1] ^= 0xFF
    (d / snaps[-2]).write_bytes(bytes(raw))  # damaged: an older snapshot is used
    with open_partition(d) as p:
        assert p.producer_state().snapshot_entries() == expected
    for f in snaps[:-1]:
        (d / f).unlink()
    with open_partition(d) as p:
        assert p.producer_state().snapshot_entries() == expected


def test_a_generated_directory_has_no_hanging_transaction(tmp_path):
    """The generator leaves transactions open at the end; their coordinator knows them (Ongoing, with
    these partitions), so however late they are judged none is hanging."""
    from kafkatx.log.generate import generate

    m = generate(tmp_path, topics=("orders",), partitions=2, records=3000, producers=3, abort_ratio=0.2,
                 zombie_ratio=0.1, open_transactions=2, seed=5, workers=0)  # fmt: skip
    assert m.transactions.get("open", 0) >= 1
    with open_log_dir(tmp_path) as d:
        assert any(p.open_transactions for (t, _n), p in d.items() if t == "orders")
    assert find_hanging_transactions(tmp_path, max_transaction_timeout_ms=0, now_ms=T0 * 10) == []


def test_cli_hanging(log_dir):
    path, ids = log_dir
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "kafkatx", "hanging", str(path)], capture_output=True, text=True,
                         env=env, check=True).stdout.splitlines()  # fmt: skip
    assert out[0].split()[:8] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                  "StartOffset", "LastTimestamp", "Duration(min)"]  # fmt: skip
    rows = [line.split()[:3] for line in out[1:]]
    assert sorted(rows) == sorted([["orders", "1", str(ids["sneaky"])], ["orders", "2", str(ids["stuck"])],
                                   ["orders", "3", "999"]])  # fmt: skip
    quiet = subprocess.run([sys.executable, "-m", "kafkatx", "hanging", str(path), "--max-transaction-timeout", "600"],
                           capture_output=True, text=True, env=env, check=True).stdout.splitlines()  # fmt: skip
    assert len(quiet) == 1
    assert DEFAULT_MAX_TRANSACTION_TIMEOUT_MS == 15 * MIN
