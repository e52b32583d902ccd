"""Kafka's transaction index (``.txnindex``): aborted transactions, per log segment.

A ``.txnindex`` file is a flat array of 34-byte big-endian entries (``AbortedTxn`` version 0)::

    version int16 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

``firstOffset`` is the offset of the transaction's first data batch, ``lastOffset`` the offset of its
ABORT marker (which lies in this segment) and ``lastStableOffset`` the partition's LSO when the marker
was appended.  Kafka's reader quirks are kept (kafka-format.md section 7):

* the version is read from the **single high byte** of the int16 (Java ``buffer.get(0)``, a *signed*
  byte): ``00 01`` reads as version 0 and is accepted, ``01 00`` is version 1 and rejected with
  :class:`~kafkatx.errors.InvalidTxnIndexVersionError` ("Unexpected aborted transaction version").
  Because the byte is signed, a high byte of ``0x80``-``0xff`` is a negative version, which Kafka
  accepts too, and so does this module;
* a trailing partial entry (fewer than 34 bytes) is ignored;
* when the segment base offset is known (from the file name, or ``base_offset=``), every entry must
  have ``last_offset >= base_offset`` (``sanityCheck``), else :class:`~kafkatx.errors.CorruptIndexError`.

Besides reading and writing, the module answers the broker's question "which aborted transactions
overlap this fetch" (:func:`collect_aborted`, :func:`collect_aborted_across_segments`, section 7.3) and
the Spark-side question "which batches of a whole segment does a read_committed reader keep"
(:func:`aborted_keep_mask`, vectorised with numpy).

numpy is needed only by the array functions (:func:`read_txnindex_arrays`, :func:`collect_aborted_arrays`,
:func:`aborted_keep_mask`, :func:`batch_header_arrays`, ``TXNINDEX_DTYPE``); it is imported on first use.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Iterable, NamedTuple, Sequence

if TYPE_CHECKING:  # numpy is optional at run time
    import numpy as np

from ._fileio import atomic_write, read_whole_file
from .errors import CorruptIndexError, InvalidTxnIndexVersionError, TxnIndexAppendError

__all__ = [
    "AbortedTxn",
    "ENTRY_SIZE",
    "CURRENT_VERSION",
    "read_txnindex",
    "read_txnindex_arrays",
    "encode_txnindex",
    "write_txnindex",
    "offset_from_file_name",
    "TransactionIndex",
    "collect_aborted",
    "collect_aborted_arrays",
    "collect_aborted_across_segments",
    "aborted_keep_mask",
    "batch_header_arrays",
]

# AbortedTxn.java field positions, chained as Kafka does
VERSION_OFFSET = 0
PRODUCER_ID_OFFSET = VERSION_OFFSET + 2
FIRST_OFFSET_OFFSET = PRODUCER_ID_OFFSET + 8
LAST_OFFSET_OFFSET = FIRST_OFFSET_OFFSET + 8
LAST_STABLE_OFFSET_OFFSET = LAST_OFFSET_OFFSET + 8
ENTRY_SIZE = LAST_STABLE_OFFSET_OFFSET + 8  # 34
CURRENT_VERSION = 0

# the version field is an int16 of which Kafka reads the high byte, signed (AbortedTxn.version(): buffer.get(0));
# it is written as that byte and a 0 low byte (AbortedTxn writes putShort(CURRENT_VERSION), 0x0000), so an
# entry read and written again reads back the same
_ENTRY = struct.Struct(">bxqqqq")

_DTYPE = None


def _np():
    """numpy, imported on first use (it is an optional dependency: the ``arrow`` extra)."""
    try:
        import numpy
    except ImportError as exc:  # pragma: no cover - numpy is installed wherever the tests run
        raise ImportError("this kafkatx.txnindex function needs numpy (pip install 'kafkatx[arrow]')") from exc
    return numpy


def _txnindex_dtype():
    global _DTYPE
    if _DTYPE is None:
        _DTYPE = _np().dtype(
            {
                "names": ["version", "producer_id", "first_offset", "last_offset", "last_stable_offset"],
                "formats": ["i1", ">i8", ">i8", ">i8", ">i8"],
                "offsets": [VERSION_OFFSET, PRODUCER_ID_OFFSET, FIRST_OFFSET_OFFSET, LAST_OFFSET_OFFSET,
                            LAST_STABLE_OFFSET_OFFSET],
                "itemsize": ENTRY_SIZE,
            }
        )  # fmt: skip
    return _DTYPE


def __getattr__(name):
    # TXNINDEX_DTYPE: the numpy dtype viewing a .txnindex buffer without copying (big-endian fields,
    # 34-byte records, the version as its signed high byte); built lazily so numpy stays optional
    if name == "TXNINDEX_DTYPE":
        return _txnindex_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def __repr__(self):
        return (
            f"AbortedTxn(version={self.version}, producer_id={self.producer_id}, first_offset={self.first_offset}, "
            f"last_offset={self.last_offset}, last_stable_offset={self.last_stable_offset})"
        )


# ------------------------------------------------------------------------------------------ reading
def offset_from_file_name(name) -> int | None:
    """The offset a log file name starts with (``00000000000000001000.txnindex`` -> 1000), or None.

    Like Kafka's ``LogFileUtils.offsetFromFileName`` it takes the part before the first dot.
    """
    base = os.path.basename(os.fspath(name))
    head = base.split(".", 1)[0]
    if head.isdigit() and head.isascii():
        return int(head)
    return None


def _load(source, base_offset):
    """(buffer, file name or None, base offset or None) for a path, bytes-like or open binary file."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        data = read_whole_file(path)
        if base_offset is None:
            base_offset = offset_from_file_name(path)
        return data, path, base_offset
    if hasattr(source, "read") and not isinstance(source, (bytes, bytearray, memoryview)):
        name = getattr(source, "name", None)
        data = source.read()
        if base_offset is None and isinstance(name, (str, os.PathLike)):
            base_offset = offset_from_file_name(name)
        return data, (os.fspath(name) if isinstance(name, (str, os.PathLike)) else None), base_offset
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError(
            f"expected a path, an open binary file or a bytes-like object, got {type(source).__name__}"
        ) from None
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view, None, base_offset


