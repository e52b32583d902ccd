"""Read a Kafka partition directory (``<topic>-<partition>``) the way a broker serves a fetch.

Layout of a partition directory (Kafka's ``LocalLog`` / ``LogLoader``): for every segment a
``<base>.log`` (concatenated batches), a ``<base>.index`` and ``<base>.timeindex`` (see
:mod:`kafkatx.log.index`), a ``<base>.txnindex`` only if an ABORT marker of a transaction with data
landed in that segment, and ``<offset>.snapshot`` producer-state snapshots.  The log directory root (the
parent) holds the ``replication-offset-checkpoint`` (high watermarks), ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` files.  Files ending ``.deleted``, ``.cleaned`` or ``.swap`` and
index files without a ``.log`` are ignored (``Partition.warnings`` mentions ``.swap`` files, which a
broker would complete on start-up).

Offsets of a partition
----------------------
* ``log_start_offset``: the ``log-start-offset-checkpoint`` entry if present (never below the first
  segment's base offset), else the first segment's base offset.
* ``log_end_offset``: one past the last offset of the last complete batch of the last segment (the
  last segment's base offset if it has none).  As a broker finds it, the headers are scanned from the
  batch of the segment's last ``.index`` entry on (checked as in Seeking below; the whole segment if
  the entry is not usable), so a 1 GiB active segment is not read from its start.
* ``high_watermark``: the ``replication-offset-checkpoint`` entry if present, capped at the log end;
  else the log end.
* ``last_stable_offset``: Kafka's ``min(first unstable offset, high watermark)``.  The first unstable
  offset is the smallest first offset of a transaction that has data but no marker, or whose marker
  is at or above the high watermark (Kafka's "unreplicated" transactions, kafka-format.md 10.4).  It is
  computed from batch headers (:func:`kafkatx.scan_batches`, no record decoded), replaying per producer
  id: a transactional data batch opens a transaction if none is open, a COMMIT/ABORT marker closes it
  (an empty control batch or one without an open transaction changes nothing, as in
  ``ProducerAppendInfo``).  As a broker restores its state, the replay starts from the newest producer
  ``.snapshot`` whose offset lies between the first segment's base offset and the high watermark (its
  open transactions, ``current_txn_first_offset``) and covers only the log from there on (from the
  indexed batch at or before the snapshot's offset: a shutdown snapshot lies inside the active segment); without
  a usable snapshot (none, or a damaged one) every segment is replayed.  ``open_transactions`` is the state
  that replay ends with.  The ``"scan"`` source of aborted transactions replays every segment, from a
  producer snapshot at the first segment's base offset if there is one (after retention deleted segments,
  it holds the transactions opened before the log start).  Every other replay must end with the same open
  transactions as the LSO's; where it does not, the segments and the snapshots tell two histories (a
  segment missing from a backup or cut, or markers a compaction removed): the read trusts the snapshot, as
  the broker does, and says so in ``warnings`` (and ``Partition.inconsistencies``); the
  ``"cross-check"`` source raises :class:`LogInconsistencyError` instead.

Seeking
-------
A read first finds the segment holding its start offset (the last one whose base offset is not above
it).  If that segment's batch headers are not known yet, the ``.index`` gives the position of the largest
indexed offset at or below the start, and only the headers from there on are scanned; the entry is
checked first (see below).  Segments whose headers a replay has already scanned are searched instead
and the index is not needed.  Every later segment is
read from its start.  Records are decoded in chunks of whole batches (``chunk_bytes``, default 32 MiB)
through one :class:`ReadCommittedFilter` per read, so the filter's state carries across segments.

Aborted transactions (``aborted_source``)
-----------------------------------------
A read under ``read_committed`` needs the aborted transactions that overlap it, found with the broker's
rule (:func:`kafkatx.txnindex.collect_aborted_across_segments`: start at the segment holding the start
offset and go on into later segments until an entry's last stable offset reaches the end of the read,
because a transaction may start segments before its ABORT marker).  The per-segment entry lists come from:

* ``"txnindex"``: the ``.txnindex`` files; a missing file counts as empty.
* ``"scan"``: the same replay as for the LSO, which emits an ``AbortedTxn`` (producer id, first offset,
  marker offset, LSO at the marker as ``ProducerStateManager.lastStableOffset`` computes it) into the
  segment holding the marker: byte-for-byte what the broker writes to ``.txnindex``.
* ``"auto"`` (default): per segment, the ``.txnindex`` file when it exists, else the scan's entries for
  that segment.  Absence alone is ambiguous (a segment without aborted transactions has no file; a
  tiered-storage copy may lack the file), and the scan resolves it: it yields exactly the entries the
  broker would have written, so a segment that legitimately has no file gets none.  The scan runs only
  when a segment of the read has no file, and then from the newest usable producer snapshot at or below
  the read's first segment (its open transactions are the state the entries depend on), else from the
  log start; when every segment of the read has its file, no segment is scanned beyond the LSO's
  replay.  A file is completed by the replay at hand (the LSO's, which covers the newest segments) with
  the entries of markers past its last entry: an ABORT marker is written to the ``.log`` before its entry
  to the ``.txnindex``, so the active segment's file read while a writer appends, or left by a crash
  between the two writes, lacks its newest entries while the marker already moved the LSO on.
* ``"cross-check"``: both; raises :class:`LogInconsistencyError` if any segment's
  ``(producer_id, first_offset, last_offset)`` entries differ between the file and the scan (a missing
  file where the scan finds aborted transactions counts as a difference), or if the aborted
  transactions collected for the read differ.  ``last_stable_offset`` fields are not compared
  entry by entry (they depend on producer state from before the log start once retention deleted
  segments), but a wrong one that changes what the read collects is caught by the second comparison.

Memory maps
-----------
Segments are memory-mapped read-only when first used, those of 2 MiB or more advised ``MADV_HUGEPAGE``
(Linux): the pages a read brings in from disk then come into the page cache as 2 MiB folios, which this
and every later map of the segment take with one page-table entry per 2 MiB instead of 512 (a read of a
gigabyte from a cache filled that way spends ~0.01 s on page tables instead of ~0.1 s, and unmapping it
likewise; pages already cached keep the size they have).  A read of ``PREFETCH_MIN_BYTES`` or more (4 MiB)
starts a read-ahead thread that maps the pages of the segments it will decode in ahead of the decoder
(``MADV_POPULATE_READ``, without the GIL; up to ``PREFETCH_LEAD`` bytes of later segments): page faults
on a mapped file otherwise cost about as much as decoding the bytes.  A read decoded in one piece
(``chunk_bytes=None``, as ``read_table``) starts it in ``read()``, before the aborted transactions are
collected, and lets it run over the whole read; such a read scans the batch headers of all its segments
before it decodes any, and it scans those after the first from the last one back, so that it meets the
read-ahead in the middle instead of overtaking it (where the kernel maps a segment 4 KiB at a time, the
reading thread took ~60% of the page faults of a gigabyte read itself in order, ~43% this way).  The
thread ends with the read.
Closing a partition hands its maps to a background thread that unmaps them (tearing down the page
tables of a read segment costs about a quarter of reading it); :func:`wait_for_release` waits for that.

Damaged files
-------------
* A segment cut mid-write (crashed broker): every complete batch is read, and the cut is reported in
  ``truncated_tails`` (:class:`TruncatedTail`: file, valid bytes, trailing bytes), never raised.  A
  length field corrupted to point past the end of the file cannot be told apart from a cut and is
  reported the same way (Kafka's recovery would truncate there too), and so are zero bytes from where the
  batches end to the end of the file (what ``log.preallocate`` leaves in an active segment, and a crash
  where the file system had not written the data yet).
* A damaged ``log-start-offset-checkpoint`` or ``recovery-point-offset-checkpoint`` is ignored with a line in
  ``Partition.warnings`` (a broker resets them); a damaged ``replication-offset-checkpoint`` raises
  :class:`~kafkatx.log.index.CheckpointError`.  A log start checkpoint past the log end makes the log empty
  there, as the broker's loader leaves it.
* A corrupt batch (CRC, magic, record framing, decompression) or offsets that do not increase raise
  the codec's error type, re-pointed at the segment: the message names the ``.log`` file and the byte
  position in it, ``error.file`` holds the path and ``error.position`` the position in the file.
  CRCs are checked where bytes are used, so each segment is read from memory once: every batch a read
  decodes (before any of its records is returned, in offset order), every control batch the LSO replay
  looks at, and the batch opening each transaction still open at the log end (a damaged header could
  otherwise fake a never-ending transaction and silently hold the LSO back).  Headers of batches nothing
  reads are not CRC-checked; ``kafkatx verify`` and :meth:`Segment.scan` check every batch.
* An offset index entry that does not point at a batch holding its offset (stale entries after a crash,
  a damaged file) is not trusted: the read scans from the segment start instead and says so in
  ``LogRead.warnings``.
"""

from __future__ import annotations

import contextlib
import mmap as _mmap
import os
import re
import threading
from bisect import bisect_left, bisect_right
from typing import NamedTuple

