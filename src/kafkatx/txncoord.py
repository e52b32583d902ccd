"""A transaction coordinator over :class:`kafkatx.log.writer.PartitionWriter` directories.

:class:`TransactionCoordinator` does what the broker's ``TransactionCoordinator`` /
``TransactionStateManager`` / ``TransactionMarkerChannelManager`` do for transactional ids, synchronously
and in one process (kafka-format.md section 9):

* its state lives in ``__transaction_state-<N>`` partition directories of the log dir, written with a
  :class:`~kafkatx.log.writer.PartitionWriter` (``N = txn_partition_for(transactional_id,
  num_partitions)``), one non-transactional record per state change, built with
  :mod:`kafkatx.txnlog`'s encoders, stamped with the coordinator epoch as partition leader epoch.  The
  value version is the coordinator's, as in ``TransactionLog.valueToBytes`` (``transactionLogValueVersion``
  of the finalized ``transaction.version``): 0 under ``transaction_version`` 0, 1 (flexible, with the
  transaction's ``ClientTransactionVersion`` tagged when it is not 0) under 1 and 2.  One departure: a
  coordinator reopened with version 0 over transactions begun under 1 or 2 writes their values as version
  1, since version 0 cannot hold their tagged fields (Kafka's serializer would refuse the write).  Every
  version 1 value carries ``PreviousProducerId`` -- every transition records the producer id it leaves, as
  Kafka 4.1+'s ``TransactionMetadata.prepareTransitionTo`` does -- and ``NextProducerId`` (set by a TV2
  PrepareCommit/PrepareAbort at an exhausted epoch, cleared on completion), as Kafka writes them since KAFKA-20310;
* the ``ClientTransactionVersion`` a value records is Kafka's: 0 for an id InitProducerId creates, carried
  unchanged by InitProducerId, set by AddPartitionsToTxn and EndTxn to the version their request carries
  (``transaction_version=`` of :meth:`~TransactionCoordinator.add_partitions` /
  :meth:`~TransactionCoordinator.end_transaction`; by default the coordinator's own for a new transaction and
  the recorded one inside a transaction), which also picks the EndTxn path as in Kafka;
* every state change goes through :func:`kafkatx.txnlog.transition`, so an illegal one raises
  :class:`~kafkatx.errors.IllegalTransitionError` before anything is written;
* ``end_transaction`` writes PrepareCommit/PrepareAbort, then a COMMIT/ABORT marker (with the coordinator
  epoch) on every partition of the transaction, then CompleteCommit/CompleteAbort.  Under
  ``transaction_version`` 2 (KIP-890, the Kafka 4 default) the epoch is bumped at prepare time, the
  markers carry the bumped epoch and the client continues with it; under 0/1 the epoch is unchanged;
* ``init_producer_id`` allocates a producer id (epoch 0) for a new transactional id, bumps the epoch of a
  known one (fencing the previous instance), aborts its open transaction first and moves to a new producer
  id with epoch 0 once the epoch is exhausted (>= 32766).  With the ``producer_id``/``producer_epoch`` a
  running producer holds (KIP-360) it bumps that producer's epoch instead, answers a retry of that bump with
  the same epoch, and fences an instance that is not current;
* ``abort_timed_out(now_ms)`` fences and aborts Ongoing transactions whose ``start + timeout < now``.  Both
  fences are the broker's (Kafka 4.1+): PrepareEpochFence with epoch + 1 (in memory only), then
  endTransaction(ABORT, isFromClient=false) under the *coordinator's* ``transaction_version`` at that epoch:
  PrepareAbort, the markers and CompleteAbort carry epoch + 1, and an InitProducerId gets epoch + 2, as a
  Kafka client does after retrying CONCURRENT_TRANSACTIONS.  (Kafka 4.0 bumped the epoch a second time
  under version 2; 4.1 dropped that -- KAFKA-19367 -- so, as there, a timed-out producer's late
  EndTxn(ABORT) at its old epoch is answered as a retry of the abort under version 2.)
* ``add_offsets_to_txn`` and ``txn_offset_commit`` (``TransactionalProducer.send_offsets_to_transaction``)
  put a consumer group's ``__consumer_offsets`` partition into the transaction and write the offsets there as
  the producer's transactional batch; the markers reach it with the others, and
  :func:`kafkatx.grouplog.load_offsets` replays them as the group coordinator does;
* opening a coordinator on a log dir reloads the state (records decoded, last value per key wins, a
  tombstone deletes) and completes transactions left in PrepareCommit/PrepareAbort by a crash (markers
  re-sent, as the broker does on coordinator election).  Without an explicit ``coordinator_epoch`` a
  reopened coordinator takes the previous epoch + 1, so markers of a stale instance are fenced by the
  partitions (TRANSACTION_COORDINATOR_FENCED).

Producer ids are never handed out twice, not even after a crash (Kafka's ``ProducerIdManager``: a broker
takes ids from blocks of 1000 that the controller reserved durably, a ``ProducerIdsRecord`` in the metadata
log, before any of them is used).  The coordinator reserves its blocks in ``latest-producer-id-block`` in
the log dir (JSON ``{"version": 1, "block_start": s, "block_end": e}``, ``e`` inclusive, as the ZooKeeper-era
``/latest_producer_id_block`` znode), written atomically and fsynced before the first id of a new block is
handed out.  A reopened coordinator starts a new block after the reserved one -- the unused rest of the old
block is skipped, as a restarted broker skips it -- or after the largest producer id found in the state log,
in the data partitions' producer snapshots and in the writers it was given, when that is larger (a log dir
written before the block file existed).  Idempotent producers (never in the state log) and data
partitions kept elsewhere (``writers=``) are covered too.  A block file that cannot be read is an error,
not a reason to start again from 0.

Simplifications: one coordinator epoch for all state partitions; no KIP-890 partition verification.

:class:`TransactionalProducer` and :class:`IdempotentProducer` are small client stand-ins (sequence
numbers per partition, the client's transaction state table, retries of the last batch) used by the
tests and the workload generator.
"""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field

