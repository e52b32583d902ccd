#!/usr/bin/env python3
"""kafkatx.log on a >= 1 GB log directory: the reader against decoding the same bytes in memory, and the writer.

    python benchmarks/log_io.py                       # ~1 GB log, generated once under /tmp/kafkatx-bench-log
    python benchmarks/log_io.py --quick               # 100 MB (smoke run)
    python benchmarks/log_io.py --markdown --json out.json
    python benchmarks/log_io.py --dir /data/bench --compression mixed --rows read

Rows (same table format and timing rules as ``compare.py``: one untimed, checked run first, then ``--repeat``
timed runs, implementations interleaved, median reported, ``gc.collect()`` before and GC off during each run):

* ``read``: every partition of the log directory read ``read_committed`` into Arrow through the reader
  (``open_log_dir(path)`` then ``Partition.read_table()`` per partition: listing, batch-header scans with
  CRC checks, last-stable-offset replay, ``.txnindex`` reads, decoding) vs the reference,
  ``kafkatx.decode_arrow(data, isolation="read_committed", aborted_transactions=..., last_stable_offset=...)``
  per partition on the partition's segment bytes already in memory (read, concatenated and given their
  aborted transactions and LSO before timing).  Both verify every CRC.  Target: the reader at >= 80 % of
  the in-memory rate (the ``kafkatx ÷ reference`` column).  The files are in the page cache (the checked
  run reads them), so this measures the reader's overhead, not the disk; before the row, the directory's
  page cache is dropped and the reader reads it back from disk (:func:`cache_as_read_from_disk`), the
  state a kafkatx read of a directory on disk (a broker's, a backup, tiered segments) leaves: its
  segment maps ask for huge pages, so the kernel caches the segments in 2 MiB folios (``--cache
  as-written`` keeps the cache as it is: right after ``generate()`` the pages are cached as its writers
  wrote them, 2 MiB at a time (``write_buffer_bytes``), in 2 MiB folios too where the file system makes
  them of such writes: ext4 on this VM's Linux 6.18 does).  ``generate()``'s default segments are a sixteenth of a partition's
  log (22 MiB here).  ``close()`` returns before the segments are unmapped (a background thread does
  that); the summary line gives that time, not timed.
* ``read_copied``: the same directory with its page cache dropped and read back by another program, each
  file in 8 MiB reads (``cp``, a restore): the kernel's readahead makes 2 MiB folios of large files only,
  so 22 MiB segments are mapped 4 KiB at a time.
* ``read_1mib``: the same workload generated with Kafka's smallest segments (1 MiB, ``log.segment.bytes``'
  floor): about a thousand of them, so per-segment costs and the page-table work of small files show.
* ``read_1gib``: the same with Kafka's default 1 GiB segments.
* ``write`` / ``write_headers_only`` / ``write_held``: ``PartitionWriter`` (a fresh partition directory,
  Kafka's default settings, ``fsync=False``) appending ~1 GB of uncompressed idempotent batches as a
  producer sends them (``validate_records=True``, the default, decodes every batch as Kafka's
  ``LogValidator`` does; ``validate_records=False`` checks headers, CRC and producer state only;
  ``write_held``: validated, and held to be written 2 MiB at a time, ``write_buffer_bytes=2 << 20``, as
  ``generate()`` writes).  Appends are timed; ``close()``
  (producer snapshot + fsync of the active segment) is timed separately and shown under the table.
  Reference: the same batches written to one file with ``os.write`` per batch.  Target: >= 200 MB/s.

The log is made once with :func:`kafkatx.log.generate.generate` (seed 0, ``--compression none`` by default so
decoding cost does not hide the reader's own overhead) and kept under ``--dir``; a directory without its
``manifest.json`` (an interrupted generation) or generated with other parameters is made again.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import platform
import shutil
import struct
import sys
import time

# numpy's OpenBLAS starts one spinning worker per CPU when imported (pyarrow imports numpy); on a 2-CPU
# machine they take CPU time from the code under test, and none of it uses BLAS.  Same for every library.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _data
import compare
from compare import Row

GB = 1_000_000_000
FULL_BYTES = 1_050_000_000  # a little over 1 GB: generate() lands close to, not exactly at, the target
QUICK_BYTES = 100_000_000
KAFKA_SEGMENT_BYTES = 1 << 30  # Kafka's default log.segment.bytes
KAFKA_MIN_SEGMENT_BYTES = 1 << 20  # its smallest (KIP-1030)
WRITE_PRODUCERS = 8
WRITE_PRODUCER_ID0 = 5000


# ------------------------------------------------------------------------------------------ the log
def generated_log(root: str, size: int, compression: str, segment_bytes: int | None, regenerate: bool, log=print):
    """The cached log directory for these parameters (generated if missing or incomplete) and its manifest."""
    from kafkatx.log.generate import MANIFEST_NAME, Manifest, generate

    seg = "auto" if segment_bytes is None else str(segment_bytes)  # (auto: generate()'s default_segment_bytes)
    path = os.path.join(root, f"log-{size}-{compression}-seg{seg}-seed0")
    manifest_path = os.path.join(path, MANIFEST_NAME)
    if not regenerate and os.path.exists(manifest_path):
        m = Manifest.load(path)
        if m.params.get("target_bytes") == size and m.params.get("compression") == compression:
            log(f"using the log generated earlier at {path}")
            return path, m
    os.makedirs(root, exist_ok=True)
    kwargs = {} if segment_bytes is None else {"segment_bytes": segment_bytes}
    log(f"generating a {size / 1e6:,.0f} MB log ({compression}) at {path} ...")
    t = time.perf_counter()
    m = generate(path, target_bytes=size, compression=compression, seed=0, overwrite=True, **kwargs)
    log(f"  {m.records:,} records, {m.bytes / 1e6:,.1f} MB of log in {time.perf_counter() - t:.1f} s")
    return path, m


def _segment_bytes(part) -> bytes:
    """A partition's segments, read from disk and concatenated: the partition's byte stream, in memory."""
    chunks = []
    for seg in part.segments:
        with open(seg.log_path, "rb") as fh:
            chunks.append(fh.read())
    return b"".join(chunks)


def _table_checksum(table) -> tuple[int, str]:
    """The manifest's record checksum (kafkatx.log.generate.record_checksum) over an Arrow table."""
    qi, i32 = struct.Struct(">qi"), struct.Struct(">i")
    h = hashlib.sha256()
    offsets = table.column("offset").to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    for o, k, v in zip(offsets, keys, values):
        h.update(qi.pack(o, -1 if k is None else len(k)))
        if k is not None:
            h.update(k)
        h.update(i32.pack(-1 if v is None else len(v)))
        if v is not None:
            h.update(v)
    return len(offsets), h.hexdigest()