from .._fileio import O_BINARY, O_CLOEXEC, close_map, map_read_only
from ..compression import check_inflate_threads
from ..errors import CorruptRecordError, KafkaTxError
from ..producer_state import ProducerStateManager, read_snapshot, rebuild_from_log
from ..txnindex import AbortedTxn, collect_aborted_across_segments, read_txnindex
from .index import (
    INDEX_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    CheckpointError,
    OffsetIndex,
    TimeIndex,
    read_checkpoint,
    segment_file_name,
)

__all__ = [
    "open_partition",
    "open_log_dir",
    "LogDir",
    "Partition",
    "Segment",
    "LogRead",
    "TruncatedTail",
    "LogInconsistencyError",
    "OffsetOutOfRangeError",
    "CorruptSegmentError",
    "parse_partition_dir_name",
    "DEFAULT_CHUNK_BYTES",
]

_MAX_OFFSET = (1 << 63) - 1
_NUMPY_MIN_ROWS = 64  # columns of batch headers shorter than this are checked in Python (numpy's call cost)
PREFETCH_MIN_BYTES = 4 << 20  # reads smaller than this map their pages in as they decode them
PREFETCH_LEAD = 64 << 20  # read-ahead: log bytes of the segments after the one being read
DEFAULT_CHUNK_BYTES = 32 * 1024 * 1024  # log bytes decoded per feed (one Arrow batch at most per chunk)

_SEGMENT_LOG_RE = re.compile(r"^([0-9]{20})\.log$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-([0-9]+)$")
_ISOLATIONS = ("read_committed", "read_uncommitted")
_FORMATS = ("records", "batches", "arrow")
_SOURCES = ("auto", "txnindex", "scan", "cross-check")


# ------------------------------------------------------------------------------------------ errors
class LogInconsistencyError(KafkaTxError, ValueError):
    """Two sources of the same fact disagree (``.txnindex`` vs the log's markers)."""

    def __init__(self, message: str, file: str | None = None, details=None):
        super().__init__(f"{message} (in {file})" if file else message)
        self.reason = message
        self.file = file
        self.details = details

    def __reduce__(self):
        return (type(self), (self.reason, self.file, self.details))


class OffsetOutOfRangeError(KafkaTxError, ValueError):
    """A read starts outside ``[log_start_offset, log_end_offset]`` (Kafka's OFFSET_OUT_OF_RANGE)."""


class CorruptSegmentError(CorruptRecordError):
    """A segment breaks a log-level rule (offsets not increasing, outside the segment's range)."""

    def __init__(
        self, message: str, position: int | None = None, base_offset: int | None = None, file: str | None = None
    ):
        super().__init__(f"{message} in {file}" if file else message, position, base_offset)
        self.reason = message
        self.file = file

    def __reduce__(self):
        return (type(self), (self.reason, self.position, self.base_offset, self.file))


def _relocate(exc: KafkaTxError, path: str, offset_in_file: int):
    """The codec error ``exc`` (position relative to a slice) re-pointed at ``path``."""
    pos = getattr(exc, "position", None)
    abs_pos = None if pos is None else offset_in_file + pos
    reason = getattr(exc, "reason", str(exc))
    try:
        if isinstance(exc, CorruptSegmentError):
            new = CorruptSegmentError(exc.reason, abs_pos, exc.base_offset, path)
        else:
            new = type(exc)(f"{reason} in {path}", abs_pos, getattr(exc, "base_offset", None))
    except Exception:  # an error type with another constructor: keep its type family via a wrapper
        new = CorruptSegmentError(f"{type(exc).__name__}: {reason}", abs_pos, getattr(exc, "base_offset", None), path)
    new.file = path
    return new


class TruncatedTail(NamedTuple):
    """Bytes after the last complete batch of a segment (a cut write)."""

    file: str
    valid_bytes: int
    trailing_bytes: int


# ------------------------------------------------------------------------------------------ helpers
def parse_partition_dir_name(name) -> tuple[str, int]:
    """``"my-topic-3"`` -> ``("my-topic", 3)`` (the partition follows the last dash)."""
    base = os.path.basename(os.path.normpath(os.fspath(name)))
    m = _PARTITION_DIR_RE.match(base)
    if not m:
        raise ValueError(f"not a Kafka partition directory name (<topic>-<partition>): {base!r}")
    return m.group(1), int(m.group(2))


def _default_codec():
    from .._backend import codec

    return codec


def _np():
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is optional
        return None
    return np


def _all_zero(view) -> bool:
    """Whether every byte of ``view`` is zero."""
    np = _np()
    if np is not None:
        return not np.count_nonzero(np.frombuffer(view, dtype=np.uint8))
    step = 1 << 22  # pragma: no cover - numpy is optional
    return all(view[i : i + step].tobytes().count(0) == len(view[i : i + step]) for i in range(0, len(view), step))


class _Scan:
    """Batch headers of one segment (from ``scan_batches``), positions relative to the file."""

    __slots__ = (
        "position",
        "base_offset",
        "last_offset",
        "producer_id",
        "attributes",
        "magic",
        "size",
        "control_type",
        "max_timestamp",
        "valid_bytes",
        "trailing_bytes",
        "start",
    )

    def __init__(self, cols, start):
        self.start = start
        shift = start
        pos = cols["position"]
        self.position = pos if not shift else _shifted(pos, shift)
        self.base_offset = cols["base_offset"]
        self.last_offset = cols["last_offset"]
        self.producer_id = cols["producer_id"]
        self.attributes = cols["attributes"]
        self.magic = cols["magic"]
        self.size = cols["size_in_bytes"]
        self.control_type = cols["control_type"]
        self.max_timestamp = cols["max_timestamp"]
        self.valid_bytes = start + cols["valid_bytes"]
        self.trailing_bytes = cols["trailing_bytes"]

    def __len__(self):
        return len(self.base_offset)

    def end_of(self, row: int) -> int:
        return self.position[row] + self.size[row]


def _shifted(arr, shift):
    from array import array

    np = _np()
    if np is not None:
        a = np.frombuffer(arr, dtype=np.int64) + shift
        out = array("q")
        out.frombytes(a.tobytes())
        return out
    return array("q", (p + shift for p in arr))  # pragma: no cover


