"""Small pieces shared by both codec backends (argument checks and result types, never hot)."""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple

from ._consts import INT32_MAX, TIMESTAMP_TYPE_MASK
from .errors import InvalidAppendError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

TIMESTAMP_TYPE_BITS = {"create_time": 0, "log_append_time": TIMESTAMP_TYPE_MASK}


class RecordSummary(NamedTuple):
    """What :meth:`RecordBatch.record_summary` finds in a batch's records (as Kafka's ``LogValidator``
    sees them: timestamps as :class:`Record` reports them, -1 being Kafka's ``NO_TIMESTAMP``)."""

    records: int  #: records decoded (control records too)
    min_timestamp: int  #: the smallest record timestamp other than -1; -1 if no record has one
    max_timestamp: int  #: the largest record timestamp other than -1; -1 if no record has one
    #: the records' offset deltas are 0, 1, 2, ...: their offsets base_offset, base_offset + 1, ... in Kafka's
    #: (wrapping) long arithmetic, with no gap
    offsets_in_sequence: bool


class RecordList(list):
    """A list of records plus where the read ended.

    ``next_offset`` is the offset to fetch next: past control records, aborted batches and offsets
    removed by compaction, so a reader never stops one offset short of the end (``None`` if no batch
    was read and no ``fetch_offset`` given).  ``valid_bytes`` counts the bytes of the complete batches
    read; ``trailing_bytes`` the bytes after them (a truncated tail, normal at the end of a Fetch
    response or of a segment cut by a crash).
    """

    __slots__ = ("next_offset", "valid_bytes", "trailing_bytes")

    def __init__(self, *args):
        super().__init__(*args)
        self.next_offset = None
        self.valid_bytes = 0
        self.trailing_bytes = 0

    def __repr__(self):
        return (
            f"RecordList({list.__repr__(self)}, next_offset={self.next_offset}, "
            f"valid_bytes={self.valid_bytes}, trailing_bytes={self.trailing_bytes})"
        )

    def __reduce__(self):
        return (_rebuild_record_list, (list(self), self.next_offset, self.valid_bytes, self.trailing_bytes))


def _rebuild_record_list(items, next_offset, valid_bytes, trailing_bytes):
    out = RecordList(items)
    out.next_offset = next_offset
    out.valid_bytes = valid_bytes
    out.trailing_bytes = trailing_bytes
    return out


def as_bytes(data, what: str):
    """``None`` or the bytes of a bytes-like object (a Record holds nothing else)."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, str):
        raise TypeError(f"record {what} must be bytes-like or None, not str")
    return bytes(data)


def byte_view(data) -> memoryview:
    """A flat memoryview of unsigned bytes over ``data`` (any C-contiguous bytes-like object), not a copy:
    its items are 0-255 whatever item type the exporter declares (pyarrow's buffers, for one, export
    signed chars, which index as -128..127)."""
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def as_headers(headers) -> tuple:
    """Record headers as a tuple of ``(str, bytes | None)`` pairs."""
    if type(headers) is tuple and not headers:
        return headers
    out = []
    for h in headers:
        k, v = h
        if not isinstance(k, str):
            raise TypeError(f"a header key must be str, got {type(k).__name__}")
        out.append((str(k), as_bytes(v, "header value")))
    return tuple(out)


def i64(x: int) -> int:
    """Java long arithmetic: ``x`` wrapped to a signed 64-bit value."""
    x &= 0xFFFFFFFFFFFFFFFF
    return x - 0x10000000000000000 if x & 0x8000000000000000 else x


def summary_of(records, base_offset: int) -> RecordSummary:
    """The :class:`RecordSummary` of decoded records (the pure twin's, and a legacy entry's)."""
    stamped = [r.timestamp for r in records if r.timestamp != -1]
    in_sequence = all(r.offset == i64(base_offset + i) for i, r in enumerate(records))
    return RecordSummary(len(records), min(stamped, default=-1), max(stamped, default=-1), in_sequence)


def as_int(value):
    """``value`` as an int if it is an integer -- anything with ``__index__`` (int, numpy integers) but a
    bool -- else None.  The one rule of every integer argument of the encoders.  (numpy before 2.3, the last
    for Python 3.10, still takes a numpy bool for an index, with a DeprecationWarning: refused here by its
    dtype's kind.)"""
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", None) == "b":
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def int64_arg(value, what: str) -> int:
    """An int64 argument (a timestamp, an offset): an integer as :func:`as_int` takes it, else a TypeError (a
    float, a str or a bool is not silently truncated, parsed or taken for 0/1); OverflowError outside int64."""
    v = as_int(value)
    if v is None:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}")
    if not INT64_MIN <= v <= INT64_MAX:
        raise OverflowError(f"{what} {v} does not fit a signed 64-bit integer")
    return v


