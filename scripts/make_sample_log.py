#!/usr/bin/env python3
"""Write the sample log segment bundled with kafkatx (``kafkatx demo`` reads it).

    python scripts/make_sample_log.py            # writes src/kafkatx/data/sample/00000000000000000000.log
    python scripts/make_sample_log.py --out X    # somewhere else

The segment is one partition of an imaginary ``shop-events`` topic as a broker would have written it:
offsets assigned in append order, a partition leader epoch that changes once, and five producers
interleaved:

* ``clickstream`` (no producer id, uncompressed): page views, some without a key, one tombstone;
* ``importer`` (no producer id, gzip): large batches of catalogue updates;
* ``payments`` (idempotent, producer id 3000, lz4): sequence numbers and trace headers;
* ``orders-tx`` (transactional, producer id 4000, snappy): committed and aborted transactions of
  one to three batches each;
* ``ledger-tx`` (transactional, producer id 4001, zstd): committed and aborted transactions that
  overlap with ``orders-tx``, one producer restart (epoch bump after an aborted transaction, sequences
  start again at 0) and one empty aborted transaction (an ABORT marker with no data before it, which
  happens when a partition was added to a transaction that then sent nothing to it).

Every transaction is decided by the end (no open transaction), so a read_committed reader sees the
whole segment minus the aborted records.  Markers are the broker's 78-byte control batches, built with
:func:`kafkatx.transactions.encode_marker`.

Deterministic: all choices come from ``random.Random(SEED)`` and all timestamps from a fixed clock, so
the records are always the same.  The compressed bytes are those of the installed zlib, lz4, zstandard
and cramjam; another version of one of them may compress differently (same records, other bytes).
``tests/test_cli.py`` checks the committed file against this script record by record.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import random
import sys

SEED = 20240601
BASE_TIMESTAMP = 1_717_200_000_000  # 2024-06-01T00:00:00Z
STEPS = 420
COORDINATOR_EPOCH = 3
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "kafkatx" / "data" / "sample" / "00000000000000000000.log"


def _import_kafkatx():
    if importlib.util.find_spec("kafkatx") is None:
        # running from a checkout without an install: use the source tree
        sys.path.insert(0, str(ROOT / "src"))
    import kafkatx
    from kafkatx import transactions

    return kafkatx, transactions


class _Partition:
    """Appends batches the way a partition leader assigns offsets."""

    def __init__(self, kafkatx, transactions):
        self.kafkatx = kafkatx
        self.transactions = transactions
        self.next_offset = 0
        self.leader_epoch = 11
        self.clock = BASE_TIMESTAMP
        self.chunks = []

    def tick(self, rng, lo=5, hi=400):
        self.clock += rng.randint(lo, hi)
        return self.clock

    def append_records(self, records, *, compression="none", producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       transactional=False):  # fmt: skip
        b = self.kafkatx.BatchBuilder(
            base_offset=self.next_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
            compression=compression,
            partition_leader_epoch=self.leader_epoch,
        )
        for key, value, timestamp, headers in records:
            b.append(value, key, timestamp=timestamp, headers=headers)
        data = b.build()
        base = self.next_offset
        self.chunks.append(data)
        self.next_offset = b.last_offset + 1
        return base

    def append_marker(self, kind, producer_id, producer_epoch):
        data = self.transactions.encode_marker(
            kind,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_offset=self.next_offset,
            coordinator_epoch=COORDINATOR_EPOCH,
            timestamp=self.clock,
            partition_leader_epoch=self.leader_epoch,
        )
        assert len(data) == 78, len(data)
        self.chunks.append(data)
        self.next_offset += 1


def _json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _records(part, rng, n, make):
    out = []
    for i in range(n):
        ts = part.tick(rng, 0, 3) if i else part.clock
        out.append(make(i, ts))
    return out


class _TxnProducer:
    def __init__(self, name, producer_id, epoch, compression, abort_ratio, prefix):
        self.name = name
        self.producer_id = producer_id
        self.epoch = epoch
        self.compression = compression
        self.abort_ratio = abort_ratio
        self.prefix = prefix
        self.sequence = 0
        self.open_batches = 0  # batches written in the current transaction
        self.planned = 0
        self.counter = 0

    def step(self, part, rng):
        """Either begin/continue the transaction with one batch, or end it with a marker."""
        if self.open_batches == 0:
            self.planned = rng.randint(1, 3)
        if self.open_batches < self.planned:
            n = rng.randint(2, 12)
            recs = _records(part, rng, n, self._record(rng))
            part.append_records(recs, compression=self.compression, producer_id=self.producer_id,
                                producer_epoch=self.epoch, base_sequence=self.sequence, transactional=True)  # fmt: skip
            self.sequence += n
            self.open_batches += 1
            return
        self.end(part, rng)

    def end(self, part, rng, kind=None):
        if kind is None:
            kind = "abort" if rng.random() < self.abort_ratio else "commit"
        part.tick(rng, 20, 200)
        part.append_marker(kind, self.producer_id, self.epoch)
        self.open_batches = 0
        return kind

    def _record(self, rng):
        def make(i, ts):
            self.counter += 1
            if self.prefix == "ord":
                value = {
                    "order_id": f"ord-{self.counter:06d}",
                    "customer": f"c-{rng.randint(1, 250):04d}",
                    "amount": round(rng.uniform(3, 480), 2),
                    "currency": rng.choice(["EUR", "EUR", "EUR", "USD", "GBP"]),
                    "items": rng.randint(1, 6),
                    "status": "created",
                }
                key = value["order_id"].encode()
                headers = (("content-type", b"application/json"), ("source", b"checkout-service"))
            else:
                value = {
                    "entry_id": f"led-{self.counter:06d}",
                    "account": f"acct-{rng.randint(1, 40):03d}",
                    "side": rng.choice(["debit", "credit"]),
                    "amount": round(rng.uniform(1, 2500), 2),
                    "currency": "EUR",
                }
                key = value["account"].encode()
                headers = (("content-type", b"application/json"),)
            return key, _json(value), ts, headers

        return make


def generate() -> bytes:
    """The sample segment's bytes."""
    kafkatx, transactions = _import_kafkatx()
    rng = random.Random(SEED)
    part = _Partition(kafkatx, transactions)
    orders = _TxnProducer("orders-tx", 4000, 0, "snappy", 0.2, "ord")
    ledger = _TxnProducer("ledger-tx", 4001, 5, "zstd", 0.3, "led")
    payments_seq = 0
    counters = {"click": 0, "import": 0, "pay": 0}
    restarted = False
    empty_abort_done = False
    pages = ["/", "/search", "/products/42", "/products/7", "/cart", "/checkout", "/account"]

    for step in range(STEPS):
        part.tick(rng)
        if step == STEPS // 2:
            part.leader_epoch += 1  # the partition leader moved to another broker
        r = rng.random()
        if r < 0.30:
            n = rng.randint(1, 15)

            def click(i, ts):
                counters["click"] += 1
                user = rng.randint(1, 500)
                value = _json({"user": f"u-{user:04d}", "page": rng.choice(pages), "ms": rng.randint(3, 900)})
                key = None if rng.random() < 0.25 else f"u-{user:04d}".encode()
                if counters["click"] % 97 == 0:
                    key, value = f"u-{user:04d}".encode(), None  # a tombstone (delete this user's profile)
                return key, value, ts, ()

            part.append_records(_records(part, rng, n, click))
        elif r < 0.38:
            n = rng.randint(20, 40)

            def item(i, ts, step=step):
                counters["import"] += 1
                sku = rng.randint(1, 5000)
                value = _json({"sku": f"sku-{sku:05d}", "price": round(rng.uniform(1, 300), 2),
                               "stock": rng.randint(0, 999), "title": f"Item {sku} " + "x" * rng.randint(0, 40)})  # fmt: skip
                return f"sku-{sku:05d}".encode(), value, ts, (("batch", f"import-{step}".encode()),)

            part.append_records(_records(part, rng, n, item), compression="gzip")
        elif r < 0.56:
            n = rng.randint(1, 8)

            def pay(i, ts):
                counters["pay"] += 1
                value = _json({"payment_id": f"pay-{counters['pay']:06d}",
                               "order_id": f"ord-{rng.randint(1, max(1, orders.counter)):06d}",
                               "amount": round(rng.uniform(3, 480), 2), "method": rng.choice(["card", "sepa", "paypal"])})  # fmt: skip
                trace = rng.getrandbits(64).to_bytes(8, "big").hex().encode()
                return f"pay-{counters['pay']:06d}".encode(), value, ts, (("trace-id", trace),)

            part.append_records(_records(part, rng, n, pay), compression="lz4", producer_id=3000, producer_epoch=0,
                                base_sequence=payments_seq)  # fmt: skip
            payments_seq += n
        elif r < 0.78:
            orders.step(part, rng)
        else:
            if not empty_abort_done and step > STEPS // 3 and ledger.open_batches == 0:
                ledger.end(part, rng, "abort")  # partition added to the transaction, no data sent to it
                empty_abort_done = True
                continue
            if not restarted and step > STEPS // 2 and ledger.open_batches:
                ledger.end(part, rng, "abort")  # the transaction timed out and the coordinator aborted it
                ledger.epoch += 1  # the restarted producer gets a new epoch and starts its sequences at 0
                ledger.sequence = 0
                restarted = True
                continue
            ledger.step(part, rng)

    for p in (orders, ledger):
        if p.open_batches:
            p.end(part, rng)
    return b"".join(part.chunks)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help=f"output file (default {OUT})")
    args = parser.parse_args(argv)
    data = generate()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, args.out)
    print(f"wrote {len(data)} bytes to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