# ------------------------------------------------------------------------------------------ segment
class Segment:
    """One segment of a partition: its files, lazily opened (``.log`` memory-mapped read-only)."""

    def __init__(self, directory: str, base_offset: int, *, codec=None, verify_crc: bool = True,
                 has_txn_index: bool | None = None):  # fmt: skip
        self.directory = directory
        self.verify_crc = verify_crc
        self.base_offset = base_offset
        # the other files' paths and the .log's size are looked up when first needed: a partition of
        # thousands of segments opens without a stat per segment (a tail read touches only the last ones)
        self.log_path = os.path.join(directory, segment_file_name(base_offset, LOG_SUFFIX))
        self._size = None
        self._codec = codec if codec is not None else _default_codec()
        self._mmap = None
        self._fd = None  # a descriptor of the .log while held_open() lasts
        self._offset_index = None
        self._time_index = None
        self._txn_entries = None
        self._has_txn = has_txn_index  # known from the directory listing (None: look when asked)
        self._scan = None
        self._headers = None
        self._tail = None

    def __repr__(self):
        return f"Segment(base_offset={self.base_offset}, size={self.size}, path={self.log_path!r})"

    @property
    def size(self) -> int:
        """Bytes of the ``.log`` (read when first needed, then fixed: the map covers that many)."""
        if self._size is None:
            self._size = os.path.getsize(self.log_path)
        return self._size

    @property
    def index_path(self) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, INDEX_SUFFIX))

    @property
    def time_index_path(self) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, TIME_INDEX_SUFFIX))

    @property
    def txn_index_path(self) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, TXN_INDEX_SUFFIX))

    @property
    def has_txn_index(self) -> bool:
        if self._has_txn is not None:
            return self._has_txn
        return os.path.exists(self.txn_index_path)

    @property
    def has_offset_index(self) -> bool:
        return os.path.exists(self.index_path)

    @property
    def mmap(self):
        """The ``.log`` mapped read-only (``b""`` for an empty file), mapped on first use."""
        if self._mmap is None:
            if self.size == 0:
                self._mmap = b""
            else:
                fd = os.open(self.log_path, os.O_RDONLY | O_BINARY | O_CLOEXEC)
                try:  # (the map keeps a descriptor of its own)
                    self._mmap = map_read_only(fd, self.size)
                finally:
                    os.close(fd)
        return self._mmap

    def batch_at(self, position: int, size: int):
        """The batch of ``size`` bytes at file ``position``: from the map if the segment is mapped, else
        read from the file (a few control batches need not map a segment); positions in its errors are
        relative to :meth:`batch_base`."""
        if self._mmap is not None or os.name != "posix":
            return self._codec.RecordBatch(self.mmap, position=position, size=size, verify_crc=self.verify_crc)
        data = self._pread_into(lambda fd: os.pread(fd, size, position))
        return self._codec.RecordBatch(data, position=0, size=len(data), verify_crc=self.verify_crc)

    def batch_base(self, position: int) -> int:
        """Where the buffer of :meth:`batch_at` for a batch at ``position`` starts in the file."""
        return 0 if self._mmap is not None or os.name != "posix" else position

    def _pread_into(self, fn):
        """``fn(fd)`` on the ``.log``: the descriptor :meth:`held_open` holds, else one opened for the call
        (a segment holds no descriptor of its own but its map's)."""
        if self._fd is not None:
            return fn(self._fd)
        with open(self.log_path, "rb") as fh:
            return fn(fh.fileno())

    @contextlib.contextmanager
    def held_open(self):
        """Hold one descriptor of the ``.log`` for the reads inside the block (a header scan and the
        control batches it leads to) instead of opening the file for each."""
        if self._fd is not None or self._mmap is not None or os.name != "posix":
            yield self
            return
        self._fd = os.open(self.log_path, os.O_RDONLY | O_BINARY | O_CLOEXEC)
        try:
            yield self
        finally:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self.index_path, self.base_offset)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset)
        return self._time_index

    def txn_index_entries(self) -> list[AbortedTxn] | None:
        """The ``.txnindex`` entries, or None if the segment has no such file."""
        if self._txn_entries is None:
            if not self.has_txn_index:
                return None
            self._txn_entries = read_txnindex(self.txn_index_path, base_offset=self.base_offset)
        return self._txn_entries

    def scan(self) -> _Scan:
        """Batch headers of the whole segment (cached).

        Checks that offsets increase inside the segment and (``verify_crc``) every v2 batch's CRC, so
        nothing derived from the headers (LSO, aborted transactions) rests on damaged bytes.
        """
        if self._scan is None:
            self._scan = self._scan_from(0)
        return self._scan

    def headers(self) -> _Scan:
        """Batch headers of the whole segment (cached), offsets checked but CRCs not (the :meth:`scan`
        if one was made).  For the transaction replay and the read path: they check the CRC of every
        batch whose contents they use (control batches in the replay, every batch read when its
        records are decoded), so the segment's bytes are read from memory once, not twice."""
        if self._scan is not None:
            return self._scan
        if self._headers is None:
            self._headers = self._scan_from(0, verify_crc=False)
        return self._headers

    def tail(self) -> _Scan:
        """Batch headers from the batch of the last ``.index`` entry to the end of the segment (cached; the
        whole segment's if its headers are known or it has no usable index): what the log end offset needs,
        found as a broker finds it, without reading a large segment from its start."""
        if self._scan is not None:
            return self._scan
        if self._headers is not None:
            return self._headers
        if self._tail is None:
            pos = self.seek(_MAX_OFFSET)
            self._tail = self._scan_from(pos, verify_crc=False) if pos else self.headers()
        return self._tail

    def headers_from(self, offset: int) -> _Scan:
        """Batch headers from the batch the ``.index`` gives for ``offset`` on (the whole segment's if known,
        or if the index has nothing before ``offset``); CRCs not checked, as for :meth:`headers`."""
        if self._scan is not None:
            return self._scan
        if self._headers is not None:
            return self._headers
        pos = self.seek(offset) if offset > self.base_offset else 0
        return self._scan_from(pos, verify_crc=False) if pos else self.headers()

    def prefetch_end(self, upper: int) -> int:
        """A file position past every batch holding an offset below ``upper`` (the size of the file unless
        the ``.index`` shows a batch further on), mapping the file: how far a read up to ``upper`` goes."""
        m = self.mmap
        if not self.has_offset_index or upper >= _MAX_OFFSET:
            return len(m)
        try:
            idx = self.offset_index
        except (OSError, KafkaTxError):
            return len(m)
        # entries are (last offset of a batch, its position): the batch holding upper - 1 is the one of the
        # first entry at or above it or an earlier one, and it ends where the entry after that one starts
        rel = upper - 1 - self.base_offset
        slot = bisect_left(idx._rel, rel) + 1 if 0 <= rel < (1 << 31) else len(idx)
        return idx._pos[slot] if slot < len(idx) and 0 < idx._pos[slot] <= len(m) else len(m)

    def _scan_from(self, position: int, verify_crc: bool | None = None) -> _Scan:
        verify = self.verify_crc if verify_crc is None else verify_crc
        scan_fd = getattr(self._codec, "scan_batches_fd", None)
        try:
            if not verify and self._mmap is None and scan_fd is not None and os.name == "posix":
                # headers only, and the file not mapped yet: read the headers (and markers) with pread
                # rather than take a page fault per batch in a map the decoding may never need
                cols = self._pread_into(lambda fd: scan_fd(fd, position, self.size, verify_control=self.verify_crc))
            else:
                data = self.mmap
                with memoryview(data)[position:] as view:
                    cols = self._codec.scan_batches(view, verify_crc=verify, verify_control=self.verify_crc)
        except CorruptRecordError as exc:
            cols = self._scan_before_zeros(position, exc, verify)
            if cols is None:
                raise _relocate(exc, self.log_path, position) from exc
        except KafkaTxError as exc:
            raise _relocate(exc, self.log_path, position) from exc
        sc = _Scan(cols, position)
        self._check_offsets(sc)
        return sc

    def _scan_before_zeros(self, position: int, exc: CorruptRecordError, verify: bool):
        """The scan from ``position`` up to the entry ``exc`` (raised by a scan from there) stopped at, with the
        rest of the file as trailing bytes, if that rest is all zero bytes, else None.  Zeros are what
        ``log.preallocate`` leaves past the batches of a broker's active segment and what a crash leaves where
        the file system had not written the data yet: a cut, not damage (LogSegment.recover truncates there)."""
        at = exc.position
        if at is None:
            return None
        data = self.mmap
        stop = position + at
        if not 0 <= stop < len(data) or not _all_zero(memoryview(data)[stop:]):
            return None
        with memoryview(data)[position:stop] as view:
            cols = self._codec.scan_batches(view, verify_crc=verify, verify_control=self.verify_crc)
        cols["trailing_bytes"] = len(data) - position - cols["valid_bytes"]
        return cols

    def _check_offsets(self, sc: _Scan):
        n = len(sc)
        if not n:
            return
        base, last = sc.base_offset, sc.last_offset
        np = _np() if n > _NUMPY_MIN_ROWS else None
        if np is not None:
            b = np.frombuffer(base, dtype=np.int64)
            la = np.frombuffer(last, dtype=np.int64)
            bad = np.flatnonzero(la < b)
            row = int(bad[0]) if len(bad) else -1
            if n > 1:
                bad2 = np.flatnonzero(b[1:] <= la[:-1])
                if len(bad2) and (row < 0 or int(bad2[0]) + 1 < row):
                    row = int(bad2[0]) + 1
        else:
            row = -1
            for i in range(n):
                if last[i] < base[i] or (i and base[i] <= last[i - 1]):
                    row = i
                    break
        if row >= 0:
            raise CorruptSegmentError(
                f"batch offsets {base[row]}..{last[row]} do not follow the previous batch "
                f"(last offset {last[row - 1] if row else None})",
                sc.position[row],
                base[row],
                self.log_path,
            )
        if sc.start == 0 and base[0] < self.base_offset:
            raise CorruptSegmentError(
                f"first batch offset {base[0]} is below the segment base offset {self.base_offset}",
                0,
                base[0],
                self.log_path,
            )

    def seek(self, target_offset: int, warnings: list | None = None) -> int:
        """File position to start scanning from for ``target_offset``, found with the ``.index``.

        The entry found is checked against the log: the batch at its position must parse, pass its CRC
        and hold the indexed offset; otherwise the segment start is returned (and a warning appended).
        """
        if not self.has_offset_index:
            return 0
        try:
            idx = self.offset_index
        except OSError as exc:  # pragma: no cover - unreadable index
            if warnings is not None:
                warnings.append(f"cannot read {self.index_path}: {exc}; scanned {self.log_path} from its start")
            return 0
        off, pos = idx.lookup(target_offset)
        if pos == 0:
            return 0
        ok = False
        if 0 < pos <= self.size - 17:
            length = int.from_bytes(self.mmap[pos + 8 : pos + 12], "big", signed=True) + 12
            try:
                if length < 26 or pos + length > self.size:
                    raise ValueError("not a whole batch")
                batch = self._codec.RecordBatch(self.mmap, position=pos, size=length, verify_crc=True)  # (CRC checked)
                ok = batch.base_offset <= off <= batch.last_offset
            except KafkaTxError:
                ok = False
            except (ValueError, IndexError):
                ok = False
        if not ok:
            if warnings is not None:
                warnings.append(
                    f"{self.index_path}: entry ({off}, position {pos}) does not point at a batch holding offset "
                    f"{off}; scanned {self.log_path} from its start"
                )
            return 0
        return pos

    def close(self):
        m = self._mmap
        self._mmap = None
        self._scan = None
        self._headers = None
        self._tail = None
        if isinstance(m, _mmap.mmap):
            _RELEASER.release(m)