def drop_cache(path: str) -> None:
    """Write back and drop (``POSIX_FADV_DONTNEED``) the page cache of every file under ``path``."""
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def cache_as_read_from_disk(path: str, by: str = "reader") -> None:
    """Leave ``path``'s files in the page cache as a cold read from disk does: dropped, then read back in
    by the log reader itself (``by="reader"``: one pass of ``open_log_dir`` + ``read_table``, whose
    segment maps are advised ``MADV_HUGEPAGE``, so the kernel reads the segments into 2 MiB folios) or by
    another program (``by="copy"``: each file read in order in 8 MiB reads, as ``cp`` or a restore from
    backup does; the kernel's readahead then makes 2 MiB folios of large files only, not of 22 MiB
    ones).  A segment's page cache in 2 MiB folios is mapped 2 MiB at a time, in small folios (and pages
    cached as they were written in small appends, as a broker writes them) 4 KiB at a time."""
    drop_cache(path)
    if by == "reader":
        from kafkatx.log import open_log_dir, wait_for_release

        with open_log_dir(path) as d:
            for part in d.values():
                part.read_table()
        wait_for_release()  # (the maps are unmapped on a background thread)
        return
    for dirpath, _dirs, files in os.walk(path):
        for name in sorted(files):
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                while os.read(fd, 8 << 20):
                    pass
            finally:
                os.close(fd)


