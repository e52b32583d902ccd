"""Kafka records as Apache Arrow, pandas and PySpark data.

Everything here sits on the codec's columnar decoder, :func:`decode_arrow`, which builds a
``pyarrow.RecordBatch`` in C with no Python object per record.  Columns (see :func:`arrow_schema`):

==================  ===================================================  =====================================
column              Arrow type                                           notes
==================  ===================================================  =====================================
offset              int64                                                gaps where records were compacted,
                                                                         aborted or are control records
timestamp           timestamp[ms, tz=UTC]                                null where Kafka has -1
timestamp_type      int8                                                 0 CreateTime, 1 LogAppendTime,
                                                                         -1 none (magic v0)
key, value          binary (large_binary with ``large_binary=True``)     null for null keys / tombstones
headers             list<struct<key: string, value: binary>>             empty list when a record has none
producer_id         int64                                                -1 for a non-idempotent producer
producer_epoch      int16
sequence            int32                                                -1 for a non-idempotent producer
is_transactional    bool
==================  ===================================================  =====================================

The schema metadata carries ``next_offset`` (the offset to fetch next), ``valid_bytes`` and
``trailing_bytes`` (a truncated tail) as strings; :func:`read_info` gives them back as ints.

pyarrow (and pandas, numpy) are imported only when a function needs them, so ``import kafkatx`` and
``import kafkatx.arrow`` work without them.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any, Callable, Iterable, Iterator

from ._backend import codec as _codec
from ._common import ARROW_COLUMNS, arrow_schema, column_names
from .compression import check_inflate_threads, usable_cpus
from .errors import InvalidTimestampError, KafkaTxError

__all__ = [
    "ARROW_COLUMNS",
    "arrow_schema",
    "decode_arrow",
    "encode_arrow",
    "next_offset",
    "read_info",
    "to_pandas",
    "decode_column",
    "decode_arrow_parallel",
    "buffer_cache_limit",
    "buffer_cache_bytes",
    "map_in_arrow_decoder",
    "spark_schema",
    "spark_arrow_schema",
]

decode_arrow = _codec.decode_arrow
# large column buffers are reused by the next decode once no array uses them (the compiled codec's cache)
buffer_cache_limit = _codec.buffer_cache_limit
buffer_cache_bytes = _codec.buffer_cache_bytes


def _encode_arrow_missing(table, **kwargs):  # pragma: no cover - only on a backend without encode_arrow
    raise NotImplementedError(
        f"the {_codec.BACKEND} codec backend has no encode_arrow yet; use the compiled extension "
        "(unset KAFKATX_NO_EXTENSIONS) or kafkatx.BatchBuilder"
    )


encode_arrow = getattr(_codec, "encode_arrow", _encode_arrow_missing)

_INFO_KEYS = ("next_offset", "valid_bytes", "trailing_bytes")
_LENGTH = struct.Struct(">i")
_LOG_OVERHEAD = 12  # base offset (8) + length (4): the framing shared by every magic
_MIN_ENTRY_SIZE = 14  # Kafka's RECORD_OVERHEAD_V0: a smaller length field is corruption


# ------------------------------------------------------------------------------------------ metadata
def read_info(record_batch) -> dict:
    """``{"next_offset": int | None, "valid_bytes": int, "trailing_bytes": int}`` from a decoded batch.

    Works on what :func:`decode_arrow`, :func:`decode_column` and ``ReadCommittedFilter.feed_arrow``
    return (a ``pyarrow.RecordBatch``, or a ``pyarrow.Table`` built from one).  ``next_offset`` is
    ``None`` when nothing was read and no ``fetch_offset`` was given.
    """
    meta = record_batch.schema.metadata or {}
    out = {}
    for name in _INFO_KEYS:
        raw = meta.get(name.encode())
        if raw is None:
            raise ValueError(f"no {name!r} in the schema metadata: not a kafkatx decode result")
        text = raw.decode()
        out[name] = None if text == "None" else int(text)
    return out


def next_offset(record_batch) -> int | None:
    """The offset to fetch next after a decode (``None`` if no batch was read and no fetch_offset)."""
    return read_info(record_batch)["next_offset"]


def _with_info(batch, info: dict):
    return batch.replace_schema_metadata({k: str(info[k]) for k in _INFO_KEYS})


# -------------------------------------------------------------------------------------------- pandas
def to_pandas(data, *, types_mapper=None, headers: str = "tuples", **decode_kwargs):
    """The visible records of ``data`` as a ``pandas.DataFrame``, decoded through Arrow.

    ``decode_kwargs`` go to :func:`decode_arrow` (``isolation``, ``aborted_transactions``,
    ``last_stable_offset``, ``fetch_offset``, ``verify_crc``, ``columns``, ...).  With the default
    conversion the dtypes are:

    * ``offset``/``producer_id`` int64, ``timestamp_type`` int8, ``producer_epoch`` int16,
      ``sequence`` int32, ``is_transactional`` bool (these columns are never null);
    * ``timestamp`` ``datetime64[ms, UTC]`` (tz-aware; ``NaT`` where Kafka has no timestamp);
    * ``key``/``value`` object columns holding ``bytes`` (``None`` for null keys and tombstones);
    * ``headers`` an object column holding, per record, a tuple of ``(key, value)`` pairs like
      :attr:`kafkatx.Record.headers` (``headers="arrow"`` keeps pyarrow's own conversion instead:
      numpy arrays of ``{"key", "value"}`` dicts).  Header keys that are not valid UTF-8 are repaired
      with U+FFFD by the Arrow decoder (the record decoders keep them with ``surrogateescape``).

    ``types_mapper`` is passed to ``pyarrow.RecordBatch.to_pandas``: ``pandas.ArrowDtype`` gives
    Arrow-backed columns with no per-value Python objects at all.
    """
    if headers not in ("tuples", "arrow"):
        raise ValueError(f"headers must be 'tuples' or 'arrow', got {headers!r}")
    batch = decode_arrow(data, **decode_kwargs)
    df = batch.to_pandas(types_mapper=types_mapper)
    # tuples where pyarrow's own conversion made the column (objects, or for an empty fetch what pandas
    # infers), never over a dtype types_mapper chose: an empty fetch gets a non-empty one's dtype
    htype = batch.schema.field("headers").type if "headers" in df.columns else None
    if headers == "tuples" and htype is not None and (types_mapper is None or types_mapper(htype) is None):
        df["headers"] = _object_series(_header_tuples(batch.column("headers")), df.index)
    df.attrs.update(read_info(batch))
    return df


def _object_series(values: list, index):
    """``values`` as an object Series on ``index`` (also when empty, where pandas would infer float64)."""
    import pandas as pd

    return pd.Series(values, index=index, dtype=object)


def _header_tuples(lists) -> list:
    """Per row, a tuple of (key, value) pairs, from a list<struct<key, value>> array (no per-row Arrow calls)."""
    offsets = lists.offsets.to_pylist()
    items = lists.values
    pairs = list(zip(items.field("key").to_pylist(), items.field("value").to_pylist()))
    return [tuple(pairs[offsets[i] : offsets[i + 1]]) for i in range(len(lists))]


# ------------------------------------------------------------------------------- columns of batches
class _ColumnDecoder:
    """One ReadCommittedFilter fed the rows of binary arrays, in row order, as runs of the data buffer.

    Consecutive rows of an Arrow binary array are adjacent in its data buffer, so a stretch of rows is
    one contiguous slice: the filter is given memoryviews of those slices (no copy), all stretches fed
    since the last :meth:`flush` in one ``feed_arrow_parts`` call.  Null rows are skipped.
    ``row_tails="carry"`` treats rows as consecutive chunks of one byte stream (a batch may span rows, as
    with ``ReadCommittedFilter.feed``); ``row_tails="drop"`` treats each row as a whole Fetch-response
    record set and drops a truncated batch at the end of a row, as Kafka's consumer does (counted in
    ``trailing_bytes``).  An error is re-pointed at the row it falls in (:meth:`_in_rows`).
    """

    def __init__(self, *, isolation, aborted_transactions, last_stable_offset, fetch_offset, verify_crc,
                 columns, large_binary, binary_view, row_tails, max_decompressed_size, inflate_threads):  # fmt: skip
        if row_tails not in ("carry", "drop"):
            raise ValueError(f"row_tails must be 'carry' or 'drop', got {row_tails!r}")
        kw = {} if max_decompressed_size is None else {"max_decompressed_size": max_decompressed_size}
        self.filter = _codec.ReadCommittedFilter(
            aborted_transactions, isolation=isolation, last_stable_offset=last_stable_offset,
            fetch_offset=fetch_offset, verify_crc=verify_crc, inflate_threads=inflate_threads, **kw,
        )  # fmt: skip
        self.feed_kwargs = {"columns": columns, "large_binary": large_binary}
        if binary_view is not None:
            self.feed_kwargs["binary_view"] = binary_view
        self.drop = row_tails == "drop"
        self.valid_bytes = 0
        self.dropped_bytes = 0
        self._views: list = []  # stretches of rows waiting for flush()
        # Where each stretch came from, to name the row of an error: (its start in the byte stream fed to
        # the filter, its length, its start in its array's data buffer, the array's row starts in that
        # buffer, the array's first row in the column), for the stretches of the last flush and any earlier
        # ones still holding bytes the filter keeps pending
        self._spans: list = []
        self._fed = 0  # bytes of the stream fed so far
        self._rows = 0  # rows of the arrays fed so far (nulls included)

    def _feed(self, view, buf_start: int, starts, row0: int) -> None:
        self._views.append(view)  # decoded by flush, all stretches in one call
        self._spans.append((self._fed, len(view), buf_start, starts, row0))
        self._fed += len(view)

    def flush(self, out: list) -> None:
        """Decode the stretches fed since the last flush into one RecordBatch (appended if not empty):
        ``feed_arrow_parts`` sizes its columns once for all of them, and nothing is concatenated."""
        views, self._views = self._views, []
        if not views:
            return
        first = len(self._spans) - len(views)  # the first of these stretches in self._spans
        try:
            rb = self.filter.feed_arrow_parts(views, **self.feed_kwargs)
        except KafkaTxError as exc:
            raise self._in_rows(exc, first) from None
        self.valid_bytes += read_info(rb)["valid_bytes"]
        # forget the stretches the filter has no bytes of any more
        keep_from = self._fed - self.filter.pending_bytes
        self._spans = [s for s in self._spans if s[0] + s[1] > keep_from]
        if rb.num_rows:
            out.append(rb)

    def _in_rows(self, exc, first: int):
        """``exc`` from ``feed_arrow_parts``, its position re-pointed from the stream of stretches to the row
        of the column it falls in: the same error with ``row`` (counting from the column's first row, nulls
        included) and ``position`` (a byte of that row).  A position past the failing entry's first byte
        that is exactly where a row ends (the end of a batch cut short, say) stays with that row."""
        import numpy as np

        part = getattr(exc, "part", None)
        if exc.position is None or part is None or not hasattr(exc, "reason"):
            return exc
        part_start, part_len = self._spans[first + part][:2]
        at = part_start - exc.carried_bytes + exc.position  # in the stream
        entry = part_start + part_len - self.filter.pending_bytes  # where the failing entry starts (kept pending)
        probe = at - 1 if at > entry else at  # a byte of the row to name
        for stream_start, length, buf_start, starts, row0 in self._spans:
            if stream_start <= probe < stream_start + length:
                i = int(np.searchsorted(starts, buf_start + probe - stream_start, side="right")) - 1
                byte = buf_start + at - stream_start - int(starts[i])
                err = type(exc)(f"{exc.reason} (in row {row0 + i} of the column)", byte, exc.base_offset)
                err.row = row0 + i
                return err
        return exc

    def feed_array(self, arr) -> None:
        """Queue every non-null row of one binary/large_binary array (decoded by :meth:`flush`)."""
        import numpy as np

        pa = _pa()
        n = len(arr)
        row0 = self._rows
        self._rows += n
        if n == 0 or pa.types.is_null(arr.type):
            return
        validity, offsets_buf, data_buf = arr.buffers()[:3]
        width = np.dtype(np.int64 if pa.types.is_large_binary(arr.type) else np.int32)
        offsets = np.frombuffer(offsets_buf, dtype=width, count=n + 1, offset=arr.offset * width.itemsize)
        offsets = offsets.astype(np.int64)
        if data_buf is None or offsets[-1] == offsets[0]:
            return  # every row empty or null: nothing to decode
        data = memoryview(data_buf)
        starts, ends = offsets[:-1], offsets[1:]
        valid = None if validity is None or arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
        # row i is fed data[starts[i]:cut[i]]: all of it, up to its last complete batch when dropping
        # tails, nothing for a null row
        if self.drop:
            cut = self._complete_prefixes(np.frombuffer(data_buf, dtype=np.uint8), starts, ends, valid, data)
        else:
            cut = ends
        if valid is not None:
            cut = np.where(valid, cut, starts)
        # row i+1 starts where row i ends, so rows fed whole make one contiguous slice: feed each
        # maximal stretch in one call, breaking after a row that is not fed to its end
        run_start = int(starts[0])
        for i in np.flatnonzero(cut != ends).tolist():
            stop = int(cut[i])
            if stop > run_start:
                self._feed(data[run_start:stop], run_start, starts, row0)
            run_start = int(ends[i])
        stop = int(ends[-1])
        if stop > run_start:
            self._feed(data[run_start:stop], run_start, starts, row0)

    def _complete_prefixes(self, u8, starts, ends, valid, data):
        """Per row, the end of its last complete entry (by the 12-byte log framing)."""
        import numpy as np

        lengths = ends - starts
        cut = ends.copy()
        # fast path, vectorised: a row that is exactly one entry (its length field says so)
        framed = lengths >= _LOG_OVERHEAD
        sizes = np.full(len(starts), -1, dtype=np.int64)
        idx = starts[framed] + 8
        if len(idx):
            be = (u8[idx].astype(np.int64) << 24) | (u8[idx + 1].astype(np.int64) << 16) \
                | (u8[idx + 2].astype(np.int64) << 8) | u8[idx + 3].astype(np.int64)  # fmt: skip
            sizes[framed] = np.where(be >= 1 << 31, be - (1 << 32), be)
        # (a row shorter than the framing has no length field: its -1 must not match an 11-byte row)
        single = framed & (sizes + _LOG_OVERHEAD == lengths)
        slow = ~single & (lengths > 0)
        if valid is not None:
            slow &= valid
        for i in np.flatnonzero(slow).tolist():
            cut[i] = _complete_end(data, int(starts[i]), int(ends[i]))
        self.dropped_bytes += int((ends - cut)[slow].sum()) if slow.any() else 0
        return cut

    def result(self, batches: list):
        """One RecordBatch of everything decoded so far, with the combined metadata."""
        pa = _pa()
        self.flush(batches)
        if not batches:
            empty = self.filter.feed_arrow(b"", **self.feed_kwargs)
            return _with_info(empty, self.info())
        if len(batches) == 1:
            return _with_info(batches[0], self.info())
        plain = [b.replace_schema_metadata(None) for b in batches]
        return _with_info(pa.concat_batches(plain), self.info())

    def info(self) -> dict:
        return {
            "next_offset": self.filter.next_offset,
            "valid_bytes": self.valid_bytes,
            "trailing_bytes": self.filter.pending_bytes + self.dropped_bytes,
        }


def _complete_end(data, pos: int, end: int) -> int:
    """The end of the last complete entry of data[pos:end]; a corrupt length stops nothing (the decoder raises)."""
    unpack = _LENGTH.unpack_from
    while end - pos >= _LOG_OVERHEAD:
        (size,) = unpack(data, pos + 8)
        if size < _MIN_ENTRY_SIZE:
            return end  # corrupt: feed it all so the decoder reports it
        if size + _LOG_OVERHEAD > end - pos:
            break
        pos += size + _LOG_OVERHEAD
    return pos


def _pa():
    try:
        import pyarrow
    except ImportError as exc:
        raise ImportError("kafkatx.arrow needs pyarrow: pip install 'kafkatx[arrow]'") from exc
    return pyarrow


def _binary_chunks(column) -> list:
    """The column as a list of binary or large_binary arrays (string types viewed as bytes, no copy)."""
    pa = _pa()
    if isinstance(column, pa.ChunkedArray):
        chunks = list(column.chunks)
    elif isinstance(column, pa.Array):
        chunks = [column]
    elif isinstance(column, (bytes, bytearray, memoryview, str)):
        raise TypeError("decode_column takes a column of batches (a pyarrow binary array); "
                        "use decode_arrow for one buffer")  # fmt: skip
    else:  # a list of bytes, a pandas Series of bytes, ...
        chunks = [pa.array(column, type=pa.large_binary())]
    out = []
    for c in chunks:
        t = c.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            out.append(c)
        elif pa.types.is_string(t):
            out.append(c.view(pa.binary()))
        elif pa.types.is_large_string(t):
            out.append(c.view(pa.large_binary()))
        elif pa.types.is_binary_view(t) or pa.types.is_string_view(t) or pa.types.is_fixed_size_binary(t):
            out.append(c.cast(pa.large_binary()))  # one copy: these layouts are not one contiguous buffer
        elif pa.types.is_null(t):
            out.append(c)  # (rows that count, nothing to decode)
        else:
            raise TypeError(f"decode_column needs a binary column, got {t}")
    return out


def decode_column(
    column,
    *,
    isolation: str = "read_uncommitted",
    aborted_transactions=None,
    last_stable_offset=None,
    fetch_offset=None,
    verify_crc: bool = True,
    columns=None,
    large_binary: bool = False,
    row_tails: str = "carry",
    binary_view=None,
    max_decompressed_size=None,
    inflate_threads=None,
):
    """Decode a column whose rows hold raw record batches into ONE record table (a ``pyarrow.RecordBatch``).

    ``column`` is a ``pyarrow`` binary/large_binary (or string) ``Array``, a ``ChunkedArray`` (a
    ``Table`` column), or anything ``pyarrow.array`` turns into binary (a list of bytes, a pandas
    Series).  Each row holds whole batches: one batch, several (a log-segment slice, a Fetch
    response's record set), or, with ``row_tails="carry"``, any consecutive piece of one partition's
    byte stream.  The records of all rows come back concatenated in row order; null rows are skipped.

    One :class:`~kafkatx.ReadCommittedFilter` is carried across the rows, so ``read_committed`` (with
    the partition's ``aborted_transactions``) works when the rows are consecutive chunks of ONE
    partition; rows of different partitions need one call each.  ``row_tails="carry"`` (default)
    completes a batch cut at the end of a row with the next row's bytes; ``row_tails="drop"`` treats
    each row as a complete record set and drops a truncated batch at its end, as Kafka's consumer does.
    Bytes left over (a truncated tail, or batches at or past ``last_stable_offset``) are counted in the
    ``trailing_bytes`` metadata.

    Rows are not copied: stretches of adjacent rows are fed to the decoder as memoryviews of the
    column's data buffer.  ``inflate_threads`` as in :func:`decode_arrow`.

    An error names the row of the column holding the bad byte (nulls and earlier chunks counted) in its
    message and in its ``row`` attribute; its ``position`` is a byte of that row.
    """
    dec = _ColumnDecoder(
        isolation=isolation, aborted_transactions=aborted_transactions, last_stable_offset=last_stable_offset,
        fetch_offset=fetch_offset, verify_crc=verify_crc, columns=columns, large_binary=large_binary,
        binary_view=binary_view, row_tails=row_tails, max_decompressed_size=max_decompressed_size,
        inflate_threads=inflate_threads,
    )  # fmt: skip
    out: list = []
    for chunk in _binary_chunks(column):
        dec.feed_array(chunk)
    return dec.result(out)


# ----------------------------------------------------------------------------------------- threads
_POOLS: dict = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    # a forked child inherits the pools but not their threads: work handed to them would never run
    global _POOLS, _POOLS_LOCK
    _POOLS = {}
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _pool(max_workers: int):
    """A long-lived thread pool per size, shared by every call.

    Reusing the threads matters beyond their start-up cost: each thread allocates from its own heap of
    the memory allocator, so fresh threads page-fault their output buffers in on every call, while
    long-lived ones reuse memory they already mapped."""
    from concurrent.futures import ThreadPoolExecutor

    with _POOLS_LOCK:
        pool = _POOLS.get(max_workers)
        if pool is None:
            pool = _POOLS[max_workers] = ThreadPoolExecutor(max_workers=max_workers,
                                                            thread_name_prefix="kafkatx-decode")
        return pool


def decode_arrow_parallel(chunks: Iterable, *, max_workers: int | None = None, **decode_kwargs) -> list:
    """:func:`decode_arrow` of each buffer of ``chunks`` on ``max_workers`` threads; results in input order.

    Each chunk is decoded on its own (its own read_committed state), so give self-contained pieces:
    one per partition, or whole batches of a partition under ``read_uncommitted``.  The compiled
    decoder releases the GIL for its bulk work, so threads decode in parallel.  ``max_workers``
    (the calling thread counts as one: it decodes chunks too rather than wait) defaults to the number of
    CPUs the process may use; the other threads live on between calls (one pool per size).  When the
    workers fill those CPUs, ``inflate_threads=None`` (the default) means 0: no inflaters beside them.  If
    chunks fail, the error of the first failing one in input order is raised, and no chunk is started
    after a failure.
    """
    chunks = list(chunks)
    if max_workers is not None and max_workers < 1:
        raise ValueError(f"max_workers must be at least 1, got {max_workers}")
    cpus = usable_cpus()
    if max_workers is None:
        max_workers = cpus
    workers = min(max_workers, len(chunks))
    if workers >= cpus and decode_kwargs.get("inflate_threads") is None:
        decode_kwargs["inflate_threads"] = 0
    if workers <= 1:
        return [decode_arrow(c, **decode_kwargs) for c in chunks]
    results: list = [None] * len(chunks)
    errors: dict = {}
    lock = threading.Lock()
    todo = iter(range(len(chunks)))

    def drain():
        while True:
            with lock:
                i = None if errors else next(todo, None)
            if i is None:
                return
            try:
                results[i] = decode_arrow(chunks[i], **decode_kwargs)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the caller below
                with lock:
                    errors[i] = exc

    helpers = [_pool(workers - 1).submit(drain) for _ in range(workers - 1)]
    try:
        drain()
    finally:
        for f in helpers:
            if not f.cancel():  # (one that has not started has nothing left to do: it is not waited for)
                f.result()
    if errors:
        raise errors[min(errors)]
    return results


# ------------------------------------------------------------------------------------------- Spark
_SPARK_DDL_TYPES = {
    "offset": "BIGINT",
    "timestamp": "TIMESTAMP",
    "timestamp_type": "TINYINT",
    "key": "BINARY",
    "value": "BINARY",
    "headers": "ARRAY<STRUCT<`key`: STRING, `value`: BINARY>>",
    "producer_id": "BIGINT",
    "producer_epoch": "SMALLINT",
    "sequence": "INT",
    "is_transactional": "BOOLEAN",
}


def _column_names(columns) -> list:
    """The named columns in the canonical order (all by default), checked without pyarrow."""
    return list(column_names(columns))


def spark_schema(columns=None) -> str:
    """The Spark DDL string of the decoded columns (all, or those named, in the canonical order).

    For ``df.mapInArrow(map_in_arrow_decoder(...), spark_schema())``.  Names are backtick-quoted
    (``offset``, ``timestamp``, ``key`` and ``value`` are SQL keywords).
    """
    return ", ".join(f"`{n}` {_SPARK_DDL_TYPES[n]}" for n in _column_names(columns))


def spark_arrow_schema(columns=None):
    """The Arrow schema Spark expects for :func:`spark_schema` (``to_arrow_schema(..., timezone="UTC")``).

    Every field nullable, ``timestamp`` in microseconds UTC, 32-bit binary offsets: what PySpark 4.x
    checks a ``mapInArrow`` or data-source batch against.
    """
    pa = _pa()
    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    types = {
        "offset": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_type": pa.int8(),
        "key": pa.binary(),
        "value": pa.binary(),
        "headers": pa.list_(pa.field("element", header)),
        "producer_id": pa.int64(),
        "producer_epoch": pa.int16(),
        "sequence": pa.int32(),
        "is_transactional": pa.bool_(),
    }
    return pa.schema([pa.field(n, types[n]) for n in _column_names(columns)])


def _to_spark(batch, schema):
    """``batch`` with ``schema``'s types and nullability (the ms→µs timestamp is the only real work)."""
    pa = _pa()
    try:
        arrays = [batch.column(f.name).cast(f.type) for f in schema]
    except pa.ArrowInvalid:
        _raise_out_of_spark_range(batch)
        raise
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _raise_out_of_spark_range(batch) -> None:
    """The first record whose millisecond timestamp does not fit Spark's int64 microseconds (a legal Kafka
    timestamp past the year 294247, as a producer with a bogus clock can write) as InvalidTimestampError:
    Spark's own Kafka source fails on it too (``Math.multiplyExact``)."""
    if "timestamp" not in batch.schema.names:
        return
    import pyarrow.compute as pc

    ms = pc.fill_null(batch.column("timestamp").view(_pa().int64()), 0).to_numpy()
    limit = ((1 << 63) - 1) // 1000
    bad = ((ms > limit) | (ms < -limit)).nonzero()[0]
    if len(bad):
        i = int(bad[0])
        where = f"offset {batch.column('offset')[i].as_py()}" if "offset" in batch.schema.names else f"row {i}"
        raise InvalidTimestampError(f"the record at {where} has timestamp {int(ms[i])} ms, past what Spark's "
                                    f"timestamps (int64 microseconds) hold")  # fmt: skip


def map_in_arrow_decoder(
    column: str = "value",
    *,
    isolation: str = "read_uncommitted",
    aborted_transactions=None,
    last_stable_offset=None,
    fetch_offset=None,
    verify_crc: bool = True,
    columns=None,
    row_tails: str = "carry",
    spark_types: bool = True,
    inflate_threads: int | None = 0,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A function for ``DataFrame.mapInArrow(func, spark_schema(columns))`` decoding the binary column ``column``.

    ``func`` takes an iterator of ``pyarrow.RecordBatch`` (one Spark partition) and yields, per input
    batch that has visible records, one RecordBatch of the decoded records.  Within one call the rows
    are decoded as by :func:`decode_column` with one read_committed state carried across all input
    batches (so a Spark partition should hold the consecutive chunks of one Kafka partition when
    ``read_committed`` is used), and an error's ``row`` counts the rows of the input batches before it
    too.  With ``spark_types`` (default) batches have :func:`spark_arrow_schema`'s types (µs
    timestamps, nullable fields), which PySpark 4.3 requires;
    ``spark_types=False`` yields kafkatx's own schema (:func:`arrow_schema`).  ``inflate_threads``
    defaults to 0, not :func:`decode_arrow`'s None: Spark runs a task per core it gives out
    (``spark.task.cpus``), so a task inflates on its own thread unless told otherwise.  Nothing here
    imports pyspark; the function works on any iterator of RecordBatches.
    """
    if isolation not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"isolation must be 'read_committed' or 'read_uncommitted', got {isolation!r}")
    if row_tails not in ("carry", "drop"):
        raise ValueError(f"row_tails must be 'carry' or 'drop', got {row_tails!r}")
    aborted = None if aborted_transactions is None else [tuple(a) for a in aborted_transactions]
    cols = None if columns is None else _column_names(columns)  # unknown names fail here, not on an executor
    check_inflate_threads(inflate_threads)  # (None is resolved on the executor, for its CPUs)

    def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
        dec = _ColumnDecoder(
            isolation=isolation, aborted_transactions=aborted, last_stable_offset=last_stable_offset,
            fetch_offset=fetch_offset, verify_crc=verify_crc, columns=cols, large_binary=False,
            binary_view=None, row_tails=row_tails, max_decompressed_size=None, inflate_threads=inflate_threads,
        )  # fmt: skip
        target = spark_arrow_schema(cols) if spark_types else None
        for batch in batches:
            try:
                col = batch.column(column)
            except KeyError:
                raise KeyError(f"the input batch has no column {column!r} (it has {batch.schema.names})") from None
            out: list = []
            for chunk in _binary_chunks(col):
                dec.feed_array(chunk)
            dec.flush(out)
            if not out:
                continue
            rb = dec.result(out)
            yield _to_spark(rb, target) if spark_types else rb

    return decode_batches
