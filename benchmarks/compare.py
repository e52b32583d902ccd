#!/usr/bin/env python3
"""kafkatx vs aiokafka (Cython) vs kafka-python on one workload, in one process.

    python benchmarks/compare.py                  # 1,000,000 records, median of 3 runs
    python benchmarks/compare.py --quick          # 100,000 records (smoke run)
    python benchmarks/compare.py --repeat 5 --json out.json --markdown
    python benchmarks/compare.py --rows decode_crc,crc32c --backend python

Every row is one operation run by each library on the same input; a cell is the median of ``--repeat``
timed runs (``time.perf_counter``; ``gc.collect()`` before each run and, as ``timeit`` does, the cyclic
garbage collector disabled while timing unless ``--gc`` is given; libraries are interleaved run by run).
Before timing, every implementation is run once and its result checked (record count and contents,
identical CRCs, encoded bytes), which also serves as warm-up.  By default the allocator's heap is warmed
first (``--heap``, see :func:`warm_heap`), so no run pays for page-faulting fresh memory.  Ratios are
throughput ratios: ``kafkatx ÷ aiokafka`` = aiokafka's seconds / kafkatx's seconds (> 1 = kafkatx faster).
See ``benchmarks/README.md`` for what each row does exactly.

Rows are registered with ``@row(...)``: a factory that takes the :class:`Context` and returns a
:class:`Row` (a name plus one zero-argument callable per library), or ``None`` when it does not apply.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import functools
import gc
import json
import os
import platform
import random as random_module
import resource
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable

# numpy's OpenBLAS starts one spinning worker per CPU when imported (pyarrow imports numpy); on a 2-CPU
# machine they take CPU time from the code under test, and none of it uses BLAS.  Same for every library.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _data

LIBS = ("kafkatx", "aiokafka", "kafka-python", "reference")


# ============================================================================== rows and registry
@dataclasses.dataclass
class Row:
    key: str
    name: str
    what: str
    records: int  # records processed per call (for records/s)
    nbytes: int  # bytes of log processed per call (for MB/s)
    impls: dict  # lib -> zero-argument callable
    check: Callable[[str, object], None] | None = None  # check(lib, result), untimed
    notes: dict = dataclasses.field(default_factory=dict)  # lib -> what exactly runs
    unit: str = "records"  # cells count "records" (or batches, entries: the name says) or "bytes" per second
    min_repeat: int = 0  # timed runs per cell at least this many (cheap rows whose runs vary a lot)
    summary: Callable[[dict], str] | None = None  # summary(results) -> a line under the table (targets, page faults)


ROW_FACTORIES: list = []  # (key, factory)


def row(key: str):
    """Register a row factory ``factory(ctx) -> Row | None`` under ``key`` (order = table order)."""

    def deco(factory):
        ROW_FACTORIES.append((key, factory))
        return factory

    return deco


class Context:
    """The workload (built lazily, cached) and the libraries under test."""

    def __init__(self, n: int):
        self.n = n
        self.kx = _data.import_kafkatx()

    def log(self, codec="none") -> bytes:
        return _data.build_log(codec, self.n)

    def txn_log(self, codec="none"):
        return _data.build_txn_log(codec, self.n)

    def expected(self):
        return _data.records(self.n)

    @functools.cached_property
    def arrow_table(self):
        """The workload's keys, values and timestamps as a ``pyarrow.Table`` (binary, binary, timestamp[ms, UTC]:
        the types ``decode_arrow`` produces), built once, before anything is timed."""
        import pyarrow as pa

        keys, values, ts = self.expected()
        return pa.table({
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "timestamp": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        })  # fmt: skip

    def tmpdir(self) -> str:
        """A temporary directory removed when the process exits."""
        d = tempfile.mkdtemp(prefix="kafkatx-bench-")
        atexit.register(shutil.rmtree, d, True)
        return d


# ============================================================================ library adapters
def aiokafka_evidence() -> dict:
    """Proof that aiokafka's record code is its Cython extension (``_crecords``), not the Python twin."""
    import aiokafka
    import aiokafka.util
    from aiokafka.record import default_records, memory_records, util

    mods = {
        "DefaultRecordBatch": default_records.DefaultRecordBatch.__module__,
        "DefaultRecordBatchBuilder": default_records.DefaultRecordBatchBuilder.__module__,
        "MemoryRecords": memory_records.MemoryRecords.__module__,
        "calc_crc32c": f"{util.calc_crc32c.__module__}.{util.calc_crc32c.__name__}",
    }
    so = sys.modules[default_records.DefaultRecordBatch.__module__].__file__
    ev = {
        "version": aiokafka.__version__,
        "AIOKAFKA_NO_EXTENSIONS": aiokafka.util.NO_EXTENSIONS,
        "modules": mods,
        "default_records_file": so,
    }
    bad = [k for k, m in mods.items() if "_crecords" not in m]
    if bad or aiokafka.util.NO_EXTENSIONS or not so.endswith((".so", ".pyd")):
        raise SystemExit(f"aiokafka is NOT using its Cython extension: {ev}")
    return ev


def kafka_python_evidence() -> dict:
    import kafka
    from kafka.record import default_records, util

    crc_impl = util.calc_crc32c.__defaults__[0]
    return {
        "version": kafka.__version__,
        "default_records_file": default_records.__file__,
        "calc_crc32c_uses": f"{crc_impl.__module__}.{crc_impl.__name__}",
    }


def aiokafka_decode(log, verify_crc=True) -> list:
    """What aiokafka's consumer (``PartitionRecords._unpack_records``) does, minus ConsumerRecord wrapping."""
    from aiokafka.errors import CorruptRecordException
    from aiokafka.record.memory_records import MemoryRecords

    out = []
    records = MemoryRecords(log)
    while records.has_next():
        batch = records.next_batch()
        if verify_crc and not batch.validate_crc():
            raise CorruptRecordException("Invalid CRC")
        if batch.is_control_batch:
            continue
        out.extend(batch)  # DefaultRecord objects: offset, timestamp, key, value, headers already materialised
    return out


def aiokafka_read(log, aborted, read_committed: bool) -> list:
    """aiokafka's fetcher logic for isolation levels (``PartitionRecords._unpack_records``), same objects."""
    from aiokafka.errors import CorruptRecordException
    from aiokafka.record.control_record import ABORT_MARKER, ControlRecord
    from aiokafka.record.memory_records import MemoryRecords

    pending = sorted(aborted, key=lambda x: x[1])
    aborted_producers = set()
    out = []
    records = MemoryRecords(log)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise CorruptRecordException("Invalid CRC")
        if read_committed and batch.producer_id is not None:
            while pending and pending[0][1] <= batch.base_offset:
                aborted_producers.add(pending.pop(0)[0])
            if batch.is_control_batch and ControlRecord.parse(next(batch).key) == ABORT_MARKER:
                aborted_producers.discard(batch.producer_id)
            if batch.is_transactional and batch.producer_id in aborted_producers:
                continue
        if batch.is_control_batch:
            continue
        out.extend(batch)
    return out


def kafka_python_decode(log, verify_crc=True) -> list:
    """What kafka-python's ``Fetcher`` does per batch (v2), minus ConsumerRecord wrapping."""
    from kafka.errors import CorruptRecordError
    from kafka.record import MemoryRecords

    out = []
    records = MemoryRecords(log)
    batch = records.next_batch()
    while batch is not None:
        if verify_crc and not batch.validate_crc():
            raise CorruptRecordError("failed crc check")
        if not batch.is_control_batch:
            out.extend(batch)
        batch = records.next_batch()
    return out


