"""The partition leader's producer state: idempotence, fencing, open transactions, ``.snapshot`` files.

This is the bookkeeping Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``
do for one partition (kafka-format.md sections 7.2, 8, 10.4 and 11), restated in our own code.

Per producer id a :class:`ProducerStateEntry` holds the epoch, the coordinator epoch of the last marker,
the last timestamp, the first offset of the open transaction (-1 when none) and the last five
:class:`BatchMetadata` (the de-duplication window; cleared whenever the epoch changes).

Three ways to feed it
---------------------

* :meth:`ProducerStateManager.append` takes a batch (a :class:`kafkatx.RecordBatch` from
  :func:`kafkatx.iter_batches`, or anything with the same header attributes) and applies every rule
  at once, returning an :class:`AppendResult`.  Control batches (markers) are recognised and routed
  to :meth:`~ProducerStateManager.append_marker`.
* :meth:`ProducerStateManager.check_and_update` is the lean hot path for one data batch, given as
  plain ints: it returns ``None`` when the batch was appended, the original :class:`BatchMetadata`
  when it is a duplicate (nothing appended, no error, as the broker does), or raises.
* The two-step API for a writer that must be able to reject a batch **without mutating state**:
  ``info = manager.prepare_update(producer_id, origin=...)`` returns a :class:`ProducerAppendInfo`
  holding a staged copy of the producer's entry; ``info.append_data_batch(...)`` /
  ``info.append_end_txn_marker(...)`` / ``info.append(batch)`` validate against it (raising, or
  returning a duplicate) and record the change in the copy only; ``manager.update(info)`` commits it
  and returns the completed transactions (with their last stable offset).  Dropping ``info`` instead
  leaves the manager untouched.  ``update`` refuses an ``info`` prepared before another change to
  the manager (:class:`~kafkatx.errors.ProducerStateError`), so a stale validation cannot be
  committed.  The offsets passed in are the ones the writer is about to assign.  ``manager.update_many(infos)``
  commits the infos of one multi-batch append (one per producer) as ``UnifiedLog.append`` does: every
  entry first, then the completed transactions in marker order, each with the LSO at that point.

Order of checks for a data batch (client origin): duplicate (same epoch, a retained batch with the
same first and last sequence) -> epoch (older -> :class:`~kafkatx.errors.InvalidProducerEpochError`)
-> sequence (:class:`~kafkatx.errors.OutOfOrderSequenceError`) -> transaction state
(:class:`~kafkatx.errors.InvalidTxnStateError`).  With ``origin="replication"`` (a follower, or log
recovery) nothing is checked and nothing is de-duplicated, as Kafka only logs there.  Markers:
epoch, then coordinator epoch (:class:`~kafkatx.errors.TransactionCoordinatorFencedError`).  Kafka's
transaction verification (KIP-890 part 1) needs the coordinator and is not modelled.

Bulk validation: :meth:`ProducerStateManager.validate_arrays` takes numpy columns of data batches and
gives the same per-batch outcomes (and final state) as calling :meth:`check_and_update` row by row; runs
of ordinary in-sequence batches are checked and applied with numpy, anything else falls back to the
scalar path.  numpy (an optional dependency) is imported only there.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from types import MappingProxyType
from typing import TYPE_CHECKING, Iterable, NamedTuple

if TYPE_CHECKING:  # numpy is optional at run time
    import numpy as np

from ._common import byte_view
from ._fileio import atomic_write
from .batch import crc32c, decrement_sequence, iter_batches
from .errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    ProducerStateError,
    TransactionCoordinatorFencedError,
)
from .txnindex import AbortedTxn

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "ORIGIN_CLIENT",
    "ORIGIN_COORDINATOR",
    "ORIGIN_REPLICATION",
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "BatchMetadata",
    "ProducerStateEntry",
    "CompletedTxn",
    "TxnMetadata",
    "AppendResult",
    "ProducerAppendInfo",
    "ProducerStateManager",
    "ProducerSnapshotEntry",
    "read_snapshot",
    "encode_snapshot",
    "write_snapshot",
    "rebuild_from_log",
    "RESULT_APPENDED",
    "RESULT_DUPLICATE",
    "RESULT_OUT_OF_ORDER_SEQUENCE",
    "RESULT_INVALID_PRODUCER_EPOCH",
    "RESULT_INVALID_TXN_STATE",
]

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2147483647
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

ORIGIN_CLIENT = "client"
ORIGIN_COORDINATOR = "coordinator"
ORIGIN_REPLICATION = "replication"
_ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1

# validate_arrays outcome codes
RESULT_APPENDED = 0
RESULT_DUPLICATE = 1
RESULT_OUT_OF_ORDER_SEQUENCE = 2
RESULT_INVALID_PRODUCER_EPOCH = 3
RESULT_INVALID_TXN_STATE = 4


class BatchMetadata(NamedTuple):
    """One retained batch of a producer (Kafka keeps lastSeq, lastOffset, offsetDelta, timestamp)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