def read_row(path: str, manifest, kx, log=print, row_key="read", label="", cache="reader") -> Row:
    import pyarrow as pa
    from kafkatx.log import open_log_dir, wait_for_release

    if cache != "as-written" and hasattr(os, "posix_fadvise"):
        cache_as_read_from_disk(path, by=cache)

    with open_log_dir(path) as d:
        inputs = {}
        for key, part in d.items():
            lso = part.last_stable_offset
            start = part.log_start_offset
            aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions(start, lso)]
            inputs[key] = (_segment_bytes(part), aborted, lso)
    log_bytes = sum(len(b) for b, _a, _l in inputs.values())
    n_aborted = sum(len(a) for _b, a, _l in inputs.values())

    def reader():
        with open_log_dir(path) as d:
            return {key: part.read_table() for key, part in d.items()}

    def in_memory():
        return {key: kx.decode_arrow(data, isolation="read_committed", aborted_transactions=aborted,
                                     last_stable_offset=lso, verify_crc=True)
                for key, (data, aborted, lso) in inputs.items()}  # fmt: skip

    first = {}

    def check(lib, out):
        assert set(out) == set(inputs), f"{lib}: partitions {sorted(out)}"
        for key, got in out.items():
            name = f"{key[0]}-{key[1]}"
            want = manifest.partitions.get(name)
            if want is not None:
                assert got.num_rows == want["read_committed"]["records"], \
                    f"{lib}: {name} has {got.num_rows} rows, the manifest says {want['read_committed']['records']}"
            table = got if isinstance(got, pa.Table) else pa.Table.from_batches([got])
            table = table.replace_schema_metadata(None)
            if key in first:  # the other implementation's result: identical tables
                assert table.equals(first[key]), f"{lib}: {name} differs from the other implementation's"
            else:
                first[key] = table
                if want is not None:  # the manifest's checksum of the visible records, once
                    assert _table_checksum(table) == (want["read_committed"]["records"],
                                                      want["read_committed"]["sha256"]), f"{lib}: {name} checksum"
        if len(first) == len(inputs) and lib == "reference":
            first.clear()

    def summary(res):
        wait_for_release()
        reader()
        t = time.perf_counter()
        wait_for_release()  # the maps closed by that run, unmapped on the background thread
        release_ms = (time.perf_counter() - t) * 1e3
        x = compare.ratio(res, "kafkatx", "reference")
        return (f"reader{label} at {x:.0%} of the in-memory rate (target >= 80%): {compare._met(x >= 0.8)}; "
                f"after close, {release_ms:.0f} ms of unmapping went on on the background thread (not timed)")

    records = manifest.records
    parts = ", ".join(f"{t}-{p}" for t, p in inputs)
    return Row(
        key=row_key,
        name=f"read_committed into Arrow: reader{label} (ref: in memory)",
        what=f"{len(inputs)} partitions ({parts}), {log_bytes / 1e6:,.0f} MB of segments, {n_aborted} aborted "
        f"transactions; read_committed into Arrow through the reader vs decode_arrow of the same bytes in memory",
        records=records,
        nbytes=log_bytes,
        impls={"kafkatx": reader, "reference": in_memory},
        check=check,
        notes={
            "kafkatx": "with open_log_dir(path) as d: {key: part.read_table() for key, part in d.items()} "
            "(read_committed, aborted_source='auto', 32 MiB chunks)",
            "reference": "per partition: kafkatx.decode_arrow(segment bytes concatenated in memory, "
            "isolation='read_committed', aborted_transactions=<from the reader>, last_stable_offset=<from the "
            "reader>, verify_crc=True)",
        },
        unit="bytes",
        summary=summary,
    )


TAIL_OFFSETS = 5000  # the tail row reads this many offsets before the LSO


