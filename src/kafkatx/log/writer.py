"""Append to a Kafka partition directory the way a broker's partition leader does.

:class:`PartitionWriter` owns one ``<topic>-<partition>`` directory and writes exactly the files a broker
writes there (``storage/.../log/UnifiedLog``, ``LocalLog``, ``LogSegment``, ``LogLoader``,
``LogValidator``, ``ProducerStateManager``; kafka-format.md sections 2, 7, 8, 11):

* ``<base>.log`` segments of v2 record batches.  A client batch is checked as ``UnifiedLog`` and
  ``LogValidator`` check a Produce request, in their order: base offset 0, ``message.max.bytes``, CRC,
  then one v2 batch with ``count > 0`` and ``lastOffsetDelta == count - 1``, no control batch,
  ``producerId >= 0`` needs ``baseSequence >= 0``, record timestamps within
  ``message.timestamp.before/after.max.ms`` (no LogAppendTime flag from a producer on a LogAppendTime
  topic), the segment size.  A full segment rolls first (as ``UnifiedLog.append`` does, even for a batch
  that turns out to be a duplicate); then the producer-state checks (duplicate, epoch, sequence,
  transaction state) run *before anything is written*, and the batch gets its offsets by rewriting
  ``baseOffset`` and stamping ``partitionLeaderEpoch`` -- both outside the CRC, so the CRC is not
  recomputed.  The only rewrites that do touch CRC-covered bytes are Kafka's own: ``maxTimestamp`` set
  to the records' real maximum and the timestamp type set to the topic's (CreateTime), the LogAppendTime
  stamp, and a compressed batch whose records do not number their offsets 0..count-1, which is rebuilt.
* A follower's append (``origin="replication"``) may carry several batches; as in ``UnifiedLog.append``
  all of them are checked -- framing, CRC, offsets and the producer-state rules -- before any is written,
  the append rolls at most once and lands in one segment, and each transaction it completes gets its last
  stable offset from the producer state after the whole append (a transaction opened later in the same
  append counts).
* ``<base>.index`` / ``<base>.timeindex`` (:mod:`kafkatx.log.index`): ``LogSegment.append`` adds an entry
  ``(batch last offset -> batch position)`` and a time entry ``(max timestamp so far, its batch's last
  offset)`` when more than ``index_interval_bytes`` were appended since the last entry.  On roll and on
  close the time index gets a last entry for the segment's maximum timestamp and both files are trimmed.
* ``<base>.txnindex``: one ``AbortedTxn(pid, first offset, marker offset, LSO)`` per ABORT marker that
  ends a transaction with data in this partition, in the segment holding the marker, with the section
  7.2 last stable offset (computed by :class:`kafkatx.producer_state.ProducerStateManager`).
* ``<offset>.snapshot``: the producer state when a segment rolls (named after the new segment's base
  offset) and at close (named after the log end offset), as ``UnifiedLog.roll`` / ``close`` do.
* ``leader-epoch-checkpoint``: ``epoch start-offset`` lines, updated when a new leader epoch first
  appends (``LeaderEpochFileCache.assign``).

Reopening a directory recovers it like ``LogLoader`` after an unclean shutdown: stray temporary and
orphaned index files are removed; every batch of the segments from the recovery point on is validated
(framing, CRC, offsets) -- the last segment only, unless a recovery point is given or read from the
``recovery-point-offset-checkpoint`` of the parent directory (a broker's log dir; a partition it does not
list, or an unreadable file, means 0 as for the broker; a ``.kafka_cleanshutdown`` file beside it means no
recovery) -- and a torn or corrupt batch is cut off with everything after it, later segments included
(bytes before it are never rewritten); the recovered segments' indexes are rebuilt (so no entry points
past the end); an earlier segment whose index is missing or unsound is recovered as ``LogLoader`` recovers
it (``LogSegment.recover``): its batches validated, the segment cut at its first invalid one while the
segments after it stay (as in the broker; snapshots after the cut are deleted, since they describe
batches no longer there), and its indexes rebuilt from what is left; the newest
readable snapshot at or below the first recovered segment's base offset is loaded (corrupt ones are
deleted, as the broker does) and the batches after it are replayed with ``origin="replication"``
semantics to restore producer state and open transactions; the ``.txnindex`` of every segment from the
first recovered one on is brought in line with the replay (kept where it agrees, cut where it runs past
the log end, completed where an entry is missing), and a damaged ``.txnindex`` of an earlier segment is
made again from the producer state at that segment (``LogLoader.recoverSegment``: the newest snapshot at
or below it, and the batches from there to its end); snapshots beyond the log end are deleted.  The
producer state the writer then goes on with is ``UnifiedLog.rebuildProducerState``'s, a snapshot at or
below the log end and the batches after it: after a clean shutdown (the marker above, or what ``close``
leaves: the recovery point at the log end and a snapshot there) the newest readable snapshot at or below
the log end, taken as it is; otherwise the replay's state as the snapshot the broker's recovery writes at
the log end holds it.  Either way one batch per producer is kept for de-duplication, as in Kafka (a retry
of an older batch after a reopen is OUT_OF_ORDER_SEQUENCE), and producers idle for
``producer.id.expiration.ms`` without an open transaction are dropped, as the broker's load of that
snapshot does.  What happened is in :attr:`PartitionWriter.recovery`.
:meth:`PartitionWriter.flush` and ``close`` fsync every segment written since the recovery point (rolled
segments are not synced when they roll, as the broker leaves that to a later flush) and record the new
recovery point in the parent directory's ``recovery-point-offset-checkpoint``, as the broker's
``LogManager`` does for its log dirs.

Not modelled: replication (the high watermark is the log end offset), retention and compaction,
KIP-890 transaction verification, message format conversion.  A writer is not thread-safe.
"""

from __future__ import annotations

import errno
import os
import random
import struct
import threading
import time
from bisect import bisect_right
from contextlib import contextmanager, suppress
from typing import NamedTuple

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lock only
    fcntl = None

from .._backend import codec as _default_codec
from .._common import byte_view
from .._legacy import legacy_crc
from .._fileio import O_BINARY, O_CLOEXEC, fsync_dir, mapped, writev
from ..errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    CrcMismatchError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaTxError,
    UnsupportedCompressionError,
)
from ..producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ORIGIN_CLIENT,
    ORIGIN_COORDINATOR,
    ORIGIN_REPLICATION,
    CompletedTxn,
    ProducerStateManager,
    rebuild_from_log,
)
from ..batch import BatchBuilder
from ..transactions import encode_marker
from ..txnindex import TransactionIndex, read_txnindex, write_txnindex
from .reader import _relocate, parse_partition_dir_name
from .index import (
    DEFAULT_MAX_INDEX_SIZE,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    CheckpointError,
    OffsetIndex,
    TimeIndex,
    parse_segment_file_name,
    read_checkpoint,
    segment_file_name,
    write_checkpoint,
)

__all__ = [
    "PartitionWriter",
    "AppendInfo",
    "RecoveryInfo",
    "LogWriterError",
    "RecordTooLargeError",
    "RecordBatchTooLargeError",
    "UnexpectedAppendOffsetError",
    "LogClosedError",
    "LEADER_EPOCH_CHECKPOINT",
    "DEFAULT_SEGMENT_BYTES",
    "DEFAULT_INDEX_INTERVAL_BYTES",
    "DEFAULT_MAX_MESSAGE_BYTES",
]

DEFAULT_SEGMENT_BYTES = 1 << 30  # log.segment.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # log.index.interval.bytes
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # message.max.bytes (1 MiB + 12)
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000  # log.message.timestamp.after.max.ms (Kafka 4.0, KIP-1030)
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # in the log dir after a clean broker shutdown: no recovery
INT32_MAX = 2147483647

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")  # bytes 0..15: baseOffset, batchLength, partitionLeaderEpoch
_ATTRS_AT = struct.Struct(">h")
_MAXTS_AT = struct.Struct(">q")
_CRC_AT = struct.Struct(">I")
_I32 = struct.Struct(">i")
_HEADER_SIZE = 61
_CONTROL = 0x20
_TRANSACTIONAL = 0x10
_LOG_APPEND_TIME = 0x08
_ORIGINS = (ORIGIN_CLIENT, ORIGIN_COORDINATOR, ORIGIN_REPLICATION)


# ------------------------------------------------------------------------------------------- errors
class LogWriterError(KafkaTxError):
    """Base of the errors only the writer raises."""


class RecordTooLargeError(LogWriterError, ValueError):
    """A batch larger than ``max_message_bytes`` (Kafka's RecordTooLargeException, MESSAGE_TOO_LARGE)."""


class RecordBatchTooLargeError(LogWriterError, ValueError):
    """A batch larger than a whole segment (Kafka's RecordBatchTooLargeException)."""


class UnexpectedAppendOffsetError(LogWriterError, ValueError):
    """A replicated batch whose offsets do not continue the log (Kafka's UnexpectedAppendOffsetException /
    OffsetsOutOfOrderException)."""


class LogClosedError(LogWriterError):
    """The writer was closed."""


class LogSegmentOffsetOverflowError(LogWriterError, ValueError):
    """A replicated append whose offsets no segment can hold: its last offset lies more than 2^31 - 1 past
    its first (Kafka's LogSegmentOffsetOverflowException; nothing is written)."""