def _version_error(version, index, file):
    name = file if file is not None else "<buffer>"
    return InvalidTxnIndexVersionError(
        f"Unexpected aborted transaction version {version} in transaction index {name}, "
        f"current version is {CURRENT_VERSION}",
        index * ENTRY_SIZE,
        file,
    )


def _below_start_error(txn, base_offset, index, file):
    name = file if file is not None else "<buffer>"
    return CorruptIndexError(
        f"Last offset of aborted transaction {txn!r} in index {name} is less than start offset {base_offset}",
        index * ENTRY_SIZE + LAST_OFFSET_OFFSET,
        file,
    )


def read_txnindex(source, *, base_offset: int | None = None) -> list[AbortedTxn]:
    """All entries of a ``.txnindex`` (path, open binary file or bytes-like), in file order.

    ``base_offset`` defaults to the offset in the file name (None for a buffer, which skips the
    sanity check).  Raises :class:`InvalidTxnIndexVersionError` / :class:`CorruptIndexError` on the
    first bad entry in file order; a trailing partial entry is ignored, as Kafka does.
    """
    data, file, base_offset = _load(source, base_offset)
    out = []
    append = out.append
    for i, (version, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(_whole_entries(data))):
        if version > CURRENT_VERSION:
            raise _version_error(version, i, file)
        txn = AbortedTxn(pid, first, last, lso, version)
        if base_offset is not None and last < base_offset:
            raise _below_start_error(txn, base_offset, i, file)
        append(txn)
    return out


def _whole_entries(data):
    n = len(data) // ENTRY_SIZE
    view = memoryview(data)
    return view[: n * ENTRY_SIZE]