def tail_row(path: str, manifest, kx) -> Row:
    from kafkatx.log import open_log_dir, open_partition

    with open_log_dir(path) as d:
        key, part = max(d.items(), key=lambda kv: len(kv[1].segments))
        part_path, segments = part.path, len(part.segments)

    def tail(full_replay: bool):
        with open_partition(part_path) as p:
            if full_replay:
                p.aborted_transactions_by_segment("scan")  # replays every segment, as the LSO needed before snapshots
            lso = p.last_stable_offset
            start = max(lso - TAIL_OFFSETS, p.log_start_offset)
            return sum(b.num_rows for b in p.read(start, isolation="read_committed", format="arrow"))

    def check(lib, out):
        assert out > 0, f"{lib}: no rows"

    return Row(
        key="tail",
        name=f"open + read the last {TAIL_OFFSETS:,} offsets read_committed (ref: full replay)",
        what=f"{key[0]}-{key[1]} ({segments} segments): open_partition, last_stable_offset, read(LSO - "
        f"{TAIL_OFFSETS}, format='arrow'); reference: the same after aborted_transactions_by_segment('scan') (a "
        "replay of every segment, which the LSO needed before producer snapshots were used)",
        records=TAIL_OFFSETS,
        nbytes=0,
        impls={"kafkatx": lambda: tail(False), "reference": lambda: tail(True)},
        check=check,
        notes={"kafkatx": "LSO from the newest producer snapshot + the segments after it",
               "reference": "LSO and open transactions from a replay of every segment"},  # fmt: skip
        summary=lambda res: (f"tail read {compare.ratio(res, 'kafkatx', 'reference'):.1f}x faster than with a full "
                             "replay"),
    )


# ------------------------------------------------------------------------------------------ writing
def producer_batches(kx, size: int) -> list:
    """About ``size`` bytes of uncompressed batches as idempotent producers send them (base offset 0), in order.

    The workload's first 100,000 records are built into 100 batches of 1000 once; copies of them get each
    producer's next base sequence (and a new CRC), so every batch is a valid in-sequence append."""
    keys, values, ts = _data.records(_data.QUICK_RECORDS)
    templates = []
    for start in range(0, len(keys), _data.BATCH_RECORDS):
        bb = kx.BatchBuilder(base_offset=0, producer_id=WRITE_PRODUCER_ID0, producer_epoch=0, base_sequence=0)
        for i in range(start, start + _data.BATCH_RECORDS):
            bb.append(values[i], keys[i], timestamp=ts[i])
        templates.append(bb.build())
    unit = sum(len(b) for b in templates)
    copies = max(1, round(size / unit))
    seq = [0] * WRITE_PRODUCERS
    out = []
    for g in range(copies * len(templates)):
        p = g % WRITE_PRODUCERS
        b = bytearray(templates[g % len(templates)])
        struct.pack_into(">qhi", b, 43, WRITE_PRODUCER_ID0 + p, 0, seq[p])
        struct.pack_into(">I", b, 17, kx.crc32c(memoryview(b)[21:]))
        seq[p] += _data.BATCH_RECORDS
        out.append(bytes(b))
    return out


class _Written:
    """What a write run returns; dropping it (untimed, after the clock stopped) closes and deletes the output."""

    closes: list = []

    def __init__(self, path, writer=None, batches=0, nbytes=0):
        self.path, self.writer, self.batches, self.nbytes = path, writer, batches, nbytes

    def __del__(self):
        if self.writer is not None:
            t = time.perf_counter()
            self.writer.close()
            _Written.closes.append(time.perf_counter() - t)
        shutil.rmtree(self.path, ignore_errors=True)