# ------------------------------------------------------------------------------------------- results
class AppendInfo(NamedTuple):
    """What an append did (Kafka's ``LogAppendInfo``, trimmed).

    For a duplicate (``duplicate`` True) nothing was written: ``first_offset`` / ``last_offset`` /
    ``max_timestamp`` are those of the original batch, ``size_in_bytes`` is 0 and ``position`` and
    ``segment_base_offset`` are -1.  ``log_append_time`` is -1 unless the writer stamps LogAppendTime.
    ``completed_txn`` is set when an appended marker ended a transaction (with its last stable offset).
    """

    first_offset: int
    last_offset: int
    log_append_time: int
    duplicate: bool
    max_timestamp: int = -1
    records_count: int = 0
    size_in_bytes: int = 0
    segment_base_offset: int = -1
    position: int = -1
    completed_txn: CompletedTxn | None = None


class RecoveryInfo(NamedTuple):
    """What opening an existing directory found and repaired."""

    segments: int
    truncated_bytes: int  # bytes cut from the end of the last segment (torn or corrupt tail)
    truncated_at: int  # byte position of the cut in the last segment (its valid size)
    rebuilt_indexes: tuple  # paths of .index / .timeindex files rebuilt from their log
    repaired_txn_indexes: tuple  # paths of .txnindex files changed to agree with the log
    snapshot_offset: int | None  # offset of the snapshot the recovery replay started from (<= the first recovered segment)
    replayed_from: int  # first offset of the recovery replay
    replayed_batches: int
    deleted_files: tuple  # stray temporary / orphaned / corrupt / out-of-range files removed
    recovered_from: int | None = None  # base offset of the first segment whose every batch was validated
    # (path, bytes kept, bytes cut) of each earlier segment cut at an invalid batch when its missing or
    # damaged index was rebuilt (the segments after it are kept, as the broker keeps them)
    cut_segments: tuple = ()
    # offset of the snapshot at or below the log end the producer state was finally loaded from after a clean
    # close (UnifiedLog.rebuildProducerState), when it is newer than snapshot_offset; None: the state is the
    # recovery replay's, cut to what a snapshot at the log end holds
    state_snapshot_offset: int | None = None


_CHECKPOINT_LOCK = threading.Lock()


@contextmanager
def _log_dir_locked(directory):
    """Hold the log directory for a read-modify-write of one of its checkpoint files: a lock in this
    process and ``flock`` on the directory itself between processes (no lock file is added; the broker's
    own ``.lock`` file is left alone)."""
    with _CHECKPOINT_LOCK:
        fd = os.open(directory, os.O_RDONLY) if fcntl is not None else None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the flock