def illegal_offset(offset: int, last: int) -> InvalidAppendError:
    """MemoryRecordsBuilder's refusal of an offset not above the previous one (``offset`` may be the wrapped
    one after Long.MAX_VALUE)."""
    return InvalidAppendError(f"illegal offset {offset} following previous offset {last} (offsets must increase "
                              "monotonically)")  # fmt: skip


BUILT = ("this BatchBuilder is built: it takes no more appends (as Kafka's MemoryRecordsBuilder after close()); "
         "start a new BatchBuilder for the next batch")  # fmt: skip


def check_offsets_fit(base_offset: int, rows: int) -> None:
    """encode_arrow's rows numbered from ``base_offset`` must end by 2^63-1 (MemoryRecordsBuilder refuses the
    offset after Long.MAX_VALUE, which Java's long arithmetic wraps)."""
    if rows and base_offset > INT64_MAX - (rows - 1):
        err = illegal_offset(INT64_MIN, INT64_MAX)
        raise InvalidAppendError(f"{err}: {rows} rows from base_offset {base_offset} run past 2^63-1")


def bytes_error(data, what: str) -> InvalidAppendError:
    """The error for a record field ``data`` that BatchBuilder cannot take as bytes."""
    if isinstance(data, str):
        return InvalidAppendError(f"{what} must be bytes-like or None, not str (encode it first)")
    try:
        with memoryview(data) as view:
            contiguous = view.c_contiguous
    except (TypeError, BufferError, ValueError):
        return InvalidAppendError(f"{what} must be bytes-like or None, got {type(data).__name__}")
    if not contiguous:
        return InvalidAppendError(
            f"{what} must be a C-contiguous buffer, got a non-contiguous {type(data).__name__} (copy it with bytes())"
        )
    return InvalidAppendError(f"{what} must be bytes-like or None, got {type(data).__name__}")


def header_key_bytes(key: str) -> bytes:
    """A str header key as UTF-8 (surrogate escapes, as decoding makes them, written back as their bytes)."""
    try:
        return key.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise InvalidAppendError(f"header key {key!r} cannot be encoded as UTF-8: {exc.reason}") from None


def isolation_flag(isolation) -> bool:
    """True for read_committed, False for read_uncommitted."""
    if isolation == "read_committed":
        return True
    if isolation == "read_uncommitted":
        return False
    raise ValueError(f"isolation must be 'read_committed' or 'read_uncommitted', got {isolation!r}")


def timestamp_type_bits(timestamp_type) -> int:
    try:
        return TIMESTAMP_TYPE_BITS[timestamp_type]
    except (KeyError, TypeError):
        raise InvalidAppendError(
            f"timestamp_type must be 'create_time' or 'log_append_time', got {timestamp_type!r}"
        ) from None


# a builder's __init__ while a build() of it on another thread is still reading its records: refused, the
# records and header fields being that build's (the compiled one compresses them without the GIL)
BUILDING_ERROR = "BatchBuilder.__init__ while build() runs on another thread"


def check_builder_args(base_offset, producer_id, producer_epoch, base_sequence, transactional, leader_epoch,
                       delete_horizon_ms) -> tuple:  # fmt: skip
    """MemoryRecordsBuilder's and the broker's rules for a producer batch's header fields; returns them as
    ints ``(base_offset, producer_id, producer_epoch, base_sequence, leader_epoch, delete_horizon_ms)``."""
    out = []
    for name, v, lo, hi in (
        ("base_offset", base_offset, 0, INT64_MAX),
        ("producer_id", producer_id, INT64_MIN, INT64_MAX),
        ("producer_epoch", producer_epoch, -(1 << 15), (1 << 15) - 1),
        ("base_sequence", base_sequence, -(1 << 31), INT32_MAX),
        ("partition_leader_epoch", leader_epoch, -(1 << 31), INT32_MAX),
    ):
        iv = as_int(v)
        if iv is None or not lo <= iv <= hi:
            raise InvalidAppendError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
        out.append(iv)
    base_offset, producer_id, producer_epoch, base_sequence, leader_epoch = out
    if transactional and producer_id < 0:
        raise InvalidAppendError("cannot write transactional messages without a valid producer id")
    if producer_id >= 0:
        if producer_epoch < 0:
            raise InvalidAppendError(f"invalid negative producer epoch {producer_epoch}")
        if base_sequence < 0:
            raise InvalidAppendError(f"invalid negative sequence number {base_sequence}")
    if delete_horizon_ms is not None:
        horizon = as_int(delete_horizon_ms)
        if horizon is None or not 0 <= horizon <= INT64_MAX:
            raise InvalidAppendError(f"delete_horizon_ms must be a non-negative integer, got {delete_horizon_ms!r}")
        delete_horizon_ms = horizon
    return base_offset, producer_id, producer_epoch, base_sequence, leader_epoch, delete_horizon_ms