def write_rows(root: str, kx, size: int) -> list:
    from kafkatx.log import PartitionWriter

    batches = producer_batches(kx, size)
    total = sum(len(b) for b in batches)
    records = len(batches) * _data.BATCH_RECORDS
    work = os.path.join(root, "write")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    counter = [0]

    def fresh(name):
        counter[0] += 1
        return os.path.join(work, f"{name}{counter[0]}-0")

    def append_all(validate, held=0):
        def run():
            w = PartitionWriter(fresh("bench"), validate_records=validate, write_buffer_bytes=held)
            append = w.append
            for b in batches:
                append(b)
            size = w.size_in_bytes
            if held:
                w.roll()  # the last piece held is written (timed), as a roll or close() writes it
            return _Written(w.path, w, len(batches), size)

        return run

    def raw_writes():
        path = fresh("raw")
        os.makedirs(path)
        fd = os.open(os.path.join(path, "00000000000000000000.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for b in batches:
                os.write(fd, b)
        finally:
            os.close(fd)
        return _Written(path, None, len(batches), total)

    def check(lib, out):
        assert out.batches == len(batches) and out.nbytes == total, f"{lib}: {out.batches} batches, {out.nbytes} B"
        if out.writer is not None:
            w = out.writer
            assert w.log_end_offset == records, f"{lib}: log end offset {w.log_end_offset}"
            assert len(w.producer_state) == WRITE_PRODUCERS
            bases = []
            for base in w.segments:  # what is on disk: every batch, CRCs intact, offsets assigned in order
                with open(os.path.join(w.path, f"{base:020d}.log"), "rb") as fh:
                    bases += list(kx.scan_batches(fh.read(), verify_crc=True)["base_offset"])
            assert bases == list(range(0, records, _data.BATCH_RECORDS)), f"{lib}: {len(bases)} batches on disk"
        else:
            assert os.path.getsize(os.path.join(out.path, "00000000000000000000.log")) == total

    def summary_for(label):
        def summary(res):
            closes = sorted(_Written.closes)
            rate = res["kafkatx"]["mb_per_s"]
            text = (f"PartitionWriter appends ({label}): {rate:,.0f} MB/s (target >= 200 MB/s): "
                    f"{compare._met(rate >= 200)}")  # fmt: skip
            if closes:
                text += (f"; close() (snapshot + fsync of the active segment) took {closes[len(closes) // 2]:.2f} s "
                         f"(median of {len(closes)}, not in the timings)")  # fmt: skip
            _Written.closes.clear()
            return text

        return summary

    what = (f"{len(batches):,} uncompressed idempotent batches of 1000 records ({WRITE_PRODUCERS} producers, "
            f"{total / 1e6:,.0f} MB) appended to a new partition directory (Kafka defaults: 1 GiB segments, "
            "index every 4 KiB, fsync=False)")  # fmt: skip
    raw = "os.write(fd, batch) per batch into one file (no index, no checks, no fsync)"
    return [
        Row(key="write", name="PartitionWriter.append, validate_records=True (ref: os.write)",
            what=what + "; validate_records=True (default: records decoded as LogValidator does)",
            records=records, nbytes=total, impls={"kafkatx": append_all(True), "reference": raw_writes},
            check=check, unit="bytes", summary=summary_for("validate_records=True"),
            notes={"kafkatx": "PartitionWriter(dir).append(batch) per batch; close() after the clock stopped",
                   "reference": raw}),  # fmt: skip
        Row(key="write_headers_only", name="PartitionWriter.append, validate_records=False (ref: os.write)",
            what=what + "; validate_records=False (header, CRC and producer-state checks only)",
            records=records, nbytes=total, impls={"kafkatx": append_all(False), "reference": raw_writes},
            check=check, unit="bytes", summary=summary_for("validate_records=False"),
            notes={"kafkatx": "PartitionWriter(dir, validate_records=False).append(batch) per batch",
                   "reference": raw}),  # fmt: skip
        Row(key="write_held", name="PartitionWriter.append, written 2 MiB at a time (ref: os.write)",
            what=what + "; validate_records=True, write_buffer_bytes=2 MiB (appends held, written in 2 MiB pieces)",
            records=records, nbytes=total, impls={"kafkatx": append_all(True, 2 << 20), "reference": raw_writes},
            check=check, unit="bytes", summary=summary_for("write_buffer_bytes=2 MiB"),
            notes={"kafkatx": "PartitionWriter(dir, write_buffer_bytes=2 << 20).append(batch) per batch, then "
                              "roll() (writes the last piece held)",
                   "reference": raw}),  # fmt: skip
    ]


# ------------------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="kafkatx.log reader and writer on a >= 1 GB log directory")
    ap.add_argument("--dir", default="/tmp/kafkatx-bench-log",
                    help="where the generated log is kept (and the writer's scratch space); default %(default)s")
    ap.add_argument("--quick", action="store_true", help="100 MB instead of ~1 GB (smoke run)")
    ap.add_argument("--bytes", type=int, help=f"log size to generate and write (default {FULL_BYTES:,})")
    ap.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd", "mixed"),
                    help="compression of the generated log (default none: decoding cost would hide the reader's "
                    "overhead; mixed = generate()'s default)")  # fmt: skip
    ap.add_argument("--segment-bytes", type=int, help="segment size of the generated log (default: generate()'s)")
    ap.add_argument("--regenerate", action="store_true", help="generate the log again even if it is cached")
    ap.add_argument("--cache", choices=("reader", "copy", "as-written"), default="reader",
                    help="the page cache before the read rows but read_copied: dropped, then read back by the "
                    "reader (default) or in 8 MiB reads (copy); as-written: left as it is (right after "
                    "generate(): as the writer appended them)")  # fmt: skip
    ap.add_argument("--rows", help="comma-separated: read, read_copied, read_1mib, read_1gib, tail, write, "
                    "write_headers_only, write_held "
                    "(default: all)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per cell; the median is reported")
    ap.add_argument("--json", metavar="OUT.json", help="also write all results and metadata as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (README-ready)")
    args = ap.parse_args(argv)
    size = args.bytes or (QUICK_BYTES if args.quick else FULL_BYTES)
    known = ("read", "read_copied", "read_1mib", "read_1gib", "tail", "write", "write_headers_only", "write_held")
    wanted = known if not args.rows else tuple(k.strip() for k in args.rows.split(",") if k.strip())
    if set(wanted) - set(known):
        ap.error(f"unknown rows {sorted(set(wanted) - set(known))}; known: {known}")

    kx = _data.import_kafkatx()
    print(f"kafkatx {kx.__version__} backend={kx.BACKEND}; python {platform.python_version()} on "
          f"{platform.machine()}, {os.cpu_count()} CPUs; median of {args.repeat}, gc off while timing")  # fmt: skip
    print(compare.load_line())
    rows_meta, results, summaries = [], [], []

    def run(r: Row):
        rows_meta.append(compare.run_row(r, args.repeat, False, results, summaries)[1])

    manifest = None
    if {"read", "read_copied", "tail"} & set(wanted):
        path, manifest = generated_log(args.dir, size, args.compression, args.segment_bytes, args.regenerate)
    # generate()'s default segments with the page cache as the reader leaves it and as a copy leaves it; the
    # same workload in Kafka's smallest and default segment sizes (log.segment.bytes)
    for key, seg_bytes, label, cache in (
        ("read", None, "", args.cache),
        ("read_copied", None, ", files cached by a copy", "copy"),
        ("read_1mib", KAFKA_MIN_SEGMENT_BYTES, ", 1 MiB segments", args.cache),
        ("read_1gib", KAFKA_SEGMENT_BYTES, ", 1 GiB segments", args.cache),
    ):
        if key in wanted:
            if seg_bytes is None:
                other, other_manifest = path, manifest
            else:
                other, other_manifest = generated_log(args.dir, size, args.compression, seg_bytes, args.regenerate)
            r = read_row(other, other_manifest, kx, row_key=key, label=label, cache=cache)
            print(f"{key}: {r.what}")
            run(r)
            del r
            gc.collect()
    if "tail" in wanted:
        r = tail_row(path, manifest, kx)
        print(f"tail: {r.what}")
        run(r)
    write = [r for r in write_rows(args.dir, kx, size) if r.key in wanted] if {"write", "write_headers_only", "write_held"} & set(wanted) else []
    for r in write:
        print(f"{r.key}: {r.what}")
        run(r)
    shutil.rmtree(os.path.join(args.dir, "write"), ignore_errors=True)

    print()
    compare.report(results, summaries, args.markdown, compare.LEGEND.replace(
        "records/s (batches/s or entries/s where the operation says so; bytes/s for byte rows)",
        "log bytes/s (records/s for tail)"))  # fmt: skip
    if args.json:
        doc = {
            "kafkatx": {"version": kx.__version__, "backend": kx.BACKEND},
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": os.getloadavg(),
            "repeat": args.repeat,
            "bytes": size,
            "compression": args.compression,
            "manifest": None if manifest is None else {"records": manifest.records, "bytes": manifest.bytes,
                                                       "params": manifest.params},  # fmt: skip
            "rows": rows_meta,
        }
        compare.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