def read_txnindex_arrays(source, *, base_offset: int | None = None, native: bool = True) -> dict:
    """A ``.txnindex`` as numpy columns: ``version`` (int8), ``producer_id``, ``first_offset``,
    ``last_offset``, ``last_stable_offset`` (int64).

    The buffer is viewed without copying (:data:`TXNINDEX_DTYPE`); with ``native=True`` (default) the
    big-endian int64 fields are converted to native-order arrays (one pass each), with ``native=False``
    the dict holds zero-copy big-endian views of the buffer.  Same checks and errors as
    :func:`read_txnindex`.
    """
    np = _np()
    data, file, base_offset = _load(source, base_offset)
    n = len(data) // ENTRY_SIZE
    table = np.frombuffer(data, dtype=_txnindex_dtype(), count=n)
    version = table["version"]
    bad = version > CURRENT_VERSION
    if base_offset is not None:
        last = table["last_offset"]
        below = last < base_offset
        bad = bad | below
    if n and bad.any():
        i = int(np.argmax(bad))
        if version[i] > CURRENT_VERSION:
            raise _version_error(int(version[i]), i, file)
        row = table[i]
        txn = AbortedTxn(int(row["producer_id"]), int(row["first_offset"]), int(row["last_offset"]),
                         int(row["last_stable_offset"]), int(row["version"]))  # fmt: skip
        raise _below_start_error(txn, base_offset, i, file)
    out = {"version": np.ascontiguousarray(version)}
    for name in ("producer_id", "first_offset", "last_offset", "last_stable_offset"):
        col = table[name]
        out[name] = col.astype(np.int64) if native else col
    return out


# ------------------------------------------------------------------------------------------ writing
def _entry_fields(entry):
    if isinstance(entry, AbortedTxn):
        return entry.version, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset
    try:
        return (
            getattr(entry, "version", CURRENT_VERSION),
            entry.producer_id,
            entry.first_offset,
            entry.last_offset,
            entry.last_stable_offset,
        )
    except AttributeError:
        pid, first, last, lso = entry
        return CURRENT_VERSION, pid, first, last, lso


def encode_txnindex(entries: Iterable) -> bytes:
    """The bytes of a ``.txnindex`` holding ``entries`` (AbortedTxn or 4-tuples), in the given order.

    The version (0 for every entry Kafka writes) is the high byte of the int16 field, as Kafka reads it: a
    signed byte, -128 to 127, followed by a 0 byte.
    """
    out = bytearray()
    for e in entries:
        version, pid, first, last, lso = _entry_fields(e)
        try:
            out += _ENTRY.pack(version, pid, first, last, lso)
        except struct.error as exc:
            raise TxnIndexAppendError(f"cannot encode {e!r}: {exc}") from None
    return bytes(out)


def write_txnindex(path, entries: Iterable, *, fsync: bool = True) -> None:
    """Write a ``.txnindex`` file atomically (temporary file, fsync, rename).

    Entries must have strictly increasing ``last_offset`` (Kafka's append rule).
    """
    entries = list(entries)
    prev = None
    for e in entries:
        last = _entry_fields(e)[3]
        if prev is not None and last <= prev:
            raise TxnIndexAppendError(
                f"The last offset of appended transactions must increase sequentially, but {last} is not "
                f"greater than current last offset {prev} of index {os.fspath(path)}"
            )
        prev = last
    atomic_write(path, encode_txnindex(entries), fsync=fsync)




_NO_BASE_CHECK = -(1 << 63)  # a base offset no entry lies below: read_txnindex without the sanity check