ARROW_COLUMNS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers", "producer_id",
                 "producer_epoch", "sequence", "is_transactional")  # fmt: skip


def column_names(columns) -> tuple:
    """The decoded columns ``columns`` names (all for None), in the canonical order; TypeError for a string
    (a list of names is meant), ValueError for none or an unknown name.  Both backends and the Spark
    helpers check with this, so they raise the same errors."""
    if columns is None:
        return ARROW_COLUMNS
    if isinstance(columns, (str, bytes)):
        raise TypeError(f"columns is a list of column names, not {type(columns).__name__} {columns!r}")
    wanted = set(columns)
    if not wanted:
        raise ValueError("columns must name at least one column")
    unknown = wanted - set(ARROW_COLUMNS)
    if unknown:
        raise ValueError(f"unknown column(s) {sorted(unknown, key=str)}; columns are {', '.join(ARROW_COLUMNS)}")
    return tuple(c for c in ARROW_COLUMNS if c in wanted)


def arrow_schema(columns=None, large_binary: bool = False, binary_view: bool = False):
    """The Arrow schema of decoded records: all columns, or those named, in the canonical order.

    ``key``/``value`` are ``binary``, or ``large_binary`` / ``binary_view`` when asked for.
    ``timestamp`` is null where Kafka has no timestamp (-1); ``timestamp_type`` is 0 CreateTime,
    1 LogAppendTime, -1 none (magic v0); ``key``/``value`` are null for null keys/values.
    """
    names = column_names(columns)
    if large_binary and binary_view:
        raise ValueError("large_binary and binary_view exclude each other")
    return _arrow_schema(names, bool(large_binary), bool(binary_view))


@functools.lru_cache(maxsize=64)
def _arrow_schema(names: tuple, large_binary: bool, binary_view: bool):
    """arrow_schema for canonical column names (built once per combination: every decode_arrow returns one,
    and building it cost a fifth of decoding a small fetch)."""
    try:
        import pyarrow as pa
    except ImportError as exc:
        raise ImportError("Arrow decoding needs pyarrow: pip install 'kafkatx[arrow]'") from exc
    binary = pa.large_binary() if large_binary else pa.binary_view() if binary_view else pa.binary()
    header = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
    fields = {
        "offset": pa.field("offset", pa.int64(), nullable=False),
        "timestamp": pa.field("timestamp", pa.timestamp("ms", tz="UTC")),
        "timestamp_type": pa.field("timestamp_type", pa.int8(), nullable=False),
        "key": pa.field("key", binary),
        "value": pa.field("value", binary),
        "headers": pa.field("headers", pa.list_(pa.field("item", header, nullable=False)), nullable=False),
        "producer_id": pa.field("producer_id", pa.int64(), nullable=False),
        "producer_epoch": pa.field("producer_epoch", pa.int16(), nullable=False),
        "sequence": pa.field("sequence", pa.int32(), nullable=False),
        "is_transactional": pa.field("is_transactional", pa.bool_(), nullable=False),
    }
    return pa.schema([fields[c] for c in names])


ENCODE_COLUMNS = frozenset(ARROW_COLUMNS)


def new_aborted_pairs(aborted_transactions, seen: set):
    """``(first_offset, producer_id)`` of each ``(producer_id, first_offset)`` entry not in ``seen`` (which
    it joins), as the read_committed filters add them; ValueError for a pair outside int64, after the pairs
    before it were yielded."""
    for entry in aborted_transactions:
        try:
            pid, first = operator.index(entry[0]), operator.index(entry[1])
        except (TypeError, IndexError, KeyError):
            raise TypeError(f"aborted transactions are (producer_id, first_offset) pairs of ints (or AbortedTxn), "
                            f"got {entry!r}") from None  # fmt: skip
        if not (INT64_MIN <= pid <= INT64_MAX and INT64_MIN <= first <= INT64_MAX):
            raise ValueError(f"aborted transaction {(pid, first)!r}: producer id and first offset are int64")
        if (pid, first) in seen:
            continue
        seen.add((pid, first))
        yield first, pid