def kafka_python_read(log, aborted, read_committed: bool) -> list:
    """kafka-python's ``Fetcher._unpack_records`` isolation logic, same record objects."""
    import collections

    from kafka.errors import CorruptRecordError
    from kafka.record import MemoryRecords

    pending = collections.deque(sorted(aborted, key=lambda x: x[1]))
    aborted_producers = set()
    out = []
    records = MemoryRecords(log)
    batch = records.next_batch()
    while batch is not None:
        if not batch.validate_crc():
            raise CorruptRecordError("failed crc check")
        if read_committed and batch.has_producer_id():
            while pending and pending[0][1] <= batch.last_offset:
                aborted_producers.add(pending.popleft()[0])
            if batch.is_control_batch:
                if next(batch).abort:
                    aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_producers:
                batch = records.next_batch()
                continue
        if not batch.is_control_batch:
            out.extend(batch)
        batch = records.next_batch()
    return out


def check_records(ctx: Context, expect_n: int | None = None, markers: bool = False):
    """A check that a decode result holds the workload's records (count + spot checks of contents).

    ``markers``: the log has a control record after every batch, so record ``j`` is at offset ``j + j // 1000``.
    """
    keys, values, ts = ctx.expected()
    n = ctx.n if expect_n is None else expect_n

    def check(lib, out):
        assert len(out) == n, f"{lib}: {len(out)} records, expected {n}"
        for i in (0, 1, n // 2, n - 1):
            r = out[i]
            j = r.offset - r.offset // (_data.BATCH_RECORDS + 1) if markers else r.offset
            got = (r.key, r.value, r.timestamp, list(r.headers))
            want = (keys[j], values[j], ts[j], [])
            assert got == want, f"{lib}: record {i} is {got!r}, expected {want!r}"

    return check


# ================================================================================== the rows
def _decode_row(ctx: Context, key, name, codec, verify, **kwargs):
    log = ctx.log(codec)
    kx = ctx.kx
    crc = "with" if verify else "without"
    if kwargs:
        try:
            kx.decode_records(log[:0], **kwargs)
        except TypeError:
            return None  # this kafkatx has no such option
    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return Row(
        key=key,
        name=name,
        what=f"{codec} log -> list of record objects, {crc} CRC-32C check of every batch",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.decode_records(log, verify_crc=verify, **kwargs),
            "aiokafka": lambda: aiokafka_decode(log, verify),
            "kafka-python": lambda: kafka_python_decode(log, verify),
        },
        check=check_records(ctx),
        notes={
            "kafkatx": f"kafkatx.decode_records(log, verify_crc={verify}{args})",
            "aiokafka": "MemoryRecords(log); per batch: " + ("validate_crc(), " if verify else "")
            + "skip control batches, out.extend(DefaultRecordBatch)",
            "kafka-python": "MemoryRecords(log); per batch: " + ("validate_crc(), " if verify else "")
            + "out.extend(DefaultRecordBatch)",
        },
    )


@row("decode_crc")
def _(ctx):
    return _decode_row(ctx, "decode_crc", "decode to objects + CRC check", "none", True)


@row("decode")
def _(ctx):
    return _decode_row(ctx, "decode", "decode to objects (no CRC check)", "none", False)


@row("decode_crc_lz4")
def _(ctx):
    return _decode_row(ctx, "decode_crc_lz4", "decode + CRC, lz4", "lz4", True)


@row("decode_crc_zstd")
def _(ctx):
    return _decode_row(ctx, "decode_crc_zstd", "decode + CRC, zstd", "zstd", True)


# The same compressed logs inflating every payload on the calling thread (inflate_threads=0); the rows above
# use the default (None: on two CPUs or more, one C thread inflates a big call's payloads ahead of the decoder).
@row("decode_crc_lz4_inline")
def _(ctx):
    return _decode_row(ctx, "decode_crc_lz4_inline", "decode + CRC, lz4, inline (inflate_threads=0)", "lz4", True,
                       inflate_threads=0)


@row("decode_crc_zstd_inline")
def _(ctx):
    return _decode_row(ctx, "decode_crc_zstd_inline", "decode + CRC, zstd, inline (inflate_threads=0)", "zstd",
                       True, inflate_threads=0)


def check_peer_encoding(kx, lib, parts, codec, n):
    """A peer's encode result (one batch per 1000 records, base offset 0) holds the workload's records."""
    expected = _data.build_log(codec, n)
    assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
    # peers write base offset 0 (the broker assigns offsets): compare from byte 8 on (none), else records
    built = _data.with_base_offsets(parts, n)
    if codec == "none" and lib == "aiokafka":
        assert built == expected, f"{lib}: bytes differ from kafkatx's"
    else:
        got = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(built)]
        want = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(expected)]
        assert got == want, f"{lib}: encoded records differ"


def _encode_impls(kx, codec, n, *args, zstd_frames=1, **kw):
    """The three builders of an encode row on one workload (``args``/``kw``: the per-batch record count,
    ``clock``, ``headers`` of _data's encode functions; ``zstd_frames``: kafkatx's only)."""
    return {
        "kafkatx": lambda: _data.encode_kafkatx(kx, codec, n, *args, zstd_frames=zstd_frames, **kw),
        "aiokafka": lambda: _data.encode_aiokafka(codec, n, *args, **kw),
        "kafka-python": lambda: _data.encode_kafka_python(codec, n, *args, **kw),
    }


def _encode_row(ctx: Context, key, name, codec, zstd_frames=1):
    kx = ctx.kx
    n = ctx.n
    _data.records(n)  # inputs exist before timing
    expected = _data.build_log(codec, n)

    def check(lib, parts):
        if lib == "kafkatx" and zstd_frames == 1:
            assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
            assert b"".join(parts) == expected, "kafkatx: encoded log differs from the cached workload log"
            return
        if lib == "kafkatx":  # two frames a batch: the same records as the workload log
            from kafkatx import compression as _compression

            assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
            assert all(len(list(_compression._zstd_frames(memoryview(p)[_data.BATCH_HEADER_BYTES:]))) == 2
                       for p in parts), "kafkatx: not two zstd frames a batch"  # fmt: skip
            got = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(b"".join(parts))]
            assert got == [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(expected)]
            return
        check_peer_encoding(kx, lib, parts, codec, n)

    return Row(
        key=key,
        name=name,
        what=f"{n // _data.BATCH_RECORDS} transactional {codec} batches of 1000 records (explicit timestamps), "
        "append + build",
        records=n,
        nbytes=len(expected),
        impls=_encode_impls(kx, codec, n, zstd_frames=zstd_frames),
        check=check,
        notes={
            "kafkatx": "BatchBuilder(base_offset, producer_id, producer_epoch, base_sequence, transactional=True,"
            f" compression{', zstd_frames=2' if zstd_frames == 2 else ''}).append(value, key, timestamp=ts) x1000;"
            " build()",
            "aiokafka": "DefaultRecordBatchBuilder(2, codec, 1, pid, epoch, seq, 1<<30)"
            ".append(offset_delta, ts, key, value, []) x1000; build()",
            "kafka-python": "DefaultRecordBatchBuilder(2, codec, 1, pid, epoch, seq, 1<<30)"
            ".append(offset_delta, ts, key, value, []) x1000; build()",
        },
    )