def _fsync_path(path) -> None:
    # (Windows flushes only a descriptor open for writing; POSIX any)
    fd = os.open(path, (os.O_RDONLY if os.name == "posix" else os.O_RDWR) | O_BINARY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _default_clock() -> int:
    return int(time.time() * 1000)


def _resolve_codec(codec):
    if codec is None:
        return _default_codec
    if isinstance(codec, str):
        import importlib

        names = {"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}
        if codec not in names:
            raise ValueError(f"codec must be 'cython', 'python' or a codec module, got {codec!r}")
        return importlib.import_module(names[codec])
    return codec


def _write_views(fd, views: list) -> tuple:
    """Write ``views`` (1-D byte memoryviews, consumed) in order with ``writev``, again after a short write:
    ``(bytes written, None)``, or ``(bytes written, the OSError that stopped it)``."""
    done = 0
    try:
        while views:
            n = writev(fd, views)
            if n == 0 and any(v.nbytes for v in views):
                raise OSError(errno.EIO, "write() wrote nothing")
            done += n
            while views and n >= views[0].nbytes:
                n -= views.pop(0).nbytes
            if n:
                views[0] = views[0][n:]
    except OSError as exc:
        return done, exc
    return done, None


def _cut_torn(fd, end: int, torn: int) -> None:
    """After a write that failed part way (ENOSPC, EFBIG...): ``torn`` bytes of the append it was making
    reached the file past ``end``, where the segment's bytes written end; they are cut off, so that the
    next append goes at ``end``, not after a torn batch (which a reload would take for a crash's tail,
    cutting every append after it)."""
    if torn:
        os.ftruncate(fd, end)


def _read_leader_epochs(path) -> list[tuple[int, int]]:
    """Entries of a ``leader-epoch-checkpoint`` (version 0, count, ``epoch start_offset`` lines)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except (FileNotFoundError, UnicodeDecodeError):
        return []
    try:
        if lines[0].strip() != "0":
            return []
        count = int(lines[1])
        out = []
        for line in lines[2 : 2 + count]:
            epoch, offset = line.split()
            out.append((int(epoch), int(offset)))
        return out if len(out) == count else []
    except (IndexError, ValueError):
        return []


def _close_index(idx, fsync):
    """Trim and close an index; without ``fsync`` skip the flush (a roll: Kafka flushes later, if at all)."""
    idx.close(fsync=fsync)


# ------------------------------------------------------------------------------------------- segment
class _Segment:
    """The active segment: its log descriptor, its writable indexes and LogSegment's counters."""

    __slots__ = ("base_offset", "dir", "log_path", "fd", "size", "written", "index", "timeindex", "txnindex", "max_ts",
                 "offset_of_max_ts", "bytes_since_index", "rolling_ts", "created", "roll_jitter_ms")  # fmt: skip

    def __init__(self, directory, base_offset, max_index_size, size=0, created=0, roll_jitter_ms=0):
        self.base_offset = base_offset
        self.dir = directory
        self.log_path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | O_BINARY | O_CLOEXEC, 0o644)
        self.size = size
        self.written = size  # with write_buffer_bytes, the bytes in the file (size - written are held)
        self.index = OffsetIndex(self.path(INDEX_SUFFIX), base_offset, max_index_size=max_index_size, writable=True)
        self.timeindex = TimeIndex(self.path(TIME_INDEX_SUFFIX), base_offset, max_index_size=max_index_size,
                                   writable=True)  # fmt: skip
        self.txnindex = TransactionIndex(self.path(TXN_INDEX_SUFFIX), base_offset)
        self.max_ts = -1  # TimestampOffset.UNKNOWN / an empty time index's last entry
        self.offset_of_max_ts = base_offset
        self.bytes_since_index = 0
        self.rolling_ts = None  # max timestamp of the first batch (LogSegment.rollingBasedTimestamp)
        self.created = created  # clock() when made: at a roll, or when the writer opened the log
        self.roll_jitter_ms = roll_jitter_ms  # LogSegment.rollJitterMs: drawn once per segment object

    def path(self, suffix):
        return os.path.join(self.dir, segment_file_name(self.base_offset, suffix))

    def close_indexes(self, fsync=True):
        # LogSegment.onBecomeInactiveSegment / close: the largest timestamp goes into the time index,
        # then both indexes are trimmed to their entries
        if self.max_ts >= 0:
            self.timeindex.append(self.max_ts, self.offset_of_max_ts, skip_full_check=True)
        _close_index(self.index, fsync)
        _close_index(self.timeindex, fsync)
        self.txnindex.close()


# -------------------------------------------------------------------------------------------- writer
class PartitionWriter:
    """Append batches and transaction markers to a ``<topic>-<partition>`` directory like a broker leader.

    ``path`` is created if missing; an existing directory is recovered (see the module docstring).
    ``segment_bytes`` / ``index_interval_bytes`` / ``max_index_size`` / ``max_message_bytes`` /
    ``segment_ms`` are Kafka's ``log.segment.bytes``, ``log.index.interval.bytes``,
    ``log.index.size.max.bytes``, ``message.max.bytes`` (None: no limit) and ``log.roll.ms`` (None: no
    time-based roll; measured on batch timestamps as Kafka does, from the max timestamp of the segment's
    first batch, or by ``clock()`` since the segment was created or loaded when that batch has none).
    ``segment_jitter_ms`` is ``log.roll.jitter.ms``: each segment rolls up to that much earlier, by an
    amount drawn when the segment is made, below ``min(segment_jitter_ms, segment_ms)`` (so that the
    partitions of a broker do not all roll at once); ``seed`` seeds those draws (None: unseeded).
    ``recovery_point``: on reopen, the segments holding it and every later offset are recovered, every
    batch validated (default: from the parent directory's ``recovery-point-offset-checkpoint`` when there
    is one, else the last segment only; see the module docstring).  ``checkpoint_recovery_point``: :meth:`flush`
    and :meth:`close` record :attr:`recovery_point` in that file, merged with the other partitions' lines
    under a lock on the directory, so that the writer's next open -- or a broker's -- recovers from the right
    segment after a crash of the machine (False: leave the parent directory alone).
    ``leader_epoch`` is stamped into every client batch and marker.  ``fsync=True`` makes every append durable before it returns (Kafka's
    ``flush.messages=1``); otherwise data reaches the operating system at every append (one write per
    batch, so a crash of the process loses nothing acknowledged) and the disk at :meth:`flush`,
    :meth:`close` and -- for the segment being rolled -- never by itself.  ``write_buffer_bytes`` (0: off)
    holds appends in memory instead and writes them in pieces that end where the segment reaches a
    multiple of that many bytes, the rest at a roll, :meth:`flush`, :meth:`close` (or when the writer is
    collected), for bulk writes such as :func:`~kafkatx.log.generate`'s.  With 2 MiB (``2 << 20``, a huge
    page), a file system that caches a 2 MiB write in one 2 MiB folio (ext4 on this project's Linux 6.18
    VM does) caches a fresh segment as a read from disk through the reader's maps does, and reading it
    right away maps it 2 MiB at a time rather than 4 KiB at a time.  What is held is not in the file yet
    (another reader sees the log up to the last piece written; the indexes may point past it), and a
    crash of the process loses it.  An append whose write fails (a full disk: the ``OSError`` is raised) is
    not made, either way: what of it reached the file is cut off, and it can be made again.  ``codec`` picks the codec
    module (``"cython"``, ``"python"`` or a module; default: kafkatx's).  ``clock()`` returns
    milliseconds (marker and LogAppendTime timestamps).  ``timestamp_type="log_append_time"`` stamps
    the append time into client batches as a topic with ``message.timestamp.type=LogAppendTime``.
    ``validate_records`` decodes client batches as ``LogValidator`` does: the record count, the max
    timestamp, every record's timestamp against ``message_timestamp_before_max_ms`` /
    ``message_timestamp_after_max_ms`` (Kafka's ``message.timestamp.before/after.max.ms``: None = no
    limit, and one hour ahead by default since Kafka 4.0), and a compressed batch whose records do not
    number their offsets 0..count-1 is rebuilt with the right ones (Kafka's answer to old clients).  Set
    False to check headers only (the header's timestamps then stand for the records').  On reopen, producers
    of the loaded snapshot idle for ``producer_id_expiration_ms`` (Kafka's ``producer.id.expiration.ms``,
    1 day) by ``clock()`` without an open transaction are dropped, as the broker does.  As Kafka's
    ``LogValidator``, a client batch flagged LogAppendTime is refused by a LogAppendTime topic and stored
    as CreateTime by a CreateTime one.
    """

    def __init__(self, path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
                 max_index_size: int = DEFAULT_MAX_INDEX_SIZE, leader_epoch: int = 0, fsync: bool = False,
                 codec=None, clock=None, max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
                 segment_ms: int | None = None, timestamp_type: str = "create_time",
                 validate_records: bool = True, message_timestamp_before_max_ms: int | None = None,
                 message_timestamp_after_max_ms: int | None = DEFAULT_TIMESTAMP_AFTER_MAX_MS,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS, segment_jitter_ms: int = 0,
                 seed: int | None = None, recovery_point: int | None = None,
                 checkpoint_recovery_point: bool = True, write_buffer_bytes: int = 0):  # fmt: skip
        if segment_bytes < _HEADER_SIZE:
            raise ValueError(f"segment_bytes must be at least {_HEADER_SIZE}, got {segment_bytes}")
        if index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must not be negative, got {index_interval_bytes}")
        if max_index_size < 12:
            raise ValueError(f"max_index_size must hold at least one entry, got {max_index_size}")
        if not -1 <= leader_epoch <= INT32_MAX:
            raise ValueError(f"leader_epoch out of range: {leader_epoch}")
        if timestamp_type not in ("create_time", "log_append_time"):
            raise ValueError(f"timestamp_type must be 'create_time' or 'log_append_time', got {timestamp_type!r}")
        if segment_ms is not None and segment_ms < 1:
            raise ValueError(f"segment_ms must be at least 1, got {segment_ms}")
        if segment_jitter_ms < 0:
            raise ValueError(f"segment_jitter_ms must not be negative, got {segment_jitter_ms}")
        if recovery_point is not None and (isinstance(recovery_point, bool) or not isinstance(recovery_point, int)
                                           or recovery_point < 0):  # fmt: skip
            raise ValueError(f"recovery_point must be an offset (an int >= 0) or None, got {recovery_point!r}")
        if isinstance(write_buffer_bytes, bool) or not isinstance(write_buffer_bytes, int) or write_buffer_bytes < 0:
            raise ValueError(f"write_buffer_bytes must be an int >= 0, got {write_buffer_bytes!r}")
        if write_buffer_bytes and fsync:
            raise ValueError("write_buffer_bytes holds appends in memory; fsync=True needs each on disk as it returns")
        self.path = os.fspath(path)
        self.segment_bytes = int(segment_bytes)
        self.index_interval_bytes = int(index_interval_bytes)
        self.max_index_size = int(max_index_size)
        self.max_message_bytes = max_message_bytes
        self.segment_ms = segment_ms
        self.segment_jitter_ms = int(segment_jitter_ms)
        self._rng = random.Random(seed)
        self.leader_epoch = int(leader_epoch)
        self.fsync = bool(fsync)
        self.timestamp_type = timestamp_type
        self.validate_records = bool(validate_records)
        self.message_timestamp_before_max_ms = message_timestamp_before_max_ms
        self.message_timestamp_after_max_ms = message_timestamp_after_max_ms
        self.producer_id_expiration_ms = int(producer_id_expiration_ms)
        self._recovery_point = recovery_point
        self.checkpoint_recovery_point = bool(checkpoint_recovery_point)
        self.write_buffer_bytes = write_buffer_bytes
        self._held = None  # write_buffer_bytes: the active segment's bytes not written yet, at the front
        self._flushed_to = 0
        self._clean_shutdown = False  # a .kafka_cleanshutdown marker was found at the last load
        self._codec = _resolve_codec(codec)
        self._crc32c = self._codec.crc32c
        self._inc_seq = self._codec.increment_sequence
        self._clock = clock if clock is not None else _default_clock
        self._closed = True
        self._psm = ProducerStateManager()
        self._segments: list[list[int]] = []  # [base_offset, size] of every segment, ascending
        self._active: _Segment | None = None
        self._leo = 0
        self._epochs: list[tuple[int, int]] = []
        os.makedirs(self.path, exist_ok=True)
        self.recovery = self._load()
        self._closed = False

    # ---------------------------------------------------------------------------------- properties
    @property
    def topic_partition(self) -> tuple[str, int]:
        return parse_partition_dir_name(self.path)

    @property
    def log_start_offset(self) -> int:
        return self._segments[0][0]

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """The log end offset: a single replica acknowledges everything it writes."""
        return self._leo

    @property
    def last_stable_offset(self) -> int:
        """First offset of the earliest open transaction, else the high watermark (section 10.4)."""
        return self._psm.last_stable_offset(self._leo)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The live producer state (read it; do not change it behind the writer's back)."""
        return self._psm

    @property
    def segments(self) -> list[int]:
        """Base offsets of the segments, ascending (the last one is active)."""
        return [s[0] for s in self._segments]

    @property
    def active_segment_base_offset(self) -> int:
        return self._active.base_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s[1] for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """``(epoch, start offset)`` entries of the leader epoch cache."""
        return list(self._epochs)

    def ongoing_transactions(self) -> dict[int, int]:
        """``{producer_id: first offset}`` of the open transactions, by first offset."""
        return {t.producer_id: t.first_offset for t in self._psm.ongoing_transactions()}

    def __repr__(self):
        return (f"PartitionWriter({self.path!r}, segments={len(self._segments)}, log_end_offset={self._leo}, "
                f"last_stable_offset={self.last_stable_offset}{', closed' if self._closed else ''})")  # fmt: skip

    # ------------------------------------------------------------------------------------- appends
    def append(self, batch_bytes, *, origin: str = ORIGIN_CLIENT) -> AppendInfo:
        """Append a producer batch (``origin="client"``), or batches copied from a leader
        (``origin="replication"``: offsets, leader epochs and markers are kept; framing, CRC, offset order and
        the producer-state rules a follower applies -- a transactional producer's open transaction takes
        only transactional batches -- are checked for every batch before any is written, the whole append
        goes into one segment and must fit in one, its size, its offsets (no more than 2^31 - 1 past its
        first: :class:`LogSegmentOffsetOverflowError`) and its index entries, and the returned info covers
        all of it).  ``origin="coordinator"`` is the coordinator writing its own (non-control) state
        records: validated like a client batch except for the client-only rules (a zero base offset, no
        control batches, a sequence with a producer id).

        Returns an :class:`AppendInfo`; a duplicate of one of the producer's last five batches returns
        the original offsets and writes nothing.  Every rejection (:class:`~kafkatx.errors.KafkaTxError`
        subclasses: corrupt or invalid batch, out-of-order sequence, fenced epoch, invalid transaction
        state, too large) leaves the directory and the producer state unchanged.
        """
        if self._closed:
            raise LogClosedError(f"the writer of {self.path} is closed")
        if origin == ORIGIN_REPLICATION:
            return self._append_replicated(batch_bytes)
        if origin not in _ORIGINS:
            raise ValueError(f"origin must be one of {_ORIGINS}, got {origin!r}")
        return self._append_leader(batch_bytes, origin)

    def _check_framing(self, view, n, at: int = 0):
        """The header fields and the size of the batch at the start of ``view`` (``n`` bytes), which starts at
        byte ``at`` of the append (where errors say they are)."""
        if n < _HEADER_SIZE:
            if n >= 17 and view[16] != 2:
                raise InvalidRecordError(f"batch magic {view[16]} is not supported: only magic v2 is written",
                                         at + 16)  # fmt: skip
            raise CorruptRecordError(f"a record batch needs at least {_HEADER_SIZE} bytes, got {n}", at)
        fields = _HEADER.unpack_from(view, 0)
        magic = fields[3]
        if magic != 2:
            raise InvalidRecordError(f"batch magic {magic} is not supported: only magic v2 is written", at + 16,
                                     fields[0])  # fmt: skip
        length = fields[1]
        total = length + 12
        if total < _HEADER_SIZE:
            raise CorruptRecordError(f"record batch size {total} is smaller than the minimum {_HEADER_SIZE}",
                                     at + 8, fields[0])  # fmt: skip
        return fields, total

    def _append_leader(self, batch_bytes, origin):
        view = byte_view(batch_bytes)
        n = view.nbytes
        fields, total = self._check_framing(view, n)
        (boff, length, _ple, _magic, crc, attrs, lod, base_ts, max_ts, pid, epoch, bseq, count) = fields
        if total > n:
            raise CorruptRecordError(f"truncated record batch: header says {total} bytes, {n} given", 8)
        if total < n:
            raise InvalidRecordError("Compressed outer record has more than one batch "
                                     f"({n - total} bytes follow the first batch)", total)  # fmt: skip
        attrs &= 0xFF
        # UnifiedLog.analyzeAndValidateRecords, in its order: a client's base offset, the size, the CRC
        if origin == ORIGIN_CLIENT and boff != 0:
            raise InvalidRecordError(f"The baseOffset of the record batch in the append to {self.path} should be 0, "
                                     f"but it is {boff}", 0, boff)  # fmt: skip
        if self.max_message_bytes is not None and total > self.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch is {total} bytes, larger than the maximum allowed ({self.max_message_bytes})"
            )
        computed = self._crc32c(view[21:total])
        if computed != crc:
            raise CrcMismatchError(f"Record is corrupt (stored crc = {crc}, computed crc = {computed})", 17)
        if attrs & 0x07 > 4:
            raise UnsupportedCompressionError(f"unknown compression type id {attrs & 0x07}", 21)
        # LogValidator.validateBatch checks a client's offset range and count; a coordinator's batch gets
        # its last offset from the records it holds as its offsets are assigned (setLastOffset), so the log
        # end offset follows the record count: here a batch whose header says otherwise is refused
        if lod < 0:
            raise InvalidRecordError(f"Batch has an invalid offset range: last offset delta {lod}", 23)
        if count <= 0:
            raise InvalidRecordError(f"Invalid reported count for record batch: {count}", 57)
        if lod + 1 != count:
            raise InvalidRecordError(f"Inconsistent batch offset range [0, {lod}] and count of records {count}", 23)
        if origin == ORIGIN_CLIENT:
            if attrs & _CONTROL:
                raise InvalidRecordError("Clients are not allowed to write control records", 21)
            if pid >= 0 and bseq < 0:
                raise InvalidRecordError(f"Invalid sequence number {bseq} in record batch with producerId {pid}", 53)
        elif attrs & _CONTROL:
            raise InvalidRecordError("the coordinator writes markers with append_marker, not append", 21)
        if attrs & _TRANSACTIONAL and pid < 0:
            raise InvalidRecordError("a transactional batch needs a producer id", 43)
        # LogValidator.validateRecord: timestamps; then the records themselves
        now = self._clock()
        lat_topic = self.timestamp_type == "log_append_time"
        if count > 0 and attrs & _LOG_APPEND_TIME and (lat_topic or max_ts == -1):
            raise InvalidTimestampError("Invalid timestamp type in the batch: producers should not set the timestamp "
                                        "type to LogAppendTime", 21)  # fmt: skip
        first = self._leo
        rebuilt = None
        if self.validate_records and count > 0:
            new_max_ts, rebuilt = self._validate_records(view, total, count, attrs, max_ts, now, first)
        else:
            new_max_ts = max_ts
            if count > 0 and not lat_topic:
                self._check_timestamps(base_ts, max_ts, now)
        if rebuilt is not None:  # a new batch (valid CRC), timestamps and timestamp type already the topic's
            view, total, length = memoryview(rebuilt), len(rebuilt), len(rebuilt) - 12
            attrs = _ATTRS_AT.unpack_from(rebuilt, 21)[0] & 0xFF
            max_ts = new_max_ts = _MAXTS_AT.unpack_from(rebuilt, 35)[0]
        log_append_time = now if lat_topic else -1
        if lat_topic:
            new_max_ts = log_append_time
        if total > self.segment_bytes:
            raise RecordBatchTooLargeError(
                f"The record batch is {total} bytes, larger than the segment size ({self.segment_bytes})"
            )
        last = first + lod
        # UnifiedLog.append rolls a full segment before the producer-state checks (a duplicate rolls it too)
        seg = self._maybe_roll(total, first, last, new_max_ts)
        info = None
        if pid >= 0:
            info = self._psm.prepare_update(pid, origin=origin)
            last_seq = self._inc_seq(bseq, lod) if bseq >= 0 else -1
            dup = info.append_data_batch(epoch, bseq, last_seq, new_max_ts, first, last, bool(attrs & _TRANSACTIONAL))
            if dup is not None:
                return AppendInfo(dup.first_offset, dup.last_offset, -1, True, dup.timestamp, count)
        position = seg.size
        header = _OFFSET_LENGTH_EPOCH.pack(first, length, self.leader_epoch)
        stored_attrs = (attrs | _LOG_APPEND_TIME) if lat_topic else (attrs & ~_LOG_APPEND_TIME)
        if new_max_ts != max_ts or stored_attrs != attrs:
            # LogValidator.setMaxTimestamp(topic's timestamp type, ...): CRC-covered bytes change
            out = self._restamped(view[:total], stored_attrs, new_max_ts)
            out[0:16] = header
            self._write(seg, (out,))
        else:
            self._write(seg, (header, view[16:total]))
        self._after_write(seg, position, total, last, new_max_ts)
        if info is not None:
            self._psm.update(info)
        self._psm.map_end_offset = last + 1
        self._leo = last + 1
        self._maybe_assign_epoch(self.leader_epoch, first)
        if self.fsync:
            self._sync_append(seg)
        return AppendInfo(first, last, log_append_time, False, new_max_ts, count, total, seg.base_offset, position)

    def _sync_append(self, seg) -> None:
        """``flush.messages=1``: the append is on disk before it returns (with whatever a load left
        unflushed before the active segment, the first time)."""
        if self._flushed_to < seg.base_offset:
            self._fsync_rolled(self._flushed_to)
        os.fsync(seg.fd)
        self._flushed_to = self._leo

    def _restamped(self, batch, attrs: int, max_ts: int) -> bytearray:
        """A copy of ``batch`` with new attributes and maxTimestamp, and so a new CRC (DefaultRecordBatch's
        setMaxTimestamp)."""
        out = bytearray(batch)
        _ATTRS_AT.pack_into(out, 21, attrs)
        _MAXTS_AT.pack_into(out, 35, max_ts)
        _CRC_AT.pack_into(out, 17, self._crc32c(memoryview(out)[21:]))
        return out

    def _check_timestamps(self, lo: int, hi: int, now: int):
        """LogValidator.validateTimestamp on a CreateTime topic: record timestamps from ``lo`` to ``hi``
        (-1: none) must lie within [now - before.max.ms, now + after.max.ms]."""
        before, after = self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms
        for ts in (lo, hi):
            if ts == -1:
                continue
            if (before is not None and now - ts > before) or (after is not None and ts - now > after):
                low = "-inf" if before is None else now - before
                high = "+inf" if after is None else now + after
                raise InvalidTimestampError(f"Timestamp {ts} of a record is out of range. The timestamp should be "
                                            f"within [{low}, {high}]", 27)  # fmt: skip

    def _validate_records(self, view, total, count, attrs, max_ts, now, first):
        """Decode the records (as LogValidator iterates them) and check their timestamps; returns the max
        timestamp to store and, for a compressed batch whose records do not number their offsets
        0..count-1, the batch rebuilt with offsets from ``first`` (else None)."""
        batch = self._codec.RecordBatch(view, 0, total, verify_crc=False)
        summary = batch.record_summary()  # (every record decoded and checked, none made)
        if summary.records != count:  # the decoder enforces it; kept as LogValidator's invariant
            raise InvalidRecordError(f"batch declares {count} records, {summary.records} decoded", 57)
        lat_batch = bool(attrs & _LOG_APPEND_TIME)
        # LogValidator's max timestamp starts at NO_TIMESTAMP (-1) and takes every larger record timestamp
        new_max = max_ts if lat_batch else max(summary.max_timestamp, -1)
        if self.timestamp_type == "create_time" and summary.max_timestamp != -1:  # NO_TIMESTAMP: not checked
            self._check_timestamps(summary.min_timestamp, summary.max_timestamp, now)
        # uncompressed: LogValidator never looks at record offsets; compressed: kept as sent when they are
        # 0, 1, 2, ... (its expectedInnerOffset), so a coordinator's batch with another base offset is rebuilt
        if attrs & 0x07 == 0 or (batch.base_offset == 0 and summary.offsets_in_sequence):
            return new_max, None
        records = batch.records()
        lat_topic = self.timestamp_type == "log_append_time"
        b = BatchBuilder(base_offset=first, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                         base_sequence=batch.base_sequence, transactional=batch.is_transactional,
                         compression=batch.compression, partition_leader_epoch=self.leader_epoch,
                         timestamp_type="log_append_time" if lat_topic else "create_time",
                         log_append_time=now if lat_topic else None)  # fmt: skip
        for r in records:
            b.append(r.value, r.key, timestamp=r.timestamp, headers=r.headers)
        return new_max, b.build()

    def _append_replicated(self, batch_bytes):
        """A follower's append (``UnifiedLog.appendAsFollower``): framing, CRCs and offset order of every batch,
        then the producer-state checks of every batch against staged copies (``analyzeAndValidateProducerState``),
        all before anything is written; then one roll check for the whole append, the write, and the
        producer-state update, after which the transactions the append completed get their last stable offset
        and ``.txnindex`` entries."""
        view = byte_view(batch_bytes)
        n = view.nbytes
        pos = 0
        spans = []
        expected = self._leo
        while pos < n:
            rest = view[pos:]
            fields, total = self._check_framing(rest, rest.nbytes, pos)
            if total > rest.nbytes:
                raise CorruptRecordError(f"truncated record batch: header says {total} bytes, {rest.nbytes} left",
                                         pos + 8, fields[0])  # fmt: skip
            computed = self._crc32c(rest[21:total])
            if computed != fields[4]:
                raise CrcMismatchError(f"Record is corrupt (stored crc = {fields[4]}, computed crc = {computed})",
                                       pos + 17, fields[0])  # fmt: skip
            base, lod = fields[0], fields[6]
            if base < expected:
                raise UnexpectedAppendOffsetError(
                    f"replicated batch at byte {pos} has base offset {base}, below the next offset {expected}"
                )
            if lod < 0:
                raise InvalidRecordError(f"Batch has an invalid offset range: last offset delta {lod}", pos + 23, base)
            spans.append((pos, total, fields))
            expected = base + lod + 1
            pos += total
        if not spans:
            raise InvalidRecordError("no record batch to append", 0)
        if n > self.segment_bytes:
            raise RecordBatchTooLargeError(
                f"The record batches are {n} bytes, larger than the segment size ({self.segment_bytes})"
            )
        infos = {}
        for pos, total, fields in spans:
            pid = fields[9]
            if pid >= 0:
                info = infos.get(pid)
                if info is None:
                    info = infos[pid] = self._psm.prepare_update(pid, origin=ORIGIN_REPLICATION)
                info.append(self._codec.RecordBatch(view[pos : pos + total], 0, total, verify_crc=False))
        first = spans[0][2][0]
        last = expected - 1
        max_ts = max(fields[8] for _pos, _total, fields in spans)
        seg = self._maybe_roll(n, first, last, max_ts, [total for _pos, total, _fields in spans])
        start = seg.size
        self._write(seg, (view,))
        for pos, total, fields in spans:
            self._after_write(seg, start + pos, total, fields[0] + fields[6], fields[8])
        done = self._psm.update_many(infos.values()) if infos else []
        aborted = False
        for c in done:
            if c.is_aborted:
                seg.txnindex.append(c.to_aborted_txn())
                aborted = True
        if done:
            self._psm.on_high_watermark_updated(last + 1)
        self._psm.map_end_offset = last + 1
        self._leo = last + 1
        for _pos, _total, fields in spans:
            self._maybe_assign_epoch(fields[2], fields[0])
        if self.fsync:
            self._sync_append(seg)
            if aborted:
                seg.txnindex.flush()
        count = sum(fields[12] for _pos, _total, fields in spans)
        return AppendInfo(first, last, -1, False, max_ts, count, n, seg.base_offset, start,
                          done[-1] if done else None)  # fmt: skip

    def append_marker(self, kind: str, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      timestamp: int | None = None, transaction_version: int = 0) -> int:  # fmt: skip
        """Write a COMMIT or ABORT marker (as ``WriteTxnMarkers`` does); returns its offset.

        The producer-state marker checks run first (an epoch below the producer's ->
        :class:`~kafkatx.errors.InvalidProducerEpochError`; with ``transaction_version >= 2`` an equal
        epoch is refused while a transaction is open; a coordinator epoch below the last one seen ->
        :class:`~kafkatx.errors.TransactionCoordinatorFencedError`), and nothing is written if they fail.
        An ABORT that ends a transaction with data here adds its ``.txnindex`` entry.
        """
        if self._closed:
            raise LogClosedError(f"the writer of {self.path} is closed")
        if timestamp is None:
            timestamp = self._clock()
        offset = self._leo
        data = encode_marker(kind, producer_id=producer_id, producer_epoch=producer_epoch, base_offset=offset,
                             coordinator_epoch=coordinator_epoch, timestamp=timestamp,
                             partition_leader_epoch=self.leader_epoch)  # fmt: skip
        if self.timestamp_type == "log_append_time":
            # appended as leader (origin COORDINATOR): LogValidator stamps it like any batch of the topic
            timestamp = self._clock()
            data = bytes(self._restamped(data, _ATTRS_AT.unpack_from(data, 21)[0] | _LOG_APPEND_TIME, timestamp))
        control_type = 1 if str(kind).lower() == "commit" else 0
        info = self._psm.prepare_update(producer_id, origin=ORIGIN_COORDINATOR)
        info.append_end_txn_marker(control_type, coordinator_epoch, producer_epoch, offset, timestamp,
                                   transaction_version=transaction_version)  # fmt: skip
        total = len(data)
        seg = self._maybe_roll(total, offset, offset, timestamp)
        position = seg.size
        self._write(seg, (data,))
        self._after_write(seg, position, total, offset, timestamp)
        done = self._psm.update(info)
        aborted = False
        for c in done:
            if c.is_aborted:
                seg.txnindex.append(c.to_aborted_txn())
                aborted = True
        self._psm.map_end_offset = offset + 1
        self._leo = offset + 1
        if done:
            self._psm.on_high_watermark_updated(self._leo)
        self._maybe_assign_epoch(self.leader_epoch, offset)
        if self.fsync:
            self._sync_append(seg)
            if aborted:
                seg.txnindex.flush()
        return offset

    # ------------------------------------------------------------------------------ write helpers
    def _write(self, seg, parts):
        if self.write_buffer_bytes:
            self._hold(seg, parts)
            return
        done, error = _write_views(seg.fd, [memoryview(p).cast("B") for p in parts])
        if error is not None:
            _cut_torn(seg.fd, seg.size, done)
            raise error

    def _hold(self, seg, parts):
        """write_buffer_bytes: the bytes of one append go after the ``seg.size - seg.written`` bytes held in
        ``self._held``; where they reach a multiple of write_buffer_bytes, everything up to the last one
        reached is written (what is held, then the append's bytes up to there straight from ``parts``) and
        only the rest is held.  So no more than write_buffer_bytes is ever held.  If the write fails, the
        append is not made (nothing of it is held) and what was held before it and not written stays held."""
        chunk = self.write_buffer_bytes
        views = [memoryview(p).cast("B") for p in parts]
        held = seg.size - seg.written
        end = seg.size + sum(v.nbytes for v in views)
        cut = end - end % chunk
        if self._held is None:
            self._held = bytearray(chunk)
        buf = self._held
        if cut <= seg.written:  # all of it stays held: held + the append < chunk
            pos = held
            for v in views:
                buf[pos : pos + v.nbytes] = v
                pos += v.nbytes
            return
        now = cut - seg.written - held  # bytes of the append written now (> 0: held never reaches a multiple)
        out = [memoryview(buf)[:held]] if held else []
        rest = []
        for v in views:
            if now >= v.nbytes:
                out.append(v)
                now -= v.nbytes
            elif now:
                out.append(v[:now])
                rest.append(v[now:])
                now = 0
            else:
                rest.append(v)
        done, error = _write_views(seg.fd, out)
        del out
        if error is not None:
            self._written_held(seg, min(done, held))
            _cut_torn(seg.fd, seg.written, done - min(done, held))
            raise error
        pos = 0
        for v in rest:
            buf[pos : pos + v.nbytes] = v
            pos += v.nbytes
        seg.written = cut

    def _written_held(self, seg, done):
        """``done`` of the bytes ``seg`` holds were written: the rest moves to the front."""
        held = seg.size - seg.written
        if done and done < held:
            self._held[: held - done] = self._held[done:held]
        seg.written += done

    def _write_held(self, seg) -> None:
        """Write every byte ``seg`` holds (at a roll, flush, close)."""
        if not self.write_buffer_bytes:
            return
        held = seg.size - seg.written
        if not held:
            return
        done, error = _write_views(seg.fd, [memoryview(self._held)[:held]])
        self._written_held(seg, done)
        if error is not None:
            raise error

    def _after_write(self, seg, position, total, last_offset, max_ts):
        """LogSegment.append's bookkeeping for one batch written at ``position``."""
        if position == 0:
            seg.rolling_ts = max_ts
        if max_ts > seg.max_ts:
            seg.max_ts = max_ts
            seg.offset_of_max_ts = last_offset
        if seg.bytes_since_index > self.index_interval_bytes:
            seg.index.append(last_offset, position)
            seg.timeindex.append(seg.max_ts, seg.offset_of_max_ts)
            seg.bytes_since_index = 0
        seg.bytes_since_index += total
        seg.size = position + total
        self._segments[-1][1] = seg.size

    def _maybe_roll(self, size, first_offset, last_offset, max_ts, sizes=None):
        """The segment an append of ``size`` bytes with offsets ``first_offset`` to ``last_offset`` goes to,
        rolled first if LogSegment.shouldRoll says so: the segment would pass segment_bytes, an index is full,
        the last offset is too far past the base for an index entry (even in an empty segment), or (a segment
        with batches) segment_ms has passed.  ``sizes``: the sizes of a replicated append's batches, which
        may add an index entry each: a segment without room for them is rolled too.  Raises before anything
        is written if the append cannot go into any segment."""
        seg = self._active
        roll = (
            seg.size > self.segment_bytes - size
            or seg.index.is_full()
            or seg.timeindex.is_full()
            or last_offset - seg.base_offset > INT32_MAX
            or (sizes is not None and self._index_entries(seg, sizes) > self._index_room(seg))
            or (seg.size > 0 and self.segment_ms is not None
                and self._waited_for_roll(seg, max_ts) > self.segment_ms - seg.roll_jitter_ms)
        )  # fmt: skip
        if roll:
            # UnifiedLog.maybeRoll rolls at the incoming batch's first offset, LocalLog.roll at no less than the
            # log end
            base = max(first_offset, self._leo)
            if seg.size:
                self._roll_at(base)
            elif base != seg.base_offset:
                self._replace_empty(base)
            seg = self._active
        if last_offset - seg.base_offset > INT32_MAX:  # LogSegment.ensureOffsetInRange, before the write
            raise LogSegmentOffsetOverflowError(
                f"the append's offsets {first_offset} to {last_offset} do not fit one segment of {self.path}: an "
                f"index holds offsets up to 2^31 - 1 past its segment's base offset ({seg.base_offset})"
            )
        if sizes is not None and self._index_entries(seg, sizes) > self._index_room(seg):
            raise LogWriterError(f"the append's {len(sizes)} batches need more index entries than a segment of "
                                 f"{self.path} holds (max_index_size {self.max_index_size})")  # fmt: skip
        return seg

    def _index_entries(self, seg, sizes) -> int:
        """How many entries appending batches of ``sizes`` bytes to ``seg`` adds to each of its indexes (as
        _after_write makes them: one where more than index_interval_bytes came since the last)."""
        since = seg.bytes_since_index
        entries = 0
        for total in sizes:
            if since > self.index_interval_bytes:
                entries += 1
                since = 0
            since += total
        return entries

    @staticmethod
    def _index_room(seg) -> int:
        """Entries both indexes of ``seg`` can still take (the time index keeps one for its closing entry)."""
        return min(seg.index.max_entries - seg.index.entry_count,
                   seg.timeindex.max_entries - 1 - seg.timeindex.entry_count)  # fmt: skip

    def _created_now(self) -> int:
        """The creation time of a segment object being made (read only when a time-based roll may need it)."""
        return self._clock() if self.segment_ms is not None else 0

    def _new_segment(self, base: int, size: int = 0) -> _Segment:
        """A segment object for ``base`` with its creation time and its roll jitter (LogConfig.randomSegmentJitter)."""
        jitter = 0
        if self.segment_jitter_ms and self.segment_ms is not None:
            jitter = self._rng.randrange(min(self.segment_jitter_ms, self.segment_ms))
        return _Segment(self.path, base, self.max_index_size, size=size, created=self._created_now(),
                        roll_jitter_ms=jitter)  # fmt: skip

    def _waited_for_roll(self, seg, max_ts: int) -> int:
        """LogSegment.timeWaitedForRoll: by the batches' timestamps, from the max timestamp of the segment's
        first batch to ``max_ts`` (the incoming batch's); if that first batch has no timestamp (-1), by the
        clock since the segment was created or loaded."""
        if seg.rolling_ts is not None and seg.rolling_ts >= 0:
            return max_ts - seg.rolling_ts
        return max(self._clock() - seg.created, 0)

    def roll(self) -> int:
        """Start a new segment at the log end offset (no-op for an empty active segment); returns its base.

        As ``UnifiedLog.roll``: the old segment's indexes get their final time entry and are trimmed, and
        the producer state is snapshotted as ``<new base>.snapshot``.
        """
        if self._closed:
            raise LogClosedError(f"the writer of {self.path} is closed")
        return self._roll_at(self._leo)

    def _roll_at(self, base: int) -> int:
        old = self._active
        if old.size == 0:
            return old.base_offset
        if base <= old.base_offset:  # LocalLog.roll: never onto or below a segment with batches
            raise LogWriterError(f"cannot roll {self.path} at offset {base}: the active segment starts at "
                                 f"{old.base_offset} and holds batches")  # fmt: skip
        self._write_held(old)
        old.close_indexes(fsync=self.fsync)
        if self.fsync:
            os.fsync(old.fd)
        os.close(old.fd)
        old.fd = None
        self._segments.append([base, 0])
        self._start_active(base)
        return base

    def _start_active(self, base: int) -> None:
        """A new active segment at ``base`` (its entry in ``_segments`` made by the caller), and the producer
        state snapshotted there, as UnifiedLog.roll does."""
        self._active = self._new_segment(base)
        self._psm.map_end_offset = base
        self._psm.take_snapshot(self.path, fsync=self.fsync)
        if self.fsync:
            fsync_dir(self.path)

    def _replace_empty(self, base: int) -> None:
        """Start the active segment, still empty, at ``base`` instead (a replicated append whose offsets lie
        too far past its base offset): its files are removed (LocalLog.roll leaves an empty segment beside
        the new one; it holds nothing) and the producer state is snapshotted at ``base``, as at a roll."""
        old = self._active
        old.close_indexes(fsync=False)
        os.close(old.fd)
        old.fd = None
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            with suppress(FileNotFoundError):
                os.remove(old.path(suffix))
        self._segments[-1] = [base, 0]
        self._start_active(base)

    def _maybe_assign_epoch(self, epoch, start_offset):
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1][0]):
            return
        self._epochs.append((epoch, start_offset))
        self._write_epochs()

    def _write_epochs(self):
        path = os.path.join(self.path, LEADER_EPOCH_CHECKPOINT)
        lines = ["0", str(len(self._epochs))] + [f"{e} {o}" for e, o in self._epochs]
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)

    # ------------------------------------------------------------------------------- durability
    @property
    def recovery_point(self) -> int:
        """Kafka's ``recoveryPoint``: every offset below it is on disk (fsynced); a recovery after a crash
        starts from the segment holding it.  Moves to the log end offset at :meth:`flush` and :meth:`close`
        (and at every append with ``fsync=True``)."""
        return self._flushed_to

    def flush(self) -> None:
        """Make everything appended so far durable, as ``UnifiedLog.flush`` does: fsync the files of every
        segment from the one holding :attr:`recovery_point` on (segments rolled since are included, with
        their indexes and the producer snapshots taken when they rolled), then the directory; the recovery
        point becomes the log end offset and, with ``checkpoint_recovery_point``, is recorded in the parent
        directory's ``recovery-point-offset-checkpoint``."""
        if self._closed:
            raise LogClosedError(f"the writer of {self.path} is closed")
        self._fsync_rolled(self.recovery_point)
        seg = self._active
        self._write_held(seg)
        os.fsync(seg.fd)
        seg.index.flush()
        seg.timeindex.flush()
        seg.txnindex.flush()
        fsync_dir(self.path)
        self._flushed_to = self._leo
        self._write_recovery_point()

    def _fsync_rolled(self, since: int) -> None:
        """fsync the files of the rolled segments that may hold offsets from ``since`` on, and the producer
        snapshots above ``since`` (``LocalLog.flush`` over ``segments.values(recoveryPoint, offset)``)."""
        bases = [s[0] for s in self._segments]
        d = self.path
        for base in bases[max(bisect_right(bases, since) - 1, 0) : -1]:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX):
                full = os.path.join(d, segment_file_name(base, suffix))
                if suffix == LOG_SUFFIX or os.path.exists(full):
                    _fsync_path(full)
        active_snapshot = os.path.join(d, segment_file_name(bases[-1], SNAPSHOT_SUFFIX))
        if bases[-1] > since and os.path.exists(active_snapshot):
            _fsync_path(active_snapshot)

    def _write_recovery_point(self) -> None:
        """Record the recovery point in the log dir's ``recovery-point-offset-checkpoint``, keeping the other
        partitions' entries (``LogManager.checkpointRecoveryOffsetsInDir``, for this partition)."""
        if not self.checkpoint_recovery_point:
            return
        key = self._checkpoint_key()
        if key is None:
            return
        parent = self._log_dir()
        path = os.path.join(parent, RECOVERY_POINT_OFFSET_CHECKPOINT)
        with _log_dir_locked(parent):
            try:
                offsets = read_checkpoint(path)
            except CheckpointError:
                offsets = {}  # the partitions lost from an unreadable file recover from 0, as they would have
            if offsets.get(key) == self._flushed_to:
                return
            offsets[key] = self._flushed_to
            write_checkpoint(path, dict(sorted(offsets.items())))

    def close(self) -> None:
        """Sync every segment written since :attr:`recovery_point`, write the producer snapshot at the log end
        offset, finish the indexes, close every file and record the log end offset as the recovery point
        (see :meth:`flush`)."""
        if self._closed:
            return
        self._closed = True
        seg = self._active
        try:
            self._write_held(seg)
            self._fsync_rolled(self.recovery_point)
            self._psm.map_end_offset = self._leo
            self._psm.take_snapshot(self.path, fsync=True)
            seg.close_indexes()
            os.fsync(seg.fd)
        finally:
            if seg.fd is not None:
                os.close(seg.fd)
                seg.fd = None
        fsync_dir(self.path)
        self._flushed_to = self._leo
        self._write_recovery_point()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        seg = getattr(self, "_active", None)
        if seg is not None and seg.fd is not None:
            try:
                self._write_held(seg)  # a writer left open: what it holds is written, not lost
            except Exception:  # (a destructor cannot raise; at interpreter exit, modules may be gone)
                pass
            try:
                os.close(seg.fd)
            except OSError:
                pass
            seg.fd = None

    # ------------------------------------------------------------------------------------ loading
    def _load(self) -> RecoveryInfo:
        d = self.path
        deleted = []
        logs = {}
        others = []
        snapshots = {}
        for name in sorted(os.listdir(d)):
            full = os.path.join(d, name)
            if not os.path.isfile(full):
                continue
            if name.endswith(".tmp"):
                try:
                    parse_segment_file_name(name[:-4])
                except ValueError:
                    if name != LEADER_EPOCH_CHECKPOINT + ".tmp":
                        continue
                os.remove(full)  # an interrupted atomic write (snapshot, txn index, checkpoint)
                deleted.append(full)
                continue
            try:
                base, suffix = parse_segment_file_name(name)
            except ValueError:
                continue
            if suffix == LOG_SUFFIX:
                logs[base] = full
            elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                others.append((base, full))
            elif suffix == SNAPSHOT_SUFFIX:
                snapshots[base] = full
        for base, full in others:  # LogLoader: an index without its log is an orphan
            if base not in logs:
                os.remove(full)
                deleted.append(full)
        self._epochs = _read_leader_epochs(os.path.join(d, LEADER_EPOCH_CHECKPOINT))
        if not logs:
            for full in snapshots.values():  # no log: a stale snapshot must not resurrect state
                os.remove(full)
                deleted.append(full)
            self._segments = [[0, 0]]
            self._active = self._new_segment(0)
            self._leo = 0
            if self._epochs:
                self._epochs = []
                os.remove(os.path.join(d, LEADER_EPOCH_CHECKPOINT))
            self._flushed_to = 0
            return RecoveryInfo(0, 0, 0, (), (), None, 0, 0, tuple(deleted))
        bases = sorted(logs)
        rebuilt = []
        bad_txn = []
        sizes = {}
        # LogLoader.recoverLog: the segments from the one holding the recovery point on are recovered (every
        # batch validated, indexes rebuilt); one found damaged is cut at its first invalid batch and every
        # later segment is deleted, so the log ends there
        first = self._first_to_recover(bases)
        for i in range(first, len(bases) - 1):
            base = bases[i]
            valid, _end, file_size = self._validate_last(logs[base], base, bases[: i + 1], logs)
            if valid < file_size:
                for later in bases[i + 1 :]:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                        full = os.path.join(d, segment_file_name(later, suffix))
                        if os.path.exists(full):
                            os.remove(full)
                            deleted.append(full)
                    del logs[later]
                bases = bases[: i + 1]
                break
            rebuilt += self._rebuild_indexes(base, logs[base])
        # the segments before: keep sound indexes; a segment whose index is missing or damaged is recovered
        # as LogLoader.loadSegmentFiles does (LogSegment.recover): every batch validated, the segment cut
        # at its first invalid one (the segments after it stay), its indexes rebuilt from what is left
        cut_segments = []
        for k, base in enumerate(bases[:-1]):
            sizes[base] = os.path.getsize(logs[base])
            if k < first and not self._indexes_sound(base, sizes[base]):
                valid, _end, file_size = self._validate_last(logs[base], base, bases[: k + 1], logs)
                if valid < file_size:
                    os.truncate(logs[base], valid)
                    sizes[base] = valid
                    cut_segments.append((logs[base], valid, file_size - valid))
                    bad_txn.append(base)  # its .txnindex is made again from the batches left
                    # snapshots after the cut hold producer state of batches no longer in the log (the broker
                    # keeps them; here the state is replayed from before the cut instead)
                    for off in [o for o in snapshots if o > base]:
                        os.remove(snapshots.pop(off))
                        deleted.append(os.path.join(d, segment_file_name(off, SNAPSHOT_SUFFIX)))
                rebuilt += self._rebuild_indexes(base, logs[base])
            txn_path = os.path.join(d, segment_file_name(base, TXN_INDEX_SUFFIX))
            if os.path.exists(txn_path):
                try:
                    read_txnindex(txn_path, base_offset=base)
                    if os.path.getsize(txn_path) % 34:
                        bad_txn.append(base)
                except CorruptIndexError:
                    bad_txn.append(base)
        # the last segment: validate every batch, cut a torn or corrupt tail
        last_base = bases[-1]
        last_path = logs[last_base]
        valid, end_offset, file_size = self._validate_last(last_path, last_base, bases, logs)
        truncated = file_size - valid
        if truncated:
            os.truncate(last_path, valid)
        sizes[last_base] = valid
        self._segments = [[b, sizes[b]] for b in bases]
        self._leo = end_offset
        # a clean shutdown: the broker's marker, or what close() leaves -- the recovery point at the log end and
        # a snapshot there (a crash after a flush leaves no snapshot at the log end); and nothing cut
        clean = (self._flushed_to >= end_offset and (self._clean_shutdown or end_offset in snapshots)
                 and not truncated and not cut_segments)  # fmt: skip
        self._flushed_to = min(self._flushed_to, end_offset)
        for off in sorted(snapshots):
            if off > end_offset:  # beyond the (possibly truncated) log end: Kafka deletes these
                os.remove(snapshots.pop(off))
                deleted.append(os.path.join(d, segment_file_name(off, SNAPSHOT_SUFFIX)))
        replayed = 0
        repaired = []
        # An earlier segment's damaged .txnindex is made again as LogLoader.recoverSegment does: from the
        # producer state at that segment (newest usable snapshot at or below it, and the batches from there)
        # and its own batches, nothing after it touched.  (Replaying on from there instead would let a gap
        # in the log between that snapshot and the newer ones -- a lost segment -- decide the later
        # segments' aborts differently from the next open, which starts at the newer snapshot.)
        earlier = sorted(b for b in bad_txn if b < bases[first])
        if earlier:
            psm, since = self._newest_snapshot(snapshots, earlier[0], deleted)
            n, fixed = self._replay_into(psm, bases, sizes, logs, since, earlier[-1], set(earlier))
            replayed += n
            repaired += fixed
        # producer state: newest usable snapshot at or below the first segment to recover, and every batch
        # from there (LogLoader); the .txnindex of each segment from that one on made to agree with it
        self._psm, snap_offset = self._newest_snapshot(snapshots, bases[first], deleted)
        start = snap_offset if snap_offset is not None else bases[0]
        n, fixed = self._replay_into(self._psm, bases, sizes, logs, snap_offset, last_base, set(bases[first:]))
        replayed += n
        repaired += fixed
        # The producer state itself is UnifiedLog.rebuildProducerState's: the newest snapshot at or below the log
        # end (truncateAndReload), then the batches after it.  After a clean shutdown the broker recovers no
        # segment and that is the snapshot close() wrote at the log end, taken as it is.  Otherwise its recovery
        # (LogLoader.recoverSegment) has deleted the snapshots above the first recovered segment, replayed from
        # there and written a snapshot at each recovered segment's end, so the state is the replay's as a
        # snapshot at the log end holds it.  Either way a snapshot keeps one batch per producer: a retry of an
        # older batch is then OUT_OF_ORDER_SEQUENCE, not a duplicate.
        state_snapshot = None
        if clean:
            psm, off = self._newest_snapshot(snapshots, end_offset, deleted)
            if off is not None and (snap_offset is None or off > snap_offset):
                n, _fixed = self._replay_into(psm, bases, sizes, logs, off, last_base, set())
                replayed += n
                self._psm, state_snapshot = psm, off
        else:
            self._psm = ProducerStateManager.from_snapshot(self._psm.snapshot_entries(), map_end_offset=end_offset)
        self._psm.map_end_offset = end_offset
        self._psm.on_high_watermark_updated(end_offset)
        # the load of the snapshot drops producers idle for producer.id.expiration.ms without an open transaction
        self._psm.remove_expired_producers(self._clock(), self.producer_id_expiration_ms)
        # stray snapshots: only those at a segment base offset, and the newest one, are kept (LogLoader)
        keep = set(bases)
        if snapshots:
            keep.add(max(snapshots))
        for off in list(snapshots):
            if off not in keep:
                os.remove(snapshots.pop(off))
                deleted.append(os.path.join(d, segment_file_name(off, SNAPSHOT_SUFFIX)))
        # leader epochs at or beyond the log end no longer have data
        kept = [(e, o) for e, o in self._epochs if o < end_offset]
        if kept != self._epochs:
            self._epochs = kept
            self._write_epochs()
        # open the last segment for appending; its indexes are rebuilt from the validated batches
        seg = self._new_segment(last_base, sizes[last_base])
        self._active = seg
        rebuilt += self._rebuild_active_indexes(seg, last_path)
        return RecoveryInfo(len(bases), truncated, valid, tuple(rebuilt), tuple(repaired), snap_offset, start,
                            replayed, tuple(deleted), bases[first], tuple(cut_segments), state_snapshot)  # fmt: skip

    def _newest_snapshot(self, snapshots: dict, at_or_below: int, deleted: list):
        """``(manager, offset)``: a ProducerStateManager loaded from the newest readable snapshot at or below
        ``at_or_below`` (corrupt ones are deleted, as the broker does) and its offset, or an empty manager
        and None."""
        for off in sorted(snapshots, reverse=True):
            if off > at_or_below:
                continue
            manager = ProducerStateManager()
            try:
                manager.load_snapshot(snapshots[off], map_end_offset=off)
                return manager, off
            except CorruptSnapshotError:
                os.remove(snapshots.pop(off))
                deleted.append(os.path.join(self.path, segment_file_name(off, SNAPSHOT_SUFFIX)))
        return ProducerStateManager(), None

    def _replay_into(self, manager, bases, sizes, logs, since, through: int, reconcile) -> tuple[int, list]:
        """Replay into ``manager`` (``origin="replication"``) the batches from offset ``since`` (None: the log
        start) to the end of the segment whose base offset is ``through``, and make the ``.txnindex`` of
        each segment whose base offset is in ``reconcile`` hold the aborts found in it.  Returns (batches
        replayed, paths of the ``.txnindex`` files changed)."""
        start = since if since is not None else bases[0]
        if since is None:
            manager.map_end_offset = bases[0]
        replayed, repaired = 0, []
        for i, base in enumerate(bases):
            if base > through:
                break
            if i + 1 < len(bases) and bases[i + 1] <= start:
                continue
            size = sizes[base]
            if size == 0:  # (cut to nothing: no aborts are left in it, as LogSegment.recover leaves none)
                path = self._reconcile_txnindex(base, []) if base in reconcile else None
                if path is not None:
                    repaired.append(path)
                continue
            counter = [0]

            def count(_b, _m, _c, counter=counter):
                counter[0] += 1

            with mapped(logs[base], size) as mm:
                batches = self._codec.iter_batches(memoryview(mm)[:size], verify_crc=False)
                try:
                    _m, aborted = rebuild_from_log(batches, start_offset=start, manager=manager, on_batch=count)
                except KafkaTxError as exc:
                    raise _relocate(exc, os.fspath(logs[base]), 0) from None
                del batches
            replayed += counter[0]
            if base in reconcile:
                path = self._reconcile_txnindex(base, aborted)
                if path is not None:
                    repaired.append(path)
        return replayed, repaired

    def _first_to_recover(self, bases) -> int:
        """Index in ``bases`` of the first segment to recover on open: the one holding the recovery point
        (Kafka's ``recovery-point-offset-checkpoint``: everything below it was flushed), or the last one.

        Sets ``self._flushed_to`` to the recovery point the load starts from (before the ``min`` with the
        log end offset that ``_load`` applies, as ``LogLoader.recoverLog`` does)."""
        rp = self._recovery_point
        if rp is None:
            parent = self._log_dir()
            checkpoint = os.path.join(parent, RECOVERY_POINT_OFFSET_CHECKPOINT)
            if os.path.exists(os.path.join(parent, CLEAN_SHUTDOWN_FILE)):
                self._clean_shutdown = True
                self._flushed_to = 1 << 63  # a clean shutdown flushed everything
                return len(bases) - 1
            key = self._checkpoint_key()
            if key is None or not os.path.exists(checkpoint):
                self._flushed_to = bases[-1]  # no checkpoint: what is before the last segment counts as flushed
                return len(bases) - 1
            try:
                rp = read_checkpoint(checkpoint).get(key, 0)  # LogManager: a partition not listed starts at 0
            except CheckpointError:
                rp = 0  # LogManager: an unreadable checkpoint resets every recovery point to 0
        self._flushed_to = rp
        return min(max(bisect_right(bases, rp) - 1, 0), len(bases) - 1)

    def _log_dir(self) -> str:
        return os.path.dirname(os.path.abspath(os.path.normpath(self.path)))

    def _checkpoint_key(self):
        """``(topic, partition)`` of the directory's name, or None when it is not a partition's name."""
        try:
            return parse_partition_dir_name(self.path)
        except ValueError:
            return None

    def _indexes_sound(self, base, log_size):
        d = self.path
        for cls, suffix in ((OffsetIndex, INDEX_SUFFIX), (TimeIndex, TIME_INDEX_SUFFIX)):
            path = os.path.join(d, segment_file_name(base, suffix))
            if not os.path.exists(path):
                return False
            idx = cls(path, base)
            try:
                idx.sanity_check()
            except CorruptIndexError:
                return False
            if idx.preallocated_bytes or idx.invalid_position is not None or idx.partial_bytes:
                return False  # an untrimmed index: the segment was active when the process stopped
            if cls is OffsetIndex and len(idx) and idx.entry(len(idx) - 1).position >= log_size:
                return False
        return True

    def _scan_segment(self, path, size):
        """(positions, sizes, last offsets, max timestamps) of the batches of a whole log file."""
        if size == 0:
            return [], [], [], []
        with mapped(path, size) as mm:
            try:
                cols = self._codec.scan_batches(mm, verify_crc=False)
            except KafkaTxError as exc:  # a segment the broker's checks would stop at: name its file
                raise _relocate(exc, os.fspath(path), 0) from None
        return (list(cols["position"]), list(cols["size_in_bytes"]), list(cols["last_offset"]),
                list(cols["max_timestamp"]))  # fmt: skip

    def _fill_indexes(self, index, timeindex, positions, sizes, lasts, max_tss):
        """LogSegment.recover's index rebuild over the batches of one segment."""
        last_entry = 0
        max_ts, off_max = -1, index.base_offset
        interval = self.index_interval_bytes
        for pos, _size, last, mts in zip(positions, sizes, lasts, max_tss):
            if mts > max_ts:
                max_ts, off_max = mts, last
            if pos - last_entry > interval:
                index.append(last, pos)
                timeindex.append(max_ts, off_max)
                last_entry = pos
        if max_ts >= 0:
            timeindex.append(max_ts, off_max, skip_full_check=True)
        return max_ts, off_max

    def _rebuild_indexes(self, base, log_path):
        d = self.path
        paths = [os.path.join(d, segment_file_name(base, s)) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
        for p in paths:
            if os.path.exists(p):
                os.remove(p)
        cols = self._scan_segment(log_path, os.path.getsize(log_path))
        index = OffsetIndex(paths[0], base, max_index_size=self.max_index_size, writable=True)
        timeindex = TimeIndex(paths[1], base, max_index_size=self.max_index_size, writable=True)
        try:
            self._fill_indexes(index, timeindex, *cols)
        finally:
            index.close()
            timeindex.close()
        return paths

    def _rebuild_active_indexes(self, seg, log_path):
        seg.index.reset()
        seg.timeindex.reset()
        cols = self._scan_segment(log_path, seg.size)
        seg.max_ts, seg.offset_of_max_ts = self._fill_indexes(seg.index, seg.timeindex, *cols)
        if seg.max_ts < 0:
            seg.offset_of_max_ts = seg.base_offset
        if cols[0]:
            seg.rolling_ts = cols[3][0]
        seg.bytes_since_index = 0  # a new LogSegment object starts counting from zero, as Kafka's does
        return [seg.index.path, seg.timeindex.path]

    def _validate_last(self, path, base, bases, logs):
        """(valid bytes, log end offset, file size) of the last segment after checking every batch."""
        file_size = os.path.getsize(path)

        def empty_end():  # an empty last segment starts where the previous one ends
            if len(bases) > 1:
                return max(base, self._segment_end_offset(logs[bases[-2]], bases[-2]))
            return base

        if file_size == 0:
            return 0, empty_end(), 0
        crc32c = self._crc32c
        with mapped(path, file_size) as mm:
            view = memoryview(mm)
            try:
                cols = self._codec.scan_batches(view, verify_crc=False)
                limit = cols["valid_bytes"]
            except KafkaTxError as exc:  # bad framing, a damaged magic: everything from that batch on is invalid
                if exc.position is None and not isinstance(exc, CorruptRecordError):
                    raise
                limit = exc.position if exc.position is not None else 0
                limit = self._frame_start(view, limit)
                cols = self._codec.scan_batches(view[:limit], verify_crc=False)
            valid = 0
            expected = base
            for pos, size, boff, last, magic in zip(cols["position"], cols["size_in_bytes"],
                                                    cols["base_offset"], cols["last_offset"],
                                                    cols["magic"]):  # fmt: skip
                if magic >= 2:
                    (stored,) = _CRC_AT.unpack_from(view, pos + 17)
                    if crc32c(view[pos + 21 : pos + size]) != stored:
                        break
                elif _CRC_AT.unpack_from(view, pos + 12)[0] != legacy_crc(view, pos, size):
                    break  # (a legacy entry's CRC-32, as Kafka's ensureValid checks it)
                if boff < expected or last < boff or last - base > INT32_MAX:
                    break
                expected = last + 1
                valid = pos + size
            del view
        end = expected if valid else empty_end()
        return valid, end, file_size

    def _frame_start(self, view, error_position):
        """The start of the entry holding ``error_position`` (the framing walk up to it)."""
        pos = 0
        n = view.nbytes
        while pos + 12 <= n:
            (size,) = _I32.unpack_from(view, pos + 8)
            nxt = pos + 12 + size
            if size < 14 or nxt > error_position:
                return pos
            pos = nxt
        return pos

    def _segment_end_offset(self, path, base):
        size = os.path.getsize(path)
        cols = self._scan_segment(path, size)
        return cols[2][-1] + 1 if cols[2] else base

    def _reconcile_txnindex(self, base, expected):
        """Make ``<base>.txnindex`` hold exactly ``expected``; returns its path if the file changed."""
        path = os.path.join(self.path, segment_file_name(base, TXN_INDEX_SUFFIX))
        exists = os.path.exists(path)
        try:
            current = read_txnindex(path, base_offset=base) if exists else []
            partial = exists and os.path.getsize(path) % 34 != 0
        except CorruptIndexError:
            current, partial = None, True
        if current == expected and not partial:
            return None
        if not exists and not expected:
            return None
        if current is not None and current == expected[: len(current)]:
            if partial:  # a crash mid-append: cut the partial entry, keep the whole ones
                os.truncate(path, len(current) * 34)
            idx = TransactionIndex(path, base)
            try:
                for e in expected[len(current) :]:
                    idx.append(e)
                idx.flush()
            finally:
                idx.close()
            return path
        if current is not None and expected == current[: len(expected)]:
            idx = TransactionIndex(path, base)
            try:
                idx.truncate_to(expected[-1].last_offset + 1 if expected else -(1 << 63))
                if os.path.getsize(path) % 34:
                    os.truncate(path, len(expected) * 34)
            finally:
                idx.close()
            return path
        write_txnindex(path, expected, fsync=True)
        return path