def one_array(col):
    """A column as one array: its only chunk as it is (``ChunkedArray.combine_chunks`` copies even one chunk),
    else the chunks concatenated."""
    if col.num_chunks == 1:
        return col.chunk(0)
    return col.combine_chunks()


def check_records_per_batch(records_per_batch) -> int:
    """encode_arrow's ``records_per_batch`` as an int (the integer rule of :func:`as_int`), at least 1."""
    n = as_int(records_per_batch)
    if n is None or not 1 <= n <= INT32_MAX:
        raise InvalidAppendError(f"records_per_batch must be an integer in [1, {INT32_MAX}], got {records_per_batch!r}")
    return n


def encode_table(table, header_rows: bool = True):
    """Check the input of ``encode_arrow``; returns ``(table, timestamps, headers)``.

    ``timestamps`` is an int64 array of milliseconds (nulls stay null) or None without a timestamp
    column; ``headers`` None without a headers column, else (``header_rows``) a list with, per row, a list
    of ``(key, value)`` pairs or None, or (not ``header_rows``) the column as one checked list array.
    """
    import pyarrow as pa

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"encode_arrow takes a pyarrow.Table or RecordBatch, got {type(table).__name__}")
    names = set(table.column_names)
    if "value" not in names:
        raise InvalidAppendError("encode_arrow needs a 'value' column")
    unknown = names - ENCODE_COLUMNS
    if unknown:
        raise InvalidAppendError(f"encode_arrow does not know the column(s) {sorted(unknown)}")
    stamps = None
    if "timestamp" in names:
        col = one_array(table.column("timestamp"))
        t = col.type
        if pa.types.is_timestamp(t):
            import pyarrow.compute as pc

            # checked in the column's own unit: the unchecked cast to milliseconds wraps seconds past
            # 2^63 ms, and flooring µs/ns near -2^63 wraps too
            raw = col.view(pa.int64())
            span = pc.min_max(raw)  # (nulls when every one is null)
            low, high = span["min"].as_py(), span["max"].as_py()
            if low is not None and low < 0:  # (-1 ms would silently write "no timestamp")
                row = pc.index(pc.less(raw, 0), True).as_py()
                raise InvalidAppendError(f"column 'timestamp' holds a negative time, before 1970, in row {row} "
                                         f"({raw[row].as_py()} {t.unit}): Kafka's timestamps are non-negative "
                                         f"milliseconds (a null writes none)")  # fmt: skip
            if t.unit == "s" and high is not None and high > INT64_MAX // 1000:
                row = pc.index(pc.greater(raw, INT64_MAX // 1000), True).as_py()
                raise InvalidAppendError(f"column 'timestamp' holds {raw[row].as_py()} s in row {row}, which does "
                                         f"not fit int64 milliseconds")  # fmt: skip
            # finer units are floored to Kafka's milliseconds (the cast truncates, the same for times from 1970)
            col = col.cast(pa.timestamp("ms", tz=t.tz), safe=False).view(pa.int64())
        elif pa.types.is_integer(t):
            try:
                col = col.cast(pa.int64())
            except pa.ArrowInvalid as exc:
                raise InvalidAppendError(f"column 'timestamp' does not fit int64 milliseconds: {exc}") from None
        else:
            raise InvalidAppendError(f"column 'timestamp' must be a timestamp or int64 milliseconds, got {t}")
        stamps = col
    if "headers" not in names:
        return table, stamps, None
    t = table.column("headers").type
    ok = (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type)
    fields = {f.name: f.type for f in t.value_type} if ok else {}
    text_or_binary = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    if not ok or set(fields) != {"key", "value"} or not any(f(fields["key"]) for f in text_or_binary[:2]) \
            or not any(f(fields["value"]) for f in text_or_binary):  # fmt: skip
        raise InvalidAppendError(
            f"column 'headers' must be list<struct<key: string, value: binary>>, got {t}"
        )
    if not header_rows:
        return table, stamps, one_array(table.column("headers"))
    rows = []
    for row, hs in enumerate(table.column("headers").to_pylist()):
        if not hs:
            rows.append(None)
            continue
        pairs = []
        for h in hs:
            if h is None or h["key"] is None:
                raise InvalidAppendError(f"row {row} has a null header (or header key)")
            v = h["value"]
            pairs.append((h["key"], v.encode("utf-8") if isinstance(v, str) else v))
        rows.append(pairs)
    return table, stamps, rows