class TransactionIndex:
    """A segment's ``.txnindex`` file, appended to like Kafka's ``TransactionIndex``.

    The file is created on the first :meth:`append` (Kafka leaves none for a segment without aborted
    transactions).  ``base_offset`` defaults to the offset in the file name.  Appends go to the file
    immediately; :meth:`flush` makes them durable (fsync).
    """

    def __init__(self, path, base_offset: int | None = None):
        self.path = os.fspath(path)
        if base_offset is None:
            base_offset = offset_from_file_name(self.path)
        self.base_offset = base_offset
        self._fh = None
        self._last_offset = None
        if os.path.exists(self.path):
            entries = self._entries()
            if entries:
                self._last_offset = entries[-1].last_offset

    def _entries(self) -> list[AbortedTxn]:
        """The entries, with Kafka's iterator check (the version) but not :meth:`sanity_check`'s (entries
        below the base offset): Kafka reads, truncates and resets an index that fails that one."""
        return read_txnindex(self.path, base_offset=_NO_BASE_CHECK)

    # -- state ----------------------------------------------------------------------------------
    @property
    def last_offset(self) -> int | None:
        """``last_offset`` of the newest entry, None when empty."""
        return self._last_offset

    def __len__(self):
        return os.path.getsize(self.path) // ENTRY_SIZE if os.path.exists(self.path) else 0

    def _file(self):
        if self._fh is None:
            if os.path.exists(self.path):
                # a partial trailing entry (a crash mid-append) would misalign every later entry;
                # readers ignore it, so cut it off before writing after it
                size = os.path.getsize(self.path)
                if size % ENTRY_SIZE:
                    with open(self.path, "r+b") as fh:
                        fh.truncate(size - size % ENTRY_SIZE)
            self._fh = open(self.path, "ab")
        return self._fh

    # -- writing --------------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        """Append one entry; its ``last_offset`` must be above the previous one's."""
        version, pid, first, last, lso = _entry_fields(txn)
        if self._last_offset is not None and self._last_offset >= last:
            raise TxnIndexAppendError(
                f"The last offset of appended transactions must increase sequentially, but {last} is not "
                f"greater than current last offset {self._last_offset} of index {self.path}"
            )
        if version != CURRENT_VERSION:
            raise TxnIndexAppendError(f"cannot append an aborted transaction of version {version}")
        try:
            data = _ENTRY.pack(version, pid, first, last, lso)
        except struct.error as exc:
            raise TxnIndexAppendError(f"cannot encode {txn!r}: {exc}") from None
        fh = self._file()
        fh.write(data)
        fh.flush()
        self._last_offset = last

    def flush(self) -> None:
        """Write buffered bytes and fsync the file."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def truncate_to(self, offset: int) -> None:
        """Drop every entry from the first one with ``last_offset >= offset`` on (Kafka's ``truncateTo``)."""
        if not os.path.exists(self.path):
            return
        entries = self.all_aborted_txns()
        keep = len(entries)
        for i, e in enumerate(entries):
            if e.last_offset >= offset:
                keep = i
                break
        self.close()
        with open(self.path, "r+b") as fh:
            fh.truncate(keep * ENTRY_SIZE)
        self._last_offset = entries[keep - 1].last_offset if keep else None

    def reset(self) -> None:
        """Remove every entry (empty the file, whatever it holds, as Kafka's ``reset``)."""
        self.close()
        if os.path.exists(self.path):
            os.truncate(self.path, 0)
        self._last_offset = None

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- reading --------------------------------------------------------------------------------
    def all_aborted_txns(self) -> list[AbortedTxn]:
        if self._fh is not None:
            self._fh.flush()
        if not os.path.exists(self.path):
            return []
        return self._entries()

    def sanity_check(self) -> None:
        """Raise if an entry has a bad version or lies below the segment base offset (Kafka's
        ``sanityCheck``, which decides on a broker's start whether the index is rebuilt)."""
        if self._fh is not None:
            self._fh.flush()
        if os.path.exists(self.path):
            read_txnindex(self.path, base_offset=self.base_offset)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int):
        """``(aborted, is_complete)`` for a fetch of ``[fetch_offset, upper_bound_offset)``."""
        return collect_aborted(self.all_aborted_txns(), fetch_offset, upper_bound_offset)

    def __repr__(self):
        return f"TransactionIndex(path={self.path!r}, base_offset={self.base_offset}, last_offset={self._last_offset})"


# ------------------------------------------------------------------------------------------ queries
def collect_aborted(entries: Iterable, fetch_offset: int, upper_bound_offset: int):
    """Kafka's per-segment ``collectAbortedTxns``: ``(overlapping entries, is_complete)``.

    An entry is collected when ``last_offset >= fetch_offset and first_offset < upper_bound_offset``;
    the scan stops, reporting complete, at the first entry whose ``last_stable_offset >=
    upper_bound_offset`` (that entry itself is still collected if it overlaps).
    """
    out = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
            out.append(e)
        if e.last_stable_offset >= upper_bound_offset:
            return out, True
    return out, False


def collect_aborted_arrays(arrays: dict, fetch_offset: int, upper_bound_offset: int):
    """:func:`collect_aborted` over :func:`read_txnindex_arrays` columns.

    Returns ``(indices, is_complete)`` where ``indices`` (int64) are the positions of the collected
    entries, in file order.
    """
    np = _np()
    lso = arrays["last_stable_offset"]
    stop = lso >= upper_bound_offset
    n = len(lso)
    complete = bool(n) and bool(stop.any())
    end = int(np.argmax(stop)) + 1 if complete else n
    first = arrays["first_offset"][:end]
    last = arrays["last_offset"][:end]
    hit = (last >= fetch_offset) & (first < upper_bound_offset)
    return np.flatnonzero(hit), complete


