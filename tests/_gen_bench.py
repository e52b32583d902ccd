"""Throughput of the partition writer and of the workload generator (not a test; run by hand).

    PYTHONPATH=src python tests/_gen_bench.py writer [--gib 1] [--dir /tmp/kafkatx-bench]
    PYTHONPATH=src python tests/_gen_bench.py generate [--bytes 1GB] [--workers N] [--dir /tmp/kafkatx-bench]

``writer``: about ``--gib`` GiB of uncompressed idempotent batches (480 records, ~70 KiB each, built
beforehand) appended to one partition with ``PartitionWriter``, with and without record validation, then
``flush()`` (fsync).  ``generate``: ``kafkatx.log.generate.generate`` with its defaults and ``target_bytes``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time


def bench_writer(root: str, gib: float) -> None:
    from kafkatx import BatchBuilder
    from kafkatx.log.writer import PartitionWriter

    records = 480
    value = b'{"order_id": %d, "customer": "customer-%04d", "amount_cents": %d, "currency": "EUR", "pad": "%s"}'
    batches, seq, total = [], 0, 0
    while total < gib * (1 << 30):
        b = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=seq)
        for i in range(records):
            n = seq + i
            b.append(value % (n, n % 10000, n * 37 % 50000, b"x" * 20), b"customer-%04d" % (n % 10000),
                     timestamp=1_700_000_000_000 + n // 1000)  # fmt: skip
        data = b.build()
        batches.append(data)
        total += len(data)
        seq += records
    for validate in (False, True):
        d = os.path.join(root, "orders-0")
        shutil.rmtree(d, ignore_errors=True)
        w = PartitionWriter(d, validate_records=validate, max_message_bytes=None)
        t = time.perf_counter()
        for data in batches:
            w.append(data)
        w.flush()
        dt = time.perf_counter() - t
        w.close()
        print(f"writer validate_records={validate}: {total / 1e6:.0f} MB, {len(batches)} batches in {dt:.2f} s "
              f"= {total / dt / 1e6:.0f} MB/s")  # fmt: skip
        shutil.rmtree(d)


def bench_generate(root: str, target: int, workers) -> None:
    from kafkatx.log.generate import generate

    d = os.path.join(root, "generated")
    t = time.perf_counter()
    m = generate(d, target_bytes=target, workers=workers, overwrite=True)
    dt = time.perf_counter() - t
    print(f"generate: {m.records} records, {m.bytes / 1e6:.0f} MB of log in {dt:.1f} s = {m.bytes / dt / 1e6:.0f} MB/s "
          f"({m.records / dt / 1e6:.2f} M records/s, workers={workers if workers is not None else 'default'}, "
          f"{os.cpu_count()} CPUs)")  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("writer", "generate"))
    p.add_argument("--dir", default="/tmp/kafkatx-bench")
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--bytes", type=int, default=1_000_000_000)
    p.add_argument("--workers", type=int, default=None)
    args = p.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    if args.what == "writer":
        bench_writer(args.dir, args.gib)
    else:
        bench_generate(args.dir, args.bytes, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
