"""Kafka's per-segment offset and time indexes, segment file names, and the log-dir checkpoint files.

File formats (``storage/.../log/OffsetIndex.java``, ``TimeIndex.java``, ``AbstractIndex.java``,
``server-common/.../CheckpointFile.java``):

* ``<base>.index``: 8-byte entries, big-endian ``int32 relative offset`` (offset - segment base offset)
  and ``int32 physical position`` of a batch in the ``.log``.  Since Kafka 2.x the indexed offset is the
  *last* offset of the batch that starts at that position (older brokers indexed its first offset); either
  way the batch at ``position`` holds no offset above the indexed one, so a read for offset ``T`` can start
  at the position of the largest entry ``<= T`` and scan forward.  Offsets are strictly increasing.
* ``<base>.timeindex``: 12-byte entries, big-endian ``int64 timestamp`` and ``int32 relative offset``;
  an entry is appended only when its timestamp is strictly above the last one (``maybeAppend``), an
  offset below the last one or a timestamp below the last one is an error, and an equal timestamp is
  silently ignored.  Lookups return ``(-1, base_offset)`` (``NO_TIMESTAMP``) when nothing matches.
* checkpoint files (``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint``): UTF-8 text, a version line (``0``), a count line, then one
  ``topic partition offset`` line per partition (fields split on whitespace); written to ``<file>.tmp``,
  fsynced and renamed over the old file.  An empty file, or a file holding only the version line, reads
  as no entries (as Kafka's ``CheckpointReadBuffer`` does).

What Kafka does with the index length (``AbstractIndex``), and what this module does instead:

* A newly created index file is preallocated with ``setLength(roundDown(maxIndexSize, entrySize))``,
  i.e. a sparse file of zeros, and its write position starts at 0.  ``close()`` / segment roll call
  ``trimToValidSize()`` which shrinks the file to ``entries * entrySize``.
* A pre-existing file is *trusted*: ``entries = roundDown(file length, entrySize) / entrySize``.  So after
  a crash the active segment's index still has its preallocated zero tail, and Kafka counts the zeros as
  entries; it does not trip ``sanityCheck`` either (the last "entry" has relative offset 0, which is not
  below the base offset).  Kafka gets away with that because the active segment lies past the recovery
  point after an unclean shutdown and is recovered (``LogSegment.recover`` resets and rebuilds its
  indexes).  A reader of a copied directory cannot rebuild, so this module counts only the *valid
  prefix*: the longest run of slots with strictly increasing offsets (time index: strictly increasing
  timestamps, non-decreasing offsets) and non-negative fields.  Whole zero slots after that prefix are the
  preallocated tail (``preallocated_bytes``); anything else after it (stale entries left beyond the write
  position by ``truncateTo``, which only moves the position, or garbage) is reported by
  :meth:`sanity_check` with its byte position, and is never used for lookups.
* Ambiguity: a file that is all zeros and longer than one slot is an *empty* preallocated index, although
  it could also hold a single real entry ``(base_offset, 0)``; both give the same lookups.
* A read-only index whose file does not exist is an empty index (``exists`` is False); Kafka would create
  the file, which a reader must not do.
"""

from __future__ import annotations

import os
import re

from .._fileio import O_BINARY, O_CLOEXEC, atomic_write, pread, pwrite
import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import NamedTuple

from ..errors import CorruptIndexError, KafkaTxError

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "DEFAULT_MAX_INDEX_SIZE",
    "NO_TIMESTAMP",
    "segment_file_name",
    "parse_segment_file_name",
    "OffsetPosition",
    "TimestampOffset",
    "OffsetIndex",
    "TimeIndex",
    "InvalidOffsetError",
    "IndexFullError",
    "CheckpointError",
    "REPLICATION_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "read_checkpoint",
    "write_checkpoint",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes default
NO_TIMESTAMP = -1

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

_INT32_MAX = 2**31 - 1
_BIG_ENDIAN_HOST = struct.pack("=i", 1) == struct.pack(">i", 1)