# ------------------------------------------------------------------------------------------ state replay
class _TxnScan(NamedTuple):
    aborted: list  # per segment: list[AbortedTxn] whose marker lies in that segment
    open_txns: dict  # producer id -> first offset of the transaction still open at the log end
    first_unstable: int | None  # smallest first offset of an open or not-yet-replicated transaction


def _replay(segments, codec, high_watermark: int, open_txns: dict | None = None, from_offset: int | None = None
            ) -> _TxnScan:
    """Replay transactional batch headers of ``segments``, in order.

    ``open_txns``/``from_offset``: start from a producer snapshot's open transactions instead of an empty
    state, and skip batches below the snapshot's offset."""
    open_: dict[int, int] = dict(open_txns or {})
    opened_at: dict[int, tuple] = {}  # producer id -> (segment, position, size) of its open transaction's start
    unreplicated_first = None
    per_segment = []
    # (no read-ahead thread here: the header scans read headers and markers only; the read that follows
    # has one)
    for k, seg in enumerate(segments):
        with seg.held_open():  # one open for the header scan and the markers of an unmapped segment
            # replaying from a snapshot: its segment from the indexed batch at or before the snapshot offset
            sc = seg.headers_from(from_offset) if k == 0 and from_offset is not None else seg.headers()
            out, unreplicated = _replay_segment(seg, sc, from_offset, open_, opened_at, high_watermark, codec)
        per_segment.append(out)
        if unreplicated is not None and (unreplicated_first is None or unreplicated < unreplicated_first):
            unreplicated_first = unreplicated
    # The headers were not CRC-checked (Segment.headers): a damaged one could fake a transaction that never
    # ends and silently pull the LSO down to it, so the batches that open the transactions still open are.
    for pid in open_:
        if pid not in opened_at:
            continue  # opened before the snapshot, whose own CRC was checked
        seg, position, size = opened_at[pid]
        if seg.verify_crc:
            try:
                seg.batch_at(position, size)  # (verify_crc: the batch's CRC is checked as it is opened)
            except KafkaTxError as exc:
                raise _relocate(exc, seg.log_path, seg.batch_base(position)) from exc
    candidates = list(open_.values())
    if unreplicated_first is not None:
        candidates.append(unreplicated_first)
    return _TxnScan(per_segment, dict(open_), min(candidates) if candidates else None)


def _replay_segment(seg, sc, from_offset, open_: dict, opened_at: dict, high_watermark: int, codec):
    """One segment of :func:`_replay` (its headers ``sc``): updates ``open_`` and ``opened_at``; returns its
    ``AbortedTxn`` entries and the smallest first offset of a transaction it closes at or above the high
    watermark (None if none).  The replay itself is the codec's ``replay_transactions``; markers the header
    scan could not read (or, with ``verify_crc``, whose CRC does not match) are read here, and raise."""
    out: list = []
    if not len(sc):
        return out, None

    def resolve(i):
        try:
            # (with verify_crc its CRC is checked as it is opened: a marker decides what is aborted, never trust a
            # damaged one)
            batch = seg.batch_at(sc.position[i], sc.size[i])
            return batch.first_control_type()
        except KafkaTxError as exc:
            raise _relocate(exc, seg.log_path, seg.batch_base(sc.position[i])) from exc

    unreplicated = codec.replay_transactions(
        sc.position, sc.base_offset, sc.producer_id, sc.attributes, sc.magic, sc.size, sc.control_type,
        open_, opened_at, out, seg, high_watermark, from_offset, resolve, AbortedTxn,
    )  # fmt: skip
    return out, unreplicated


def _completed(entries: list, scanned) -> list:
    """A segment's ``.txnindex`` entries, then those of a replay of its markers past the file's last one.  An
    ABORT marker reaches the ``.log`` before its entry reaches the ``.txnindex`` (the broker and
    :class:`~kafkatx.log.writer.PartitionWriter` write them in that order): a file read between the two
    writes, or left by a crash between them, lacks its newest entries, and the marker has already closed the
    transaction for the LSO."""
    end = entries[-1].last_offset if entries else -1
    extra = [e for e in scanned if e.last_offset > end]
    return entries + extra if extra else entries


# ------------------------------------------------------------------------------------------ releasing maps
class _Releaser:
    """Unmaps closed segments on a background thread.  Unmapping a segment that was read costs about a
    quarter of reading it (every page-table entry of the map is torn down; ``mmap.close`` runs without
    the GIL), so ``Segment.close`` hands its map here and returns: the caller goes on while they
    are released.  :meth:`wait` blocks until everything handed over is released.  Off POSIX (where an
    open map keeps its file from being deleted or replaced) maps are closed at once."""

    def __init__(self):
        self._cond = threading.Condition()
        self._pending: list = []
        self._busy = False
        self._thread = None

    def release(self, m):
        if os.name != "posix":
            close_map(m)
            return
        with self._cond:
            self._pending.append(m)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="kafkatx-log-release", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self):
        cond = self._cond
        while True:
            with cond:
                while not self._pending:
                    self._busy = False
                    cond.notify_all()
                    cond.wait()
                m = self._pending.pop(0)
                self._busy = True
            try:
                close_map(m)
            except Exception:  # pragma: no cover - closing a read-only map or file does not fail
                pass

    def wait(self):
        """Block until every map handed over so far is unmapped."""
        with self._cond:
            while self._pending or self._busy:
                self._cond.wait()

    def after_fork_in_child(self):
        """A forked child has none of its parent's threads: start afresh, closing what was pending."""
        pending, self._pending = self._pending, []
        self._cond = threading.Condition()
        self._thread = None
        self._busy = False
        for m in pending:
            close_map(m)


_RELEASER = _Releaser()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_RELEASER.after_fork_in_child)


def wait_for_release():
    """Block until the memory maps of every closed segment are unmapped (``close`` returns before that;
    see :class:`_Releaser`)."""
    _RELEASER.wait()


# ------------------------------------------------------------------------------------------ read-ahead
class _Prefetcher:
    """Maps the pages of byte ranges of memory-mapped segments in on a background thread, in the order they
    are queued, ahead of the decoder that follows (a page fault on a mapped file costs about as much as
    decoding the page; ``populate`` of the compiled codec runs without the GIL).  Only a hint: the decoder
    reads the same bytes whether or not the thread got there first.  The thread starts once
    ``PREFETCH_MIN_BYTES`` are queued and ends with :meth:`close` (or by itself when the codec cannot
    populate: the pure-Python one)."""

    STEP = 16 << 20  # bytes per populate call: the GIL is taken back between calls

    def __init__(self, codec, segments, upper: int = _MAX_OFFSET, lead: int = PREFETCH_LEAD):
        self._populate = getattr(codec, "populate_many", None)
        self._max_lead = lead  # PREFETCH_LEAD, or more for a read decoded in one piece
        self._cond = threading.Condition()
        self._queue: list = []  # (mmap, start, end)
        self._queued = 0
        self._closed = False
        self._thread = None
        self._segs = segments  # the segments to be read, in order; the last one up to ``upper``
        self._upper = upper
        self._ahead = 0  # segments [0, _ahead) are queued
        self._lead = 0  # bytes of the queued segments after the one being read

    def reached(self, i: int, pos0: int | None = 0):
        """Segment ``i`` is about to be read from ``pos0`` (None: from a position not known here, so it is
        not queued): queue it unless it is, and the segments after it up to the lead (``PREFETCH_LEAD`` bytes
        unless given)."""
        segs, last = self._segs, len(self._segs) - 1
        if self._ahead <= i:
            if pos0 is not None:
                seg = segs[i]
                self.add(seg, pos0, seg.prefetch_end(self._upper) if i == last else len(seg.mmap))
            self._ahead = i + 1
            self._lead = 0
        else:
            self._lead -= segs[i].size  # (queued in full as a later segment)
        while self._ahead < len(segs) and self._lead < self._max_lead:
            seg = segs[self._ahead]
            self.add(seg, 0, seg.prefetch_end(self._upper) if self._ahead == last else len(seg.mmap))
            self._lead += seg.size
            self._ahead += 1

    def add(self, segment, start: int, end: int):
        m = segment._mmap
        if self._populate is None or self._closed or end <= start or not isinstance(m, _mmap.mmap):
            return
        with self._cond:
            self._queue.append((m, start, end))
            self._queued += end - start
            self._cond.notify()
            if self._thread is None and self._queued >= PREFETCH_MIN_BYTES:
                self._thread = threading.Thread(target=self._run, name="kafkatx-log-prefetch", daemon=True)
                self._thread.start()

    def _run(self):
        populate = self._populate
        while True:
            batch, size = [], 0  # up to STEP bytes, maybe of several maps, in one call (one GIL hand-off)
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                while self._queue and size < self.STEP:
                    m, a, b = self._queue[0]
                    n = min(self.STEP - size, b - a)
                    if a + n >= b:
                        self._queue.pop(0)
                    else:
                        self._queue[0] = (m, a + n, b)
                    batch.append((m, a, a + n))
                    size += n
            if not populate(batch):
                return  # this codec cannot populate pages: nothing to gain

    def scan_headers_back(self):
        """For a read decoded in one piece, which scans the batch headers of all its segments (for the
        transaction replay, then for the read) before it decodes any, while this thread maps their pages in
        from the first segment on: scanned in order, the headers (a batch every few KiB) soon catch up with
        the thread, and the reading thread takes most of the page faults itself; scanned here from the last
        segment back, the two threads meet in the middle.  Nothing to gain if the thread is not running.
        The headers are cached (Segment.headers) for the scans in order, which also meet any damage found
        here where a read in order meets it, and raise there."""
        t = self._thread
        if t is None or not t.is_alive():
            return
        for seg in reversed(self._segs[1:]):
            try:
                seg.headers()
            except KafkaTxError:
                continue

    def close(self):
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify()
        t, self._thread = self._thread, None
        if t is not None:
            t.join()