_tuple_new = tuple.__new__


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker: ``last_offset`` is the marker's offset.

    ``last_stable_offset`` is the LSO recorded for it (section 7.2): the first offset of the earliest
    ongoing transaction of another producer, else ``last_offset + 1``; -1 while not yet known (a
    :class:`ProducerAppendInfo` that has not been committed).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int = -1

    def to_aborted_txn(self) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TxnMetadata(NamedTuple):
    """An ongoing (``last_offset`` None) or completed-but-unreplicated transaction."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None


class AppendResult(NamedTuple):
    """What :meth:`ProducerStateManager.append` did with a batch.

    ``duplicate`` True: nothing was appended and ``first_offset``/``last_offset``/``timestamp`` are
    those of the original batch (what the broker answers).  Otherwise they are the appended batch's,
    and ``completed_txn`` is set when a marker ended a transaction.
    """

    duplicate: bool
    first_offset: int
    last_offset: int
    timestamp: int
    completed_txn: CompletedTxn | None = None


class ProducerSnapshotEntry(NamedTuple):
    """One 46-byte entry of a ``.snapshot`` file (Kafka's ProducerSnapshot.json field order)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class ProducerStateEntry:
    """The broker's state for one producer id.

    ``batch_metadata`` is the de-duplication window, oldest first (at most
    :data:`NUM_BATCHES_TO_RETAIN`); internally the batches are plain tuples in BatchMetadata field order.
    """

    __slots__ = (
        "producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp", "current_txn_first_offset",
        "_batches",
    )  # fmt: skip

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = -1, current_txn_first_offset: int = -1, batch_metadata=()):  # fmt: skip
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self._batches = deque((tuple(b) for b in batch_metadata), NUM_BATCHES_TO_RETAIN)

    @property
    def batch_metadata(self) -> tuple[BatchMetadata, ...]:
        return tuple(_tuple_new(BatchMetadata, b) for b in self._batches)

    @property
    def is_empty(self) -> bool:
        return not self._batches

    @property
    def first_seq(self) -> int:
        return self._batches[0][0] if self._batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self._batches[-1][1] if self._batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self._batches[0][2] if self._batches else -1

    @property
    def last_data_offset(self) -> int:
        return self._batches[-1][3] if self._batches else -1

    @property
    def last_offset_delta(self) -> int:
        if not self._batches:
            return 0
        b = self._batches[-1]
        return b[3] - b[2]

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this sequence range under the same epoch, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        for b in self._batches:
            if b[0] == first_seq and b[1] == last_seq:
                return _tuple_new(BatchMetadata, b)
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                                  self.current_txn_first_offset, self._batches)  # fmt: skip

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        return ProducerSnapshotEntry(
            self.producer_id, self.producer_epoch, self.last_seq, self.last_data_offset, self.last_offset_delta,
            self.last_timestamp, self.coordinator_epoch, self.current_txn_first_offset,
        )  # fmt: skip

    def _key(self):
        return (self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                self.current_txn_first_offset, tuple(self._batches))  # fmt: skip

    def _stamp(self):
        """Cheap identity of the current state (see ProducerAppendInfo staleness check)."""
        return (self.producer_epoch, self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset,
                self._batches[-1] if self._batches else None, len(self._batches))  # fmt: skip

    def __eq__(self, other):
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None

    def __repr__(self):
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, "
            f"batch_metadata={list(self.batch_metadata)})"
        )


# ----------------------------------------------------------------------------------- error messages
def _epoch_error(pid, epoch, cur, offset):
    return InvalidProducerEpochError(
        f"Epoch of producer {pid} at offset {offset} is {epoch}, which is smaller than the last seen epoch {cur}",
        pid,
        offset,
    )


def _new_epoch_seq_error(pid, epoch, seq, cur, offset):
    return OutOfOrderSequenceError(
        f"Invalid sequence number for new epoch of producer {pid} at offset {offset}: {epoch} (request epoch), "
        f"{seq} (seq. number), {cur} (current producer epoch)",
        pid,
        offset,
    )


def _seq_error(pid, seq, last, offset):
    return OutOfOrderSequenceError(
        f"Out of order sequence number for producer {pid} at offset {offset}: {seq} (incoming seq. number), "
        f"{last} (current end sequence number)",
        pid,
        offset,
    )


def _txn_state_error(pid, offset):
    return InvalidTxnStateError(
        f"Expected transactional write from producer {pid} at offset {offset} (a transaction is open)", pid, offset
    )


def _fenced_error(pid, marker_epoch, cur, offset):
    return TransactionCoordinatorFencedError(
        f"Invalid coordinator epoch for producer {pid} at offset {offset}: {marker_epoch} (zombie), {cur} (current)",
        pid,
        offset,
    )


def _check_origin(origin):
    if origin not in _ORIGINS:
        raise ValueError(f"origin must be one of {_ORIGINS}, got {origin!r}")
    return origin


def _marker_fields(batch):
    """(control_type, coordinator_epoch, timestamp) of a non-empty control batch's first record."""
    ctype = batch.first_control_type()
    rec = batch.records()[0]
    value = rec.value
    if ctype not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise InvalidRecordError(
            f"Invalid control record type {ctype} for end transaction marker", batch.position, batch.base_offset
        )
    if value is None or len(value) < 6:
        raise InvalidRecordError(
            f"end transaction marker value is {'null' if value is None else f'{len(value)} bytes'}, "
            "expected at least 6",
            batch.position,
            batch.base_offset,
        )
    version, coordinator_epoch = struct.unpack_from(">hi", value, 0)
    if version < 0:
        raise InvalidRecordError(
            f"invalid version {version} of end transaction marker, may indicate data corruption",
            batch.position,
            batch.base_offset,
        )
    return ctype, coordinator_epoch, rec.timestamp