class InvalidOffsetError(KafkaTxError, ValueError):
    """An index append whose offset is not above the last one (Kafka's InvalidOffsetException),
    or (time index) whose timestamp is below the last one, or an offset not representable relative to
    the segment base (Kafka's IndexOffsetOverflowException)."""


class IndexFullError(KafkaTxError, ValueError):
    """An append to an index that has no free slot left (the segment must roll first)."""


class CheckpointError(KafkaTxError, ValueError):
    """A checkpoint file is malformed; the message names the file and the line."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        where = []
        if file is not None:
            where.append(f"in {file}")
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.reason = message
        self.file = file
        self.line = line

    def __reduce__(self):
        return (type(self), (self.reason, self.file, self.line))


# ------------------------------------------------------------------------------------------ file names
def segment_file_name(base_offset: int, suffix: str) -> str:
    """``segment_file_name(1000, ".log") == "00000000000000001000.log"`` (Kafka's ``LogFileUtils``)."""
    if base_offset < 0:
        raise ValueError(f"base offset must not be negative, got {base_offset}")
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name) -> tuple[int, str]:
    """``"00000000000000001000.timeindex"`` -> ``(1000, ".timeindex")``.

    The offset is the part of the base name before the first dot (as Kafka's ``offsetFromFileName``),
    the suffix everything from that dot on (``.log``, ``.index``, ``.txnindex``, ``.log.deleted``,
    ``.index.swap``...).  Raises ValueError for a name that does not start with decimal digits and a dot.
    """
    base = os.path.basename(os.fspath(name))
    head, dot, rest = base.partition(".")
    if not dot or not head or not (head.isascii() and head.isdigit()):
        raise ValueError(f"not a Kafka segment file name: {base!r}")
    return int(head), "." + rest


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