def _inflate_row(ctx: Context, codec: str):
    """Inflation alone: every library's decompressor over the log's 1,000 payloads (each library inflates
    before it decodes, so this part of its decode cannot get faster by decoding faster)."""
    import aiokafka.codec as aio_codec
    import kafka.codec as kp_codec

    from kafkatx import compression

    kx = ctx.kx
    log = ctx.log(codec)
    cid = compression.codec_id(codec)
    scan = kx.scan_batches(log)
    mv = memoryview(log)
    payloads = [mv[p + _data.BATCH_HEADER_BYTES : p + n] for p, n in zip(scan["position"], scan["size_in_bytes"])]
    want = _data.record_bytes(ctx.n)
    aio_fn = getattr(aio_codec, f"{codec}_decode")
    kp_fn = getattr(kp_codec, f"{codec}_decode")

    def kafkatx_inflate():  # the decoders' own path: into the thread's reused buffer
        return sum(len(compression.decompress_view(cid, p)) for p in payloads)

    def check(lib, total):
        assert total == want, f"{lib}: {total} bytes inflated, expected {want}"

    return Row(
        key=f"inflate_{codec}",
        name=f"{codec} inflation alone (part of decode)",
        what=f"decompress the {len(payloads)} payloads of the {codec} log, nothing decoded: the part of every "
        "library's decode that faster decoding cannot shorten",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": kafkatx_inflate,
            "aiokafka": lambda: sum(len(aio_fn(p)) for p in payloads),
            "kafka-python": lambda: sum(len(kp_fn(bytes(p))) for p in payloads),
        },
        check=check,
        notes={
            "kafkatx": f"kafkatx.compression.decompress_view({cid}, payload) per batch (cramjam decompress_into a "
            "reused buffer, as its decoders do)",
            "aiokafka": f"aiokafka.codec.{codec}_decode(payload) per batch (cramjam, then bytes())",
            "kafka-python": f"kafka.codec.{codec}_decode(payload) per batch",
        },
    )


@row("inflate_lz4")
def _(ctx):
    return _inflate_row(ctx, "lz4")


@row("inflate_zstd")
def _(ctx):
    return _inflate_row(ctx, "zstd")


@row("encode")
def _(ctx):
    return _encode_row(ctx, "encode", "encode (BatchBuilder)", "none")


@row("encode_clock")
def _(ctx):
    """As the encode row with no timestamps given, as a producer usually appends: each record takes the
    wall clock at its append (Kafka's producer: System.currentTimeMillis())."""
    kx = ctx.kx
    n = ctx.n
    keys, values, _ts = _data.records(n)
    want = [(i, keys[i], values[i]) for i in range(n)]
    since = time.time_ns() // 1_000_000

    def check(lib, parts):
        assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
        log = b"".join(parts) if lib == "kafkatx" else _data.with_base_offsets(parts, n)
        got = kx.decode_records(log)
        assert [(r.offset, r.key, r.value) for r in got] == want, f"{lib}: encoded records differ"
        stamps = [r.timestamp for r in got]
        assert since <= min(stamps) and max(stamps) <= time.time_ns() // 1_000_000, f"{lib}: not the clock's times"

    return Row(
        key="encode_clock",
        name="encode, timestamps from the clock",
        what=f"{n // _data.BATCH_RECORDS} transactional batches of 1000 records, no timestamp given: append + build",
        records=n,
        nbytes=len(_data.build_log("none", n)),
        impls=_encode_impls(kx, "none", n, clock=True),
        check=check,
        notes={
            "kafkatx": "as the encode row, .append(value, key)",
            "aiokafka": "as the encode row, .append(offset_delta, None, key, value, [])",
            "kafka-python": "as the encode row, .append(offset_delta, None, key, value, [])",
        },
    )


@row("encode_headers")
def _(ctx):
    """As the encode row with a W3C trace-context header on every record (``traceparent``, 55 bytes), as a
    traced producer sends them."""
    kx = ctx.kx
    n = ctx.n
    keys, values, ts = _data.records(n)
    trace = [[("traceparent", b"00-%032x-%016x-01" % (i * 7919 + 1, i + 1))] for i in range(n)]
    want = [(i, ts[i], keys[i], values[i], tuple(trace[i])) for i in range(n)]

    def check(lib, parts):
        assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
        log = b"".join(parts) if lib == "kafkatx" else _data.with_base_offsets(parts, n)
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kx.decode_records(log)]
        assert got == want, f"{lib}: encoded records differ"

    return Row(
        key="encode_headers",
        name="encode, a trace header per record",
        what=f"{n // _data.BATCH_RECORDS} transactional batches of 1000 records, each with a 55-byte traceparent "
        "header: append + build",
        records=n,
        nbytes=sum(map(len, _data.encode_kafkatx(kx, "none", n, headers=trace))),
        impls=_encode_impls(kx, "none", n, headers=trace),
        check=check,
        notes={
            "kafkatx": "as the encode row, .append(value, key, timestamp=ts, headers=[(name, value)])",
            "aiokafka": "as the encode row, .append(offset_delta, ts, key, value, [(name, value)])",
            "kafka-python": "as the encode row, .append(offset_delta, ts, key, value, [(name, value)])",
        },
    )


SMALL_BATCH_RECORDS = 1  # a producer with linger.ms=0 sends each record in a batch of its own


@row("encode_small")
def _(ctx):
    """Per-batch cost: the first tenth of the workload, one record per batch, as a producer that does not
    linger sends it (building a batch then costs more than appending its record)."""
    kx = ctx.kx
    n = ctx.n // 10
    per = SMALL_BATCH_RECORDS
    keys, values, ts = _data.records(ctx.n)
    want = [(i, ts[i], keys[i], values[i]) for i in range(n)]
    log_bytes = sum(map(len, _data.encode_kafkatx(kx, "none", n, per)))

    def check(lib, parts):
        assert len(parts) == n // per, f"{lib}: {len(parts)} batches"
        log = b"".join(parts) if lib == "kafkatx" else _data.with_base_offsets(parts, n, per)
        got = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(log)]
        assert got == want, f"{lib}: encoded records differ"

    return Row(
        key="encode_small",
        name=f"encode, {per}-record batches",
        what=f"{n // per:,} transactional batches of {per} record (the workload's first {n:,} records, explicit "
        "timestamps): builder + append + build per batch",
        records=n,
        nbytes=log_bytes,
        impls=_encode_impls(kx, "none", n, per),
        check=check,
        notes={lib: "as the encode row, a new builder per record" for lib in ("kafkatx", "aiokafka", "kafka-python")},
    )


@row("encode_lz4")
def _(ctx):
    return _encode_row(ctx, "encode_lz4", "encode, lz4", "lz4")


@row("encode_zstd")
def _(ctx):
    return _encode_row(ctx, "encode_zstd", "encode, zstd", "zstd")


@row("encode_zstd_frames2")
def _(ctx):
    """zstd_frames=2: each payload as two frames, the second compressed on a worker thread."""
    return _encode_row(ctx, "encode_zstd_frames2", "encode, zstd, two frames (zstd_frames=2)", "zstd", zstd_frames=2)


@row("crc32c")
def _(ctx):
    import crc32c as crc32c_pkg
    from aiokafka.record.util import calc_crc32c as aio_crc
    from kafka.record.util import calc_crc32c as kp_crc

    log = ctx.log("none")
    kx = ctx.kx
    want = crc32c_pkg.crc32c(log)

    def check(lib, value):
        assert value == want, f"{lib}: CRC {value:#x}, expected {want:#x}"

    return Row(
        key="crc32c",
        name="CRC-32C of the whole log",
        what=f"CRC-32C over all {len(log):,} bytes of the none log",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.crc32c(log),
            "aiokafka": lambda: aio_crc(log),
            "kafka-python": lambda: kp_crc(log),
            "reference": lambda: crc32c_pkg.crc32c(log),
        },
        check=check,
        notes={
            "kafkatx": "kafkatx.crc32c(log)",
            "aiokafka": f"aiokafka.record.util.calc_crc32c = {aio_crc.__module__}.{aio_crc.__name__}",
            "kafka-python": "kafka.record.util.calc_crc32c (uses "
            f"{kafka_python_evidence()['calc_crc32c_uses']})",
            "reference": "crc32c.crc32c(log) (the crc32c package, hardware CRC32C)",
        },
    )