# ---------------------------------------------------------------------------------------- append info
class ProducerAppendInfo:
    """Staged changes for one producer (Kafka's ``ProducerAppendInfo``); see the module docstring.

    It validates against a copy of the producer's entry; nothing reaches the manager until
    :meth:`ProducerStateManager.update`.
    """

    __slots__ = ("producer_id", "origin", "_current", "_updated", "_started", "_completed", "_stamp", "_manager",
                 "_last_offset", "_committed")  # fmt: skip

    def __init__(self, manager, producer_id, current, origin):
        self._manager = manager
        self.producer_id = producer_id
        self.origin = origin
        self._current = current  # ProducerStateEntry or None (unknown producer)
        base = current if current is not None else ProducerStateEntry(producer_id)
        self._updated = ProducerStateEntry(
            producer_id, base.producer_epoch, base.coordinator_epoch, base.last_timestamp,
            base.current_txn_first_offset,
        )  # fmt: skip
        self._started = []
        self._completed = []
        self._stamp = (current, current._stamp()) if current is not None else (None, None)
        self._last_offset = None
        self._committed = False

    @property
    def updated_entry(self) -> ProducerStateEntry:
        """The staged entry (its batch metadata holds only the batches staged here)."""
        return self._updated

    @property
    def started_transactions(self) -> list[int]:
        return list(self._started)

    @property
    def completed_transactions(self) -> list[CompletedTxn]:
        return list(self._completed)

    def _check_epoch(self, epoch, offset):
        cur = self._updated.producer_epoch
        if epoch < cur and self.origin != ORIGIN_REPLICATION:
            raise _epoch_error(self.producer_id, epoch, cur, offset)

    def _check_sequence(self, epoch, first_seq, offset):
        upd = self._updated
        if epoch != upd.producer_epoch:
            if first_seq != 0 and upd.producer_epoch != NO_PRODUCER_EPOCH:
                raise _new_epoch_seq_error(self.producer_id, epoch, first_seq, upd.producer_epoch, offset)
            return
        cur = self._current
        cur_epoch = cur.producer_epoch if cur is not None else NO_PRODUCER_EPOCH
        if upd._batches:
            last = upd._batches[-1][1]
        elif cur is not None and epoch == cur_epoch:
            last = cur.last_seq
        else:
            last = NO_SEQUENCE
        if not (cur_epoch == NO_PRODUCER_EPOCH or first_seq == last + 1 or (first_seq == 0 and last == INT32_MAX)):
            raise _seq_error(self.producer_id, first_seq, last, offset)

    def append_data_batch(self, producer_epoch, first_seq, last_seq, timestamp, first_offset, last_offset,
                          is_transactional) -> BatchMetadata | None:  # fmt: skip
        """Validate and stage one data batch; returns the original batch if it is a duplicate."""
        if self.origin == ORIGIN_CLIENT and self._current is not None:
            dup = self._current.find_duplicate_batch(producer_epoch, first_seq, last_seq)
            if dup is not None:
                return dup
        self._check_epoch(producer_epoch, first_offset)
        if self.origin == ORIGIN_CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        upd = self._updated
        txn_first = upd.current_txn_first_offset
        if txn_first >= 0 and not is_transactional:
            raise _txn_state_error(self.producer_id, first_offset)
        if upd.producer_epoch != producer_epoch:
            upd._batches.clear()
            upd.producer_epoch = producer_epoch
        upd._batches.append((first_seq, last_seq, first_offset, last_offset, timestamp))
        upd.last_timestamp = timestamp
        if txn_first < 0 and is_transactional:
            upd.current_txn_first_offset = first_offset
            self._started.append(first_offset)
        self._last_offset = last_offset
        return None

    def append_end_txn_marker(self, control_type, coordinator_epoch, producer_epoch, offset, timestamp, *,
                              transaction_version: int = 0) -> CompletedTxn | None:  # fmt: skip
        """Validate and stage a COMMIT/ABORT marker; returns the transaction it ends (LSO still -1)."""
        if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
            raise InvalidRecordError(f"Invalid control record type {control_type} for end transaction marker")
        upd = self._updated
        if self.origin != ORIGIN_REPLICATION:
            cur = upd.producer_epoch
            if producer_epoch < cur:
                raise _epoch_error(self.producer_id, producer_epoch, cur, offset)
            if transaction_version >= 2 and producer_epoch == cur and upd.current_txn_first_offset >= 0:
                raise InvalidProducerEpochError(
                    f"Epoch of the transaction marker of producer {self.producer_id} at offset {offset} is "
                    f"{producer_epoch}, which is not above the epoch {cur} of its open transaction "
                    "(transaction.version 2 bumps the epoch at commit/abort)",
                    self.producer_id,
                    offset,
                )
            if upd.coordinator_epoch > coordinator_epoch:
                raise _fenced_error(self.producer_id, coordinator_epoch, upd.coordinator_epoch, offset)
        completed = None
        if upd.current_txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, upd.current_txn_first_offset, offset,
                                     control_type == CONTROL_TYPE_ABORT)  # fmt: skip
            self._completed.append(completed)
        if upd.producer_epoch != producer_epoch:
            upd._batches.clear()
            upd.producer_epoch = producer_epoch
        upd.coordinator_epoch = coordinator_epoch
        upd.current_txn_first_offset = -1
        upd.last_timestamp = timestamp
        self._last_offset = offset
        return completed

    def append(self, batch):
        """Stage a batch; returns a duplicate BatchMetadata, a CompletedTxn or None."""
        if batch.producer_id != self.producer_id:
            raise ValueError(f"batch of producer {batch.producer_id} given to the append info of {self.producer_id}")
        if batch.is_control:
            if batch.records_count == 0:
                # the whole transaction was cleaned away: nothing to apply, but (as Kafka's update of this
                # append info does) an unknown producer gets an entry with no epoch and no batches
                self._last_offset = batch.last_offset
                return None
            ctype, coord_epoch, ts = _marker_fields(batch)
            return self.append_end_txn_marker(ctype, coord_epoch, batch.producer_epoch, batch.base_offset, ts)
        return self.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                                      batch.max_timestamp, batch.base_offset, batch.last_offset,
                                      batch.is_transactional)  # fmt: skip