def collect_aborted_across_segments(segments: Sequence, fetch_offset: int, upper_bound_offset: int):
    """Kafka's log-level ``collectAbortedTransactions``: ``(aborted, is_complete)``.

    ``segments`` is an ordered list of ``(base_offset, entries)`` (entries as from
    :func:`read_txnindex`).  The search starts at the segment holding ``fetch_offset`` (the last one
    whose base offset is ``<= fetch_offset``; the first one if none is) and continues into later
    segments until one reports complete.
    """
    segments = list(segments)
    start = 0
    for i, (base, _entries) in enumerate(segments):
        if base <= fetch_offset:
            start = i
        else:
            break
    out = []
    for _base, entries in segments[start:]:
        found, complete = collect_aborted(entries, fetch_offset, upper_bound_offset)
        out.extend(found)
        if complete:
            return out, True
    return out, False


# ------------------------------------------------------------------------------ segment-wide filter
def _as_i64(a):
    np = _np()
    return np.asarray(a, dtype=np.int64)


def aborted_keep_mask(
    batch_base_offsets,
    batch_last_offsets,
    batch_producer_ids,
    batch_is_transactional,
    batch_is_control,
    aborted_producer_ids,
    aborted_first_offsets,
    aborted_last_offsets,
) -> np.ndarray:
    """Which batches of a segment a read_committed reader keeps, as a numpy bool array.

    A control batch is never kept (it carries no data).  A transactional data batch of producer P
    is dropped iff some aborted transaction of P has ``first_offset <= batch.base_offset <=
    last_offset`` (``last_offset`` is the ABORT marker's offset).  Every other batch is kept.

    Aborted ranges are sorted by ``(producer_id, first_offset)`` once and every batch is located
    with one ``np.searchsorted``; there is no Python loop per batch.  Overlapping ranges of one
    producer (never written by Kafka) are handled as their union.  ``batch_last_offsets`` is
    accepted for symmetry with the batch header but not needed by the rule.
    """
    np = _np()
    base = _as_i64(batch_base_offsets)
    pid = _as_i64(batch_producer_ids)
    txn = np.asarray(batch_is_transactional, dtype=bool)
    ctrl = np.asarray(batch_is_control, dtype=bool)
    n = len(base)
    if not (len(pid) == len(txn) == len(ctrl) == n) or len(_as_i64(batch_last_offsets)) != n:
        raise ValueError("the batch arrays must all have the same length")
    apid = _as_i64(aborted_producer_ids)
    afirst = _as_i64(aborted_first_offsets)
    alast = _as_i64(aborted_last_offsets)
    if not (len(apid) == len(afirst) == len(alast)):
        raise ValueError("the aborted-transaction arrays must all have the same length")
    keep = ~ctrl
    candidates = txn & keep & (pid >= 0)
    if len(apid) == 0 or not candidates.any():
        return keep
    dropped = _dropped(base, pid, candidates, apid, afirst, alast)
    keep &= ~dropped
    return keep


