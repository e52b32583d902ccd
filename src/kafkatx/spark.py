"""PySpark Python Data Source ``kafkatx``: Kafka log directories read as Spark's own Kafka source reads a topic.

::

    df = (spark.read.format("kafkatx")                  # found by PySpark 4 itself (the pyspark_kafkatx module)
          .option("subscribe", "orders")                # or subscribePattern / assign; none: every topic but __*
          .option("startingOffsets", "earliest")        # or {"orders": {"0": 1200, "1": -2}}
          .option("endingOffsets", "latest")            # the last stable offset under read_committed
          .load("/var/lib/kafka/data"))                 # a broker log dir, a backup of one, or one partition dir

The rows are those a consumer with ``kafka.isolation.level`` sees, ``read_committed`` by default (Spark's
Kafka source defaults to ``read_uncommitted``; an offline reader of exactly-once data should not show
aborted records unless asked): aborted transactions hidden (from the ``.txnindex`` files, or a replay of
the batch headers where a segment has none), control records skipped, nothing at or past the last stable
offset.  The columns are those of Spark's Kafka source, in its order: ``key, value, topic, partition,
offset, timestamp, timestampType`` and, with ``includeHeaders``, ``headers`` (null for a record without
any).  ``includeProducerFields`` adds ``producerId, producerEpoch, sequence, isTransactional``.

Options (names and meanings of Spark's Kafka source where it has them; values are strings):

* ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular expression the whole topic name
  must match) or ``assign`` (``{"orders": [0, 1]}``): at most one.  Without any, every topic whose name
  does not start with ``__`` (Kafka's internal topics are read only when named).
* ``startingOffsets``: ``earliest`` (the default for batch queries) or JSON ``{"topic": {"0": offset}}``
  naming every partition read, ``-2`` for earliest; a streaming query also takes ``latest`` (its default)
  and ``-1``.  ``endingOffsets`` (batch only): ``latest`` (the default: the last stable offset, or the high
  watermark under ``read_uncommitted``) or JSON, ``-1`` for latest; the end is exclusive.
* ``startingTimestamp`` (one for every partition) or ``startingOffsetsByTimestamp`` (JSON ``{"topic": {"0":
  timestamp}}``), in milliseconds, before ``startingOffsets``: each partition from the offset a ListOffsets
  request for the timestamp gets (:meth:`kafkatx.log.Partition.offset_for_timestamp`); where there is none,
  an error, or the latest offset with ``startingOffsetsByTimestampStrategy=latest``.  ``endingTimestamp`` /
  ``endingOffsetsByTimestamp`` (batch only) end there likewise, or at the latest offset.
* ``failOnDataLoss`` (``true``): a starting offset below a partition's log start offset (deleted by
  retention) is an error; ``false`` starts at the log start offset instead.
* ``minPartitions``: at least this many Spark partitions where the segments allow, made by cutting each Kafka
  partition at segment boundaries into its share by bytes (one Kafka partition is one Spark partition by
  default, as in Spark; a single segment is never cut).
* ``maxOffsetsPerTrigger`` (streaming): at most this many offsets a micro-batch, shared among the
  partitions in proportion to what each has to read.
* kafkatx's own: ``abortedSource`` (``auto`` / ``txnindex`` / ``scan`` / ``cross-check``, as
  :meth:`kafkatx.log.Partition.read`'s ``aborted_source``), ``verifyCrc`` (``true``), ``chunkBytes`` (log
  bytes decoded into one Arrow batch, 32 MiB).

Every task opens its partition directory again (the driver only plans), so executors need the path too.
A streaming query re-lists the directory at every trigger: partitions that appear are read from their log
start offset, as Spark's Kafka source reads new partitions from the earliest offset.  A corrupt batch fails
the task with kafkatx's error (its file and byte position).  Needs PySpark 4.0+ (admission control,
``maxOffsetsPerTrigger``, needs 4.2+).  :func:`register` registers the source by hand where the
``pyspark_kafkatx`` module is not importable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
from bisect import bisect_right

from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # PySpark 4.0 / 4.1: Trigger.AvailableNow reads everything in one micro-batch
    SupportsTriggerAvailableNow = object  # type: ignore[misc,assignment]

__all__ = ["KafkaLogDataSource", "NAME", "register", "source_schema"]

NAME = "kafkatx"

_KAFKA_FIELDS = (("key", T.BinaryType()), ("value", T.BinaryType()), ("topic", T.StringType()),
                 ("partition", T.IntegerType()), ("offset", T.LongType()), ("timestamp", T.TimestampType()),
                 ("timestampType", T.IntegerType()))  # fmt: skip
_HEADERS_FIELD = ("headers", T.ArrayType(T.StructType([T.StructField("key", T.StringType()),
                                                       T.StructField("value", T.BinaryType())])))  # fmt: skip
_PRODUCER_FIELDS = (("producerId", T.LongType()), ("producerEpoch", T.ShortType()), ("sequence", T.IntegerType()),
                    ("isTransactional", T.BooleanType()))  # fmt: skip
# the columns of the source that kafkatx.decode_arrow's give (the others: topic and partition, one value a task)
_FROM_DECODER = {"key": "key", "value": "value", "offset": "offset", "timestamp": "timestamp",
                 "timestampType": "timestamp_type", "headers": "headers", "producerId": "producer_id",
                 "producerEpoch": "producer_epoch", "sequence": "sequence", "isTransactional": "is_transactional"}
_EARLIEST, _LATEST = -2, -1


def source_schema(include_headers: bool = False, include_producer_fields: bool = False) -> T.StructType:
    """The schema of the source's rows with these options (every field nullable, as in Spark's Kafka source)."""
    fields = list(_KAFKA_FIELDS)
    if include_headers:
        fields.append(_HEADERS_FIELD)
    if include_producer_fields:
        fields.extend(_PRODUCER_FIELDS)
    return T.StructType([T.StructField(name, dtype) for name, dtype in fields])


def register(spark) -> None:
    """Register the source with ``spark`` (``spark.dataSource.register``) under the name ``kafkatx``."""
    spark.dataSource.register(KafkaLogDataSource)


# ------------------------------------------------------------------------------------------ options
def _flag(options, name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, got {raw!r}")
    return value == "true"


def _positive_int(options, name: str):
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"option {name} must be a positive integer, got {raw!r}")
    return value


def _offsets_option(options, name: str, keywords: dict):
    """``keywords[value]`` for a keyword value, else the JSON ``{topic: {partition: offset}}`` as
    ``{(topic, partition): offset}``."""
    raw = options.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    if text.lower() in keywords:
        return keywords[text.lower()]
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError(f"option {name} must be {''.join(k + ' or ' for k in sorted(keywords))}JSON like "
                         f'{{"topic": {{"0": 23}}}}, got {raw!r}')  # fmt: skip
    out = {}
    for topic, parts in doc.items():
        for p, off in parts.items():
            try:
                key = (topic, int(p))
            except ValueError:
                raise ValueError(f"option {name}: partition {p!r} of topic {topic!r} is not a number") from None
            if type(off) is not int or off < _EARLIEST:
                raise ValueError(f"option {name}: offset {off!r} of {topic}-{p} is not an offset, -1 or -2")
            out[key] = off
    return out


def _timestamps_option(options, single: str, by_partition: str):
    """``single`` (one timestamp for every partition) or else ``by_partition`` (JSON ``{topic: {partition:
    timestamp}}``, as ``{(topic, partition): timestamp}``), or None; the single one wins, as in Spark."""
    raw = options.get(single)
    if raw is not None:
        try:
            value = int(str(raw).strip())
        except ValueError:
            value = -1
        if value < 0:
            raise ValueError(f"option {single} must be a timestamp in milliseconds (>= 0), got {raw!r}")
        return value
    return _offsets_option(options, by_partition, {})


@dataclasses.dataclass(frozen=True)
class _Options:
    path: str
    subscribe: tuple | None
    pattern: str | None
    assign: frozenset | None
    starting: object  # "earliest" / "latest" / {(topic, partition): offset}
    ending: object  # "latest" / {(topic, partition): offset}
    starting_timestamp: object  # None / a timestamp for every partition / {(topic, partition): timestamp}
    ending_timestamp: object
    timestamp_strategy: str  # startingOffsetsByTimestampStrategy: "error" / "latest"
    isolation: str
    include_headers: bool
    include_producer_fields: bool
    fail_on_data_loss: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    aborted_source: str
    verify_crc: bool
    chunk_bytes: int | None

    @classmethod
    def parse(cls, options, *, streaming: bool = False) -> _Options:
        path = options.get("path")
        if not path:
            raise ValueError("the kafkatx source needs a path: .load('/path/to/log/dir')")
        chosen = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k) is not None]
        if len(chosen) > 1:
            raise ValueError(f"options {', '.join(chosen)} exclude each other: give at most one")
        subscribe = pattern = assign = None
        if options.get("subscribe") is not None:
            subscribe = tuple(t.strip() for t in str(options["subscribe"]).split(",") if t.strip())
            if not subscribe:
                raise ValueError("option subscribe names no topic")
        if options.get("subscribePattern") is not None:
            pattern = str(options["subscribePattern"])
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"option subscribePattern is not a regular expression: {exc}") from None
        if options.get("assign") is not None:
            try:
                doc = json.loads(str(options["assign"]))
            except ValueError:
                doc = None
            if not isinstance(doc, dict) or not all(
                    isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps) for ps in doc.values()):
                raise ValueError(f'option assign must be JSON like {{"topic": [0, 1]}}, got {options["assign"]!r}')
            assign = frozenset((t, p) for t, ps in doc.items() for p in ps)
        starting_kw = {"earliest": "earliest", "latest": "latest"} if streaming else {"earliest": "earliest"}
        starting = _offsets_option(options, "startingOffsets", starting_kw)
        if starting is None:
            starting = "latest" if streaming else "earliest"
        if isinstance(starting, dict) and not streaming and _LATEST in starting.values():
            raise ValueError("option startingOffsets: -1 (latest) is not allowed for a batch query")
        if streaming:
            if options.get("endingOffsets") is not None:
                raise ValueError("option endingOffsets is for batch queries only")
            ending = "latest"
        else:
            ending = _offsets_option(options, "endingOffsets", {"latest": "latest"}) or "latest"
            if isinstance(ending, dict) and _EARLIEST in ending.values():
                raise ValueError("option endingOffsets: -2 (earliest) is not allowed")
        starting_ts = _timestamps_option(options, "startingTimestamp", "startingOffsetsByTimestamp")
        ending_ts = None
        if streaming:
            for name in ("endingTimestamp", "endingOffsetsByTimestamp"):
                if options.get(name) is not None:
                    raise ValueError(f"option {name} is for batch queries only")
        else:
            ending_ts = _timestamps_option(options, "endingTimestamp", "endingOffsetsByTimestamp")
        strategy = str(options.get("startingOffsetsByTimestampStrategy", "error")).strip().lower()
        if strategy not in ("error", "latest"):
            raise ValueError(f"option startingOffsetsByTimestampStrategy must be error or latest, "
                             f"got {options.get('startingOffsetsByTimestampStrategy')!r}")  # fmt: skip
        from .log.reader import _ISOLATIONS, _SOURCES  # (what Partition.read takes)

        isolation = str(options.get("kafka.isolation.level", "read_committed")).strip().lower()
        if isolation not in _ISOLATIONS:
            raise ValueError(f"option kafka.isolation.level must be read_committed or read_uncommitted, "
                             f"got {options.get('kafka.isolation.level')!r}")  # fmt: skip
        aborted_source = str(options.get("abortedSource", "auto")).strip().lower()
        if aborted_source not in _SOURCES:
            raise ValueError(f"option abortedSource must be one of {', '.join(_SOURCES)}, "
                             f"got {options.get('abortedSource')!r}")  # fmt: skip
        return cls(
            path=os.path.abspath(str(path)),
            subscribe=subscribe,
            pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            starting_timestamp=starting_ts,
            ending_timestamp=ending_ts,
            timestamp_strategy=strategy,
            isolation=isolation,
            include_headers=_flag(options, "includeHeaders", False),
            include_producer_fields=_flag(options, "includeProducerFields", False),
            fail_on_data_loss=_flag(options, "failOnDataLoss", True),
            min_partitions=_positive_int(options, "minPartitions"),
            max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger") if streaming else None,
            aborted_source=aborted_source,
            verify_crc=_flag(options, "verifyCrc", True),
            chunk_bytes=_positive_int(options, "chunkBytes"),
        )

    def schema(self) -> T.StructType:
        return source_schema(self.include_headers, self.include_producer_fields)

    def selected(self, topic: str, partition: int) -> bool:
        if self.assign is not None:
            return (topic, partition) in self.assign
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return not topic.startswith("__")


# ------------------------------------------------------------------------------------------ planning
@dataclasses.dataclass
class KafkaLogPartition(InputPartition):
    """One Spark task: offsets ``[start, end)`` of the partition directory at ``path``."""

    path: str
    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self):
        super().__init__(None)


@contextlib.contextmanager
def _opened(opts: _Options):
    """``{(topic, partition): Partition}`` of the selected partitions under ``opts.path`` (the partition
    directory itself, or every one in a log dir), closed on leaving."""
    found = _partitions(opts)
    try:
        yield found
    finally:
        for p in found.values():
            p.close()


def _partitions(opts: _Options) -> dict:
    from .log import open_log_dir, open_partition
    from .log.reader import _SEGMENT_LOG_RE

    path = opts.path
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no directory at {path}")
    with os.scandir(path) as listing:
        is_partition = any(e.is_file() and _SEGMENT_LOG_RE.match(e.name) for e in listing)
    if is_partition:
        p = open_partition(path)
        found = {(p.topic, p.partition): p}
    else:
        found = dict(open_log_dir(path))
    out = {}
    for key, p in found.items():
        if opts.selected(*key):
            out[key] = p
        else:
            p.close()
    if opts.assign is not None and set(out) != set(opts.assign):
        missing = sorted(set(opts.assign) - set(out))
        for p in out.values():
            p.close()
        raise ValueError(f"option assign names partitions not found under {path}: "
                         f"{', '.join(f'{t}-{n}' for t, n in missing)}")  # fmt: skip
    return out


def _latest(opts: _Options, p) -> int:
    return p.last_stable_offset if opts.isolation == "read_committed" else p.high_watermark


def _resolve(opts: _Options, spec, key, p, what: str) -> int:
    """The offset ``spec`` (a keyword or ``{key: offset}``) gives partition ``key``."""
    if isinstance(spec, dict):
        if key not in spec:
            raise ValueError(f"option {what} names offsets for some partitions but not for {key[0]}-{key[1]}: "
                             "name every partition read (-2 for earliest, -1 for latest)")  # fmt: skip
        off = spec[key]
    else:
        off = _EARLIEST if spec == "earliest" else _LATEST
    if off == _EARLIEST:
        return p.log_start_offset
    if off == _LATEST:
        return _latest(opts, p)
    return off


def _by_timestamp(opts: _Options, spec, key, p, what: str):
    """The offset the timestamp ``spec`` (one for all, or ``{key: timestamp}``) gives partition ``key`` (the
    broker's ListOffsets answer, :meth:`Partition.offset_for_timestamp`), None where it gives none."""
    if isinstance(spec, dict):
        if key not in spec:
            raise ValueError(f"option {what} names timestamps for some partitions but not for {key[0]}-{key[1]}: "
                             "name every partition read")  # fmt: skip
        spec = spec[key]
    return p.offset_for_timestamp(spec, isolation=opts.isolation)


def _start_offset(opts: _Options, key, p) -> int:
    """Where partition ``key`` is read from: ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (no offset
    for the timestamp: an error, or the latest offset with ``startingOffsetsByTimestampStrategy=latest``), else
    ``startingOffsets``."""
    if opts.starting_timestamp is not None:
        off = _by_timestamp(opts, opts.starting_timestamp, key, p, "startingOffsetsByTimestamp")
        if off is None:
            if opts.timestamp_strategy == "error":
                raise ValueError(
                    f"no record of {key[0]}-{key[1]} below its latest offset ({opts.isolation}) has a timestamp at "
                    "or after the starting timestamp; option startingOffsetsByTimestampStrategy=latest starts such "
                    "a partition at its latest offset")  # fmt: skip
            off = _latest(opts, p)
    else:
        off = _resolve(opts, opts.starting, key, p, "startingOffsets")
    return _check_start(opts, key, p, off)


def _end_offset(opts: _Options, key, p) -> int:
    """Where the read of partition ``key`` ends (exclusive): ``endingTimestamp`` / ``endingOffsetsByTimestamp``
    (no offset for the timestamp: the latest), else ``endingOffsets``."""
    if opts.ending_timestamp is not None:
        off = _by_timestamp(opts, opts.ending_timestamp, key, p, "endingOffsetsByTimestamp")
        return _latest(opts, p) if off is None else off
    return _resolve(opts, opts.ending, key, p, "endingOffsets")


def _check_start(opts: _Options, key, p, start: int) -> int:
    log_start = p.log_start_offset
    if start < log_start:
        if opts.fail_on_data_loss:
            raise ValueError(
                f"offset {start} of {key[0]}-{key[1]} is below the partition's log start offset {log_start}: "
                "those records are gone (deleted by retention?); option failOnDataLoss=false starts at the log "
                "start offset instead")  # fmt: skip
        return log_start
    return start


def _cuts(p, start: int, end: int, pieces: int) -> list:
    """``[start, end)`` cut at segment base offsets into ``pieces`` ranges of about equal bytes of segment files
    (fewer where there are fewer segments): each cut at the segment boundary nearest its share."""
    segs = p.segments
    bases = [s.base_offset for s in segs]
    i = max(bisect_right(bases, start) - 1, 0)
    bounds, acc = [], 0  # (bytes before the boundary, the base offset there) for each boundary inside the range
    for j in range(i, len(segs)):
        if segs[j].base_offset >= end:
            break
        if segs[j].base_offset > start:
            bounds.append((acc, segs[j].base_offset))
        acc += segs[j].size
    cuts: list = []
    for k in range(1, pieces):
        want = acc * k / pieces
        options = [b for b in bounds if not cuts or b[1] > cuts[-1]]
        if not options:
            break
        cuts.append(min(options, key=lambda b: abs(b[0] - want))[1])
    edges = [start, *dict.fromkeys(cuts), end]
    return list(zip(edges, edges[1:]))


def _plan(opts: _Options, found: dict, ranges: dict) -> list:
    """The tasks for ``{(topic, partition): (start, end)}``: one a partition, or, for ``minPartitions``, each
    cut at segment boundaries into its share of them by bytes (rounded up, so there are at least that many
    where the segments allow)."""
    work = {k: r for k, r in ranges.items() if r[0] < r[1]}
    sizes = {}
    for key, (start, end) in work.items():
        segs = found[key].segments
        bases = [s.base_offset for s in segs]
        first = max(bisect_right(bases, start) - 1, 0)
        sizes[key] = sum(s.size for s in segs[first:] if s.base_offset < end)
    pieces = {k: [r] for k, r in work.items()}
    want = opts.min_partitions or 0
    if want > len(work) and work:
        total = sum(sizes.values()) or 1
        for key, (start, end) in work.items():
            share = max(1, math.ceil(want * sizes[key] / total))
            if share > 1:
                pieces[key] = _cuts(found[key], start, end, share)
    tasks = []
    for key in sorted(pieces):
        p = found[key]
        for lo, hi in pieces[key]:
            tasks.append(KafkaLogPartition(p.path, key[0], key[1], lo, hi))
    return tasks


# ------------------------------------------------------------------------------------------ reading
def _arrow_schema(opts: _Options):
    """The Arrow schema Spark takes the source's batches in: what ``to_arrow_schema(schema, timezone="UTC")``
    gives on PySpark 4.2+, which 4.3 checks the first batch against.  The decoded columns' types are
    :func:`kafkatx.arrow.spark_arrow_schema`'s (every field nullable, microsecond UTC timestamps, 32-bit binary
    offsets); built here since PySpark 4.0/4.1's ``to_arrow_schema`` has no ``timezone``."""
    import pyarrow as pa

    from .arrow import spark_arrow_schema

    decoded = {f.name: f.type for f in spark_arrow_schema()}
    types = {name: decoded[col] for name, col in _FROM_DECODER.items()}
    types.update(topic=pa.string(), partition=pa.int32(), timestampType=pa.int32())
    return pa.schema([pa.field(f.name, types[f.name]) for f in opts.schema()])


def _read(opts: _Options, task: KafkaLogPartition):
    """The rows of one task as Arrow batches of Spark's schema for these options."""
    if not isinstance(task, KafkaLogPartition):
        return  # nothing to read: Spark plans one InputPartition(None) when partitions() gives none
    import pyarrow as pa
    import pyarrow.compute as pc

    from .arrow import _to_spark
    from .log import open_partition
    from .log.reader import DEFAULT_CHUNK_BYTES

    schema = _arrow_schema(opts)
    decoded = {name: col for name, col in _FROM_DECODER.items() if name in schema.names}
    topic = pa.scalar(task.topic, pa.string())
    partition = pa.scalar(task.partition, pa.int32())
    with open_partition(task.path, verify_crc=opts.verify_crc) as p:  # (the checkpoints beside it, as planned)
        got = p.read(task.start, task.end, isolation=opts.isolation, format="arrow", columns=list(decoded.values()),
                     aborted_source=opts.aborted_source, chunk_bytes=opts.chunk_bytes or DEFAULT_CHUNK_BYTES,
                     inflate_threads=0)  # fmt: skip
        try:
            for rb in got:
                cols = {name: rb.column(col) for name, col in decoded.items()}
                cols["topic"], cols["partition"] = pa.repeat(topic, rb.num_rows), pa.repeat(partition, rb.num_rows)
                if "headers" in cols:  # Spark's Kafka source: null, not [], for a record without headers
                    h = cols["headers"]
                    cols["headers"] = pa.ListArray.from_arrays(h.offsets, h.values,
                                                               mask=pc.equal(pc.list_value_length(h), 0))
                # (_to_spark casts to Spark's types: ms -> us timestamps, with kafkatx's error past Spark's range)
                yield _to_spark(pa.RecordBatch.from_arrays([cols[n] for n in schema.names], names=schema.names),
                                schema)
        finally:
            got.close()


# ------------------------------------------------------------------------------------------ the source
class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafkatx")`` / ``spark.readStream.format("kafkatx")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> T.StructType:
        opts = _Options.parse(self.options)  # the options and the path are checked here, at load()
        if not os.path.isdir(opts.path):
            raise FileNotFoundError(f"no directory at {opts.path}")
        return opts.schema()

    def reader(self, schema):
        return _BatchReader(_Options.parse(self.options), schema)

    def streamReader(self, schema):
        return _StreamReader(_Options.parse(self.options, streaming=True), schema)


def _check_schema(opts: _Options, schema) -> None:
    want = opts.schema()
    if schema is not None and [(f.name, f.dataType) for f in schema] != [(f.name, f.dataType) for f in want]:
        raise ValueError(f"the kafkatx source's rows have the schema {want.simpleString()} with these options, "
                         f"not {schema.simpleString()}")  # fmt: skip


class _Reader:
    """What the batch and the stream reader share: the options, checked against the schema Spark gives, and
    ``read``, which runs on the executors (with a pickled copy of the reader made before planning)."""

    def __init__(self, opts: _Options, schema):
        _check_schema(opts, schema)
        self.opts = opts

    def read(self, partition):
        return _read(self.opts, partition)


class _BatchReader(_Reader, DataSourceReader):
    def partitions(self):
        opts = self.opts
        with _opened(opts) as found:
            ranges = {}
            for key, p in found.items():
                start = _start_offset(opts, key, p)
                end = _end_offset(opts, key, p)
                latest = _latest(opts, p)
                if end > latest:
                    if opts.fail_on_data_loss:
                        raise ValueError(f"endingOffsets {end} of {key[0]}-{key[1]} is past its latest offset "
                                         f"{latest} ({opts.isolation})")  # fmt: skip
                    end = latest
                if start > end:
                    raise ValueError(f"startingOffsets {start} of {key[0]}-{key[1]} is past its ending offset {end}")
                ranges[key] = (start, end)
            return _plan(opts, found, ranges)


class _StreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{topic: {partition: offset}}`` (the next offset to read), as Spark's Kafka source keeps."""

    def __init__(self, opts: _Options, schema):
        super().__init__(opts, schema)
        self._until = None  # Trigger.AvailableNow: the offsets that were there when the query started

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to what is there now, in micro-batches of ``maxOffsetsPerTrigger``."""
        self._until = self._offsets(self.latestOffset())

    @staticmethod
    def _doc(offsets: dict) -> dict:
        doc: dict = {}
        for (topic, partition), off in sorted(offsets.items()):
            doc.setdefault(topic, {})[str(partition)] = off
        return doc

    @staticmethod
    def _offsets(doc) -> dict:
        return {(topic, int(p)): int(off) for topic, parts in (doc or {}).items() for p, off in parts.items()}

    def initialOffset(self) -> dict:
        opts = self.opts
        with _opened(opts) as found:
            start = {k: _start_offset(opts, k, p) for k, p in found.items()}
        return self._doc(start)

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start=None, limit=None) -> dict:
        opts = self.opts
        begun = self._offsets(start)
        with _opened(opts) as found:
            latest = {}
            for key, p in found.items():
                # a partition that appeared since: from its log start offset (Spark: earliest)
                lo = begun.get(key, p.log_start_offset)
                latest[key] = max(_latest(opts, p), lo)
                if self._until is not None:  # (a partition that appeared since is left for a later query)
                    latest[key] = max(lo, min(latest[key], self._until.get(key, lo)))
                begun[key] = lo
        cap = getattr(limit, "max_rows", None)
        if cap is not None:
            lag = {k: latest[k] - begun[k] for k in latest}
            total = sum(lag.values())
            if total > cap:
                # Spark's Kafka source: each partition gets its share of the cap by how much it has to read
                # (rounded down, at least one offset for a partition with any; never past the cap in total)
                left = cap
                for key in sorted(lag, key=lambda k: (-lag[k], k)):
                    take = min(lag[key], max(1 if lag[key] else 0, int(cap * lag[key] / total)), left)
                    latest[key] = begun[key] + take
                    left -= take
        return self._doc(latest)

    def partitions(self, start: dict, end: dict):
        opts = self.opts
        begun, stop = self._offsets(start), self._offsets(end)
        with _opened(opts) as found:
            ranges = {}
            for key, hi in stop.items():
                p = found.get(key)
                if p is None:
                    raise ValueError(f"partition {key[0]}-{key[1]} is gone from {opts.path}")
                lo = begun.get(key, p.log_start_offset)
                ranges[key] = (_check_start(opts, key, p, lo), hi)
            return _plan(opts, found, ranges)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: every task opens its files itself