@row("memcpy")
def _(ctx):
    log = ctx.log("none")

    def check(lib, value):
        assert len(value) == len(log)

    return Row(
        key="memcpy",
        name="lower bound: one memcpy of the log",
        what="bytearray(log)",
        records=ctx.n,
        nbytes=len(log),
        impls={"reference": lambda: bytearray(log)},
        check=check,
        notes={"reference": "bytearray(log)"},
    )


@row("slices")
def _(ctx):
    log = ctx.log("none")
    slices = _data.key_value_slices(log)
    keys, values, _ = ctx.expected()

    def check(lib, value):
        assert len(value) == 2 * ctx.n and value[0] == keys[0] and value[-1] == values[-1]

    return Row(
        key="slices",
        name="lower bound: slice every key and value",
        what="a new bytes object for every key and value (2 per record)",
        records=ctx.n,
        nbytes=len(log),
        impls={"reference": lambda: list(map(log.__getitem__, slices))},
        check=check,
        notes={"reference": "list(map(log.__getitem__, slices)) with 2n precomputed slice objects"},
    )


def _isolation_row(ctx, key, name, committed: bool):
    log, aborted, n_committed = ctx.txn_log("none")
    kx = ctx.kx
    iso = "read_committed" if committed else "read_uncommitted"
    n_visible = n_committed if committed else ctx.n
    return Row(
        key=key,
        name=name,
        what=f"none log with a COMMIT/ABORT marker after every batch, 10% of transactions aborted; {iso}",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.decode_records(log, isolation=iso, aborted_transactions=aborted),
            "aiokafka": lambda: aiokafka_read(log, aborted, committed),
            "kafka-python": lambda: kafka_python_read(log, aborted, committed),
        },
        check=check_records(ctx, expect_n=n_visible, markers=True),
        notes={
            "kafkatx": f"kafkatx.decode_records(log, isolation={iso!r}, aborted_transactions=...)",
            "aiokafka": "aiokafka's PartitionRecords._unpack_records logic, records appended as DefaultRecord",
            "kafka-python": "kafka-python's Fetcher._unpack_records logic, records appended as DefaultRecord",
        },
    )


@row("read_uncommitted")
def _(ctx):
    return _isolation_row(ctx, "read_uncommitted", "transactions: read_uncommitted", False)


@row("read_committed")
def _(ctx):
    return _isolation_row(ctx, "read_committed", "transactions: read_committed, 10% aborted", True)


def _arrow_row(ctx, key, name, codec="none", **kwargs):
    # Columns instead of objects. Only kafkatx decodes into columns; the rows appear when kafkatx.decode_arrow
    # exists (and accepts ``kwargs``); the peers are shown with their object decoders, for scale.
    kx = ctx.kx
    if not hasattr(kx, "decode_arrow"):
        return None
    log = ctx.log(codec)
    try:
        kx.decode_arrow(log, verify_crc=True, **kwargs)
    except TypeError:
        return None  # this kafkatx has no such option
    keys, values, ts = ctx.expected()
    object_check = check_records(ctx)

    def check(lib, out):
        if lib != "kafkatx":
            object_check(lib, out)
            return
        assert out.num_rows == ctx.n, f"{lib}: {out.num_rows} rows"
        for i in (0, ctx.n // 2, ctx.n - 1):
            col = out.column
            got = (col("offset")[i].as_py(), col("timestamp")[i].value, col("key")[i].as_py(), col("value")[i].as_py())
            assert got == (i, ts[i], keys[i], values[i]), f"{lib}: row {i} is {got!r}"

    args = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    return Row(
        key=key,
        name=name,
        what=f"{codec} log -> pyarrow.RecordBatch (kafkatx) vs objects (peers)",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.decode_arrow(log, verify_crc=True, **kwargs),
            "aiokafka": lambda: aiokafka_decode(log, True),
            "kafka-python": lambda: kafka_python_decode(log, True),
        },
        check=check,
        notes={
            "kafkatx": f"kafkatx.decode_arrow(log, verify_crc=True{args}) -> pyarrow.RecordBatch",
            "aiokafka": "the decode_crc row's object decoder (no peer decodes into columns)",
            "kafka-python": "the decode_crc row's object decoder (no peer decodes into columns)",
        },
    )


@row("decode_arrow")
def _(ctx):
    return _arrow_row(ctx, "decode_arrow", "decode to Arrow columns + CRC")


def _compressed_arrow_factory(key: str, codec: str, threads: int | None):
    name = f"decode to Arrow columns + CRC, {codec}"
    if threads is not None:
        name += ", inline (inflate_threads=0)" if threads == 0 else f", inflate_threads={threads}"
    kwargs = {} if threads is None else {"inflate_threads": threads}
    return lambda ctx: _arrow_row(ctx, key, name, codec=codec, **kwargs)


# decode_arrow_<codec> with the default inflate_threads (None), then inline (_inline) and with 2 (_ahead2)
for _suffix, _threads in (("", None), ("_inline", 0), ("_ahead2", 2)):
    for _codec in ("lz4", "zstd"):
        _key = f"decode_arrow_{_codec}{_suffix}"
        row(_key)(_compressed_arrow_factory(_key, _codec, _threads))


@row("decode_arrow_view")
def _(ctx):
    return _arrow_row(ctx, "decode_arrow_view", "decode to Arrow columns + CRC, binary_view", binary_view=True)


# ================================================================= Arrow encode, threads, floor, indexes, state
ENCODE_SLICE_ROWS = 100_000  # rows per encode_arrow call in the streaming variant


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def _median_s(res, lib):
    return res[lib]["median_s"]


@functools.lru_cache(maxsize=None)
def _single_producer_log(n: int) -> bytes:
    """The workload's records as BatchBuilder writes them for ONE transactional producer (id 4000, epoch 3,
    sequences from 0): the bytes ``encode_arrow`` must produce for the workload table."""
    kx = _data.import_kafkatx()
    keys, values, ts = _data.records(n)
    out = []
    for start in range(0, n, _data.BATCH_RECORDS):
        bb = kx.BatchBuilder(base_offset=start, producer_id=_data.PRODUCER_ID0, producer_epoch=_data.PRODUCER_EPOCH,
                             base_sequence=start, transactional=True)  # fmt: skip
        for i in range(start, start + _data.BATCH_RECORDS):
            bb.append(values[i], keys[i], timestamp=ts[i])
        out.append(bb.build())
    return b"".join(out)


