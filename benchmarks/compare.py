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
identical CRCs, encoded bytes), which also serves as warm-up.  Ratios are throughput ratios:
``kafkatx ÷ aiokafka`` = aiokafka's seconds / kafkatx's seconds (> 1 means kafkatx is faster).
See ``benchmarks/README.md`` for what each row does exactly.

Rows are registered with ``@row(...)``: a factory that takes the :class:`Context` and returns a
:class:`Row` (a name plus one zero-argument callable per library), or ``None`` when it does not apply.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import statistics
import sys
import time
from typing import Callable

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
def _decode_row(ctx: Context, key, name, codec, verify):
    log = ctx.log(codec)
    kx = ctx.kx
    crc = "with" if verify else "without"
    return Row(
        key=key,
        name=name,
        what=f"{codec} log -> list of record objects, {crc} CRC-32C check of every batch",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.decode_records(log, verify_crc=verify),
            "aiokafka": lambda: aiokafka_decode(log, verify),
            "kafka-python": lambda: kafka_python_decode(log, verify),
        },
        check=check_records(ctx),
        notes={
            "kafkatx": f"kafkatx.decode_records(log, verify_crc={verify})",
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


def _encode_row(ctx: Context, key, name, codec):
    kx = ctx.kx
    n = ctx.n
    _data.records(n)  # inputs exist before timing
    expected = _data.build_log(codec, n)

    def check(lib, parts):
        assert len(parts) == n // _data.BATCH_RECORDS, f"{lib}: {len(parts)} batches"
        if lib == "kafkatx":
            assert b"".join(parts) == expected, "kafkatx: encoded log differs from the cached workload log"
            return
        # peers write base offset 0 (the broker assigns offsets): compare from byte 8 on (none), else records
        built = _data.with_base_offsets(parts, n)
        if codec == "none" and lib == "aiokafka":
            assert built == expected, f"{lib}: bytes differ from kafkatx's"
        else:
            got = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(built)]
            want = [(r.offset, r.timestamp, r.key, r.value) for r in kx.decode_records(expected)]
            assert got == want, f"{lib}: encoded records differ"

    return Row(
        key=key,
        name=name,
        what=f"{n // _data.BATCH_RECORDS} transactional {codec} batches of 1000 records (explicit timestamps), "
        "append + build",
        records=n,
        nbytes=len(expected),
        impls={
            "kafkatx": lambda: _data.encode_kafkatx(kx, codec, n),
            "aiokafka": lambda: _data.encode_aiokafka(codec, n),
            "kafka-python": lambda: _data.encode_kafka_python(codec, n),
        },
        check=check,
        notes={
            "kafkatx": "BatchBuilder(base_offset, producer_id, producer_epoch, base_sequence, transactional=True,"
            " compression).append(value, key, timestamp=ts) x1000; build()",
            "aiokafka": "DefaultRecordBatchBuilder(2, codec, 1, pid, epoch, seq, 1<<30)"
            ".append(offset_delta, ts, key, value, []) x1000; build()",
            "kafka-python": "DefaultRecordBatchBuilder(2, codec, 1, pid, epoch, seq, 1<<30)"
            ".append(offset_delta, ts, key, value, []) x1000; build()",
        },
    )


@row("encode")
def _(ctx):
    return _encode_row(ctx, "encode", "encode (BatchBuilder)", "none")


@row("encode_lz4")
def _(ctx):
    return _encode_row(ctx, "encode_lz4", "encode, lz4", "lz4")


@row("encode_zstd")
def _(ctx):
    return _encode_row(ctx, "encode_zstd", "encode, zstd", "zstd")


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