# ------------------------------------------------------------------------------------------ indexes
class _Index:
    """Shared lifecycle of the offset and time index (Kafka's ``AbstractIndex``)."""

    ENTRY_SIZE = 0
    _KIND = "index"

    def __init__(self, path, base_offset: int, *, max_index_size: int = DEFAULT_MAX_INDEX_SIZE, writable: bool = False):
        self.path = os.fspath(path)
        self.base_offset = int(base_offset)
        self.max_index_size = int(max_index_size)
        self.writable = bool(writable)
        self._fd = None
        self._closed = False
        size = self.ENTRY_SIZE
        if self.writable and self.max_index_size < size:
            raise ValueError(f"Invalid max index size: {self.max_index_size}")
        self.exists = os.path.exists(self.path)
        data = b""
        newly_created = False
        if self.writable:
            flags = os.O_RDWR | os.O_CREAT | O_BINARY | O_CLOEXEC
            newly_created = not self.exists
            self._fd = os.open(self.path, flags, 0o644)
            self.exists = True
            if not newly_created:
                data = _read_all(self._fd)
        elif self.exists:
            with open(self.path, "rb") as fh:
                data = fh.read()
        #: length of the file when opened
        self.file_length = len(data)
        self._parse(data)
        if self.writable:
            # Kafka preallocates a new index and resizes the active segment's index to the maximum size
            # on load; the file keeps at least the valid entries.
            target = max(_round_down(self.max_index_size, size), self._n * size)
            if newly_created or os.fstat(self._fd).st_size != target:
                os.ftruncate(self._fd, target)
            self._length = target
            if not newly_created and self.invalid_position is not None:
                # stale or garbage slots past the valid prefix: zero them so that a crash after new
                # appends cannot leave old entries looking valid behind them
                pwrite(self._fd, bytes(min(len(data), target) - self._n * size), self._n * size)
        else:
            self._length = len(data)

    # -- parsing
    def _parse(self, data):  # pragma: no cover - overridden
        raise NotImplementedError

    def _classify_tail(self, data, n_valid):
        size = self.ENTRY_SIZE
        whole = len(data) - len(data) % size
        tail = memoryview(data)[n_valid * size : whole]
        #: bytes of whole zero slots after the valid entries (the preallocated tail)
        self.preallocated_bytes = 0
        #: byte position of the first slot after the valid entries that is neither valid nor zero
        self.invalid_position = None
        if len(tail) and _all_zero(tail):
            self.preallocated_bytes = len(tail)
        elif len(tail):
            self.invalid_position = n_valid * size
        #: bytes after the last whole slot (a file length that is not a multiple of the entry size)
        self.partial_bytes = len(data) - whole

    # -- Kafka's lifecycle
    def __len__(self):
        return self._n

    @property
    def entry_count(self) -> int:
        return self._n

    @property
    def max_entries(self) -> int:
        return self._length // self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._n >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by the entries (Kafka's ``sizeInBytes``)."""
        return self._n * self.ENTRY_SIZE

    def _check_writable(self):
        if self._closed:
            raise ValueError(f"{self._KIND} {self.path} is closed")
        if not self.writable:
            raise ValueError(f"{self._KIND} {self.path} was opened read-only")

    def _relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise InvalidOffsetError(f"Integer overflow for offset: {offset} ({self.path})")
        return rel

    def _write_slot(self, slot: int, payload: bytes):
        if slot >= self.max_entries:
            raise IndexFullError(f"Attempt to append to a full {self._KIND} (size = {self._n}) ({self.path})")
        pwrite(self._fd, payload, slot * self.ENTRY_SIZE)

    def flush(self) -> None:
        """fsync the index file (Kafka's ``flush`` forces the mmap)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (Kafka does this on close and on segment roll)."""
        self._check_writable()
        self._resize(self._n * self.ENTRY_SIZE)

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries (never below the entries)."""
        self._check_writable()
        target = max(_round_down(int(new_size), self.ENTRY_SIZE), self._n * self.ENTRY_SIZE)
        if target == self._length:
            return False
        self._resize(target)
        return True

    def _resize(self, target):
        os.ftruncate(self._fd, target)
        self._length = target

    def reset(self) -> None:
        """Remove every entry and resize to the maximum size (Kafka's ``reset``)."""
        self._check_writable()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def close(self, *, fsync: bool = True) -> None:
        """Trim the file to its entries (writable indexes, as Kafka's ``close``) and release it.

        ``fsync=False`` skips the flush (a segment roll: the data is flushed later, as Kafka does)."""
        if self._closed:
            return
        if self._fd is not None:
            try:
                self._resize(self._n * self.ENTRY_SIZE)
                if fsync:
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):  # an abandoned writable index must not leak its descriptor
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
            self._fd = None

    def _zero_slots_from(self, entries: int, old_entries: int):
        if self._fd is not None and old_entries > entries:
            pwrite(self._fd, bytes((old_entries - entries) * self.ENTRY_SIZE), entries * self.ENTRY_SIZE)

    def _sanity_common(self):
        size = self.ENTRY_SIZE
        if self.partial_bytes:
            raise CorruptIndexError(
                f"{self._KIND} file {self.path} is corrupt, found {self.file_length} bytes which is not a "
                f"multiple of {size}",
                self.file_length - self.partial_bytes,
                self.path,
            )
        if self.invalid_position is not None:
            raise CorruptIndexError(
                f"{self._KIND} file {self.path} is corrupt: the entry after {self._n} valid entries breaks "
                f"the index order and is not zero preallocation",
                self.invalid_position,
                self.path,
            )