# ------------------------------------------------------------------------------------------ read result
class LogRead:
    """Iterator over one read of a partition; its attributes describe the read.

    * ``next_offset``: where the next read should start (past control records and skipped batches,
      never beyond the read's upper bound); final once iteration ends.
    * ``upper_bound``: the offset the read stops before (LSO under read_committed, high watermark under
      read_uncommitted, or ``end_offset`` if lower).
    * ``aborted_transactions``: the :class:`~kafkatx.txnindex.AbortedTxn` entries used.
    * ``truncated_tails``: :class:`TruncatedTail` for each cut segment met by the read.
    * ``warnings``: strings (index entries not trusted, ...).
    """

    def __init__(self, partition, start, upper, isolation, fmt, columns, aborted, chunk_bytes, large_binary,
                 inflate_threads=None, prefetch=None):
        self.partition = partition
        self.start_offset = start
        self.upper_bound = upper
        self.isolation = isolation
        self.format = fmt
        self.columns = columns
        self.aborted_transactions = aborted
        self.next_offset = start
        self.truncated_tails: list[TruncatedTail] = []
        self.warnings: list[str] = []
        self.last_stable_offset = partition.last_stable_offset if isolation == "read_committed" else None
        self.high_watermark = partition.high_watermark
        self._chunk = chunk_bytes
        self._large = large_binary
        self._threads = inflate_threads
        self._queue: list = []  # arrow reads: (segment, start, end) byte ranges waiting to be decoded
        self._queued = 0
        self._prefetch = prefetch  # (started by Partition.read for a read decoded in one piece)
        self._gen = self._run()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self):
        self._gen.close()
        if self._prefetch is not None:  # (a read closed before it started)
            self._prefetch.close()

    def __del__(self):
        if getattr(self, "_prefetch", None) is not None:
            self._prefetch.close()

    # -- the read
    @staticmethod
    def _mapped(segs):
        for seg in segs:  # mapped now: mmap() waits while the read-ahead thread populates another map
            seg.mmap  # noqa: B018
        return segs

    def _run(self):
        start, upper = self.start_offset, self.upper_bound
        if start >= upper:
            return
        p = self.partition
        codec = p.codec
        pairs = [(a.producer_id, a.first_offset) for a in self.aborted_transactions]
        # read_committed with an explicit bound: the filter's LSO is our upper bound.  Under
        # read_uncommitted the same filter runs without aborted transactions (nothing is hidden
        # but control records), so it can still enforce the bound.
        # The headers come from Segment.headers (no CRC check); the filter checks the CRC of every batch
        # before it decodes it, in offset order, so nothing is returned from a damaged batch.
        filt = codec.ReadCommittedFilter(
            pairs, isolation="read_committed", last_stable_offset=upper, fetch_offset=start,
            verify_crc=p.verify_crc, inflate_threads=self._threads,
        )
        first = True
        segs = p._segments_between(start, upper)
        if self._prefetch is None:
            self._prefetch = _Prefetcher(codec, self._mapped(segs) if self.format != "batches" else [], upper)
        try:
            yield from self._segments_loop(segs, filt, start, upper, first)
        finally:
            self._prefetch.close()
        if self.format != "batches":
            if filt.next_offset is not None and filt.next_offset > self.next_offset:
                self.next_offset = filt.next_offset

    def _segments_loop(self, segs, filt, start, upper, first):
        for i, seg in enumerate(segs):
            row0 = 0
            pos0 = 0
            if seg._scan is None and first and start > seg.base_offset:
                pos0 = seg.seek(start, self.warnings)
            if self.format != "batches":
                self._prefetch.reached(i, pos0)
            if seg._scan is not None:
                sc = seg._scan  # headers already known (the LSO replay scans every segment)
            else:
                # seeking: headers from the indexed position on only
                sc = seg._scan_from(pos0, verify_crc=False) if pos0 else seg.headers()
            first = False
            if sc.trailing_bytes:
                tail = TruncatedTail(seg.log_path, sc.valid_bytes, sc.trailing_bytes)
                if tail not in self.truncated_tails:
                    self.truncated_tails.append(tail)
            n = len(sc)
            # rows holding offsets >= start and starting below the upper bound (offsets increase: checked).  A
            # legacy compressed wrapper's header has only its last offset (its first is inside), so records
            # and Arrow reads take the first row reaching the bound too and the filter (its LSO is the bound)
            # cuts its records there; raw batches end before it, as the broker's read ends at the position of
            # the batch holding its bound offset (LogSegment.translateOffset)
            lo = bisect_left(sc.last_offset, start, row0, n)
            if self.format == "batches":
                hi = bisect_left(sc.base_offset, upper, lo, n)
            else:
                hi = bisect_left(sc.last_offset, upper, lo, n)
                if hi < n and (sc.base_offset[hi] < upper or sc.magic[hi] < 2):
                    hi += 1
            if lo < hi:
                if self.format == "arrow":
                    yield from self._gather(seg, sc, lo, hi, filt)
                else:
                    yield from self._emit(seg, sc, lo, hi, filt)
            if hi < n:
                break  # the upper bound lies in this segment
        if self.format == "arrow":
            yield from self._flush(filt)

    def _chunks(self, sc, lo, hi):
        """Row ranges of at most ``chunk_bytes`` log bytes (at least one batch each)."""
        limit = self._chunk
        if limit is None:
            yield lo, hi
            return
        pos = sc.position
        i = lo
        while i < hi:
            j = max(bisect_left(pos, pos[i] + limit, i + 1, hi), i + 1)
            yield i, j
            i = j

    def _gather(self, seg, sc, lo, hi, filt):
        """Arrow reads: queue the byte ranges of rows [lo, hi) of ``seg``; decode (and yield) once
        ``chunk_bytes`` of log bytes are queued, possibly from several segments, as one RecordBatch."""
        limit = self._chunk
        for a, b in self._chunks(sc, lo, hi):
            start_pos, end_pos = sc.position[a], sc.end_of(b - 1)
            self._queue.append((seg, start_pos, end_pos))
            self._queued += end_pos - start_pos
            if limit is not None and self._queued >= limit:
                yield from self._flush(filt)

    def _flush(self, filt):
        queue, self._queue, self._queued = self._queue, [], 0
        if not queue:
            return
        views = [memoryview(seg.mmap)[a:b] for seg, a, b in queue]
        try:
            out = filt.feed_arrow_parts(views, columns=self.columns, large_binary=self._large)
        except KafkaTxError as exc:
            seg, a, _b = queue[getattr(exc, "part", 0)]
            raise _relocate(exc, seg.log_path, a) from exc
        finally:
            for v in views:
                v.release()
        if filt.next_offset is not None and filt.next_offset > self.next_offset:
            self.next_offset = filt.next_offset
        if out.num_rows:
            yield out

    def _emit(self, seg, sc, lo, hi, filt):
        """Records (or raw batches) of rows [lo, hi) of ``seg``."""
        path = seg.log_path
        data = seg.mmap
        if self.format == "batches":
            codec = self.partition.codec
            verify = self.partition.verify_crc
            for i in range(lo, hi):
                p = sc.position[i]
                try:
                    batch = codec.RecordBatch(data, position=p, size=sc.size[i], verify_crc=verify)  # (CRC checked)
                except KafkaTxError as exc:
                    raise _relocate(exc, path, 0) from exc
                self.next_offset = max(self.next_offset, min(batch.last_offset + 1, self.upper_bound))
                yield batch
            return
        for a, b in self._chunks(sc, lo, hi):
            start_pos = sc.position[a]
            end_pos = sc.end_of(b - 1)
            view = memoryview(data)[start_pos:end_pos]
            try:
                out = filt.feed(view)
            except KafkaTxError as exc:
                raise _relocate(exc, path, start_pos) from exc
            finally:
                view.release()
            if filt.next_offset is not None and filt.next_offset > self.next_offset:
                self.next_offset = filt.next_offset
            yield from out