from ._fileio import atomic_write
from .batch import BatchBuilder, crc32c, increment_sequence
from .errors import (
    IllegalTransitionError,
    InvalidProducerEpochError,
    KafkaTxError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .grouplog import (
    CONSUMER_OFFSETS_TOPIC,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_records,
    group_partition_for,
)
from .log.writer import LEADER_EPOCH_CHECKPOINT, PartitionWriter, _read_leader_epochs
from .txnlog import (
    ClientTransactionState,
    TransactionState,
    TxnMetadataValue,
    UnknownKey,
    client_transition,
    decode_txn_records,
    encode_txn_records,
    transition,
    txn_partition_for,
)

__all__ = [
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionalProducer",
    "IdempotentProducer",
    "stamp_producer",
    "TransactionCoordinatorError",
    "ProducerFencedError",
    "InvalidProducerIdMappingError",
    "ConcurrentTransactionsError",
    "InvalidTransactionTimeoutError",
    "TransactionalIdNotFoundError",
    "TXN_STATE_TOPIC",
    "MAX_PRODUCER_EPOCH",
    "PRODUCER_ID_BLOCK_FILE",
    "PRODUCER_ID_BLOCK_SIZE",
]

TXN_STATE_TOPIC = "__transaction_state"
PRODUCER_ID_BLOCK_FILE = "latest-producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_MAX_PRODUCER_ID = (1 << 63) - 1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue
_EXHAUSTED = MAX_PRODUCER_EPOCH - 1  # TransactionMetadata.isProducerEpochExhausted: epoch >= 32766
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000  # transactional.id.expiration.ms
DEFAULT_STATE_SEGMENT_BYTES = 100 * 1024 * 1024  # transaction.state.log.segment.bytes
_S = TransactionState


# ------------------------------------------------------------------------------------------- errors
class TransactionCoordinatorError(KafkaTxError):
    """Base of the errors the coordinator answers a request with (Kafka's error codes)."""


class ProducerFencedError(TransactionCoordinatorError):
    """PRODUCER_FENCED: the request's producer epoch is not the transactional id's current one."""


class InvalidProducerIdMappingError(TransactionCoordinatorError):
    """INVALID_PRODUCER_ID_MAPPING: unknown transactional id, or another producer id than its current one."""


class ConcurrentTransactionsError(TransactionCoordinatorError):
    """CONCURRENT_TRANSACTIONS: the previous transaction is still being completed."""


class InvalidTransactionTimeoutError(TransactionCoordinatorError, ValueError):
    """INVALID_TRANSACTION_TIMEOUT: a timeout <= 0 or above ``max_transaction_timeout_ms``."""


class TransactionalIdNotFoundError(TransactionCoordinatorError):
    """TRANSACTIONAL_ID_NOT_FOUND."""


# ------------------------------------------------------------------------------------------ metadata
@dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional id (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: set = field(default_factory=set)  # {(topic, partition)}
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    previous_producer_id: int = -1  # prevProducerId: the producer id before the last transition
    next_producer_id: int = -1  # nextProducerId: the id a TV2 transaction moves to when it completes
    last_producer_epoch: int = -1  # Kafka's lastProducerEpoch (not persisted); EndTxn retries go by epoch arithmetic
    client_transaction_version: int = 0

    def to_value(self, value_version: int = 1) -> TxnMetadataValue:
        """The value ``TransactionLog.valueToBytes`` writes at ``value_version``: PreviousProducerId and
        NextProducerId are tagged fields, set at version 1 only (KAFKA-20310; earlier Kafka never set them)."""
        tagged_ids = value_version >= 1
        if self.state is _S.Empty:
            parts = None  # TransactionLog.valueToBytes: null partitions for Empty
        else:
            parts = {}
            for topic, p in sorted(self.partitions):
                parts.setdefault(topic, []).append(p)
        return TxnMetadataValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.transaction_timeout_ms,
            state=self.state,
            partitions=parts,
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
            previous_producer_id=self.previous_producer_id if tagged_ids else -1,
            next_producer_id=self.next_producer_id if tagged_ids else -1,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_value(cls, transactional_id: str, v: TxnMetadataValue) -> TransactionMetadata:
        parts = set()
        for topic, ids in (v.partitions or {}).items():
            parts.update((topic, p) for p in ids)
        return cls(transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.state, parts,
                   v.start_timestamp_ms, v.last_update_timestamp_ms, v.previous_producer_id, v.next_producer_id,
                   -1, v.client_transaction_version)  # fmt: skip

    def copy(self) -> TransactionMetadata:
        c = TransactionMetadata(**self.__dict__)
        c.partitions = set(self.partitions)
        return c


def _check_partitions(partitions):
    out = set()
    for tp in partitions:
        try:
            topic, p = tp
        except (TypeError, ValueError):
            raise TransactionCoordinatorError(f"a partition is a (topic, partition) pair, got {tp!r}") from None
        if not isinstance(topic, str) or not topic or not isinstance(p, int) or p < 0:
            raise TransactionCoordinatorError(f"invalid topic partition {tp!r}")
        if topic == TXN_STATE_TOPIC:
            raise TransactionCoordinatorError(f"{TXN_STATE_TOPIC} cannot take part in a transaction")
        out.add((topic, p))
    return out


# -------------------------------------------------------------------------------- producer id blocks
class _ProducerIdBlocks:
    """Producer ids handed out from blocks reserved durably in ``path`` before use (see the module docstring).

    ``floor`` is the least id the next block may start at; the reserved end read from ``path`` raises it.
    No block is held until the first :meth:`allocate`, which reserves one from ``next_id`` on."""

    def __init__(self, path: str, floor: int, block_size: int = PRODUCER_ID_BLOCK_SIZE):
        self.path = path
        self.block_size = block_size
        reserved = self._read()
        self.next_id = max(floor, reserved[1] + 1) if reserved is not None else floor
        self.block_end = self.next_id  # exclusive end of the block held: none yet

    def _read(self):
        """``(block_start, block_end)`` of the last reserved block, or None when none was reserved."""
        try:
            with open(self.path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw.decode("utf-8"))
            start, end = doc["block_start"], doc["block_end"]
            if doc.get("version") != 1 or not all(type(v) is int for v in (start, end)) or not 0 <= start <= end:
                raise ValueError(f"unexpected content {doc!r}")
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise TransactionCoordinatorError(
                f"{self.path} is not a readable producer id block ({exc}); refusing to hand out producer ids "
                "that may have been used before") from None  # fmt: skip
        return start, end

    def raise_floor(self, floor: int) -> None:
        """Hand out no id below ``floor`` (ids already seen elsewhere)."""
        if floor > self.next_id:
            self.next_id = floor
            self.block_end = max(self.block_end, floor)

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            start = self.next_id
            if start > _MAX_PRODUCER_ID - self.block_size:
                raise TransactionCoordinatorError("producer ids are exhausted")
            end = start + self.block_size - 1
            doc = {"version": 1, "block_start": start, "block_end": end}
            atomic_write(self.path, json.dumps(doc).encode("ascii"), fsync=True)  # durable before any id is used
            self.block_end = end + 1
        pid = self.next_id
        self.next_id += 1
        return pid


# ------------------------------------------------------------------------------------- coordinator
class TransactionCoordinator:
    """Drive transactional ids over the partition directories of ``log_dir`` (see the module docstring).

    ``writers`` supplies the data partitions' writers: a dict ``{(topic, partition): PartitionWriter}``
    (shared with the caller) or a callable ``(topic, partition) -> PartitionWriter``; by default
    ``<log_dir>/<topic>-<partition>`` is opened on first use with ``writer_options`` (and closed by
    :meth:`close`).  ``clock()`` returns milliseconds.  ``first_producer_id`` is where the producer id
    counter starts for a new log dir (a reopened one continues after its reserved id block).
    """

    def __init__(self, log_dir, *, writers=None, num_partitions: int = 50, coordinator_epoch: int | None = None,
                 transaction_version: int = 2, clock=None, first_producer_id: int = 0,
                 max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS, writer_options=None,
                 state_segment_bytes: int = DEFAULT_STATE_SEGMENT_BYTES, fsync: bool = False,
                 offsets_partitions: int = 50):  # fmt: skip
        if transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        if not isinstance(num_partitions, int) or num_partitions <= 0:
            raise ValueError(f"num_partitions must be a positive integer, got {num_partitions!r}")
        self.log_dir = os.fspath(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        self.num_partitions = num_partitions
        if not isinstance(offsets_partitions, int) or offsets_partitions <= 0:
            raise ValueError(f"offsets_partitions must be a positive integer, got {offsets_partitions!r}")
        self.offsets_partitions = offsets_partitions  # of __consumer_offsets (offsets.topic.num.partitions)
        self.transaction_version = transaction_version
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._clock = clock if clock is not None else (lambda: int(time.time() * 1000))
        self._writer_options = dict(writer_options or {})
        self._fsync = fsync
        self._state_segment_bytes = state_segment_bytes
        self._owned: dict = {}
        if writers is None:
            self._writers: dict = {}
            self._writer_factory = None
        elif callable(writers) and not isinstance(writers, dict):
            self._writers = {}
            self._writer_factory = writers
        else:
            self._writers = writers
            self._writer_factory = None
        self._closed = False
        self._txns: dict[str, TransactionMetadata] = {}
        self._state_writers: dict[int, PartitionWriter] = {}
        existing = self._existing_state_partitions()
        bad = [n for n in existing if n >= num_partitions]
        if bad:
            raise TransactionCoordinatorError(
                f"{TXN_STATE_TOPIC}-{max(bad)} exists in {self.log_dir} but num_partitions is {num_partitions}: "
                "transactional ids would map to other partitions"
            )
        if coordinator_epoch is None:
            last = [e[-1][0] for e in (_read_leader_epochs(os.path.join(self._state_dir(n), LEADER_EPOCH_CHECKPOINT))
                                       for n in existing) if e]  # fmt: skip
            coordinator_epoch = max(last) + 1 if last else 0
        self.coordinator_epoch = int(coordinator_epoch)
        try:
            for n in existing:
                self._load_partition(n)
            self._producer_ids = _ProducerIdBlocks(os.path.join(self.log_dir, PRODUCER_ID_BLOCK_FILE),
                                                   first_producer_id)  # fmt: skip
            self._producer_ids.raise_floor(self._max_known_producer_id() + 1)  # a log dir from before the block file
            # transactions a crash left between Prepare* and Complete*: send their markers again
            for meta in list(self._txns.values()):
                if meta.state in (_S.PrepareCommit, _S.PrepareAbort):
                    self._complete(meta, commit=meta.state is _S.PrepareCommit)
        except BaseException:
            self.close()  # a coordinator that failed to open leaves no writer (file descriptors, maps) open
            raise

    # ------------------------------------------------------------------------------ plumbing
    def _state_dir(self, n):
        return os.path.join(self.log_dir, f"{TXN_STATE_TOPIC}-{n}")

    def _existing_state_partitions(self):
        out = []
        prefix = TXN_STATE_TOPIC + "-"
        for name in os.listdir(self.log_dir):
            n = name[len(prefix) :]
            if name.startswith(prefix) and n.isascii() and n.isdigit() and os.path.isdir(os.path.join(self.log_dir, name)):
                out.append(int(n))
        return sorted(out)

    def _state_writer(self, n) -> PartitionWriter:
        w = self._state_writers.get(n)
        if w is None:
            w = PartitionWriter(self._state_dir(n), leader_epoch=self.coordinator_epoch, fsync=self._fsync,
                                segment_bytes=self._state_segment_bytes, clock=self._clock)  # fmt: skip
            self._state_writers[n] = w
        return w

    def _load_partition(self, n):
        w = self._state_writer(n)
        values: dict[str, TxnMetadataValue | None] = {}
        for base in w.segments:
            path = os.path.join(w.path, f"{base:020d}.log")
            with open(path, "rb") as fh:
                data = fh.read()
            for rec in decode_txn_records(data):
                if isinstance(rec.transactional_id, UnknownKey):
                    continue  # the coordinator skips keys of other versions
                values[rec.transactional_id] = rec.value
        for tid, v in values.items():
            if v is None:
                self._txns.pop(tid, None)
            else:
                self._txns[tid] = TransactionMetadata.from_value(tid, v)

    def _max_known_producer_id(self) -> int:
        best = -1
        for m in self._txns.values():
            best = max(best, m.producer_id, m.previous_producer_id, m.next_producer_id)
        from .producer_state import read_snapshot

        for name in os.listdir(self.log_dir):
            d = os.path.join(self.log_dir, name)
            if not os.path.isdir(d) or name.startswith(TXN_STATE_TOPIC + "-"):
                continue
            snaps = sorted(f for f in os.listdir(d) if f.endswith(".snapshot"))
            if not snaps:
                continue
            try:
                entries = read_snapshot(os.path.join(d, snaps[-1]))
            except KafkaTxError:
                continue
            for e in entries:
                best = max(best, e.producer_id)
        for w in self._writers.values():
            for pid in w.producer_state.producers:
                best = max(best, pid)
        return best

    def writer(self, topic: str, partition: int) -> PartitionWriter:
        """The writer of a data partition (opened on first use unless ``writers`` supplied it)."""
        key = (topic, partition)
        w = self._writers.get(key)
        if w is None:
            if self._writer_factory is not None:
                w = self._writer_factory(topic, partition)
            else:
                w = PartitionWriter(os.path.join(self.log_dir, f"{topic}-{partition}"), clock=self._clock,
                                    **self._writer_options)  # fmt: skip
                self._owned[key] = w
            self._writers[key] = w
        return w

    def _persist(self, meta: TransactionMetadata) -> None:
        n = txn_partition_for(meta.transactional_id, self.num_partitions)
        # TransactionLog.valueToBytes: the coordinator's transactionLogValueVersion (0 under version 0, or 1 when
        # the transaction's ClientTransactionVersion is one that 0 cannot hold: the module docstring's departure)
        version = 1 if self.transaction_version >= 1 or meta.client_transaction_version >= 1 else 0
        batch = encode_txn_records([(meta.transactional_id, meta.to_value(version))],
                                   timestamp=meta.last_update_timestamp_ms, version=version)  # fmt: skip
        self._state_writer(n).append(batch, origin="coordinator")

    def _tombstone(self, transactional_id: str, now: int) -> None:
        n = txn_partition_for(transactional_id, self.num_partitions)
        batch = encode_txn_records([(transactional_id, None)], timestamp=now)
        self._state_writer(n).append(batch, origin="coordinator")

    def _allocate_producer_id(self) -> int:
        return self._producer_ids.allocate()

    def _check_open(self):
        if self._closed:
            raise TransactionCoordinatorError("the coordinator is closed")

    def _now(self) -> int:
        return int(self._clock())

    def _apply(self, meta: TransactionMetadata, new: TransactionMetadata, *, persist: bool = True) -> None:
        """Validate ``meta.state -> new.state`` under the transaction version the change is made with (the
        transaction's, not the coordinator's: a TV0/1 transaction never goes CompleteCommit -> PrepareAbort),
        write ``new`` to the state log, then adopt it."""
        transition(meta.state, new.state, transaction_version=new.client_transaction_version)
        if persist:
            # prepareTransitionTo: every transition records the producer id it leaves as prevProducerId (the
            # in-memory PrepareEpochFence is never completed in Kafka, so it leaves it alone)
            new.previous_producer_id = meta.producer_id
            self._persist(new)
        meta.__dict__.update(new.__dict__)
        meta.partitions = set(new.partitions)

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TransactionMetadata:
        """The metadata of ``transactional_id`` if the producer id and epoch are its current ones."""
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the current one of transactional id {transactional_id!r}"
            )
        if meta.producer_epoch != producer_epoch:
            raise ProducerFencedError(
                f"producer epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                f"{meta.producer_epoch}: the producer was fenced"
            )
        return meta

    # ------------------------------------------------------------------------------ requests
    def init_producer_id(self, transactional_id: str | None = None, *, transaction_timeout_ms: int = 60000,
                         producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:  # fmt: skip
        """InitProducerId: ``(producer_id, producer_epoch)`` for a new producer instance.

        ``None`` (an idempotent producer without transactional id) gets a fresh producer id and epoch 0.

        ``producer_id`` / ``producer_epoch`` (KIP-360, InitProducerId v3+): a running producer that hit an
        error asks for an epoch bump of the id and epoch it holds, instead of starting over as a new
        instance.  The request is refused with :class:`ProducerFencedError` unless that id is the current
        one (or the one the id was rotated away from, with the epoch it was exhausted at) and the epoch is
        the current one (bumped) or the last one handed out (a retry of a bump whose answer was lost: the
        same id and epoch again, no second bump).  A transactional id unknown to the coordinator is
        created, as for a new instance (the producer recovers from UNKNOWN_PRODUCER_ID that way).  Both
        given or neither (INVALID_REQUEST otherwise).
        """
        self._check_open()
        if (producer_id == -1) != (producer_epoch == -1):
            raise TransactionCoordinatorError(
                f"INVALID_REQUEST: producer id {producer_id} and epoch {producer_epoch} must both be given or "
                "both be -1")  # fmt: skip
        expected = None if producer_id == -1 else (producer_id, producer_epoch)
        if transactional_id is None:
            return self._allocate_producer_id(), 0
        if not isinstance(transactional_id, str) or not transactional_id:
            raise TransactionCoordinatorError("INVALID_REQUEST: the transactional id is empty")
        if not 0 < transaction_timeout_ms <= self.max_transaction_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {transaction_timeout_ms} ms is not in (0, {self.max_transaction_timeout_ms}]"
            )
        now = self._now()
        meta = self._txns.get(transactional_id)
        if meta is None:
            # handleInitProducerId creates it with TransactionVersion.TV_0: the ClientTransactionVersion recorded
            # is that of the AddPartitionsToTxn/EndTxn requests, which InitProducerId leaves as it finds it
            meta = TransactionMetadata(transactional_id, self._allocate_producer_id(), -1, transaction_timeout_ms,
                                       _S.Empty, set(), -1, now)  # fmt: skip
            self._txns[transactional_id] = meta
        self._check_expected(meta, expected)
        if meta.state in (_S.PrepareCommit, _S.PrepareAbort):
            raise ConcurrentTransactionsError(f"transaction of {transactional_id!r} is being completed")
        if meta.state is _S.Ongoing:
            # fence the previous instance and abort its transaction (Kafka answers CONCURRENT_TRANSACTIONS
            # and the client retries; the retry is done here at once, with the same expected id and epoch,
            # which the fencing has made stale)
            self._fence_and_abort(meta)
            self._check_expected(meta, expected)
        new = meta.copy()
        new.transaction_timeout_ms = transaction_timeout_ms
        new.state = _S.Empty
        new.partitions = set()
        new.start_timestamp_ms = -1
        new.last_update_timestamp_ms = now
        # prepareProducerIdRotation / prepareIncrementProducerEpoch leave nextProducerId as it is; _apply sets
        # prevProducerId to the id held before (the old one when rotating)
        if meta.producer_epoch >= _EXHAUSTED and (expected is None or expected[1] == meta.producer_epoch):
            # prepareProducerIdRotation; with an expected epoch, the last epoch is kept for its retry
            new.producer_id = self._allocate_producer_id()
            new.producer_epoch = 0
            new.last_producer_epoch = meta.producer_epoch if expected is not None else -1
        elif expected is None:  # prepareIncrementProducerEpoch: a new instance
            new.producer_epoch = meta.producer_epoch + 1
            new.last_producer_epoch = -1
        elif meta.producer_epoch == -1 or expected[1] == meta.producer_epoch:  # bump the epoch it holds
            new.producer_epoch = meta.producer_epoch + 1
            new.last_producer_epoch = meta.producer_epoch
        elif expected[1] == meta.last_producer_epoch:  # a retry of the bump that made the current epoch
            pass
        else:
            raise ProducerFencedError(
                f"producer epoch {expected[1]} of {transactional_id!r} is neither the current epoch "
                f"{meta.producer_epoch} nor the last one {meta.last_producer_epoch}: the producer was fenced"
            )
        self._apply(meta, new)
        return meta.producer_id, meta.producer_epoch

    def _client_version(self, meta: TransactionMetadata, transaction_version: int | None) -> int:
        """The transaction version an AddPartitionsToTxn or EndTxn request carries (Kafka takes it from the
        request's version): ``transaction_version`` where the caller names it; else, for an id in Empty (a new
        transaction), the coordinator's own -- the client speaks the cluster's version -- and otherwise the
        version recorded for the transaction in progress or just ended (a client does not switch versions inside
        a transaction, and a retried EndTxn comes from the client that sent the first)."""
        if transaction_version is not None:
            if transaction_version not in (0, 1, 2):
                raise ValueError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
            return transaction_version
        return self.transaction_version if meta.state is _S.Empty else meta.client_transaction_version

    @staticmethod
    def _check_expected(meta: TransactionMetadata, expected) -> None:
        """TransactionCoordinator.isValidProducerId for an InitProducerId with an expected id and epoch."""
        if expected is None or meta.producer_epoch == -1:
            return
        pid, epoch = expected
        if pid == meta.producer_id or (pid == meta.previous_producer_id and epoch >= _EXHAUSTED):
            return
        raise ProducerFencedError(
            f"producer id {pid} is not the current one ({meta.producer_id}) of transactional id "
            f"{meta.transactional_id!r}: the producer was fenced"
        )

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions, *,
                       transaction_version: int | None = None) -> None:  # fmt: skip
        """AddPartitionsToTxn: the transaction moves to (or stays) Ongoing with these partitions.

        ``transaction_version``: the client's (0, 1 or 2; AddPartitionsToTxn v5+ and the implicit adds of KIP-890
        are 2), recorded as the transaction's ClientTransactionVersion as prepareAddPartitions does.  None: the
        coordinator's own for a new transaction, the recorded one for a transaction in progress or just ended."""
        self._check_open()
        parts = _check_partitions(partitions)
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state in (_S.PrepareCommit, _S.PrepareAbort):
            raise ConcurrentTransactionsError(f"transaction of {transactional_id!r} is being completed")
        if meta.state is _S.Ongoing and parts <= meta.partitions:
            return
        now = self._now()
        new = meta.copy()
        if meta.state in (_S.Empty, _S.CompleteCommit, _S.CompleteAbort):
            new.start_timestamp_ms = now
        new.state = _S.Ongoing
        new.partitions = meta.partitions | parts
        new.last_update_timestamp_ms = now
        new.client_transaction_version = self._client_version(meta, transaction_version)
        self._apply(meta, new)

    def add_offsets_to_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, *,
                           transaction_version: int | None = None) -> int:  # fmt: skip
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition (:attr:`offsets_partitions` of them)
        joins the transaction, as :meth:`add_partitions` adds one; returns its number."""
        n = group_partition_for(group_id, self.offsets_partitions)
        self.add_partitions(transactional_id, producer_id, producer_epoch, [(CONSUMER_OFFSETS_TOPIC, n)],
                            transaction_version=transaction_version)  # fmt: skip
        return n

    def txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                          offsets, *, metadata: str = "") -> None:  # fmt: skip
        """TxnOffsetCommit, the group coordinator's side: the offsets (``{(topic, partition): offset}`` or
        ``{(topic, partition): (offset, leader_epoch)}``; the next offset to consume) go into the group's
        ``__consumer_offsets`` partition as one transactional batch of the producer's id and epoch, written
        by the coordinator (base sequence 0; the partition does not check the sequence of a coordinator's
        batch), pending until the transaction's marker.  The partition must have joined the transaction
        (:meth:`add_offsets_to_txn`).  Not modelled: the group's generation and member checks (KIP-447)."""
        self._check_open()
        meta = self._current(transactional_id, producer_id, producer_epoch)
        n = group_partition_for(group_id, self.offsets_partitions)
        if meta.state is not _S.Ongoing or (CONSUMER_OFFSETS_TOPIC, n) not in meta.partitions:
            raise TransactionCoordinatorError(
                f"{CONSUMER_OFFSETS_TOPIC}-{n} (group {group_id!r}) is not in the transaction of {transactional_id!r}: "
                "AddOffsetsToTxn comes first"
            )
        now = self._now()
        items = []
        for (topic, partition), spec in sorted(dict(offsets).items()):
            offset, leader_epoch = spec if isinstance(spec, tuple) else (spec, -1)
            items.append((OffsetCommitKey(group_id, topic, partition),
                          OffsetCommitValue(offset, metadata, now, leader_epoch, version=3)))  # fmt: skip
        if not items:
            return
        batch = encode_group_records(items, timestamp=now, producer_id=producer_id, producer_epoch=producer_epoch,
                                     base_sequence=0, transactional=True)  # fmt: skip
        self.writer(CONSUMER_OFFSETS_TOPIC, n).append(batch, origin="coordinator")

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *,
                        transaction_version: int | None = None) -> tuple[int, int]:  # fmt: skip
        """EndTxn: commit or abort; returns the ``(producer_id, producer_epoch)`` the client continues with
        (bumped under transaction version 2, unchanged under 0/1).

        ``transaction_version``: the client's (EndTxn v5+ is 2), which picks Kafka's endTransaction path and is
        recorded as the ClientTransactionVersion.  None: the version recorded for the transaction in progress or
        just ended (a client keeps its version inside a transaction; a retry comes from the same client), the
        coordinator's own for an id in Empty (an abort with nothing in it)."""
        self._check_open()
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise InvalidProducerIdMappingError(f"unknown transactional id {transactional_id!r}")
        done = _S.CompleteCommit if commit else _S.CompleteAbort
        tv = self._client_version(meta, transaction_version)
        if tv >= 2:
            return self._end_transaction_v2(meta, transactional_id, producer_id, producer_epoch, commit, tv)
        if meta.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the current one of transactional id {transactional_id!r}"
            )
        if producer_epoch != meta.producer_epoch:
            raise ProducerFencedError(
                f"producer epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                f"{meta.producer_epoch}: the producer was fenced"
            )
        # endTransactionWithTV1: the same result again is a retry (of one being completed, or completed);
        # anything else but Ongoing is INVALID_TXN_STATE
        state = meta.state
        if state in (_S.PrepareCommit, _S.PrepareAbort) and (state is _S.PrepareCommit) == commit:
            raise ConcurrentTransactionsError(f"transaction of {transactional_id!r} is being completed")
        if state is done:
            return meta.producer_id, meta.producer_epoch  # TV0/1: a retry of a completed EndTxn
        if state is not _S.Ongoing:
            raise IllegalTransitionError(
                f"EndTxn({'COMMIT' if commit else 'ABORT'}) of {transactional_id!r} in state {state.name} is not "
                f"a valid transition (INVALID_TXN_STATE)", state, _S.PrepareCommit if commit else _S.PrepareAbort)
        self._prepare(meta, commit=commit, transaction_version=tv)
        self._complete(meta, commit=commit)
        return meta.producer_id, meta.producer_epoch

    def _end_transaction_v2(self, meta, transactional_id, producer_id, producer_epoch, commit, tv):
        """EndTxn under transaction version 2 (TransactionCoordinator.endTransaction): every commit or abort
        bumps the epoch, so a retry is recognised by its epoch (one below the current, or the last epoch of
        the previous producer id after an overflow), which needs no state beyond __transaction_state."""
        retry_on_overflow = (producer_id == meta.previous_producer_id and producer_epoch == _EXHAUSTED
                             and meta.producer_epoch == 0)  # fmt: skip
        if meta.producer_id != producer_id and not retry_on_overflow:
            raise InvalidProducerIdMappingError(
                f"producer id {producer_id} is not the current one of transactional id {transactional_id!r}"
            )
        retry_on_bump = meta.producer_epoch == producer_epoch + 1
        state = meta.state
        if state in (_S.PrepareCommit, _S.PrepareAbort):
            valid = retry_on_bump
        elif state in (_S.CompleteCommit, _S.CompleteAbort):
            valid = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if not valid:
            raise ProducerFencedError(
                f"producer epoch {producer_epoch} of {transactional_id!r} is not the current epoch "
                f"{meta.producer_epoch}: the producer was fenced"
            )
        is_retry = retry_on_bump or retry_on_overflow
        result = "COMMIT" if commit else "ABORT"
        if state in (_S.PrepareCommit, _S.PrepareAbort):
            if (state is _S.PrepareCommit) == commit:
                raise ConcurrentTransactionsError(f"transaction of {transactional_id!r} is being completed")
        elif state is _S.CompleteCommit or state is _S.CompleteAbort:
            same = (state is _S.CompleteCommit) == commit
            if is_retry and same:
                return meta.producer_id, meta.producer_epoch  # a retry of the EndTxn that completed it
            if not is_retry and not commit:
                # an abort with nothing in it: bumps the epoch
                self._prepare(meta, commit=False, transaction_version=tv)
                self._complete(meta, commit=False)
                return meta.producer_id, meta.producer_epoch
        elif state is _S.Ongoing or (state is _S.Empty and not commit):
            self._prepare(meta, commit=commit, transaction_version=tv)
            self._complete(meta, commit=commit)
            return meta.producer_id, meta.producer_epoch
        raise IllegalTransitionError(
            f"EndTxn({result}) of {transactional_id!r} in state {state.name} is not a valid transition "
            f"(INVALID_TXN_STATE)"
        )

    def abort_timed_out(self, now_ms: int | None = None) -> list[str]:
        """Fence and abort every Ongoing transaction with ``start + timeout < now``; returns their ids."""
        self._check_open()
        now = self._now() if now_ms is None else now_ms
        out = []
        for tid, meta in list(self._txns.items()):
            if meta.state is _S.Ongoing and meta.start_timestamp_ms + meta.transaction_timeout_ms < now:
                self._fence_and_abort(meta)
                out.append(tid)
        return out

    def expire_transactional_ids(self, now_ms: int | None = None, *,
                                 expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS) -> list[str]:  # fmt: skip
        """Remove ids idle in Empty/CompleteCommit/CompleteAbort for ``expiration_ms`` (Dead, tombstone)."""
        self._check_open()
        now = self._now() if now_ms is None else now_ms
        out = []
        for tid, meta in list(self._txns.items()):
            if meta.state.expiration_allowed and meta.last_update_timestamp_ms + expiration_ms <= now:
                transition(meta.state, _S.Dead, transaction_version=meta.client_transaction_version)
                self._tombstone(tid, now)
                del self._txns[tid]
                out.append(tid)
        return out

    # ------------------------------------------------------------------------------ transitions
    def _fence_and_abort(self, meta: TransactionMetadata) -> None:
        """Fence the producer of an Ongoing transaction and abort it, as the broker does for an InitProducerId
        of a new instance and for a timed-out transaction: prepareFenceProducerEpoch (epoch + 1, in memory
        only), then endTransaction(ABORT, isFromClient=false) with the coordinator's own transaction version,
        at that epoch under every version (Kafka 4.1+, KAFKA-19367; 4.0 bumped it a second time under
        version 2): PrepareAbort, the markers and CompleteAbort carry epoch + 1."""
        if meta.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise TransactionCoordinatorError(
                f"cannot fence producer {meta.producer_id} of {meta.transactional_id!r}: epoch {meta.producer_epoch} "
                "would overflow")  # fmt: skip
        fenced = meta.copy()  # prepareFenceProducerEpoch: in memory only, never written
        fenced.state = _S.PrepareEpochFence
        fenced.producer_epoch = meta.producer_epoch + 1
        fenced.last_producer_epoch = -1
        self._apply(meta, fenced, persist=False)
        self._prepare(meta, commit=False, transaction_version=self.transaction_version, fence=True)
        self._complete(meta, commit=False)

    def _prepare(self, meta: TransactionMetadata, *, commit: bool, transaction_version: int,
                 fence: bool = False) -> None:  # fmt: skip
        """PrepareCommit/PrepareAbort (TransactionMetadata.prepareAbortOrCommit) under ``transaction_version``:
        the client's for an EndTxn, the coordinator's for a fencing abort; the value records it."""
        now = self._now()
        new = meta.copy()
        new.state = _S.PrepareCommit if commit else _S.PrepareAbort
        new.last_update_timestamp_ms = now
        new.client_transaction_version = transaction_version
        # prepareAbortOrCommit takes nextProducerId from its caller: -1 from endTransactionWithTV1 and from a
        # fencing abort, a new id from a TV2 EndTxn at an exhausted epoch
        new.next_producer_id = -1
        # KIP-890: a client's commit or abort bumps the epoch; a fencing abort does not bump it again (it runs
        # at the fencing epoch: KAFKA-19367, Kafka 4.1)
        if transaction_version >= 2 and not fence:
            if meta.producer_epoch >= _EXHAUSTED:
                new.next_producer_id = self._allocate_producer_id()  # rotate the id at completion
            if meta.producer_epoch < MAX_PRODUCER_EPOCH:
                new.producer_epoch = meta.producer_epoch + 1
            elif commit:
                raise TransactionCoordinatorError(
                    f"cannot commit the transaction of {meta.transactional_id!r}: producer epoch "
                    f"{meta.producer_epoch} would overflow")  # fmt: skip
            # else: an abort at the last epoch keeps it (newer Kafka lets it through so the id can recover)
            new.last_producer_epoch = meta.producer_epoch
        if meta.state in (_S.Empty, _S.CompleteCommit, _S.CompleteAbort):
            new.start_timestamp_ms = now  # TV2: an abort without partitions
            new.partitions = set()
        self._apply(meta, new)

    def _complete(self, meta: TransactionMetadata, *, commit: bool) -> None:
        kind = "commit" if commit else "abort"
        for topic, p in sorted(meta.partitions):
            self.writer(topic, p).append_marker(kind, producer_id=meta.producer_id,
                                                producer_epoch=meta.producer_epoch,
                                                coordinator_epoch=self.coordinator_epoch,
                                                transaction_version=meta.client_transaction_version)  # fmt: skip
        new = meta.copy()
        new.state = _S.CompleteCommit if commit else _S.CompleteAbort
        new.partitions = set()
        new.last_update_timestamp_ms = self._now()
        # prepareComplete: a TV2 transaction given a next producer id moves to it at epoch 0 (prevProducerId, set
        # by _apply, is the id it ran under); nextProducerId is cleared under every version
        if meta.client_transaction_version >= 2 and meta.next_producer_id >= 0:
            new.producer_id = meta.next_producer_id
            new.producer_epoch = 0
        new.next_producer_id = -1
        self._apply(meta, new)

    # ------------------------------------------------------------------------------ views
    def describe(self, transactional_id: str) -> TransactionMetadata:
        meta = self._txns.get(transactional_id)
        if meta is None:
            raise TransactionalIdNotFoundError(f"unknown transactional id {transactional_id!r}")
        return meta.copy()

    def transactional_ids(self) -> list[str]:
        return sorted(self._txns)

    def state_partition_for(self, transactional_id: str) -> int:
        return txn_partition_for(transactional_id, self.num_partitions)

    @property
    def state_partitions(self) -> list[int]:
        """The ``__transaction_state`` partitions this coordinator has opened (loaded or written)."""
        return sorted(self._state_writers)

    def close(self) -> None:
        """Close the state log writers and the data writers this coordinator opened itself."""
        if self._closed:
            return
        self._closed = True
        for w in self._state_writers.values():
            w.close()
        for key, w in self._owned.items():
            w.close()
            self._writers.pop(key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------------------- producers
_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence at byte 43
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


def stamp_producer(batch, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool) -> bytes:
    """A copy of a v2 ``batch`` with its producer id, epoch, base sequence and transactional flag set
    (the CRC is recomputed: these fields are CRC-covered)."""
    out = bytearray(batch)
    if len(out) < 61 or out[16] != 2:
        raise TransactionCoordinatorError("stamp_producer needs one magic v2 record batch")
    (length,) = struct.unpack_from(">i", out, 8)
    if length + 12 != len(out):
        raise TransactionCoordinatorError(f"stamp_producer needs exactly one batch ({length + 12} != {len(out)} bytes)")
    _PRODUCER_FIELDS.pack_into(out, 43, producer_id, producer_epoch, base_sequence)
    (attrs,) = _ATTRIBUTES.unpack_from(out, 21)
    _ATTRIBUTES.pack_into(out, 21, (attrs | 0x10) if transactional else (attrs & ~0x10))
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


class IdempotentProducer:
    """An idempotent (non-transactional) producer: producer id, epoch and a sequence per partition.

    ``send`` builds one batch from ``records`` (``(key, value)``, ``(key, value, timestamp)`` or
    ``(key, value, timestamp, headers)`` tuples) and appends it to the partition's writer;
    ``send_batch`` takes a batch built without producer fields and stamps this producer's (as the
    client's sender does when it drains a batch); ``resend_last`` appends the last batch sent to a
    partition again (a retry, which the writer answers as a duplicate).
    """

    transactional = False

    def __init__(self, coordinator: TransactionCoordinator, *, compression="none", clock=None):
        self.coordinator = coordinator
        self.compression = compression
        self._clock = clock if clock is not None else (lambda: int(time.time() * 1000))
        self._sequences: dict = {}
        self._last_batch: dict = {}
        self.producer_id, self.producer_epoch = coordinator.init_producer_id(None)

    def _reset_sequences(self):
        self._sequences.clear()
        self._last_batch.clear()

    def bump_epoch(self) -> tuple[int, int]:
        """KIP-360 for an idempotent producer: after an OUT_OF_ORDER_SEQUENCE (or UNKNOWN_PRODUCER_ID)
        answer the client bumps its epoch itself and starts every partition's sequence at 0 again, so the
        batches it still has to send are accepted without a new producer id; at the last epoch it takes a
        new producer id instead.  Returns the new ``(producer_id, producer_epoch)``."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            self.producer_id, self.producer_epoch = self.coordinator.init_producer_id(None)
        else:
            self.producer_epoch += 1
        self._reset_sequences()
        return self.producer_id, self.producer_epoch

    def next_sequence(self, topic: str, partition: int) -> int:
        return self._sequences.get((topic, partition), 0)

    def build(self, topic: str, partition: int, records, *, compression=None, compression_level=None) -> bytes:
        seq = self._sequences.get((topic, partition), 0)
        b = BatchBuilder(producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=seq,
                         transactional=self.transactional,
                         compression=self.compression if compression is None else compression,
                         compression_level=compression_level)  # fmt: skip
        now = None
        append = b.append
        for rec in records:
            n = len(rec)
            if n == 2:
                if now is None:
                    now = self._clock()
                append(rec[1], rec[0], timestamp=now)
            elif n == 3:
                append(rec[1], rec[0], timestamp=rec[2])
            else:
                append(rec[1], rec[0], timestamp=rec[2], headers=rec[3])
        if not b.records_count:
            raise TransactionCoordinatorError("a batch needs at least one record")
        return b.build()

    def _send_bytes(self, topic, partition, data, count):
        info = self.coordinator.writer(topic, partition).append(data)
        key = (topic, partition)
        if not info.duplicate:
            self._sequences[key] = increment_sequence(self._sequences.get(key, 0), count)
        self._last_batch[key] = data
        return info

    def send(self, topic: str, partition: int, records, *, compression=None, compression_level=None):
        """Build a batch of ``records`` with this producer's fields and append it; returns the AppendInfo."""
        records = records if isinstance(records, list) else list(records)
        data = self.build(topic, partition, records, compression=compression, compression_level=compression_level)
        return self._send_bytes(topic, partition, data, len(records))

    def send_batch(self, topic: str, partition: int, batch):
        """Stamp this producer's id, epoch, next sequence (and transactional flag) on ``batch`` and append it."""
        (count,) = struct.unpack_from(">i", batch, 57) if len(batch) >= 61 else (0,)
        if count <= 0:
            raise TransactionCoordinatorError("send_batch needs a record batch with at least one record")
        data = stamp_producer(batch, self.producer_id, self.producer_epoch,
                              self._sequences.get((topic, partition), 0), self.transactional)  # fmt: skip
        return self._send_bytes(topic, partition, data, count)

    def resend_last(self, topic: str, partition: int):
        """Append the last batch sent to this partition again, byte for byte (a producer retry)."""
        data = self._last_batch.get((topic, partition))
        if data is None:
            raise TransactionCoordinatorError(f"nothing was sent to {topic}-{partition} yet")
        return self.coordinator.writer(topic, partition).append(data)


class TransactionalProducer(IdempotentProducer):
    """A transactional producer: ``init_transactions``, ``begin_transaction``, ``send``,
    ``commit_transaction`` / ``abort_transaction``, following the client's state table
    (:func:`kafkatx.txnlog.client_transition`).  A fenced producer moves to FATAL_ERROR."""

    transactional = True

    def __init__(self, coordinator: TransactionCoordinator, transactional_id: str, *,
                 transaction_timeout_ms: int = 60000, compression="none", clock=None, init: bool = True):  # fmt: skip
        self.coordinator = coordinator
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.compression = compression
        self._clock = clock if clock is not None else (lambda: int(time.time() * 1000))
        self._sequences = {}
        self._last_batch = {}
        self._partitions: set = set()
        self._epoch_bump_required = False
        self.state = ClientTransactionState.UNINITIALIZED
        self.producer_id, self.producer_epoch = -1, -1
        if init:
            self.init_transactions()

    def _to(self, target):
        self.state = client_transition(self.state, target)

    def init_transactions(self) -> tuple[int, int]:
        self._to(ClientTransactionState.INITIALIZING)
        return self._init_producer_id(-1, -1)

    def _init_producer_id(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        try:
            pid, epoch = self.coordinator.init_producer_id(
                self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
                producer_id=producer_id, producer_epoch=producer_epoch,
            )
        except KafkaTxError:
            self.state = ClientTransactionState.FATAL_ERROR
            raise
        self.producer_id, self.producer_epoch = pid, epoch
        self._epoch_bump_required = False
        self._reset_sequences()
        self._to(ClientTransactionState.READY)
        return pid, epoch

    @property
    def epoch_bump_required(self) -> bool:
        """A send failed with OUT_OF_ORDER_SEQUENCE: the transaction must be aborted, and the abort gets a
        new epoch (KIP-360) before the producer goes on."""
        return self._epoch_bump_required

    def begin_transaction(self) -> None:
        self._to(ClientTransactionState.IN_TRANSACTION)
        self._partitions = set()

    def _fatal(self):
        self.state = ClientTransactionState.FATAL_ERROR

    def _send_bytes(self, topic, partition, data, count):
        if self.state is not ClientTransactionState.IN_TRANSACTION:
            raise TransactionCoordinatorError(f"send needs an open transaction (producer state {self.state.name})")
        key = (topic, partition)
        if key not in self._partitions:
            try:
                self.coordinator.add_partitions(self.transactional_id, self.producer_id, self.producer_epoch, [key])
            except (ProducerFencedError, InvalidProducerIdMappingError):
                self._fatal()
                raise
            self._partitions.add(key)
        try:
            return super()._send_bytes(topic, partition, data, count)
        except InvalidProducerEpochError:
            self._fatal()
            raise
        except OutOfOrderSequenceError:
            # an abortable error (KIP-360): abort_transaction() then bumps the epoch, and the producer goes on
            self._to(ClientTransactionState.ABORTABLE_ERROR)
            self._epoch_bump_required = True
            raise

    def send_offsets_to_transaction(self, offsets, group_id: str, *, metadata: str = "") -> None:
        """``sendOffsetsToTransaction``: AddOffsetsToTxn (the group's ``__consumer_offsets`` partition joins
        the transaction), then TxnOffsetCommit of ``offsets`` (``{(topic, partition): next offset}`` or
        ``(offset, leader_epoch)`` values); they count for the group only if the transaction commits."""
        if self.state is not ClientTransactionState.IN_TRANSACTION:
            raise TransactionCoordinatorError(
                f"sendOffsetsToTransaction needs an open transaction (producer state {self.state.name})")
        try:
            n = self.coordinator.add_offsets_to_txn(self.transactional_id, self.producer_id, self.producer_epoch,
                                                    group_id)  # fmt: skip
            self.coordinator.txn_offset_commit(self.transactional_id, self.producer_id, self.producer_epoch, group_id,
                                               offsets, metadata=metadata)  # fmt: skip
        except (ProducerFencedError, InvalidProducerIdMappingError):
            self._fatal()
            raise
        self._partitions.add((CONSUMER_OFFSETS_TOPIC, n))

    def _end(self, commit):
        self._to(ClientTransactionState.COMMITTING_TRANSACTION if commit
                 else ClientTransactionState.ABORTING_TRANSACTION)  # fmt: skip
        try:
            pid, epoch = self.coordinator.end_transaction(self.transactional_id, self.producer_id,
                                                          self.producer_epoch, commit)  # fmt: skip
        except (ProducerFencedError, InvalidProducerIdMappingError, TransactionCoordinatorFencedError):
            self._fatal()
            raise
        self._partitions = set()
        if (pid, epoch) != (self.producer_id, self.producer_epoch):
            self.producer_id, self.producer_epoch = pid, epoch  # TV2: the bumped epoch, sequences from 0
            self._epoch_bump_required = False
            self._reset_sequences()
        elif self._epoch_bump_required:
            # TV0/1 after an abortable error: InitProducerId with the id and epoch held (KIP-360), which
            # the coordinator bumps unless another instance fenced this one
            self._to(ClientTransactionState.INITIALIZING)
            return self._init_producer_id(self.producer_id, self.producer_epoch)
        self._to(ClientTransactionState.READY)
        return pid, epoch

    def commit_transaction(self) -> tuple[int, int]:
        return self._end(True)

    def abort_transaction(self) -> tuple[int, int]:
        return self._end(False)

    @property
    def partitions_in_transaction(self) -> set:
        return set(self._partitions)