def _encode_arrow_row(ctx: Context, key: str, sliced: bool):
    kx = ctx.kx
    if not hasattr(kx, "encode_arrow"):
        return None
    n = ctx.n
    table = ctx.arrow_table
    expected = _single_producer_log(n)
    producer = dict(producer_id=_data.PRODUCER_ID0, producer_epoch=_data.PRODUCER_EPOCH, transactional=True)
    step = min(ENCODE_SLICE_ROWS, n)
    state = {"keep": True}  # the first (checked) run of the sliced variant keeps its slices

    def whole():
        return kx.encode_arrow(table, base_sequence=0, **producer)

    def slices():
        # what a streaming writer does: encode a slice, write it out, drop it, encode the next one
        kept = [] if state["keep"] else None
        total = 0
        for start in range(0, n, step):
            part = kx.encode_arrow(table.slice(start, step), base_offset=start, base_sequence=start, **producer)
            total += len(part)
            if kept is not None:
                kept.append(part)
            del part
        return kept if kept is not None else total

    def check(lib, out):
        if lib != "kafkatx":
            check_peer_encoding(kx, lib, out, "none", n)
            return
        if sliced:
            state["keep"] = False
            assert len(out) == -(-n // step), f"{lib}: {len(out)} slices"
            out = b"".join(out)
        assert out == expected, "kafkatx: encode_arrow's bytes differ from BatchBuilder's for the same records"
        rb = kx.decode_arrow(out, columns=["offset", "key", "value", "timestamp"])  # CRCs checked too
        assert rb.num_rows == n
        for col in ("key", "value", "timestamp"):
            assert rb.column(col).equals(table.column(col).combine_chunks()), f"{lib}: column {col} differs"

    what = (f"the workload table ({n:,} rows: key binary, value binary, timestamp[ms, UTC], built before timing) "
            f"-> {n // _data.BATCH_RECORDS} transactional none batches of 1000 records")  # fmt: skip
    if sliced:
        what += f", encoded in {step:,}-row slices (each dropped before the next, as a streaming writer does)"
    call = (f"for each {step:,}-row slice: kafkatx.encode_arrow(table.slice(start, {step}), base_offset=start, "
            "base_sequence=start, producer_id=4000, producer_epoch=3, transactional=True)" if sliced else
            "kafkatx.encode_arrow(table, producer_id=4000, producer_epoch=3, base_sequence=0, transactional=True): "
            "one bytes object of the whole log")  # fmt: skip
    peer = "DefaultRecordBatchBuilder(2, 0, 1, pid, epoch, seq, 1<<30).append(offset_delta, ts, key, value, []) " \
           "x1000; build() (the encode row's work: no peer encodes from columns)"  # fmt: skip

    def summary(res):
        faults = res["kafkatx"]["minor_faults"]
        t = _median_s(res, "kafkatx")
        if sliced:
            return (f"encode_arrow in {step:,}-row slices: {t * 1e3:.0f} ms, {faults:,} minor page faults per run "
                    f"(a {len(expected) * step / n / 1e6:.0f} MB slice at a time, dropped before the next)")  # fmt: skip
        return (f"encode_arrow of the whole table: {t * 1e3:.0f} ms, {faults:,} minor page faults per run: the "
                f"{len(expected) / 1e6:.0f} MB output is one fresh allocation, faulted in on every call (huge pages "
                "asked for)")  # fmt: skip

    return Row(
        key=key,
        name="encode from Arrow, 100k-row slices" if sliced else "encode from Arrow (whole table)",
        what=what,
        records=n,
        nbytes=len(expected),
        impls={
            "kafkatx": slices if sliced else whole,
            "aiokafka": lambda: _data.encode_aiokafka("none", n),
            "kafka-python": lambda: _data.encode_kafka_python("none", n),
        },
        check=check,
        notes={"kafkatx": call, "aiokafka": peer, "kafka-python": peer},
        summary=summary,
    )


@row("encode_arrow")
def _(ctx):
    return _encode_arrow_row(ctx, "encode_arrow", sliced=False)


@row("encode_arrow_slices")
def _(ctx):
    return _encode_arrow_row(ctx, "encode_arrow_slices", sliced=True)


@row("decode_arrow_threads")
def _(ctx):
    kx = ctx.kx
    if not hasattr(kx, "decode_arrow"):
        return None
    from kafkatx.arrow import decode_arrow_parallel

    log = ctx.log("none")
    positions = kx.scan_batches(log)["position"]
    mid = positions[len(positions) // 2]
    halves = [log[:mid], log[mid:]]  # two separate logs (copies), split at a batch boundary
    first_half = (len(positions) // 2) * _data.BATCH_RECORDS
    keys, values, _ts = ctx.expected()

    def check(lib, out):
        assert [rb.num_rows for rb in out] == [first_half, ctx.n - first_half], f"{lib}: {[len(b) for b in out]}"
        for rb, start in zip(out, (0, first_half)):
            for i in (0, rb.num_rows - 1):
                got = (rb.column("offset")[i].as_py(), rb.column("key")[i].as_py(), rb.column("value")[i].as_py())
                assert got == (start + i, keys[start + i], values[start + i]), f"{lib}: row {i} is {got!r}"

    def cpu_split(runs: int = 5) -> str:
        """The two decodes on two threads again, with each thread's CPU time beside the wall time: CPU time
        near the wall time means both ran at once but slower (memory or cache contention); CPU time near
        half of it means they took turns (no second CPU to be had)."""
        import threading

        walls, cpus = [], []
        for _ in range(runs):
            spent = [0.0, 0.0]
            barrier = threading.Barrier(2)

            def one(i, barrier=barrier, spent=spent):
                barrier.wait()
                c0 = time.thread_time()
                kx.decode_arrow(halves[i])
                spent[i] = time.thread_time() - c0

            helper = threading.Thread(target=one, args=(1,))
            t0 = time.perf_counter()
            helper.start()
            one(0)
            helper.join()
            walls.append(time.perf_counter() - t0)
            cpus.append(max(spent))
        return (f"; traced again, {runs} runs: wall {statistics.median(walls) * 1e3:.1f} ms, CPU time of the busier "
                f"thread {statistics.median(cpus) * 1e3:.1f} ms (median)")  # fmt: skip

    def summary(res):
        kx_runs, ref_runs = res["kafkatx"]["runs_s"], res["reference"]["runs_s"]
        per_run = sorted(r / k for k, r in zip(kx_runs, ref_runs))
        speedup = _median_s(res, "reference") / _median_s(res, "kafkatx")
        return (f"decode_arrow on 2 threads vs 1: {speedup:.2f}x (target >= 1.6x): {_met(speedup >= 1.6)}; "
                f"run by run {per_run[0]:.2f}x to {per_run[-1]:.2f}x over {len(per_run)} runs"
                + cpu_split())  # fmt: skip

    call = "kafkatx.arrow.decode_arrow_parallel([half1, half2], max_workers={}) (decode_arrow(verify_crc=True) each)"
    return Row(
        key="decode_arrow_threads",
        name="decode to Arrow, 2 logs on 2 threads (ref: 1 thread)",
        what=f"the none log split at a batch boundary into two separate logs of {len(halves[0]) / 1e6:.0f} MB, "
        "decoded to Arrow (+ CRC) on two threads; reference: the same two decodes on one thread",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: decode_arrow_parallel(halves, max_workers=2),
            "reference": lambda: decode_arrow_parallel(halves, max_workers=1),
        },
        check=check,
        notes={"kafkatx": call.format(2), "reference": call.format(1) + ": a plain loop, no pool"},
        min_repeat=9,
        summary=summary,
    )


@row("floor")
def _(ctx):
    kx = ctx.kx
    if not hasattr(kx, "decode_arrow"):
        return None
    log = ctx.log("none")
    dst = bytearray(len(log))
    view = memoryview(dst)
    view[:] = log  # fault the destination in once: the floor is the copy, not the page faults
    want_crc = kx.crc32c(log)

    def floor():
        view[:] = log
        return kx.crc32c(log)

    def check(lib, out):
        if lib == "reference":
            assert out == want_crc and dst == log
        else:
            assert out.num_rows == ctx.n, f"{lib}: {out.num_rows} rows"

    def summary(res):
        x = _median_s(res, "kafkatx") / _median_s(res, "reference")
        return f"decode_arrow takes {x:.2f}x one memcpy + CRC-32C of the log (target <= 4x): {_met(x <= 4)}"

    return Row(
        key="floor",
        name="floor: memcpy + CRC-32C (ref) vs decode_arrow",
        what="decode_arrow(log, verify_crc=True) next to its floor: one memcpy of the none log into a buffer "
        "faulted in beforehand, plus kafkatx.crc32c over the log",
        records=ctx.n,
        nbytes=len(log),
        impls={"kafkatx": lambda: kx.decode_arrow(log, verify_crc=True), "reference": floor},
        check=check,
        notes={
            "kafkatx": "kafkatx.decode_arrow(log, verify_crc=True) -> pyarrow.RecordBatch",
            "reference": "memoryview(dst)[:] = log (dst pre-faulted) + kafkatx.crc32c(log)",
        },
        min_repeat=9,
        summary=summary,
    )


@row("txnindex_1m")
def _(ctx):
    from kafkatx import txnindex as ti

    n = ctx.n  # entries
    # aborted transaction i: producer 1000 + (7919 i mod 1000), offsets [10 i, 10 i + 7] (marker at 10 i + 7), LSO at
    # the marker = 10 i + 8; written with encode_txnindex before timing
    path = os.path.join(ctx.tmpdir(), "00000000000000000000.txnindex")
    with open(path, "wb") as fh:
        fh.write(ti.encode_txnindex((1000 + (7919 * i) % 1000, 10 * i, 10 * i + 7, 10 * i + 8) for i in range(n)))
    size = os.path.getsize(path)
    fetch = 10 * (n // 2)  # a fetch in the middle of the segment, 10,000 offsets long
    upper = fetch + 10_000
    hits = list(range(n // 2, min(n, n // 2 + 1000)))  # the entries overlapping [fetch, upper)

    def arrays():
        cols = ti.read_txnindex_arrays(path)
        idx, complete = ti.collect_aborted_arrays(cols, fetch, upper)
        return cols, idx, complete

    def objects():
        entries = ti.read_txnindex(path)
        got, complete = ti.collect_aborted(entries, fetch, upper)
        return entries, got, complete

    def check(lib, out):
        table, got, complete = out
        assert complete, f"{lib}: query not complete"
        if lib == "kafkatx":
            assert all(len(col) == n for col in table.values()), f"{lib}: {len(table['producer_id'])} entries"
            assert got.tolist() == hits, f"{lib}: collected {len(got)} entries"
            assert table["first_offset"][got].tolist() == [10 * i for i in hits]
            assert table["producer_id"][hits[0]] == 1000 + (7919 * hits[0]) % 1000
        else:
            assert len(table) == n, f"{lib}: {len(table)} entries"
            assert [e.first_offset for e in got] == [10 * i for i in hits], f"{lib}: collected {len(got)} entries"

    def summary(res):
        t = _median_s(res, "kafkatx")
        return (f"read {n:,}-entry .txnindex as arrays + one collect_aborted_arrays query: {t * 1e3:.1f} ms "
                f"(target < 0.1 s): {_met(t < 0.1)}")  # fmt: skip

    return Row(
        key="txnindex_1m",
        name=f"read a {n // 1000:,}k-entry .txnindex + 1 query (entries/s)",
        what=f"read_txnindex_arrays of a {size / 1e6:.0f} MB .txnindex file ({n:,} entries, written before timing, "
        f"in the page cache) + collect_aborted_arrays for a fetch of [{fetch}, {upper}) ({len(hits)} hits)",
        records=n,
        nbytes=size,
        impls={"kafkatx": arrays, "reference": objects},
        check=check,
        notes={
            "kafkatx": "kafkatx.txnindex.read_txnindex_arrays(path) + collect_aborted_arrays(cols, fetch, upper)",
            "reference": "kafkatx's object path: read_txnindex(path) (one AbortedTxn per entry) + "
            "collect_aborted(entries, fetch, upper); no peer reads .txnindex files",
        },
        summary=summary,
    )


PRODUCERS = 1000
BATCH_SIZE_PS = 10  # records per batch in the producer-state workload
DUPLICATE_RATE = 0.01


@functools.lru_cache(maxsize=None)
def producer_batches(n: int):
    """``n`` data batch headers of ``PRODUCERS`` idempotent producers (epoch 0, 10 records a batch), in a random
    interleaving, each producer's sequences in order; ``DUPLICATE_RATE`` of the rows re-send one of the
    producer's last five batches (a retry).  Returns ``(rows, is_duplicate, last_five)``: rows as
    ``check_and_update`` argument tuples, and per producer the batches the state must retain at the end."""
    from collections import deque

    rng = random_module.Random(_data.SEED)
    next_seq = [0] * PRODUCERS
    retained = [deque(maxlen=5) for _ in range(PRODUCERS)]
    rows, dup = [], []
    offset = 0
    for r in range(n):
        p = rng.randrange(PRODUCERS)
        pid = 100_000 + p
        ts = _data.T0 + r
        if retained[p] and rng.random() < DUPLICATE_RATE:
            bs, ls, _f, _l, _t = rng.choice(retained[p])
            rows.append((pid, 0, bs, ls, offset, offset + BATCH_SIZE_PS - 1, ts, False))
            dup.append(True)  # nothing is appended, so the offsets are not used up
            continue
        bs = next_seq[p]
        ls = bs + BATCH_SIZE_PS - 1
        rows.append((pid, 0, bs, ls, offset, offset + BATCH_SIZE_PS - 1, ts, False))
        retained[p].append((bs, ls, offset, offset + BATCH_SIZE_PS - 1, ts))
        dup.append(False)
        next_seq[p] = ls + 1
        offset += BATCH_SIZE_PS
    last_five = {100_000 + p: tuple(retained[p]) for p in range(PRODUCERS) if retained[p]}
    return rows, dup, last_five


@row("producer_state")
def _(ctx):
    import numpy as np

    from kafkatx import producer_state as ps  # importable: Context() found kafkatx

    n = ctx.n  # batches
    rows, dup, last_five = producer_batches(n)
    cols = [np.array(c, dtype=bool if i == 7 else np.int64) for i, c in enumerate(zip(*rows))]
    dup_mask = np.array(dup)
    n_dup = int(dup_mask.sum())

    def bulk():
        m = ps.ProducerStateManager()
        return m, m.validate_arrays(*cols)

    def per_batch():
        m = ps.ProducerStateManager()
        cu = m.check_and_update
        dups = 0
        for args in rows:
            if cu(*args) is not None:
                dups += 1
        return m, dups

    def check(lib, out):
        m, result = out
        if lib == "kafkatx":
            assert ((result == ps.RESULT_DUPLICATE) == dup_mask).all(), f"{lib}: duplicates found at other rows"
            assert ((result == ps.RESULT_APPENDED) == ~dup_mask).all(), f"{lib}: a batch was rejected"
        else:
            assert result == n_dup, f"{lib}: {result} duplicates, expected {n_dup}"
        got = {pid: tuple(tuple(b) for b in e.batch_metadata) for pid, e in m.producers.items()}
        assert got == last_five, f"{lib}: the retained batches differ"

    def summary(res):
        bulk_rate = ctx.n / _median_s(res, "kafkatx")
        loop_rate = ctx.n / _median_s(res, "reference")
        return (f"producer state, {n:,} batch headers ({n_dup:,} duplicates): validate_arrays {bulk_rate / 1e6:.2f} M "
                f"batches/s, check_and_update {loop_rate / 1e6:.2f} M batches/s (target >= 2 M/s): "
                f"validate_arrays {_met(bulk_rate >= 2e6)}, check_and_update {_met(loop_rate >= 2e6)}")  # fmt: skip

    return Row(
        key="producer_state",
        name=f"validate {n // 1000:,}k batch headers, bulk (ref: per batch) (batches/s)",
        what=f"{n:,} data batch headers of {PRODUCERS} idempotent producers (random interleaving, sequences in "
        f"order, {n_dup:,} retries of a retained batch), validated and applied by a fresh ProducerStateManager",
        records=n,
        nbytes=0,
        impls={"kafkatx": bulk, "reference": per_batch},
        check=check,
        notes={
            "kafkatx": "ProducerStateManager().validate_arrays(pids, epochs, base_seqs, last_seqs, first_offsets, "
            "last_offsets, timestamps, is_transactional) over numpy columns",
            "reference": "kafkatx's per-batch API: for each row, ProducerStateManager.check_and_update(*row)",
        },
        summary=summary,
    )


# ================================================================================== running
def warm_heap(n_records: int) -> list:
    """Leave CPython's small-object allocator holding about 1 GB per million records of mapped memory.

    Decoding a million records allocates ~300-500 MB of small objects; pymalloc returns an arena to the
    OS as soon as it is empty, so in a fresh process every run page-faults all of that memory in again
    (on this project's VMs that doubles or triples the time of every object-producing decoder, and how
    much depends on what ran before).  Allocating ~12 small objects per record and keeping every 2048th
    alive pins the arenas: later runs reuse mapped memory, as a long-running consumer's heap does.
    Returns the pins (keep them alive).  ``--heap cold`` skips this.
    """
    objs = [bytes(40) for _ in range(12 * n_records)]
    pins = objs[::2048]
    del objs
    return pins


class CpuMeter:
    """How many CPUs other processes kept busy from construction to :meth:`others` (Linux ``/proc/stat``:
    the machine's busy time minus this process's own CPU time, per second of wall time)."""

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        try:
            with open("/proc/stat") as fh:
                v = [int(x) for x in fh.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        hz = os.sysconf("SC_CLK_TCK")
        own = os.times()
        # user nice system idle iowait irq softirq steal
        return (v[0] + v[1] + v[2] + v[5] + v[6]) / hz, v[7] / hz, own.user + own.system, time.perf_counter()

    def others(self) -> tuple:
        """``(other processes' CPUs, stolen CPUs)`` on average since construction, or ``(None, None)``."""
        end = self._sample()
        if self.start is None or end is None or end[3] <= self.start[3]:
            return None, None
        wall = end[3] - self.start[3]
        busy = (end[0] - self.start[0]) - (end[2] - self.start[2])
        return max(0.0, busy / wall), (end[1] - self.start[1]) / wall


def run_row(r: Row, repeat: int, gc_on: bool, results: list, summaries: list) -> tuple:
    """Time one row; appends to ``results`` (for :func:`table`) and ``summaries``; returns ``(res, meta)``."""
    t = time.perf_counter()
    meter = CpuMeter()
    res = time_row(r, repeat, gc_on)
    others, steal = meter.others()
    busy = "" if others is None else f", other processes {others:.2f} CPUs busy, steal {steal:.2f}"
    print(f"[{r.key}] {r.name}: " + ", ".join(f"{lib} {c['median_s']:.3f}s" for lib, c in res.items())
          + f"  ({time.perf_counter() - t:.0f} s{busy})", file=sys.stderr, flush=True)  # fmt: skip
    summary = r.summary(res) if r.summary else None
    results.append((r.name, res, r.unit))
    if summary:
        summaries.append((r.key, summary))
    if others is not None and others + steal > 0.25:
        summaries.append((r.key, f"while this row ran, other processes kept {others:.2f} CPUs busy (steal "
                                 f"{steal:.2f}) of {os.cpu_count()}: its numbers, multi-threaded ones above all, "
                                 "are not those of an idle machine"))  # fmt: skip
    meta = {
        "key": r.key, "name": r.name, "what": r.what, "records": r.records, "bytes": r.nbytes, "unit": r.unit,
        "results": res, "notes": r.notes, "summary": summary,
        "other_processes_cpus": others, "steal_cpus": steal,
        "kafkatx_over_aiokafka": ratio(res, "kafkatx", "aiokafka"),
        "kafkatx_over_kafka_python": ratio(res, "kafkatx", "kafka-python"),
        "kafkatx_over_reference": ratio(res, "kafkatx", "reference"),
    }  # fmt: skip
    return res, meta


def load_line(seconds: float = 1.0) -> str:
    """How busy the machine is just before starting (another busy process distorts every row, on 2 CPUs above
    all the multi-threaded ones); each row's line on stderr says the same for the time it ran."""
    meter = CpuMeter()
    time.sleep(seconds)
    others, steal = meter.others()
    if others is None:
        return f"load average before starting: {os.getloadavg()[0]:.2f} (1 min)"
    warn = "" if others + steal < 0.25 else "  (something else is using the CPUs: the numbers will be off)"
    return (f"other processes before starting: {others:.2f} of {os.cpu_count()} CPUs busy, steal {steal:.2f} "
            f"(over {seconds:.0f} s){warn}")  # fmt: skip


def minor_faults() -> int:
    """Minor page faults of this process so far (memory mapped in on first touch)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def time_row(r: Row, repeat: int, gc_on: bool, log=print) -> dict:
    for lib, fn in r.impls.items():  # check + warm-up (untimed)
        result = fn()
        if r.check:
            r.check(lib, result)
        del result
    repeat = max(repeat, r.min_repeat)
    runs = {lib: [] for lib in r.impls}
    faults = {lib: [] for lib in r.impls}
    for _ in range(repeat):
        for lib, fn in r.impls.items():
            gc.collect()
            if not gc_on:
                gc.disable()
            f0 = minor_faults()
            t = time.perf_counter()
            result = fn()
            dt = time.perf_counter() - t
            faults[lib].append(minor_faults() - f0)
            gc.enable()
            del result
            runs[lib].append(dt)
    out = {}
    for lib, ts in runs.items():
        med = statistics.median(ts)
        out[lib] = {
            "median_s": med,
            "runs_s": ts,
            "records_per_s": r.records / med,
            "mb_per_s": r.nbytes / med / 1e6,
            "minor_faults": int(statistics.median(faults[lib])),
            "minor_faults_runs": faults[lib],
        }
    return out


def ratio(res: dict, a: str, b: str):
    if a in res and b in res:
        return res[b]["median_s"] / res[a]["median_s"]
    return None


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M/s" if x >= 1e5 else f"{x / 1e3:.0f} k/s"


def fmt_bytes_rate(x: float) -> str:
    return f"{x / 1e9:.2f} GB/s" if x >= 1e9 else f"{x / 1e6:.0f} MB/s"


def fmt_seconds(s: float) -> str:
    return f"{s:.3f} s" if s >= 0.1 else f"{s * 1e3:.2f} ms"


def fmt_cell(res: dict, lib: str, unit: str = "records") -> str:
    if lib not in res:
        return ""
    c = res[lib]
    rate = fmt_bytes_rate(c["mb_per_s"] * 1e6) if unit == "bytes" else fmt_rate(c["records_per_s"])
    return f"{rate} ({fmt_seconds(c['median_s'])})"


def fmt_ratio(x) -> str:
    return "" if x is None else f"{x:.2f}x"


def table(results: list, markdown: bool) -> str:
    """``results``: ``(name, res)`` or ``(name, res, unit)`` per row.  Columns no row fills are left out."""
    head = ["operation", "kafkatx", "aiokafka", "kafka-python", "reference",
            "kafkatx ÷ aiokafka", "kafkatx ÷ kafka-python", "kafkatx ÷ reference"]  # fmt: skip
    rows = []
    for name, res, *unit in results:
        u = unit[0] if unit else "records"
        rows.append([name, fmt_cell(res, "kafkatx", u), fmt_cell(res, "aiokafka", u), fmt_cell(res, "kafka-python", u),
                     fmt_cell(res, "reference", u), fmt_ratio(ratio(res, "kafkatx", "aiokafka")),
                     fmt_ratio(ratio(res, "kafkatx", "kafka-python")),
                     fmt_ratio(ratio(res, "kafkatx", "reference"))])  # fmt: skip
    keep = [0] + [i for i in range(1, len(head)) if any(r[i] for r in rows)]
    head = [head[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]

    def fmt(r):
        return "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


LEGEND = ("cells: records/s (batches/s or entries/s where the operation says so; bytes/s for byte rows) and the "
          "median seconds; ratios: other seconds / kafkatx seconds (> 1 = kafkatx faster)")  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="kafkatx vs aiokafka vs kafka-python, one workload, one process")
    ap.add_argument("--quick", action="store_true", help=f"{_data.QUICK_RECORDS:,} records instead of 1,000,000")
    ap.add_argument("--records", type=int, help="number of records (a multiple of 1000)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per cell; the median is reported")
    ap.add_argument("--rows", help="comma-separated row keys (default: all); see --list")
    ap.add_argument("--list", action="store_true", help="list the row keys and exit")
    ap.add_argument("--backend", choices=("default", "cython", "python"), default="default",
                    help="kafkatx backend: cython = the compiled _codec (required), "
                    "python = the pure-Python twin (sets KAFKATX_NO_EXTENSIONS=1)")  # fmt: skip
    ap.add_argument("--gc", action="store_true",
                    help="keep the cyclic garbage collector on while timing (default: off, as timeit does; with it "
                    "on, building a million container objects triggers repeated full collections)")  # fmt: skip
    ap.add_argument("--heap", choices=("warm", "cold"), default="warm",
                    help="warm (default): pin ~1 GB per million records of allocator arenas first, so runs reuse "
                    "mapped memory like a long-running consumer; cold: fresh process heap, every run page-faults "
                    "its objects in (see warm_heap())")  # fmt: skip
    ap.add_argument("--json", metavar="OUT.json", help="also write all results and metadata as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (README-ready)")
    args = ap.parse_args(argv)
    if args.list:
        for key, _f in ROW_FACTORIES:
            print(key)
        return 0
    if args.backend == "python":
        os.environ["KAFKATX_NO_EXTENSIONS"] = "1"
    elif args.backend == "cython":
        os.environ.pop("KAFKATX_NO_EXTENSIONS", None)
    n = args.records or (_data.QUICK_RECORDS if args.quick else _data.N_RECORDS)

    ctx = Context(n)
    kx = ctx.kx
    if args.backend != "default" and kx.BACKEND != args.backend:
        ap.error(f"asked for the {args.backend} backend, kafkatx loaded {kx.BACKEND}")
    aio = aiokafka_evidence()
    kp = kafka_python_evidence()
    print(f"kafkatx {kx.__version__} backend={kx.BACKEND} (codec module {kx.BatchBuilder.__module__})")
    print(f"aiokafka {aio['version']}: Cython confirmed: "
          + ", ".join(f"{k} from {v}" for k, v in aio["modules"].items()))  # fmt: skip
    print(f"  {aio['default_records_file']}")
    print(f"kafka-python {kp['version']}: pure Python ({kp['default_records_file']}); "
          f"its calc_crc32c uses {kp['calc_crc32c_uses']}")  # fmt: skip
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"{n:,} records, median of {args.repeat}, gc {'on' if args.gc else 'off'} while timing, "
          f"{args.heap} heap")  # fmt: skip
    print(load_line())

    wanted = None if not args.rows else [k.strip() for k in args.rows.split(",") if k.strip()]
    known = [k for k, _ in ROW_FACTORIES]
    if wanted:
        unknown = [k for k in wanted if k not in known]
        if unknown:
            ap.error(f"unknown rows {unknown}; known: {known}")

    t = time.perf_counter()
    sizes = {c: len(ctx.log(c)) for c in _data.CODECS}
    rec_bytes = _data.record_bytes(n)
    print(f"workload built in {time.perf_counter() - t:.1f} s: "
          + ", ".join(f"{c} {s / 1e6:.1f} MB" for c, s in sizes.items())
          + f" (lz4 keeps {(sizes['lz4'] - 61 * n // 1000) / rec_bytes:.0%}, zstd "
          f"{(sizes['zstd'] - 61 * n // 1000) / rec_bytes:.0%} of the record bytes)")  # fmt: skip
    equivalence = {}
    for c in _data.CODECS:
        equivalence[c] = _data.check_equivalence(c, n)
        print(f"  same log built by the peers ({c}): {equivalence[c]}")
    pins = warm_heap(n) if args.heap == "warm" else []
    print()

    results, meta_rows, summaries, by_key = [], [], [], {}
    for key, factory in ROW_FACTORIES:
        if wanted and key not in wanted:
            continue
        r = factory(ctx)
        if r is None:
            print(f"[{key}] not applicable here, skipped", file=sys.stderr)
            continue
        res, meta = run_row(r, args.repeat, args.gc, results, summaries)
        meta_rows.append(meta)
        by_key[key] = res
    summaries += budgets(by_key)

    report(results, summaries, args.markdown, LEGEND)
    if args.json:
        doc = {
            "kafkatx": {"version": kx.__version__, "backend": kx.BACKEND},
            "aiokafka": aio,
            "kafka_python": kp,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "records": n,
            "repeat": args.repeat,
            "gc": args.gc,
            "heap": args.heap,
            "load_average_at_start": os.getloadavg(),
            "log_bytes": sizes,
            "record_bytes_uncompressed": rec_bytes,
            "equivalence": equivalence,
            "rows": meta_rows,
        }
        write_json(args.json, doc)
    del pins
    return 0


# (compressed row, uncompressed row, target kafkatx ÷ aiokafka): the rows whose time budget is worked out
BUDGETS = (
    ("decode_crc_lz4", "decode_crc", 1.5),
    ("decode_crc_zstd", "decode_crc", 1.5),
    ("decode_arrow_lz4", "decode_arrow", 3.0),
    ("decode_arrow_zstd", "decode_arrow", 3.0),
)


def budgets(by_key: dict) -> list:
    """Notes on the compressed rows' targets: a target ratio gives kafkatx aiokafka's time / target; on one
    thread (the row's ``_inline`` twin) its inflation alone (row ``inflate_<codec>``, the same library call
    every peer makes) must fit in it, and what is left has to cover the decode, which the uncompressed row
    shows for the same records.  Then the row itself (the default inflate_threads) and ``_ahead2``.  Only
    for rows that ran together with the three they need."""
    out = []
    for key, plain, target in BUDGETS:
        codec = key.rsplit("_", 1)[1]
        rows = [by_key.get(k) for k in (key + "_inline", plain, f"inflate_{codec}")]
        if None in rows or "aiokafka" not in rows[0]:
            continue
        comp, unc, infl = (_median_s(r, "kafkatx") * 1e3 for r in rows)
        budget = _median_s(rows[0], "aiokafka") * 1e3 / target
        out.append((key, f"{target:g}x aiokafka leaves {budget:.1f} ms on one thread; kafkatx's {codec} inflation "
                         f"alone takes {infl:.1f} ms, leaving {budget - infl:.1f} ms for the decode ({plain} of the "
                         f"same records uncompressed: {unc:.1f} ms); inline (inflate_threads=0) {comp:.1f} ms in all"
                         + _ahead_note(by_key.get(key), target, "the default (inflate_threads=None)")
                         + _ahead_note(by_key.get(key + "_ahead2"), target, "inflate_threads=2")))  # fmt: skip
    return out


def _ahead_note(res, target: float, how: str) -> str:
    """The same log decoded ``how`` (inflation on other threads, overlapping the decode)."""
    if res is None or "aiokafka" not in res:
        return ""
    kx, aio = _median_s(res, "kafkatx"), _median_s(res, "aiokafka")
    return f"; {how}: {kx * 1e3:.1f} ms, {aio / kx:.2f}x aiokafka (target {target:g}x: {_met(aio / kx >= target)})"


def report(results: list, summaries: list, markdown: bool, legend: str) -> None:
    """Print the table, the legend and the rows' notes and targets (shared with log_io.py)."""
    print(table(results, markdown))
    print()
    print(legend)
    if summaries:
        print()
        print("notes and targets:")
        for key, text in summaries:
            print(f"  [{key}] {text}")


def write_json(path: str, doc: dict) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