@row("decode_arrow")
def _(ctx):
    # Hook: columns instead of objects. Only kafkatx decodes into columns; the row appears once
    # kafkatx.decode_arrow exists (peers are shown as their object decoders for scale).
    kx = ctx.kx
    if not hasattr(kx, "decode_arrow"):
        return None
    log = ctx.log("none")

    def check(lib, out):
        assert len(out) == ctx.n, f"{lib}: {len(out)} rows"

    return Row(
        key="decode_arrow",
        name="decode to Arrow columns + CRC",
        what="none log -> pyarrow table (kafkatx) vs objects (peers)",
        records=ctx.n,
        nbytes=len(log),
        impls={
            "kafkatx": lambda: kx.decode_arrow(log, verify_crc=True),
            "aiokafka": lambda: aiokafka_decode(log, True),
            "kafka-python": lambda: kafka_python_decode(log, True),
        },
        check=check,
    )


# ================================================================================== running
def time_row(r: Row, repeat: int, gc_on: bool, log=print) -> dict:
    for lib, fn in r.impls.items():  # check + warm-up (untimed)
        result = fn()
        if r.check:
            r.check(lib, result)
        del result
    runs = {lib: [] for lib in r.impls}
    for _ in range(repeat):
        for lib, fn in r.impls.items():
            gc.collect()
            if not gc_on:
                gc.disable()
            t = time.perf_counter()
            result = fn()
            dt = time.perf_counter() - t
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
        }
    return out


def ratio(res: dict, a: str, b: str):
    if a in res and b in res:
        return res[b]["median_s"] / res[a]["median_s"]
    return None


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M/s" if x >= 1e5 else f"{x / 1e3:.0f} k/s"


def fmt_seconds(s: float) -> str:
    return f"{s:.3f} s" if s >= 0.1 else f"{s * 1e3:.2f} ms"


def fmt_cell(res: dict, lib: str) -> str:
    if lib not in res:
        return ""
    c = res[lib]
    return f"{fmt_rate(c['records_per_s'])} ({fmt_seconds(c['median_s'])})"


def fmt_ratio(x) -> str:
    return "" if x is None else f"{x:.2f}x"


def table(results: list, markdown: bool) -> str:
    head = ["operation", "kafkatx", "aiokafka", "kafka-python", "reference",
            "kafkatx ÷ aiokafka", "kafkatx ÷ kafka-python"]  # fmt: skip
    rows = []
    for name, res in results:
        rows.append([name, fmt_cell(res, "kafkatx"), fmt_cell(res, "aiokafka"), fmt_cell(res, "kafka-python"),
                     fmt_cell(res, "reference"), fmt_ratio(ratio(res, "kafkatx", "aiokafka")),
                     fmt_ratio(ratio(res, "kafkatx", "kafka-python"))])  # fmt: skip
    # drop the reference column if no row uses it
    if not any(r[4] for r in rows):
        head.pop(4)
        for r in rows:
            r.pop(4)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]

    def fmt(r):
        return "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows])


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
          f"{n:,} records, median of {args.repeat}, gc {'on' if args.gc else 'off'} while timing")  # fmt: skip

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
    print()

    results, meta_rows = [], []
    for key, factory in ROW_FACTORIES:
        if wanted and key not in wanted:
            continue
        r = factory(ctx)
        if r is None:
            print(f"[{key}] not applicable here, skipped", file=sys.stderr)
            continue
        t = time.perf_counter()
        res = time_row(r, args.repeat, args.gc)
        print(f"[{key}] {r.name}: " + ", ".join(f"{lib} {c['median_s']:.3f}s" for lib, c in res.items())
              + f"  ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
        results.append((r.name, res))
        meta_rows.append({
            "key": r.key, "name": r.name, "what": r.what, "records": r.records, "bytes": r.nbytes,
            "results": res, "notes": r.notes,
            "kafkatx_over_aiokafka": ratio(res, "kafkatx", "aiokafka"),
            "kafkatx_over_kafka_python": ratio(res, "kafkatx", "kafka-python"),
        })  # fmt: skip

    print(table(results, args.markdown))
    print()
    print("cells: records/s (median seconds); ratios: peer seconds / kafkatx seconds (> 1 = kafkatx faster)")
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
            "log_bytes": sizes,
            "record_bytes_uncompressed": rec_bytes,
            "equivalence": equivalence,
            "rows": meta_rows,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