# ------------------------------------------------------------------------------------------ manager
class ProducerStateManager:
    """Producer state of one partition; see the module docstring for the three ways to feed it."""

    def __init__(self):
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # first offset -> producer id, ascending first offset
        self._ongoing_max = -(1 << 63)
        self._unreplicated: dict[int, tuple] = {}  # first offset -> (producer id, marker offset)
        self.map_end_offset = 0

    # -- views -----------------------------------------------------------------------------------
    @property
    def producers(self):
        """Read-only mapping producer id -> :class:`ProducerStateEntry` (entries are live objects)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def __len__(self):
        return len(self._producers)

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction (Kafka's ``firstUndecidedOffset``)."""
        for first in self._ongoing:
            return first
        return None

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset among ongoing and completed-but-unreplicated transactions."""
        cands = [f for f in (self.first_undecided_offset(),) if f is not None]
        if self._unreplicated:
            cands.append(min(self._unreplicated))
        return min(cands) if cands else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first unstable offset if it is below the high watermark, else the high watermark."""
        fuo = self.first_unstable_offset()
        return fuo if fuo is not None and fuo < high_watermark else high_watermark

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker lies below the high watermark."""
        gone = [k for k, (_pid, last) in self._unreplicated.items() if last < high_watermark]
        for k in gone:
            del self._unreplicated[k]

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """Open transactions, by first offset."""
        return [TxnMetadata(pid, first) for first, pid in self._ongoing.items()]

    def unreplicated_transactions(self) -> list[TxnMetadata]:
        return [TxnMetadata(pid, first, last) for first, (pid, last) in sorted(self._unreplicated.items())]

    # -- internal bookkeeping ----------------------------------------------------------------------
    def _open_txn(self, first_offset, producer_id):
        ongoing = self._ongoing
        if first_offset > self._ongoing_max:
            ongoing[first_offset] = producer_id
            self._ongoing_max = first_offset
        else:  # out of order (snapshot load, or offsets given out of order): keep the dict sorted
            ongoing[first_offset] = producer_id
            self._ongoing = dict(sorted(ongoing.items()))

    def _lso_for(self, producer_id, marker_offset):
        for first, pid in self._ongoing.items():
            if pid != producer_id:
                return first
        return marker_offset + 1

    def _complete_txn(self, producer_id, first_offset, marker_offset):
        if self._ongoing.pop(first_offset, None) is None:
            raise ProducerStateError(
                f"Attempted to complete transaction of producer {producer_id} starting at {first_offset}, "
                "which was not started",
                producer_id,
                marker_offset,
            )
        self._unreplicated[first_offset] = (producer_id, marker_offset)

    # -- hot path ----------------------------------------------------------------------------------
    def check_and_update(self, producer_id, producer_epoch, base_sequence, last_sequence, first_offset, last_offset,
                         timestamp, is_transactional, origin=ORIGIN_CLIENT):  # fmt: skip
        """Validate one data batch of a producer (``producer_id >= 0``) and apply it.

        Returns None when appended, or the original :class:`BatchMetadata` when the batch is a
        duplicate of one of the last five (nothing is appended).  Raises
        :class:`InvalidProducerEpochError`, :class:`OutOfOrderSequenceError` or
        :class:`InvalidTxnStateError`, leaving the state unchanged.  ``first_offset``/``last_offset``
        are the batch's (assigned) offsets and ``timestamp`` its max timestamp.  Unlike :meth:`append`
        it does not move :attr:`map_end_offset` (call :meth:`update_map_end_offset`).
        """
        entry = self._producers.get(producer_id)
        if entry is not None and origin == ORIGIN_CLIENT and producer_epoch == entry.producer_epoch:
            # the common case: a known producer continuing its epoch
            batches = entry._batches
            if batches:
                for b in batches:
                    if b[1] == last_sequence and b[0] == base_sequence:
                        return _tuple_new(BatchMetadata, b)
                last = batches[-1][1]
            else:
                last = -1
            if base_sequence != last + 1 and producer_epoch != -1 and not (base_sequence == 0 and last == INT32_MAX):
                raise _seq_error(producer_id, base_sequence, last, first_offset)
            txn_first = entry.current_txn_first_offset
            if txn_first >= 0:
                if not is_transactional:
                    raise _txn_state_error(producer_id, first_offset)
            elif is_transactional:
                entry.current_txn_first_offset = first_offset
                self._open_txn(first_offset, producer_id)
            batches.append((base_sequence, last_sequence, first_offset, last_offset, timestamp))
            entry.last_timestamp = timestamp
            return None
        return self._check_and_update_slow(entry, producer_id, producer_epoch, base_sequence, last_sequence,
                                           first_offset, last_offset, timestamp, is_transactional, origin)  # fmt: skip

    def _check_and_update_slow(self, entry, producer_id, producer_epoch, base_sequence, last_sequence, first_offset,
                               last_offset, timestamp, is_transactional, origin):  # fmt: skip
        if origin not in _ORIGINS:
            _check_origin(origin)
        if entry is None:
            # unknown producer: no epoch, so any epoch and any sequence are accepted
            entry = ProducerStateEntry(producer_id, producer_epoch, -1, timestamp)
            entry._batches.append((base_sequence, last_sequence, first_offset, last_offset, timestamp))
            self._producers[producer_id] = entry
            if is_transactional:
                entry.current_txn_first_offset = first_offset
                self._open_txn(first_offset, producer_id)
            return None
        cur_epoch = entry.producer_epoch
        batches = entry._batches
        if origin != ORIGIN_REPLICATION:
            if producer_epoch == cur_epoch:
                if origin == ORIGIN_CLIENT:  # pragma: no cover - handled by the fast path
                    raise AssertionError("unreachable")
            elif producer_epoch < cur_epoch:
                raise _epoch_error(producer_id, producer_epoch, cur_epoch, first_offset)
            elif base_sequence != 0 and cur_epoch != -1 and origin == ORIGIN_CLIENT:
                raise _new_epoch_seq_error(producer_id, producer_epoch, base_sequence, cur_epoch, first_offset)
        txn_first = entry.current_txn_first_offset
        if txn_first >= 0:
            if not is_transactional:
                raise _txn_state_error(producer_id, first_offset)
        elif is_transactional:
            entry.current_txn_first_offset = first_offset
            self._open_txn(first_offset, producer_id)
        if producer_epoch != cur_epoch:
            batches.clear()
            entry.producer_epoch = producer_epoch
        batches.append((base_sequence, last_sequence, first_offset, last_offset, timestamp))
        entry.last_timestamp = timestamp
        return None

    # -- markers -----------------------------------------------------------------------------------
    def append_marker(self, producer_id: int, producer_epoch: int, *, control_type: int, coordinator_epoch: int,
                      offset: int, timestamp: int, origin: str = ORIGIN_COORDINATOR,
                      transaction_version: int = 0) -> CompletedTxn | None:  # fmt: skip
        """Apply a COMMIT (1) / ABORT (0) marker at ``offset``.

        Returns the :class:`CompletedTxn` (with its last stable offset) when the producer had an open
        transaction, else None.  Epoch rule: a marker epoch below the producer's is rejected; with
        ``transaction_version >= 2`` an equal epoch is rejected too while a transaction is open
        (newer-trunk TV2 rule).  A coordinator epoch below the last one seen is fenced.
        """
        info = self.prepare_update(producer_id, origin=origin)
        info.append_end_txn_marker(control_type, coordinator_epoch, producer_epoch, offset, timestamp,
                                   transaction_version=transaction_version)  # fmt: skip
        completed = self.update(info)
        return completed[0] if completed else None

    # -- general entry points ----------------------------------------------------------------------
    def append(self, batch, *, origin: str = ORIGIN_CLIENT) -> AppendResult:
        """Apply one batch (a :class:`kafkatx.RecordBatch` or anything with its header attributes).

        Batches without a producer id (``producer_id < 0``) change nothing but the map end offset.
        An empty control batch (count 0: the transaction was cleaned away) changes nothing but, for a
        producer not seen before, adds an empty entry (epoch -1, no batches), as Kafka does.  For a marker the
        control type and coordinator epoch are read from the first control record.
        """
        _check_origin(origin)
        pid = batch.producer_id
        base = batch.base_offset
        last = batch.last_offset
        if pid < 0:
            self.map_end_offset = last + 1
            return AppendResult(False, base, last, batch.max_timestamp, None)
        if batch.is_control:
            if batch.records_count == 0:
                if pid not in self._producers:  # as Kafka: an entry with no epoch, no batches, no timestamp
                    self._producers[pid] = ProducerStateEntry(pid)
                self.map_end_offset = last + 1
                return AppendResult(False, base, last, batch.max_timestamp, None)
            ctype, coord_epoch, ts = _marker_fields(batch)
            completed = self.append_marker(pid, batch.producer_epoch, control_type=ctype,
                                           coordinator_epoch=coord_epoch, offset=base, timestamp=ts,
                                           origin=ORIGIN_COORDINATOR if origin == ORIGIN_CLIENT else origin)  # fmt: skip
            self.map_end_offset = last + 1
            return AppendResult(False, base, last, ts, completed)
        ts = batch.max_timestamp
        dup = self.check_and_update(pid, batch.producer_epoch, batch.base_sequence, batch.last_sequence, base, last,
                                    ts, batch.is_transactional, origin)  # fmt: skip
        if dup is not None:
            return AppendResult(True, dup.first_offset, dup.last_offset, dup.timestamp, None)
        self.map_end_offset = last + 1
        return AppendResult(False, base, last, ts, None)

    def prepare_update(self, producer_id: int, *, origin: str = ORIGIN_CLIENT) -> ProducerAppendInfo:
        """Start a staged append for ``producer_id`` (see the module docstring)."""
        _check_origin(origin)
        if producer_id < 0:
            raise ValueError(f"invalid producer id {producer_id}: only batches with a producer id have state")
        return ProducerAppendInfo(self, producer_id, self._producers.get(producer_id), origin)

    def update(self, info: ProducerAppendInfo) -> list[CompletedTxn]:
        """Commit a :class:`ProducerAppendInfo`; returns the transactions it completed, with their LSO."""
        return self.update_many((info,))

    def update_many(self, infos) -> list[CompletedTxn]:
        """Commit the append infos of one append, one per producer, as ``UnifiedLog.append`` does once the
        batches are written: first every producer's entry and the transactions it started, then each
        completed transaction in the order of its marker, its last stable offset taken just before it is
        completed -- so a transaction that another producer opened later in the same append counts.
        Nothing is committed unless every info can be."""
        infos = list(infos)
        pids = set()
        for info in infos:
            self._check_committable(info)
            if info.producer_id in pids:
                raise ProducerStateError(f"two append infos of producer {info.producer_id} in one update",
                                         info.producer_id)  # fmt: skip
            pids.add(info.producer_id)
        staged = [info._last_offset for info in infos if info._last_offset is not None]
        completed = []
        for info in infos:
            completed += self._commit_entry(info)
        if staged:
            self.map_end_offset = max(staged) + 1
        completed.sort(key=lambda c: c.last_offset)
        out = []
        for c in completed:
            lso = self._lso_for(c.producer_id, c.last_offset)
            self._complete_txn(c.producer_id, c.first_offset, c.last_offset)
            out.append(c._replace(last_stable_offset=lso))
        return out

    def _check_committable(self, info: ProducerAppendInfo) -> None:
        if info._manager is not self:
            raise ProducerStateError("this append info was prepared by another ProducerStateManager",
                                     info.producer_id)  # fmt: skip
        if info._committed:
            raise ProducerStateError(f"the append info of producer {info.producer_id} was already committed",
                                     info.producer_id)  # fmt: skip
        current = self._producers.get(info.producer_id)
        captured, stamp = info._stamp
        if current is not captured or (current is not None and current._stamp() != stamp):
            raise ProducerStateError(
                f"the producer state changed after the append info of producer {info.producer_id} was prepared; "
                "prepare it again",
                info.producer_id,
            )

    def _commit_entry(self, info: ProducerAppendInfo) -> list[CompletedTxn]:
        """The entry and started transactions of ``info``; returns the transactions it completes (LSO -1)."""
        pid = info.producer_id
        upd = info._updated
        if info._last_offset is None:  # nothing was staged
            info._committed = True
            return []
        entry = self._producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(pid)
            self._producers[pid] = entry
        if entry.producer_epoch != upd.producer_epoch:
            entry._batches.clear()
            entry.producer_epoch = upd.producer_epoch
        entry.coordinator_epoch = upd.coordinator_epoch
        entry.last_timestamp = upd.last_timestamp
        entry._batches.extend(upd._batches)
        entry.current_txn_first_offset = upd.current_txn_first_offset
        for first in info._started:
            self._open_txn(first, pid)
        info._committed = True
        return list(info._completed)

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # -- bulk ------------------------------------------------------------------------------------------
    def validate_arrays(self, producer_ids, producer_epochs, base_sequences, last_sequences, first_offsets,
                        last_offsets, timestamps, is_transactional) -> np.ndarray:  # fmt: skip
        """Validate and apply many data batches (client origin), in order.

        Returns an int8 array of outcomes, one per batch: :data:`RESULT_APPENDED`,
        :data:`RESULT_DUPLICATE`, :data:`RESULT_OUT_OF_ORDER_SEQUENCE`,
        :data:`RESULT_INVALID_PRODUCER_EPOCH`, :data:`RESULT_INVALID_TXN_STATE`.  A rejected or
        duplicate batch changes nothing, exactly as if :meth:`check_and_update` had been called for each
        row in turn (batches of different producers are independent, so they are processed per
        producer).  Rows with ``producer_id < 0`` are appended without checks.  The map end offset is left
        as :meth:`append` leaves it after each batch in turn: the last appended row's ``last_offset + 1``
        (rows in log order only move it forward).
        """
        return _validate_arrays(self, producer_ids, producer_epochs, base_sequences, last_sequences, first_offsets,
                                last_offsets, timestamps, is_transactional)  # fmt: skip

    # -- snapshots ---------------------------------------------------------------------------------
    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        return [e.to_snapshot_entry() for e in self._producers.values()]

    def take_snapshot(self, directory, *, fsync: bool = True) -> str:
        """Write ``<map_end_offset:020d>.snapshot`` into ``directory``; returns its path."""
        path = os.path.join(os.fspath(directory), f"{self.map_end_offset:020d}.snapshot")
        write_snapshot(path, self, fsync=fsync)
        return path

    def load_snapshot(self, source, *, map_end_offset: int | None = None, current_time_ms: int | None = None,
                      producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:  # fmt: skip
        """Replace the state with a snapshot's (path, open binary file, bytes or a list of entries).

        Each entry with ``last_offset >= 0`` gets one BatchMetadata whose timestamp is the producer's
        last timestamp; ``current_txn_first_offset >= 0`` re-opens a transaction.  With
        ``current_time_ms``, producers without an open transaction idle for at least
        ``producer_id_expiration_ms`` are dropped, as the broker does on load.  ``map_end_offset``
        defaults to the offset in the file name.
        """
        if isinstance(source, (list, tuple)):
            entries = [ProducerSnapshotEntry(*e) for e in source]
        else:
            entries = read_snapshot(source)
            if map_end_offset is None and isinstance(source, (str, os.PathLike)):
                from .txnindex import offset_from_file_name

                map_end_offset = offset_from_file_name(source)
        self._producers = {}
        self._ongoing = {}
        self._ongoing_max = -(1 << 63)
        self._unreplicated = {}
        for e in entries:
            if (
                current_time_ms is not None
                and e.current_txn_first_offset < 0
                and current_time_ms - e.timestamp >= producer_id_expiration_ms
            ):
                continue
            batches = ()
            if e.last_offset >= 0:
                batches = ((decrement_sequence(e.last_sequence, e.offset_delta), e.last_sequence,
                            e.last_offset - e.offset_delta, e.last_offset, e.timestamp),)  # fmt: skip
            txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else -1
            self._producers[e.producer_id] = ProducerStateEntry(
                e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp, txn_first, batches
            )
            if txn_first >= 0:
                self._open_txn(txn_first, e.producer_id)
        if map_end_offset is not None:
            self.map_end_offset = map_end_offset

    @classmethod
    def from_snapshot(cls, source, **kwargs) -> ProducerStateManager:
        m = cls()
        m.load_snapshot(source, **kwargs)
        return m

    def remove_expired_producers(self, current_time_ms: int,
                                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> list[int]:  # fmt: skip
        """Drop producers without an open transaction idle for ``producer_id_expiration_ms``; returns their ids."""
        gone = [
            pid
            for pid, e in self._producers.items()
            if e.current_txn_first_offset < 0 and current_time_ms - e.last_timestamp >= producer_id_expiration_ms
        ]
        for pid in gone:
            del self._producers[pid]
        return gone

    def __repr__(self):
        return (
            f"ProducerStateManager(producers={len(self._producers)}, ongoing={len(self._ongoing)}, "
            f"map_end_offset={self.map_end_offset})"
        )


# --------------------------------------------------------------------------------------- bulk checks
def _validate_arrays(m, pids, epochs, bseqs, lseqs, firsts, lasts, tss, txns):
    import numpy as np  # optional dependency (the ``arrow`` extra), needed only here
    pids = np.asarray(pids, dtype=np.int64)
    n = len(pids)
    cols = [np.asarray(a, dtype=np.int64) for a in (epochs, bseqs, lseqs, firsts, lasts, tss)]
    txns = np.asarray(txns, dtype=bool)
    if any(len(c) != n for c in cols) or len(txns) != n:
        raise ValueError("all arrays given to validate_arrays must have the same length")
    epochs, bseqs, lseqs, firsts, lasts, tss = cols
    out = np.zeros(n, dtype=np.int8)
    if n == 0:
        return out
    # Group rows by producer (stable: each producer's rows stay in order).  Producers are independent
    # for data batches, so per-producer processing gives the same outcomes as row-by-row processing.
    lo = int(pids.min())
    if int(pids.max()) - lo < (1 << 16):
        # numpy's stable sort is a radix sort for 16-bit keys (~7x faster than its int64 timsort); producer ids
        # of one log usually span far fewer than 65,536 values
        order = np.argsort((pids - lo).astype(np.uint16), kind="stable")
    else:
        order = np.argsort(pids, kind="stable")
    spid = pids[order]
    sep = epochs[order]
    sbs = bseqs[order]
    sls = lseqs[order]
    stx = txns[order]
    # Sorted row i is "simple" when, provided row i-1 was appended, row i is certainly appended too:
    # same producer and epoch as row i-1, first sequence right after row i-1's last one, and no
    # transactional -> non-transactional step (no markers here, so an appended transactional row
    # means the transaction is open).  It cannot be a duplicate either once the five retained batches
    # are all rows of the same chain: each covers fewer than 2^28 sequence numbers, so five of them
    # cannot wrap around the 2^31 sequence space back to the same range.
    same = np.zeros(n, dtype=bool)
    same[1:] = spid[1:] == spid[:-1]
    prev_ls = np.empty(n, dtype=np.int64)
    prev_ls[0] = -2
    prev_ls[1:] = sls[:-1]
    in_seq = (sbs == prev_ls + 1) | ((sbs == 0) & (prev_ls == INT32_MAX))
    same_epoch = np.zeros(n, dtype=bool)
    same_epoch[1:] = sep[1:] == sep[:-1]
    width = (sls - sbs) % (INT32_MAX + 1)
    small = (sbs >= 0) & (sls >= 0) & (sbs <= INT32_MAX) & (sls <= INT32_MAX) & (width < (1 << 28))
    txn_ok = np.ones(n, dtype=bool)
    txn_ok[1:] = stx[1:] | ~stx[:-1]
    simple = same & same_epoch & in_seq & small & txn_ok & (spid >= 0)
    not_simple = np.flatnonzero(~simple)  # holds every group head
    starts = np.flatnonzero(~same)
    ends = np.append(starts[1:], n)
    producers = m._producers
    cols = (epochs, bseqs, lseqs, firsts, lasts, tss, txns)
    for g in range(len(starts)):
        h = int(starts[g])
        e = int(ends[g])
        pid = int(spid[h])
        if pid < 0:
            continue  # no producer id: no state, nothing to check (RESULT_APPENDED)
        j = h
        streak = 0  # consecutive appended rows ending at j-1, each simple w.r.t. the one before
        while j < e:
            if streak >= NUM_BATCHES_TO_RETAIN and simple.item(j):
                k = int(np.searchsorted(not_simple, j))
                r = min(int(not_simple[k]) if k < len(not_simple) else n, e)
                _apply_run(m, producers[pid], pid, order[max(j, r - NUM_BATCHES_TO_RETAIN) : r], order[j:r], cols)
                j = r
                continue
            i = order.item(j)
            code = _scalar_row(m, pid, i, cols)
            out[i] = code
            if code == RESULT_APPENDED:
                streak = streak + 1 if streak and simple.item(j) else 1
            else:
                streak = 0
            j += 1
    appended = np.flatnonzero(out == RESULT_APPENDED)
    if len(appended):
        m.map_end_offset = int(lasts[appended[-1]]) + 1
    return out


def _apply_run(m, entry, pid, tail_rows, run_rows, cols):
    """Apply a run of rows known to be appended: the last five become the retained batches."""
    import numpy as np
    _epochs, bseqs, lseqs, firsts, lasts, tss, txns = cols
    entry._batches.extend(
        (bseqs.item(i), lseqs.item(i), firsts.item(i), lasts.item(i), tss.item(i)) for i in tail_rows.tolist()
    )
    entry.last_timestamp = tss.item(run_rows.item(-1))
    if entry.current_txn_first_offset < 0:
        opened = np.flatnonzero(txns[run_rows])
        if len(opened):
            fo = firsts.item(run_rows.item(int(opened[0])))
            entry.current_txn_first_offset = fo
            m._open_txn(fo, pid)


def _scalar_row(m, pid, i, cols):
    epochs, bseqs, lseqs, firsts, lasts, tss, txns = cols
    try:
        dup = m.check_and_update(pid, epochs.item(i), bseqs.item(i), lseqs.item(i), firsts.item(i), lasts.item(i),
                                 tss.item(i), txns.item(i))  # fmt: skip
    except OutOfOrderSequenceError:
        return RESULT_OUT_OF_ORDER_SEQUENCE
    except InvalidProducerEpochError:
        return RESULT_INVALID_PRODUCER_EPOCH
    except InvalidTxnStateError:
        return RESULT_INVALID_TXN_STATE
    return RESULT_DUPLICATE if dup is not None else RESULT_APPENDED


# ---------------------------------------------------------------------------------------- snapshots
SNAPSHOT_VERSION = 1
VERSION_OFFSET = 0
CRC_OFFSET = VERSION_OFFSET + 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4  # 6: the CRC covers [6, EOF)
ENTRY_COUNT_OFFSET = PRODUCER_ENTRIES_OFFSET
ENTRIES_OFFSET = ENTRY_COUNT_OFFSET + 4  # 10
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_SIZE = _SNAP_ENTRY.size  # 46


def _snapshot_source(source):
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        with open(path, "rb") as fh:
            return fh.read(), path
    if hasattr(source, "read") and not isinstance(source, (bytes, bytearray, memoryview)):
        name = getattr(source, "name", None)
        return source.read(), (os.fspath(name) if isinstance(name, (str, os.PathLike)) else None)
    try:
        return byte_view(source), None
    except TypeError:
        raise TypeError(
            f"expected a path, an open binary file or a bytes-like object, got {type(source).__name__}"
        ) from None


def read_snapshot(source) -> list[ProducerSnapshotEntry]:
    """The entries of a producer-state ``.snapshot`` (path, open binary file or bytes-like), in file order.

    Raises :class:`CorruptSnapshotError` (naming the file and byte position) for a file shorter than its
    10-byte header, a version other than 1, a CRC-32C mismatch, a negative entry count or a size that
    does not match the count.
    """
    data, file = _snapshot_source(source)
    size = len(data)
    if size < ENTRIES_OFFSET:
        raise CorruptSnapshotError(f"Snapshot is {size} bytes, shorter than its {ENTRIES_OFFSET}-byte header",
                                   size, file)  # fmt: skip
    version, stored_crc = struct.unpack_from(">hI", data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}", VERSION_OFFSET, file)
    computed = crc32c(memoryview(data)[PRODUCER_ENTRIES_OFFSET:])
    if stored_crc != computed:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed}",
            CRC_OFFSET,
            file,
        )
    (count,) = struct.unpack_from(">i", data, ENTRY_COUNT_OFFSET)
    if count < 0:
        raise CorruptSnapshotError(f"Snapshot failed schema validation: negative entry count {count}",
                                   ENTRY_COUNT_OFFSET, file)  # fmt: skip
    expected = ENTRIES_OFFSET + count * SNAPSHOT_ENTRY_SIZE
    if size < expected:
        raise CorruptSnapshotError(
            f"Snapshot failed schema validation: entry count {count} needs {expected} bytes, file has {size}",
            size,
            file,
        )
    # bytes after the last entry are ignored, as Kafka's Schema.read does (the CRC above covers them)
    body = memoryview(data)[ENTRIES_OFFSET:expected]
    return [ProducerSnapshotEntry(*t) for t in _SNAP_ENTRY.iter_unpack(body)]


def _snapshot_entries(entries_or_manager):
    if isinstance(entries_or_manager, ProducerStateManager):
        return entries_or_manager.snapshot_entries()
    out = []
    for e in entries_or_manager:
        if isinstance(e, ProducerStateEntry):
            out.append(e.to_snapshot_entry())
        elif isinstance(e, ProducerSnapshotEntry):
            out.append(e)
        else:
            out.append(ProducerSnapshotEntry(*e))
    return out


def encode_snapshot(entries_or_manager) -> bytes:
    """The bytes of a version-1 ``.snapshot`` holding the given entries (or a manager's), in that order."""
    entries = _snapshot_entries(entries_or_manager)
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        try:
            body += _SNAP_ENTRY.pack(*e)
        except struct.error as exc:
            raise ProducerStateError(f"cannot encode snapshot entry {e!r}: {exc}", e.producer_id) from None
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def write_snapshot(path, entries_or_manager, *, fsync: bool = True) -> None:
    """Write a ``.snapshot`` atomically (temporary file, fsync, rename)."""
    atomic_write(path, encode_snapshot(entries_or_manager), fsync=fsync)


# ------------------------------------------------------------------------------------------ rebuild
def rebuild_from_log(data_or_batches, *, start_offset: int = 0, manager: ProducerStateManager | None = None,
                     verify_crc: bool = True, on_batch=None):  # fmt: skip
    """Replay a segment into producer state the way ``LogSegment.recover`` does.

    Every batch with a producer id is applied with origin ``replication`` (no sequence checks, stale
    epochs accepted); each marker that ends a transaction yields a :class:`CompletedTxn` with its LSO,
    and the aborted ones become the segment's ``.txnindex`` entries.  Batches whose last offset is below
    ``start_offset`` are skipped.  ``data_or_batches`` is a buffer (read with :func:`kafkatx.iter_batches`)
    or an iterable of batches; ``on_batch(batch, manager, completed_txn_or_None)`` is called after each
    applied batch.  Returns ``(manager, aborted)``.
    """
    m = manager if manager is not None else ProducerStateManager()
    if isinstance(data_or_batches, (bytes, bytearray, memoryview)) or hasattr(data_or_batches, "__buffer__"):
        batches: Iterable = iter_batches(data_or_batches, verify_crc=verify_crc)
    else:
        try:
            memoryview(data_or_batches)
        except TypeError:
            batches = data_or_batches
        else:
            batches = iter_batches(data_or_batches, verify_crc=verify_crc)
    aborted = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        completed = None
        if b.producer_id >= 0:
            completed = m.append(b, origin=ORIGIN_REPLICATION).completed_txn
            if completed is not None and completed.is_aborted:
                aborted.append(completed.to_aborted_txn())
        m.map_end_offset = b.last_offset + 1
        if on_batch is not None:
            on_batch(b, m, completed)
    return m, aborted