# ------------------------------------------------------------------------------------------ partition
class Partition:
    """One ``<topic>-<partition>`` directory.  See the module docstring for the offsets it reports."""

    def __init__(
        self,
        path,
        *,
        topic: str | None = None,
        partition: int | None = None,
        codec=None,
        verify_crc: bool = True,
        high_watermark: int | None = None,
        log_start_offset: int | None = None,
        recovery_point: int | None = None,
    ):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"no partition directory at {self.path}")
        if topic is None or partition is None:
            t, p = parse_partition_dir_name(self.path)
            topic = t if topic is None else topic
            partition = p if partition is None else partition
        self.topic = topic
        self.partition = partition
        self.codec = codec if codec is not None else _default_codec()
        self.verify_crc = verify_crc
        self.warnings: list[str] = []
        bases, snapshots, txn_files = [], [], set()
        odd = []
        with os.scandir(self.path) as listing:
            for entry in listing:
                name = entry.name
                m = _SEGMENT_LOG_RE.match(name)
                if m:
                    # as LogLoader, which lists files only (the listing's file type: no stat but for a symlink)
                    if entry.is_file():
                        bases.append(int(m.group(1)))
                    else:
                        odd.append(f"{entry.path}: not a file (ignored)")
                elif name.endswith(".txnindex"):
                    txn_files.add(name[: -len(".txnindex")])
                elif name.endswith(".swap"):
                    odd.append(f"{entry.path}: an unfinished segment swap (ignored)")
                elif name.endswith(".snapshot"):
                    stem = name[: -len(".snapshot")]
                    if len(stem) == 20 and stem.isascii() and stem.isdigit():
                        snapshots.append(int(stem))
        self.warnings.extend(sorted(odd))
        bases.sort()
        # which segments have a .txnindex is known from the listing, but for the last one: a broker (or a
        # PartitionWriter) may still be appending to it, and its index file appears with its first abort
        self.segments: list[Segment] = [
            Segment(self.path, b, codec=self.codec, verify_crc=verify_crc,
                    has_txn_index=(f"{b:020d}" in txn_files) if i + 1 < len(bases) else None)
            for i, b in enumerate(bases)
        ]  # fmt: skip
        self._hw_checkpoint = high_watermark
        self._lso_checkpoint = log_start_offset
        self.recovery_point = recovery_point
        self._txn_scan = None
        self._snapshot_offsets = sorted(snapshots)  # offsets of the .snapshot files (listed with the segments)
        self._snapshot_replays: dict = {}  # snapshot offset -> (replay from it, index of its first segment)
        self._snapshot_txns: dict = {}  # snapshot offset -> its open transactions, None if it cannot be read
        #: :class:`LogInconsistencyError` s found by replays (see ``_check_replay``), also in ``warnings``
        self.inconsistencies: list[LogInconsistencyError] = []

    def __repr__(self):
        return f"Partition({self.topic!r}, {self.partition}, segments={len(self.segments)}, path={self.path!r})"

    # -- offsets
    @property
    def log_start_offset(self) -> int:
        first = self.segments[0].base_offset if self.segments else 0
        if self._lso_checkpoint is not None:
            return max(self._lso_checkpoint, first)
        return first

    @property
    def log_end_offset(self) -> int:
        if not self.segments:
            return self._lso_checkpoint or 0
        last = self.segments[-1]
        sc = last.tail()
        # an empty active segment (just rolled, or cut before its first batch): the log end is its base
        end = sc.last_offset[len(sc) - 1] + 1 if len(sc) else last.base_offset
        # a log start checkpoint past the log end (LogLoader deletes every segment then and starts the log
        # empty there): the log is empty at its log start
        return max(end, self.log_start_offset)

    @property
    def high_watermark(self) -> int:
        leo = self.log_end_offset
        if self._hw_checkpoint is not None:
            return max(min(self._hw_checkpoint, leo), self.log_start_offset if self.segments else 0)
        return leo

    def _replayed(self) -> _TxnScan:
        """The replay of every segment: from a producer snapshot at the first segment's base offset when
        there is a usable one (after retention deleted segments it holds the transactions opened before the
        log start, which the broker's state keeps), else from an empty state.  Checked against the LSO's
        replay (:meth:`_check_replay`)."""
        if self._txn_scan is None:
            snap = self._snapshot_at_or_below(self.segments[0].base_offset) if self.segments else None
            if snap is None:
                scan = _replay(self.segments, self.codec, self.high_watermark)
                self._check_replay(scan, None)
            else:
                scan = self._replay_from(snap)[0]
            self._txn_scan = scan
        return self._txn_scan

    def _check_replay(self, scan: _TxnScan, snap) -> None:
        """Note a :class:`LogInconsistencyError` (in :attr:`inconsistencies` and :attr:`warnings`) if a replay
        from ``snap`` (an older producer snapshot, or None: the log start) ends with other open transactions
        than the replay from the newest snapshot, which the LSO uses.  The segments and the snapshots then
        tell two histories: a segment missing from a backup or cut, a snapshot from another log -- or, on
        a compacted topic, a COMMIT/ABORT marker the cleaner removed after its delete horizon (Kafka
        Streams changelogs), which leaves a transaction's data without its end.  Reads go on as the broker
        would, trusting the snapshot; ``aborted_source="cross-check"`` raises it.  From the log start with
        no snapshot, a transaction opened before the log start may be open with a later first offset, or
        not seen at all (its batches were deleted): that is no disagreement."""
        newest = self._snapshot_at_or_below(self.high_watermark)
        if newest is None or (snap is not None and snap[0] == newest[0]):
            return
        ref = self._replay_from(newest)[0].open_txns
        got = scan.open_txns
        origin = "the log start" if snap is None else f"the producer snapshot at offset {snap[0]}"
        bad = [(pid, first, ref.get(pid)) for pid, first in sorted(got.items()) if pid not in ref or ref[pid] > first]
        if snap is not None:
            bad += [(pid, got.get(pid), first) for pid, first in sorted(ref.items()) if got.get(pid) != first]
        if not bad:
            return
        pid, replayed, snapped = bad[0]
        err = LogInconsistencyError(
            f"replayed from {origin}, producer {pid} has "
            f"{'no open transaction' if replayed is None else f'a transaction open from offset {replayed}'}, but "
            f"the producer snapshot at offset {newest[0]} has "
            f"{'none' if snapped is None else f'one open from offset {snapped}'} ({len(bad)} producer(s) differ): "
            f"a segment is missing or was cut, a snapshot is not this log's, or compaction removed markers; reads "
            f"trust the snapshot, as the broker does",
            os.path.join(self.path, f"{newest[0]:020d}.snapshot"), {"replay": dict(got), "snapshot": dict(ref)},
        )  # fmt: skip
        self.inconsistencies.append(err)
        self.warnings.append(str(err))

    def _snapshot_at_or_below(self, limit: int):
        """``(offset, open transactions)`` of the newest usable producer snapshot at or below ``limit``, or
        None.  Usable, as for a broker restoring its state: a readable ``.snapshot`` (CRC checked) whose
        offset is at least the first segment's base offset, so the segments from it on hold every later
        batch."""
        if not self.segments:
            return None
        lo = self.segments[0].base_offset
        for offset in reversed(self._snapshot_offsets):
            if not lo <= offset <= limit:
                continue
            if offset not in self._snapshot_txns:  # (each file read once: the LSO and every replay ask)
                try:
                    entries = read_snapshot(os.path.join(self.path, f"{offset:020d}.snapshot"))
                except (KafkaTxError, OSError):
                    entries = None  # a damaged snapshot: an older one, or the full replay, decides
                self._snapshot_txns[offset] = None if entries is None else {
                    e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0}
            if self._snapshot_txns[offset] is not None:
                return offset, dict(self._snapshot_txns[offset])
        return None

    def _replay_from(self, snapshot) -> tuple[_TxnScan, int]:
        """The replay from a producer snapshot (cached): its scan and the index of its first segment."""
        offset, open_txns = snapshot
        got = self._snapshot_replays.get(offset)
        if got is None:
            bases = [seg.base_offset for seg in self.segments]
            first = max(bisect_right(bases, offset) - 1, 0)
            scan = _replay(self.segments[first:], self.codec, self.high_watermark, open_txns, offset)
            self._check_replay(scan, snapshot)
            got = self._snapshot_replays[offset] = (scan, first)
        return got

    def _unstable_scan(self) -> _TxnScan:
        """What the LSO needs: a replay from the newest producer snapshot at or below the high watermark
        (as a broker restores its state; every marker at or above the high watermark lies after it), else
        the full replay.  Always the same one, whatever else was replayed before: every other replay is
        checked against it."""
        return self._unstable_replay()[0]

    def _unstable_replay(self) -> tuple[_TxnScan, int]:
        """:meth:`_unstable_scan` and the index of the first segment it covers."""
        snap = self._snapshot_at_or_below(self.high_watermark)
        if snap is None:
            return self._replayed(), 0
        return self._replay_from(snap)

    @property
    def last_stable_offset(self) -> int:
        hw = self.high_watermark
        first = self._unstable_scan().first_unstable
        return hw if first is None else max(min(first, hw), self.log_start_offset)

    def offset_for_timestamp(self, timestamp: int, *, isolation: str = "read_uncommitted") -> int | None:
        """The offset a ListOffsets request for ``timestamp`` gets from the broker, or None where it gets none.

        As Kafka's ``UnifiedLog.fetchOffsetByTimestamp``: in the first segment whose largest timestamp is at
        least ``timestamp`` (``LogSegment.largestTimestamp``: a rolled segment's is the last ``.timeindex``
        entry, written when it rolled, and the active one's is found in its batch headers, as is a rolled one's
        without a readable ``.timeindex``; a segment without timestamps counts its file's modification
        time), the first record with a timestamp at least ``timestamp`` and an
        offset at least the log start offset, searched from the batch the ``.timeindex`` and ``.index`` give
        for it (``LogSegment.findOffsetByTimestamp``: a record before that batch is not looked at, even with
        a later timestamp; with no usable index files the search starts at the segment's start).  Then the
        partition's bound for ``isolation``: an offset at or past the last stable offset (read_committed) or
        the high watermark (read_uncommitted) is None.  ``-2`` (EARLIEST_TIMESTAMP) gives the log start
        offset and ``-1`` (LATEST_TIMESTAMP) that bound.  Records of control batches are searched too, as
        Kafka searches them.
        """
        if isolation not in _ISOLATIONS:
            raise ValueError(f"isolation must be 'read_committed' or 'read_uncommitted', got {isolation!r}")
        bound = self.last_stable_offset if isolation == "read_committed" else self.high_watermark
        if timestamp == -2:
            return self.log_start_offset
        if timestamp == -1:
            return bound
        if type(timestamp) is not int or timestamp < 0:
            raise ValueError(f"timestamp must be a timestamp in ms (>= 0), -1 (latest) or -2 (earliest), "
                             f"got {timestamp!r}")  # fmt: skip
        log_start = self.log_start_offset
        last = len(self.segments) - 1
        for i, seg in enumerate(self.segments):
            if self._largest_timestamp(seg, rolled=i < last) < timestamp:
                continue
            found = self._search_timestamp(seg, seg.headers(), timestamp, log_start)
            return found if found is not None and found < bound else None
        return None

    @staticmethod
    def _largest_timestamp(seg, *, rolled: bool) -> int:
        """``LogSegment.largestTimestamp`` of ``seg`` (see :meth:`offset_for_timestamp`)."""
        largest = None
        if rolled and os.path.exists(seg.time_index_path):
            try:
                largest = seg.time_index.last_entry().timestamp
            except (OSError, KafkaTxError):
                largest = None  # (a broker would rebuild it: the batch headers say what it would hold)
        if largest is None:
            largest = max(seg.headers().max_timestamp, default=-1)
        if largest < 0:
            try:
                largest = int(os.stat(seg.log_path).st_mtime * 1000)
            except OSError:
                largest = -1
        return largest

    @staticmethod
    def _search_timestamp(seg, sc, timestamp: int, starting_offset: int) -> int | None:
        """``LogSegment.findOffsetByTimestamp`` / ``FileRecords.searchForTimestamp`` in ``seg`` (headers ``sc``)."""
        start = 0
        if seg.has_offset_index and os.path.exists(seg.time_index_path):
            try:
                indexed = seg.time_index.lookup(timestamp).offset
            except (OSError, KafkaTxError):
                indexed = seg.base_offset
            start = seg.seek(max(indexed, starting_offset))
        for i in range(len(sc)):
            if sc.position[i] < start or sc.max_timestamp[i] < timestamp:
                continue
            batch = seg.batch_at(sc.position[i], sc.size[i])
            try:
                for rec in batch:
                    if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                        return rec.offset
            except KafkaTxError as exc:
                raise _relocate(exc, seg.log_path, seg.batch_base(sc.position[i])) from exc
        return None

    @property
    def open_transactions(self) -> dict[int, int]:
        """``{producer_id: first_offset}`` of transactions with data and no marker at the log end, from the
        state the LSO is computed from (a first offset may lie below the log start, as in the broker's
        producer state)."""
        return dict(self._unstable_scan().open_txns)

    def producer_state(self):
        """The broker's producer state at the log end, as it restores it: the newest readable producer
        snapshot (at or below the log end) loaded into a :class:`~kafkatx.producer_state.ProducerStateManager`
        and the batches after it replayed (``origin="replication"``); with no usable snapshot, every batch.
        What Kafka's DescribeProducers reports for the partition: each producer's epoch, last sequence,
        last timestamp, coordinator epoch and the first offset of its open transaction."""
        m = ProducerStateManager()
        if not self.segments:
            return m
        start = self.segments[0].base_offset
        leo = self.log_end_offset
        for offset in reversed(self._snapshot_offsets):
            if not start <= offset <= leo:
                continue
            try:
                m.load_snapshot(os.path.join(self.path, f"{offset:020d}.snapshot"), map_end_offset=offset)
            except (KafkaTxError, OSError):
                m = ProducerStateManager()
                continue
            start = offset
            break
        bases = [seg.base_offset for seg in self.segments]
        for seg in self.segments[max(bisect_right(bases, start) - 1, 0) :]:
            data = seg.mmap
            if not len(data):
                continue
            try:
                rebuild_from_log(data, start_offset=start, manager=m, verify_crc=self.verify_crc)
            except KafkaTxError as exc:
                raise _relocate(exc, seg.log_path, 0) from exc
        return m

    @property
    def truncated_tails(self) -> list[TruncatedTail]:
        """Cut segment tails (scans every segment's batch headers)."""
        out = []
        for seg in self.segments:
            sc = seg.scan()
            if sc.trailing_bytes:
                out.append(TruncatedTail(seg.log_path, sc.valid_bytes, sc.trailing_bytes))
        return out

    # -- aborted transactions
    def aborted_transactions_by_segment(self, source: str = "auto") -> list[list[AbortedTxn]]:
        """Per segment, the aborted-transaction entries from ``source`` (``"txnindex"``, ``"scan"``,
        ``"auto"``; see the module docstring)."""
        if source not in ("auto", "txnindex", "scan"):
            raise ValueError(f"source must be 'auto', 'txnindex' or 'scan', got {source!r}")
        return self._aborted_entries(source, 0)

    def _aborted_entries(self, source: str, first: int) -> list[list[AbortedTxn]]:
        """aborted_transactions_by_segment for the segments from index ``first`` on.  ``"auto"`` replays the
        log only if one of them has no ``.txnindex`` (the replay's state comes from every segment)."""
        segs = self.segments[first:]
        if source == "txnindex":
            return [seg.txn_index_entries() or [] for seg in segs]
        if source == "auto":
            entries = [seg.txn_index_entries() for seg in segs]
            if all(e is not None for e in entries):
                # the segments the LSO's replay covered (the newest ones; it is made for every
                # read_committed read anyway) have their files' newest entries checked against it
                scan, k = self._unstable_replay()
                return [e if i + first < k else _completed(e, scan.aborted[i + first - k])
                        for i, e in enumerate(entries)]  # fmt: skip
            # a replay resolves the missing files: from a producer snapshot at or below the first segment
            # when there is one (the snapshot holds the open transactions an entry's LSO depends on)
            snap = None if self._txn_scan is not None or not segs else self._snapshot_at_or_below(segs[0].base_offset)
            if snap is None:
                scanned = self._replayed().aborted[first:]
            else:
                scan, k = self._replay_from(snap)
                scanned = scan.aborted[first - k :]
            return [list(sc) if e is None else _completed(e, sc) for e, sc in zip(entries, scanned)]
        return [list(x) for x in self._replayed().aborted[first:]]

    def aborted_transactions(
        self, start_offset: int, upper_bound_offset: int, *, source: str = "auto"
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``, collected with the
        broker's rule (:func:`~kafkatx.txnindex.collect_aborted_across_segments`)."""
        if source not in _SOURCES:
            raise ValueError(f"aborted_source must be one of {', '.join(_SOURCES)}, got {source!r}")
        bases = [s.base_offset for s in self.segments]
        if source == "cross-check":
            from_index = self.aborted_transactions_by_segment("txnindex")
            from_scan = self.aborted_transactions_by_segment("scan")
            if self.inconsistencies:  # the replay and the snapshots disagree
                raise self.inconsistencies[0]
            for seg, a, b in zip(self.segments, from_index, from_scan):
                ka = [(e.producer_id, e.first_offset, e.last_offset) for e in a]
                kb = [(e.producer_id, e.first_offset, e.last_offset) for e in b]
                if ka != kb:
                    only_index = [e for e in a if (e.producer_id, e.first_offset, e.last_offset) not in kb]
                    only_scan = [e for e in b if (e.producer_id, e.first_offset, e.last_offset) not in ka]
                    what = "is missing" if not seg.has_txn_index else "disagrees with the log's markers"
                    raise LogInconsistencyError(
                        f"transaction index {what}: only in the index {only_index}, only in the log {only_scan}",
                        seg.txn_index_path,
                        {"index": a, "scan": b},
                    )
            got_index, _ = collect_aborted_across_segments(zip(bases, from_index), start_offset, upper_bound_offset)
            got_scan, _ = collect_aborted_across_segments(zip(bases, from_scan), start_offset, upper_bound_offset)
            key = lambda es: sorted((e.producer_id, e.first_offset) for e in es)  # noqa: E731
            if key(got_index) != key(got_scan):
                raise LogInconsistencyError(
                    f"aborted transactions for [{start_offset}, {upper_bound_offset}) differ: from the transaction "
                    f"indexes {got_index}, from the log {got_scan} (a last_stable_offset field is wrong)",
                    self.path,
                    {"index": got_index, "scan": got_scan},
                )
            return got_index
        # the search starts at the segment holding the start offset: only it and later ones are read
        first = max(bisect_right(bases, start_offset) - 1, 0)
        per_segment = self._aborted_entries(source, first)
        got, _ = collect_aborted_across_segments(zip(bases[first:], per_segment), start_offset, upper_bound_offset)
        return got

    # -- reads
    def read(
        self,
        start_offset: int | None = None,
        end_offset: int | None = None,
        *,
        isolation: str = "read_committed",
        format: str = "records",
        columns=None,
        aborted_source: str = "auto",
        chunk_bytes: int | None = DEFAULT_CHUNK_BYTES,
        large_binary: bool = False,
        inflate_threads: int | None = None,
    ) -> LogRead:
        """Read ``[start_offset, end_offset)`` as a consumer with ``isolation`` would see it.

        ``format="records"`` yields :class:`kafkatx.Record` objects in offset order (never control
        records); ``"batches"`` yields the raw :class:`kafkatx.RecordBatch` objects the broker would
        return for the fetch (data, control and aborted batches alike, up to the same upper bound; filter
        them with ``read.aborted_transactions``); ``"arrow"`` yields ``pyarrow.RecordBatch`` objects (one
        per ``chunk_bytes`` of log bytes, whole batches, spanning segments; empty ones skipped)
        with ``columns`` as in :func:`kafkatx.decode_arrow`.  ``inflate_threads``: as in
        :func:`kafkatx.decode_records` (compressed segments: payloads inflated ahead on that many threads).

        Under ``read_committed`` nothing at or beyond the last stable offset is returned and aborted
        transactions are hidden; under ``read_uncommitted`` the bound is the high watermark.
        ``start_offset`` defaults to the log start offset and must lie in ``[log_start_offset,
        log_end_offset]``.  The returned :class:`LogRead` tells ``next_offset`` once iterated.
        """
        if isolation not in _ISOLATIONS:
            raise ValueError(f"isolation must be 'read_committed' or 'read_uncommitted', got {isolation!r}")
        if format not in _FORMATS:
            raise ValueError(f"format must be one of {', '.join(_FORMATS)}, got {format!r}")
        if aborted_source not in _SOURCES:
            raise ValueError(f"aborted_source must be one of {', '.join(_SOURCES)}, got {aborted_source!r}")
        if chunk_bytes is not None and chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
        if columns is not None and format != "arrow":
            raise ValueError("columns only applies to format='arrow'")
        check_inflate_threads(inflate_threads)
        log_start = self.log_start_offset
        leo = self.log_end_offset
        start = log_start if start_offset is None else int(start_offset)
        if not log_start <= start <= leo:
            raise OffsetOutOfRangeError(
                f"offset {start} is out of range [{log_start}, {leo}] of partition {self.topic}-{self.partition}"
            )
        upper = self.last_stable_offset if isolation == "read_committed" else self.high_watermark
        if end_offset is not None:
            upper = min(upper, int(end_offset))
        upper = max(upper, start)
        prefetch = None
        if format != "batches" and chunk_bytes is None and start < upper:
            # decoded in one piece: map the pages in on the read-ahead thread while the aborted transactions
            # are collected (a replay of batch headers when .txnindex files are missing), as far as it gets
            prefetch = self._early_prefetch(start, upper)
        try:
            if prefetch is not None and format == "arrow":
                # (not records: they are yielded as their segments are met, and a reader may stop before the last)
                prefetch.scan_headers_back()
            aborted = []
            if isolation == "read_committed" and start < upper:
                aborted = self.aborted_transactions(start, upper, source=aborted_source)
        except BaseException:
            if prefetch is not None:
                prefetch.close()
            raise
        got = LogRead(self, start, upper, isolation, format, columns, aborted, chunk_bytes, large_binary,
                      inflate_threads, prefetch)
        if isolation == "read_committed":  # what replays found (this read's, or earlier ones it relies on)
            got.warnings.extend(str(e) for e in self.inconsistencies)
        return got

    def _segments_between(self, start: int, upper: int) -> list:
        """The segments a read of ``[start, upper)`` goes through: from the one holding ``start`` to the last
        one starting below ``upper``."""
        bases = [s.base_offset for s in self.segments]
        i = max(bisect_right(bases, start) - 1, 0)
        return [seg for seg in self.segments[i:] if seg.base_offset < upper]

    def _early_prefetch(self, start: int, upper: int):
        segs = self._segments_between(start, upper)
        if not segs:
            return None
        pos0 = segs[0].seek(start) if start > segs[0].base_offset else 0
        pre = _Prefetcher(self.codec, LogRead._mapped(segs), upper, lead=1 << 62)
        pre.reached(0, pos0)
        return pre

    def read_table(self, start_offset: int | None = None, end_offset: int | None = None, **kwargs):
        """:meth:`read` with ``format="arrow"`` gathered into one ``pyarrow.Table``.

        Unless ``chunk_bytes`` is given, the whole read is decoded in one piece (its columns sized
        once), since the table holds all of it anyway."""
        import pyarrow as pa

        from .._common import arrow_schema

        kwargs.setdefault("chunk_bytes", None)
        r = self.read(start_offset, end_offset, format="arrow", **kwargs)
        batches = [b.replace_schema_metadata(None) for b in r]
        schema = arrow_schema(kwargs.get("columns"), kwargs.get("large_binary", False))
        return pa.Table.from_batches(batches, schema=schema)

    # -- lifecycle
    def close(self):
        """Close every segment.  Their memory maps are unmapped on a background thread (returning before
        that; :func:`wait_for_release` waits for it)."""
        for seg in self.segments:
            seg.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------------------------------ opening
def _checkpoints(log_dir: str) -> tuple[dict[str, dict], list[str]]:
    """The log dir's checkpoint files, and what was wrong with them.  A damaged high-watermark checkpoint
    raises :class:`CheckpointError` (the bound of every read would be lost); a damaged log-start or
    recovery-point checkpoint is taken as empty with a warning, as a broker's LogManager.loadLogs resets
    them (to the first segment's base offset, to 0)."""
    out = {REPLICATION_OFFSET_CHECKPOINT: read_checkpoint(os.path.join(log_dir, REPLICATION_OFFSET_CHECKPOINT))}
    warnings = []
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT):
        try:
            out[name] = read_checkpoint(os.path.join(log_dir, name))
        except CheckpointError as exc:
            out[name] = {}
            warnings.append(f"{exc}: ignored, as a broker resets it")
    return out, warnings