def _dropped(base, pid, candidates, apid, afirst, alast, _path="auto"):
    """Bool array: candidate batch lies inside an aborted range of its producer.

    Each aborted range gets the int64 key ``band * span + (first_offset - lo)`` where ``band`` is the
    producer id minus the smallest aborted producer id (or, when producer ids are spread too widely,
    the producer's rank among the aborted producers) and ``span`` the width of the offsets involved;
    a batch gets ``band * span + (base_offset - lo)``.  One ``np.searchsorted`` then finds, for every
    batch, the last range of its producer starting at or before it, and a running max of the range
    ends (which cannot leak across bands) says whether that batch is covered.  The key is exact
    whenever ``bands * span < 2**62``, which one segment (offsets within 2**31 of its base) always
    satisfies; otherwise :func:`_dropped_general` runs one searchsorted per aborted producer.
    ``_path`` forces a strategy (tests).
    """
    np = _np()
    out = np.zeros(len(base), dtype=bool)
    ok = afirst <= alast
    if not ok.all():
        apid, afirst, alast = apid[ok], afirst[ok], alast[ok]
    if len(apid) == 0:
        return out
    pmin = int(apid.min())
    pmax = int(apid.max())
    idx = np.flatnonzero(candidates & (pid >= pmin) & (pid <= pmax))
    if len(idx) == 0:
        return out
    b = base[idx]
    p = pid[idx]
    lo = min(int(afirst.min()), int(b.min()))
    hi = max(int(alast.max()), int(b.max()))
    span = hi - lo + 1
    limit = 1 << 62
    if _path == "direct" or (_path == "auto" and (pmax - pmin + 1) * span < limit):
        aband = apid - pmin
        bband = p - pmin
    else:
        upids = np.unique(apid)
        if _path == "general" or (_path == "auto" and len(upids) * span >= limit):
            return _dropped_general(base, pid, candidates, upids, apid, afirst, alast)
        aband = np.searchsorted(upids, apid).astype(np.int64)
        r = np.searchsorted(upids, p)
        exact = upids[np.minimum(r, len(upids) - 1)] == p
        idx, b, bband = idx[exact], b[exact], r[exact].astype(np.int64)
        if len(idx) == 0:
            return out
    akey = aband * span + (afirst - lo)
    order = np.argsort(akey, kind="stable")
    akey = akey[order]
    aend = np.maximum.accumulate(aband[order] * span + (alast[order] - lo))
    band_start = bband * span
    bkey = band_start + (b - lo)
    pos = np.searchsorted(akey, bkey, side="right") - 1
    posc = np.maximum(pos, 0)
    # the range found must belong to the same producer (its key lies in the batch's band)
    out[idx] = (pos >= 0) & (akey[posc] >= band_start) & (aend[posc] >= bkey)
    return out


def _dropped_general(base, pid, candidates, upids, apid, afirst, alast):
    """Fallback for keys that do not fit one int64: one searchsorted per aborted producer."""
    np = _np()
    out = np.zeros(len(base), dtype=bool)
    idx = np.flatnonzero(candidates)
    if len(idx) == 0:
        return out
    bpid = pid[idx]
    border = np.argsort(bpid, kind="stable")
    sorted_pid = bpid[border]
    aorder = np.lexsort((afirst, apid))
    apid_s, afirst_s, alast_s = apid[aorder], afirst[aorder], alast[aorder]
    for u in upids:
        lo_b = np.searchsorted(sorted_pid, u, side="left")
        hi_b = np.searchsorted(sorted_pid, u, side="right")
        if lo_b == hi_b:
            continue
        lo_a = np.searchsorted(apid_s, u, side="left")
        hi_a = np.searchsorted(apid_s, u, side="right")
        firsts = afirst_s[lo_a:hi_a]
        ends = np.maximum.accumulate(alast_s[lo_a:hi_a])
        rows = idx[border[lo_b:hi_b]]
        b = base[rows]
        p = np.searchsorted(firsts, b, side="right") - 1
        out[rows] = (p >= 0) & (ends[np.maximum(p, 0)] >= b)
    return out


def batch_header_arrays(data, *, verify_crc: bool = False) -> dict:
    """Scan a segment buffer and return its batch headers as numpy columns.

    Keys: ``position``, ``base_offset``, ``last_offset``, ``producer_id``, ``producer_epoch``,
    ``base_sequence`` (int64) and ``is_transactional``, ``is_control`` (bool) -- the inputs of
    :func:`aborted_keep_mask`.  Built on :func:`kafkatx.scan_batches` (no record is decoded); legacy
    (magic 0/1) entries are neither transactional nor control.  Iteration stops at a truncated tail,
    as :func:`kafkatx.iter_batches` does.
    """
    from .batch import scan_batches

    np = _np()
    cols = scan_batches(data, verify_crc=verify_crc)
    i64 = np.int64

    def col(name, dtype=i64):
        return np.frombuffer(cols[name], dtype=cols[name].typecode).astype(dtype)

    attrs = col("attributes", np.int64)
    v2 = col("magic", np.int64) >= 2
    return {
        "position": col("position"),
        "base_offset": col("base_offset"),
        "last_offset": col("last_offset"),
        "producer_id": col("producer_id"),
        "producer_epoch": col("producer_epoch"),
        "base_sequence": col("base_sequence"),
        "is_transactional": v2 & ((attrs & 0x10) != 0),
        "is_control": v2 & ((attrs & 0x20) != 0),
    }