def _read_all(fd) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    pos = 0
    while pos < size:
        chunk = pread(fd, min(size - pos, 1 << 24), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


def _all_zero(data) -> bool:
    raw = data if isinstance(data, bytes) else bytes(data)
    return raw.count(0) == len(raw)


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


def _be_columns(data, n, fmt_codes):
    """Column arrays of ``n`` big-endian fixed-size entries (fields given by struct codes)."""
    cols = [array(code) for code in fmt_codes]
    if n == 0:
        return cols
    fmt = ">" + "".join(fmt_codes)
    size = struct.calcsize(fmt)
    view = memoryview(data)[: n * size]
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is an optional dependency
        np = None
    if np is not None:
        dtype = np.dtype([(f"f{i}", ">" + c) for i, c in enumerate(fmt_codes)])
        rec = np.frombuffer(view, dtype=dtype, count=n)
        for i, (col, code) in enumerate(zip(cols, fmt_codes)):
            col.frombytes(rec[f"f{i}"].astype("=" + code).tobytes())
        return cols
    for i, fields in enumerate(zip(*struct.iter_unpack(fmt, view))):  # pragma: no cover
        cols[i].extend(fields)
    return cols


class OffsetIndex(_Index):
    """A segment's ``.index``: offset -> physical position of a batch in the ``.log``."""

    ENTRY_SIZE = 8
    _KIND = "index"

    def _parse(self, data):
        n_slots = len(data) // 8
        rel, pos = _be_columns(data, n_slots, ("i", "i"))
        n = _valid_prefix(rel, pos)
        if n == 1 and rel[0] == 0 and pos[0] == 0 and n_slots > 1 and _all_zero(data):
            n = 0  # an all-zero preallocated file: no entries (see the module docstring)
        del rel[n:], pos[n:]
        self._rel = rel
        self._pos = pos
        self._n = n
        self._classify_tail(data, n)

    @property
    def last_offset(self) -> int:
        """The last indexed offset, or the base offset when the index is empty (as Kafka)."""
        return self.base_offset + self._rel[self._n - 1] if self._n else self.base_offset

    def entries(self) -> list[OffsetPosition]:
        base = self.base_offset
        return [OffsetPosition(base + r, p) for r, p in zip(self._rel, self._pos)]

    def entry(self, n: int) -> OffsetPosition:
        if not 0 <= n < self._n:
            raise IndexError(f"Attempt to fetch the {n}th entry from index {self.path}, which has size {self._n}")
        return OffsetPosition(self.base_offset + self._rel[n], self._pos[n])

    def arrays(self):
        """``(offsets, positions)`` as numpy int64 arrays (absolute offsets)."""
        import numpy as np

        offsets = np.frombuffer(self._rel, dtype=np.int32).astype(np.int64) + self.base_offset
        return offsets, np.frombuffer(self._pos, dtype=np.int32).astype(np.int64)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Largest entry with offset <= ``target_offset``, else ``(base_offset, 0)``."""
        rel = target_offset - self.base_offset
        if rel < 0 or self._n == 0:
            return OffsetPosition(self.base_offset, 0)
        slot = bisect_right(self._rel, min(rel, _INT32_MAX)) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[slot], self._pos[slot])

    def append(self, offset: int, position: int) -> None:
        """Append ``(offset, position)``; ``offset`` must be above the last entry (Kafka's ``append``)."""
        self._check_writable()
        if self._n and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {self._n} no larger than the last offset "
                f"appended ({self.last_offset}) to {self.path}"
            )
        rel = self._relative(offset)
        if not 0 <= position <= _INT32_MAX:
            raise InvalidOffsetError(f"physical position {position} out of range for {self.path}")
        self._write_slot(self._n, struct.pack(">ii", rel, position))
        self._rel.append(rel)
        self._pos.append(position)
        self._n += 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        self._check_writable()
        rel = offset - self.base_offset
        if rel <= 0:
            keep = 0
        elif rel > _INT32_MAX:
            keep = self._n
        else:
            keep = bisect_left(self._rel, rel)  # entries strictly below ``offset``
        self._truncate_to_entries(keep)

    def _truncate_to_entries(self, keep):
        old = self._n
        del self._rel[keep:], self._pos[keep:]
        self._n = keep
        self._zero_slots_from(keep, old)

    def sanity_check(self) -> None:
        """Raise :class:`~kafkatx.errors.CorruptIndexError` (file and byte position) if the index is not sound."""
        self._sanity_common()
        if self._n and self.last_offset < self.base_offset:  # unreachable after parsing, kept as Kafka's check
            raise CorruptIndexError(
                f"Corrupt index found, index file {self.path} has non-zero size but the last offset is "
                f"{self.last_offset} which is less than the base offset {self.base_offset}",
                (self._n - 1) * 8,
                self.path,
            )

    def __repr__(self):
        return f"OffsetIndex({self.path!r}, base_offset={self.base_offset}, entries={self._n})"


def _valid_prefix(keys, values, *, values_nondecreasing: bool = False):
    """Length of the longest prefix with non-negative fields and strictly increasing ``keys`` (and, for a
    time index, ``values`` that never decrease)."""
    n = len(keys)
    if n == 0:
        return 0
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        k = np.frombuffer(keys, dtype=keys.typecode)
        v = np.frombuffer(values, dtype=values.typecode)
        bad = (k < 0) | (v < 0)
        if n > 1:
            bad[1:] |= k[1:] <= k[:-1]
            if values_nondecreasing:
                bad[1:] |= v[1:] < v[:-1]
        idx = np.flatnonzero(bad)
        return int(idx[0]) if len(idx) else n
    for i in range(n):  # pragma: no cover - pure fallback
        k, v = keys[i], values[i]
        if k < 0 or v < 0:
            return i
        if i and (k <= keys[i - 1] or (values_nondecreasing and v < values[i - 1])):
            return i
    return n  # pragma: no cover


class TimeIndex(_Index):
    """A segment's ``.timeindex``: the largest timestamp seen before an offset."""

    ENTRY_SIZE = 12
    _KIND = "time index"

    def _parse(self, data):
        n_slots = len(data) // 12
        ts, rel = _be_columns(data, n_slots, ("q", "i"))
        n = _valid_prefix(ts, rel, values_nondecreasing=True)
        if n == 1 and ts[0] == 0 and rel[0] == 0 and n_slots > 1 and _all_zero(data):
            n = 0
        del ts[n:], rel[n:]
        self._ts = ts
        self._rel = rel
        self._n = n
        self._classify_tail(data, n)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base_offset)`` when empty (as Kafka)."""
        if not self._n:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._ts[self._n - 1], self.base_offset + self._rel[self._n - 1])

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def is_full(self) -> bool:
        # Kafka keeps the last slot for the entry written when the segment rolls
        return self._n >= self.max_entries - 1

    def entries(self) -> list[TimestampOffset]:
        base = self.base_offset
        return [TimestampOffset(t, base + r) for t, r in zip(self._ts, self._rel)]

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._n:
            raise IndexError(f"Attempt to fetch the {n}th entry from time index {self.path} which has size {self._n}")
        return TimestampOffset(self._ts[n], self.base_offset + self._rel[n])

    def arrays(self):
        """``(timestamps, offsets)`` as numpy int64 arrays (absolute offsets)."""
        import numpy as np

        return (
            np.frombuffer(self._ts, dtype=np.int64).copy(),
            np.frombuffer(self._rel, dtype=np.int32).astype(np.int64) + self.base_offset,
        )

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Entry with the largest timestamp <= ``target_timestamp``, else ``(-1, base_offset)``."""
        slot = bisect_right(self._ts, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._ts[slot], self.base_offset + self._rel[slot])

    def append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Kafka's ``maybeAppend``: returns True if an entry was written.

        An offset below the last entry's, or a timestamp below the last entry's, raises
        :class:`InvalidOffsetError`; a timestamp equal to the last one (including ``-1`` on an empty
        index) is ignored.  ``skip_full_check`` allows the reserved last slot (segment roll / close).
        """
        self._check_writable()
        if not skip_full_check and self.is_full():
            raise IndexFullError(f"Attempt to append to a full time index (size = {self._n}) ({self.path})")
        last_ts, last_off = self.last_entry()
        if self._n and offset < last_off:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self._n} no larger than the last offset "
                f"appended ({last_off}) to {self.path}"
            )
        if self._n and timestamp < last_ts:
            raise InvalidOffsetError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self._n} no larger than the last timestamp "
                f"appended ({last_ts}) to {self.path}"
            )
        if timestamp <= last_ts:
            return False
        rel = self._relative(offset)
        self._write_slot(self._n, struct.pack(">qi", timestamp, rel))
        self._ts.append(timestamp)
        self._rel.append(rel)
        self._n += 1
        return True

    maybe_append = append

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        self._check_writable()
        rel = offset - self.base_offset
        if rel <= 0:
            keep = 0
        elif rel > _INT32_MAX:
            keep = self._n
        else:
            keep = bisect_left(self._rel, rel)  # offsets are non-decreasing: keep those below ``offset``
        self._truncate_to_entries(keep)

    def _truncate_to_entries(self, keep):
        old = self._n
        del self._ts[keep:], self._rel[keep:]
        self._n = keep
        self._zero_slots_from(keep, old)

    def sanity_check(self) -> None:
        """Raise :class:`~kafkatx.errors.CorruptIndexError` (file and byte position) if the index is not sound."""
        self._sanity_common()

    def __repr__(self):
        return f"TimeIndex({self.path!r}, base_offset={self.base_offset}, entries={self._n})"


# ------------------------------------------------------------------------------------------ checkpoints
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_SPACES = re.compile(r"[ \t\n\x0b\f\r]+")  # Java's \s


def read_checkpoint(path, *, missing_ok: bool = True) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from a Kafka offset checkpoint file (version 0).

    A missing file gives ``{}`` when ``missing_ok`` (the broker creates them lazily).  Raises
    :class:`CheckpointError` naming the file and line for a bad version, a malformed line or an entry
    count that does not match the count line.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"not UTF-8 text at byte {exc.start}", path) from None
    lines = text.splitlines()
    if not lines:
        return {}

    def to_int(s, lineno, bits=32, line=None):
        # as Java's Integer.parseInt / Long.parseLong: an optional sign and digits, in range (Python's int()
        # would also take spaces, underscores and other scripts' digits)
        value = int(s) if _JAVA_INT.fullmatch(s) else None
        if value is None or not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            raise CheckpointError(f"Malformed line in checkpoint file: {s if line is None else line!r}", path, lineno)
        return value

    version = to_int(lines[0], 1)
    if version != 0:
        raise CheckpointError(f"Unrecognised version: {version}, expected version: 0", path, 1)
    if len(lines) < 2:
        return {}
    expected = to_int(lines[1], 2)
    out: dict[tuple[str, int], int] = {}
    for lineno, line in enumerate(lines[2:], start=3):
        # as Kafka's line.split("\\s+"): a leading space makes an empty first field, trailing ones are dropped
        parts = _JAVA_SPACES.split(line)
        while parts and not parts[-1]:
            parts.pop()
        if len(parts) != 3:
            raise CheckpointError(f"Malformed line in checkpoint file: {line!r}", path, lineno)
        topic = parts[0]
        partition = to_int(parts[1], lineno, 32, line)
        offset = to_int(parts[2], lineno, 64, line)
        out[(topic, partition)] = offset
    found = len(lines) - 2
    if found != expected:
        raise CheckpointError(f"Expected [{expected}] entries in checkpoint file, but found only [{found}]", path)
    return out


def write_checkpoint(path, offsets, *, fsync: bool = True) -> None:
    """Write ``{(topic, partition): offset}`` (or ``(topic, partition, offset)`` triples) atomically.

    Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the directory, like
    Kafka's ``CheckpointFile.write(entries, sync=true)``.
    """
    path = os.fspath(path)
    items = list(offsets.items()) if isinstance(offsets, dict) else [((t, p), o) for t, p, o in offsets]
    lines = ["0", str(len(items))]
    for (topic, partition), offset in items:
        topic = str(topic)
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"invalid topic name for a checkpoint file: {topic!r}")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"), fsync=fsync)