def _partition_from(path, topic, partition, cps, codec, verify_crc, warnings=()):
    key = (topic, partition)
    p = Partition(
        path,
        topic=topic,
        partition=partition,
        codec=codec,
        verify_crc=verify_crc,
        high_watermark=cps[REPLICATION_OFFSET_CHECKPOINT].get(key),
        log_start_offset=cps[LOG_START_OFFSET_CHECKPOINT].get(key),
        recovery_point=cps[RECOVERY_POINT_OFFSET_CHECKPOINT].get(key),
    )
    p.warnings.extend(warnings)
    return p


def open_partition(path, *, codec=None, verify_crc: bool = True, checkpoints: bool = True) -> Partition:
    """Open one ``<topic>-<partition>`` directory.

    With ``checkpoints`` the high watermark and log start offset come from the checkpoint files in the
    parent directory (the broker's log dir) when they list this partition.
    """
    path = os.fspath(path)
    topic, partition = parse_partition_dir_name(path)
    if checkpoints:
        cps, warnings = _checkpoints(os.path.dirname(os.path.abspath(os.path.normpath(path))))
    else:
        cps = {REPLICATION_OFFSET_CHECKPOINT: {}, LOG_START_OFFSET_CHECKPOINT: {},
               RECOVERY_POINT_OFFSET_CHECKPOINT: {}}  # fmt: skip
        warnings = []
    return _partition_from(path, topic, partition, cps, codec, verify_crc, warnings)


class LogDir(dict):
    """A broker log directory: ``{(topic, partition): Partition}`` plus the checkpoint files read."""

    def __init__(self, path, partitions, checkpoints):
        super().__init__(partitions)
        self.path = path
        self.checkpoints = checkpoints

    def close(self):
        for p in self.values():
            p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_log_dir(path, *, codec=None, verify_crc: bool = True) -> LogDir:
    """Open every ``<topic>-<partition>`` directory of a broker log dir (others, e.g. ``-delete`` or
    ``-future`` directories, are skipped)."""
    path = os.fspath(path)
    cps, warnings = _checkpoints(path)
    parts = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if not os.path.isdir(full):
            continue
        m = _PARTITION_DIR_RE.match(name)
        if not m:
            continue
        topic, partition = m.group(1), int(m.group(2))
        parts[(topic, partition)] = _partition_from(full, topic, partition, cps, codec, verify_crc, warnings)
    return LogDir(path, parts, cps)
