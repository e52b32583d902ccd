"""Audits of a broker log directory that need no running broker.

:func:`find_hanging_transactions` does what ``kafka-transactions.sh find-hanging`` (KIP-664) does against
a cluster, on the files alone: a *hanging* transaction is one a partition's producer state holds open
(its data is in the log, no COMMIT/ABORT marker after it) that the transaction coordinator will never
end -- no transactional id has its producer id any more, or the id's transaction is not one that still
has this partition to write a marker to.  Such a transaction holds the partition's last stable offset
back forever: read_committed consumers stop at its first offset.  Typical causes are a producer that
wrote to a partition it never added to its transaction (what KIP-890 verification now refuses), and a
marker lost to a bug or a botched restore.

The tool's steps, each from the log directory instead of an admin request:

* DescribeProducers: :meth:`kafkatx.log.Partition.producer_state` of every partition (the newest producer
  snapshot plus the batches after it), keeping producers with an open transaction whose last write is
  more than ``max_transaction_timeout_ms`` (15 minutes, the tool's default) before ``now_ms``;
* ListTransactions filtered by producer id, and DescribeTransactions: the ``__transaction_state-N``
  partitions of the same directory, decoded (the last value of each transactional id; a tombstone
  removes it), matched on the value's current producer id;
* a candidate is hanging unless its transactional id is Ongoing, PrepareCommit or PrepareAbort with the
  candidate's partition among the transaction's partitions.

``now_ms`` defaults to the newest time the directory recorded (the last write of any producer, or the last
state change of any transactional id): a copy of a broker's directory is judged as of when it was taken.
Pass the wall clock to judge a live broker's directory as the tool would.  The coordinator state must be in
the same directory (a broker log dir holds the ``__transaction_state`` partitions its broker leads; the
transactional id of a producer whose coordinator lives elsewhere is not found, so its open transactions
are reported with ``transactional_id=None``).
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from ..txnlog import TransactionState, UnknownKey, decode_txn_records

__all__ = ["HangingTransaction", "find_hanging_transactions", "transaction_states", "DEFAULT_MAX_TRANSACTION_TIMEOUT_MS"]

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 15 * 60_000  # find-hanging --max-transaction-timeout (15 minutes)
TXN_STATE_TOPIC = "__transaction_state"
_PENDING = (TransactionState.Ongoing, TransactionState.PrepareCommit, TransactionState.PrepareAbort)

_PARTITION_DIR_RE = re.compile(r"^.+-[0-9]+$")


class HangingTransaction(NamedTuple):
    """One open transaction of one partition that its coordinator will not end (find-hanging's row)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # of the producer's last marker in this partition (-1: none)
    start_offset: int  # first offset of the open transaction
    last_timestamp: int  # the producer's last write to this partition (ms)
    duration_ms: int  # now_ms - last_timestamp
    transactional_id: str | None  # the id whose current producer id this is, if any
    reason: str


def transaction_states(log_dir) -> dict:
    """``{transactional_id: TxnMetadataValue}`` from the ``__transaction_state-N`` partitions of a log dir:
    the last value written for each id (a tombstone removes it), as the coordinator loads them."""
    from .reader import open_log_dir

    out: dict = {}
    with open_log_dir(log_dir) as d:
        for (topic, _n), part in sorted(d.items()):
            if topic != TXN_STATE_TOPIC:
                continue
            for seg in part.segments:
                data = seg.mmap
                if not len(data):
                    continue
                for rec in decode_txn_records(data, verify_crc=part.verify_crc):
                    if isinstance(rec.transactional_id, UnknownKey):
                        continue  # a key version the coordinator skips
                    if rec.value is None:
                        out.pop(rec.transactional_id, None)
                    else:
                        out[rec.transactional_id] = rec.value
    return out


def find_hanging_transactions(log_dir, *, max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
                              now_ms: int | None = None) -> list[HangingTransaction]:  # fmt: skip
    """The hanging transactions of a broker log directory (see the module docstring), by partition and
    producer id."""
    from .reader import open_log_dir

    if max_transaction_timeout_ms < 0:
        raise ValueError(f"max_transaction_timeout_ms must not be negative, got {max_transaction_timeout_ms}")
    states = transaction_states(log_dir)
    by_producer: dict[int, list[str]] = {}
    for tid, v in states.items():
        by_producer.setdefault(v.producer_id, []).append(tid)
    open_txns = []
    newest = max((v.last_update_timestamp_ms for v in states.values()), default=-1)
    with open_log_dir(os.fspath(log_dir)) as d:
        if not len(d) and not states:  # (a partition directory, or an empty one: nothing would be checked)
            path = os.fspath(log_dir)
            hint = (f"; {os.path.basename(os.path.normpath(path))} looks like a partition directory, give its parent"
                    if _PARTITION_DIR_RE.match(os.path.basename(os.path.normpath(path))) else "")
            raise ValueError(f"{path}: no <topic>-<partition> directories here, so nothing to check: give a broker "
                             f"log directory{hint}")  # fmt: skip
        for (topic, partition), part in sorted(d.items()):
            for entry in part.producer_state().producers.values():
                newest = max(newest, entry.last_timestamp)
                if entry.current_txn_first_offset >= 0:
                    open_txns.append((topic, partition, entry))
    now = newest if now_ms is None else int(now_ms)
    out = []
    for topic, partition, e in open_txns:
        duration = now - e.last_timestamp
        if duration <= max_transaction_timeout_ms:
            continue  # it may still end by itself: the coordinator aborts it at its timeout
        tids = sorted(by_producer.get(e.producer_id, ()))
        if not tids:
            tid, reason = None, f"no transactional id has producer id {e.producer_id}"
        else:
            tid = tids[0]
            v = states[tid]
            parts = v.partitions or {}
            if v.state in _PENDING and partition in parts.get(topic, ()):
                continue  # the coordinator still has a marker to write here
            if v.state in _PENDING:
                reason = f"transactional id {tid!r} is {v.state.name} without {topic}-{partition}"
            else:
                reason = f"transactional id {tid!r} is {v.state.name}: no marker will come"
        out.append(HangingTransaction(topic, partition, e.producer_id, e.producer_epoch, e.coordinator_epoch,
                                      e.current_txn_first_offset, e.last_timestamp, duration, tid, reason))  # fmt: skip
    return out
