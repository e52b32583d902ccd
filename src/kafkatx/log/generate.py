"""A deterministic exactly-once workload written as a Kafka log directory, with its expected reads.

:func:`generate` drives a :class:`~kafkatx.txncoord.TransactionCoordinator` and
:class:`~kafkatx.log.writer.PartitionWriter` s the way a small cluster's producers would:

* transactional producers (``txn-producer-<i>``) run interleaved transactions of 1-5 batches spread over
  the partitions (so transactions span partitions and segments); ``abort_ratio`` of them abort;
* ``zombie_ratio`` of the transactions meet a new instance of their transactional id: its
  ``init_producer_id`` fences the old instance and aborts its open transaction, and the old instance
  (the zombie) then tries one more write, which the partition rejects with
  :class:`~kafkatx.errors.InvalidProducerEpochError` (counted, never written);
* ``retry_ratio`` of the idempotent and transactional sends are retried byte for byte, and the writer
  answers with the original offsets (counted as duplicates, never written);
* each transactional producer is a consume-transform-produce application: before it ends a transaction
  it commits, with ``sendOffsetsToTransaction``, the offset of partition ``i`` of an input topic
  (``input``, not written) that its records so far account for, one input record per record written, in
  consumer group ``consumer_group`` (``etl``; None: no offsets); the offsets count only if the
  transaction commits, as the group coordinator loads them (:func:`kafkatx.grouplog.load_offsets`);
* idempotent and plain (no producer id) producers write beside them;
* ``open_transactions`` transactions are left open at the end, with some non-transactional data after
  them, so the last stable offset is below the log end;
* batch compression is ``compression`` or, for ``"mixed"``, drawn per batch from none / gzip / snappy /
  lz4 / zstd (gzip at level 1); keys are ``customer-<nnnn>`` (partitioned with Kafka's murmur2
  partitioner; a partition that no key hashes to, as when ``keys`` is below ``partitions``, draws from
  every key instead of staying empty, so there a key is in more than one partition), values JSON orders ``{"order_id", "customer", "amount_cents", "currency", "items",
  "shipping", "status", "ts"}`` whose ``amount_cents`` is the items' total plus shipping.

Everything, including every timestamp (a synthetic clock), follows from ``seed``: the same arguments give
byte-identical directories.  A planner draws every decision up front and predicts each partition's
offsets, so batches (and each partition's expected checksums) are built by ``workers`` processes while
the main process appends; the output does not depend on the number of workers.

``manifest.json`` at the root records what a reader must see, per partition and isolation level: the
record count, a checksum, the log end offset and last stable offset, and (read_committed) the sum of
``amount_cents`` per key; plus how many duplicates and zombie writes were rejected, and the group's
committed input offsets (``consumer_offsets``).  The checksum
(:func:`record_checksum`) is the SHA-256 of the partition's visible records in offset order, each
contributing ``int64 offset | int32 key length | key | int32 value length | value`` (big-endian, length
-1 and no bytes for null).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import struct
import sys
import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..batch import BatchBuilder
from ..compression import usable_cpus
from ..errors import InvalidProducerEpochError, KafkaTxError
from .writer import RecordBatchTooLargeError, RecordTooLargeError

__all__ = [
    "generate",
    "main_generate",
    "Manifest",
    "ManifestError",
    "record_checksum",
    "murmur2",
    "kafka_partition_for_key",
    "MANIFEST_NAME",
    "CHECKSUM_DEFINITION",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "kafkatx-generate/1"
INPUT_TOPIC = "input"  # the (unwritten) topic whose offsets the transactional producers commit
CHECKSUM_DEFINITION = (
    "sha256 over the visible records in offset order; each record contributes int64 offset, int32 key length, "
    "key bytes, int32 value length, value bytes (big-endian; length -1 and no bytes for null)"
)
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
START_TIMESTAMP = 1_700_000_000_000


class _DefaultRecords(int):
    """The default record count (100 000), told apart from an explicit ``records=100_000``."""


DEFAULT_RECORDS = _DefaultRecords(100_000)
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_PARTITION_NAME_RE = re.compile(r"(.+)-[0-9]+")  # <topic>-<partition>, the topic checked by _legal_topic
_QI = struct.Struct(">qi")
_I = struct.Struct(">i")


# ------------------------------------------------------------------------------------ partitioning
def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (int32 result), used by the default partitioner for keyed records."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition_for_key(key: bytes, num_partitions: int) -> int:
    """``Utils.toPositive(murmur2(key)) % numPartitions`` (the default partitioner for keyed records)."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# ------------------------------------------------------------------------------------ checksums
def record_checksum(records) -> tuple[int, str]:
    """``(count, sha256 hex)`` of records (objects with ``offset``, ``key``, ``value``) in the given order,
    as the manifest defines it (:data:`CHECKSUM_DEFINITION`)."""
    h = hashlib.sha256()
    n = 0
    for r in records:
        h.update(_record_bytes(r.offset, r.key, r.value))
        n += 1
    return n, h.hexdigest()


def _record_bytes(offset, key, value) -> bytes:
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    return b"".join((_QI.pack(offset, klen), key or b"", _I.pack(vlen), value or b""))


def _legal_topic(t) -> bool:
    """Whether ``t`` is a topic name Kafka allows (1-249 of [a-zA-Z0-9._-], not ``.`` or ``..``): one
    directory name, never a path."""
    return isinstance(t, str) and _TOPIC_RE.fullmatch(t) is not None and t not in (".", "..")


# ------------------------------------------------------------------------------------ manifest
class ManifestError(KafkaTxError, ValueError):
    """A ``manifest.json`` that is not a generator's manifest (not UTF-8 JSON, not an object, another format,
    a field missing or of the wrong type, a partition named other than ``<topic>-<partition>``); the message
    names the file when it is known."""

    def __init__(self, message: str, file: str | None = None):
        super().__init__(f"{message} (in {file})" if file is not None else message)
        self.reason = message
        self.file = file

    def __reduce__(self):
        return (type(self), (self.reason, self.file))


# the fields (name -> type) a manifest must have, those it may have, and those of each partition that
# verify_directory reads
_MANIFEST_FIELDS = {"seed": int, "params": dict, "partitions": dict, "duplicates_rejected": int,
                    "zombie_writes_rejected": int, "records": int}  # fmt: skip
_MANIFEST_OPTIONAL = {"transactions": dict, "transactional_ids": list, "transaction_state_partitions": list,
                      "bytes": int, "checksum": str, "consumer_offsets": dict}  # fmt: skip
_OFFSETS_FIELDS = {"group": str, "partition": str, "offsets": dict}
_PARTITION_FIELDS = {"log_end_offset": int, "last_stable_offset": int, "read_committed": dict,
                     "read_uncommitted": dict}  # fmt: skip
_VISIBLE_FIELDS = {"records": int, "sha256": str}
_COMMITTED_FIELDS = {**_VISIBLE_FIELDS, "amount_cents_by_key": dict}


def _check_fields(d: dict, fields: dict, where: str, required: bool = True) -> None:
    for name, kind in fields.items():
        if name not in d:
            if required:
                raise ManifestError(f"{where}{name!r} is missing")
            continue
        v = d[name]
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ManifestError(f"{where}{name!r} is {type(v).__name__} {v!r:.40}, not {kind.__name__}")


@dataclass
class Manifest:
    """The content of ``manifest.json`` (see the module docstring); ``partitions`` maps
    ``"<topic>-<partition>"`` to its expectations."""

    seed: int
    params: dict
    partitions: dict
    duplicates_rejected: int
    zombie_writes_rejected: int
    records: int
    transactions: dict = field(default_factory=dict)
    transactional_ids: list = field(default_factory=list)
    transaction_state_partitions: list = field(default_factory=list)
    bytes: int = 0
    format: str = MANIFEST_FORMAT
    checksum: str = CHECKSUM_DEFINITION
    consumer_offsets: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "format": self.format,
            "checksum": self.checksum,
            "seed": self.seed,
            "params": self.params,
            "records": self.records,
            "bytes": self.bytes,
            "duplicates_rejected": self.duplicates_rejected,
            "zombie_writes_rejected": self.zombie_writes_rejected,
            "transactions": self.transactions,
            "transactional_ids": self.transactional_ids,
            "transaction_state_partitions": self.transaction_state_partitions,
            **({"consumer_offsets": self.consumer_offsets} if self.consumer_offsets else {}),
            "partitions": self.partitions,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Manifest:
        """The manifest of ``d`` (as :meth:`to_dict` makes it); raises :class:`ManifestError` if ``d`` is not
        one: another format, or a field that is missing or of the wrong type."""
        if not isinstance(d, dict):
            raise ManifestError(f"not a {MANIFEST_FORMAT} manifest (a JSON {type(d).__name__}, not an object)")
        if d.get("format") != MANIFEST_FORMAT:
            raise ManifestError(f"not a {MANIFEST_FORMAT} manifest (format {d.get('format')!r:.40})")
        _check_fields(d, _MANIFEST_FIELDS, "")
        _check_fields(d, _MANIFEST_OPTIONAL, "", required=False)
        for name, exp in d["partitions"].items():
            # a partition's name is joined to the directory verify_directory reads: never a path out of it
            m = _PARTITION_NAME_RE.fullmatch(name)
            if m is None or not _legal_topic(m.group(1)):
                raise ManifestError(f"partition {name!r:.80} is not a <topic>-<partition> directory name")
            if not isinstance(exp, dict):
                raise ManifestError(f"partition {name!r} is {type(exp).__name__} {exp!r:.40}, not dict")
            _check_fields(exp, _PARTITION_FIELDS, f"partition {name!r}: ")
            _check_fields(exp["read_committed"], _COMMITTED_FIELDS, f"partition {name!r}: read_committed: ")
            _check_fields(exp["read_uncommitted"], _VISIBLE_FIELDS, f"partition {name!r}: read_uncommitted: ")
        offsets = d.get("consumer_offsets") or {}
        if offsets:
            _check_fields(offsets, _OFFSETS_FIELDS, "consumer_offsets: ")
            m = _PARTITION_NAME_RE.fullmatch(offsets["partition"])  # joined to the directory verify reads, as above
            if m is None or m.group(1) != "__consumer_offsets":
                raise ManifestError(f"consumer_offsets: partition {offsets['partition']!r:.80} is not a "
                                    "__consumer_offsets-<partition> directory name")  # fmt: skip
            bad = [k for k, v in offsets["offsets"].items() if type(v) is not int]
            if bad:
                raise ManifestError(f"consumer_offsets: offset of {bad[0]!r:.80} is not an int")
        return cls(d["seed"], d["params"], d["partitions"], d["duplicates_rejected"], d["zombie_writes_rejected"],
                   d["records"], d.get("transactions", {}), d.get("transactional_ids", []),
                   d.get("transaction_state_partitions", []), d.get("bytes", 0), d["format"],
                   d.get("checksum", CHECKSUM_DEFINITION), offsets)  # fmt: skip

    @classmethod
    def load(cls, path) -> Manifest:
        """Read a manifest from a generated directory (or the ``manifest.json`` path itself)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, MANIFEST_NAME)
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            d = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ManifestError(f"not UTF-8 text: {exc}", path) from None
        except (ValueError, RecursionError) as exc:  # (JSONDecodeError is a ValueError)
            raise ManifestError(f"not JSON: {exc}", path) from None
        try:
            return cls.from_dict(d)
        except ManifestError as exc:
            raise ManifestError(exc.reason, path) from None

    def write(self, directory) -> str:
        path = os.path.join(os.fspath(directory), MANIFEST_NAME)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)
        return path


# ------------------------------------------------------------------------------------ bookkeeping
class _Entry:
    __slots__ = ("first", "blob", "count", "customers", "amounts", "visible")

    def __init__(self, first, blob, count, customers, amounts, visible):
        self.first = first
        self.blob = blob
        self.count = count
        self.customers = customers
        self.amounts = amounts
        self.visible = visible  # True / False once decided, None while the transaction is open


class _Book:
    """What a reader of one partition must see, streamed in offset order."""

    def __init__(self, topic, partition):
        self.topic = topic
        self.partition = partition
        self.uncommitted = hashlib.sha256()
        self.uncommitted_count = 0
        self.committed = hashlib.sha256()
        self.committed_count = 0
        self.visible_customers = array("i")
        self.visible_amounts = array("q")
        self.pending: deque[_Entry] = deque()
        self.open: dict[str, list[_Entry]] = {}
        self.batches = 0
        self.txn_counts = {"committed": 0, "aborted": 0, "open": 0}

    def add(self, first, blob, count, customers, amounts, txn_id):
        self.uncommitted.update(blob)
        self.uncommitted_count += count
        self.batches += 1
        if txn_id is None and not self.pending:
            self._visible(blob, count, customers, amounts)
            return
        e = _Entry(first, blob, count, customers, amounts, True if txn_id is None else None)
        self.pending.append(e)
        if txn_id is not None:
            self.open.setdefault(txn_id, []).append(e)

    def end(self, txn_id, committed: bool):
        entries = self.open.pop(txn_id, None)
        if not entries:
            return
        self.txn_counts["committed" if committed else "aborted"] += 1
        for e in entries:
            e.visible = committed
        pending = self.pending
        while pending and pending[0].visible is not None:
            e = pending.popleft()
            if e.visible:
                self._visible(e.blob, e.count, e.customers, e.amounts)

    def _visible(self, blob, count, customers, amounts):
        self.committed.update(blob)
        self.committed_count += count
        self.visible_customers.frombytes(customers)  # native int32 / int64 bytes from the builder
        self.visible_amounts.frombytes(amounts)

    def sums(self) -> dict[int, int]:
        """``{customer: sum of amount_cents}`` over the visible records."""
        try:
            import numpy as np
        except ImportError:  # pragma: no cover - numpy is an optional dependency
            out: dict[int, int] = {}
            get = out.get
            for c, a in zip(self.visible_customers, self.visible_amounts):
                out[c] = get(c, 0) + a
            return out
        c = np.frombuffer(self.visible_customers, dtype=np.int32)
        a = np.frombuffer(self.visible_amounts, dtype=np.int64)
        if not len(c):
            return {}
        totals = np.zeros(int(c.max()) + 1, dtype=np.int64)
        np.add.at(totals, c, a)
        present = np.flatnonzero(np.bincount(c, minlength=len(totals)))
        return {int(k): int(totals[k]) for k in present}

    def last_stable_offset(self, log_end_offset):
        for e in self.pending:
            if e.visible is None:
                return e.first
        return log_end_offset


# ------------------------------------------------------------------------------------ generator
_CITIES = (
    ("Lyon", "69003", "FR"),
    ("Berlin", "10115", "DE"),
    ("Madrid", "28001", "ES"),
    ("Milano", "20121", "IT"),
    ("Porto", "4000-007", "PT"),
    ("Gent", "9000", "BE"),
    ("Utrecht", "3511", "NL"),
    ("Graz", "8010", "AT"),
)
_POOL_SIZE = 4096
GZIP_LEVEL = 1  # compression.gzip.level (KIP-390); the fastest level keeps generation quick
SEGMENTS_PER_PARTITION = 16  # what generate()'s default segment size aims at
MIN_SEGMENT_BYTES = 1 << 20  # Kafka's smallest log.segment.bytes (KIP-1030)
WRITE_BUFFER_BYTES = 2 << 20  # the writers' write_buffer_bytes: a huge page (x86-64, most arm64 kernels)
MAX_SEGMENT_BYTES = 1 << 30  # Kafka's default log.segment.bytes


_PRODUCTS = (
    b"Wireless Mouse",
    b"USB-C Cable 2m",
    b"Mechanical Keyboard",
    b"27in Monitor",
    b"Laptop Stand",
    b"Webcam HD",
    b"Noise Cancelling Headphones",
    b"Portable SSD 1TB",
    b"Desk Lamp",
    b"Ergonomic Chair",
    b"Phone Case",
    b"Bluetooth Speaker",
    b"Coffee Grinder",
    b"French Press",
    b"Running Shoes",
    b"Rain Jacket",
    b"Backpack 30L",
    b"Water Bottle",
    b"Yoga Mat",
    b"Cast Iron Pan",
    b"Chef Knife",
    b"Cutting Board",
    b"Tea Sampler",
    b"Notebook A5",
    b"Fountain Pen",
    b"Board Game",
    b"Puzzle 1000pc",
    b"LED Strip 5m",
    b"Smart Plug",
    b"Air Purifier Filter",
)
_STATUSES = (b"PAID", b"PAID", b"PAID", b"PENDING", b"SHIPPED")


def _order_pool(r: random.Random, size: int):
    """``size`` JSON fragments (items, shipping address, status) and the order total of each."""
    frags, totals = [], []
    for _ in range(size):
        items = []
        total = 0
        for _j in range(r.randint(1, 4)):
            qty = r.randint(1, 3)
            price = r.randint(199, 9999)
            total += qty * price
            items.append(b'{"sku": "SKU-%05d", "name": "%s", "qty": %d, "price_cents": %d}'
                         % (r.randrange(100_000), r.choice(_PRODUCTS), qty, price))  # fmt: skip
        city, zip_code, country = r.choice(_CITIES)
        shipping = r.choice((0, 0, 499, 990))
        total += shipping
        frags.append(b'"items": [' + b", ".join(items) + b'], "shipping": {"city": "%s", "zip": "%s", '
                     b'"country": "%s", "cost_cents": %d}, "status": "%s"'
                     % (city.encode(), zip_code.encode(), country.encode(), shipping, r.choice(_STATUSES)))  # fmt: skip
        totals.append(total)
    return frags, totals


class _Tables:
    """Keys, their partitions and the order fragments: everything a batch builder needs besides its spec."""

    def __init__(self, seed: int, keys: int, partitions: int):
        self.key_bytes = [b"customer-%04d" % c for c in range(keys)]
        by_partition = [[] for _ in range(partitions)]
        for c, k in enumerate(self.key_bytes):
            by_partition[kafka_partition_for_key(k, partitions)].append(c)
        for p in range(partitions):  # a partition no key maps to still gets data
            if not by_partition[p]:
                by_partition[p] = list(range(keys))
        self.customers_by_partition = by_partition
        self.frags, self.totals = _order_pool(random.Random(seed * 7919 + 1), _POOL_SIZE)
        self.pool_ids = range(_POOL_SIZE)


class _Spec(NamedTuple):
    """A batch to build: its own random seed, partition, size, codec, first timestamp, first order id and
    the offset its first record will get."""

    seed: int
    partition: int
    count: int
    compression: str
    base_timestamp: int
    order_id: int
    first_offset: int


_BLOB_PACKERS: dict = {}


def _blob_packer(key_len, value_len):
    """``pack(offset, key_len, key, value_len, value)``: one record's checksum contribution."""
    p = _BLOB_PACKERS.get((key_len, value_len))
    if p is None:
        p = _BLOB_PACKERS[(key_len, value_len)] = struct.Struct(f">qi{key_len}si{value_len}s").pack
    return p


def _draw(r, population, n):
    """``n`` items of ``population`` drawn uniformly (with replacement) from ``r``'s bytes."""
    m = len(population)
    return [population[x % m] for x in array("I", r.randbytes(4 * n))]


def _build(t: _Tables, spec: _Spec):
    """(batch without producer fields, checksum blob, customers, amounts) for ``spec``."""
    r = random.Random(spec.seed)
    n = spec.count
    custs = _draw(r, t.customers_by_partition[spec.partition], n)
    frag_ids = _draw(r, t.pool_ids, n)
    key_bytes, frags, totals = t.key_bytes, t.frags, t.totals
    b = BatchBuilder(compression=spec.compression,
                     compression_level=GZIP_LEVEL if spec.compression == "gzip" else None)  # fmt: skip
    append = b.append
    base_ts, oid, off = spec.base_timestamp, spec.order_id, spec.first_offset
    parts = []
    add = parts.append
    amounts = [totals[f] for f in frag_ids]
    packers = _BLOB_PACKERS
    for i in range(n):
        k = key_bytes[custs[i]]
        ts = base_ts + i
        v = b'{"order_id": %d, "customer": "%s", "amount_cents": %d, "currency": "EUR", %s, "ts": %d}' % (
            oid + i, k, amounts[i], frags[frag_ids[i]], ts)  # fmt: skip
        append(v, k, timestamp=ts)
        kl, vl = len(k), len(v)
        pack = packers.get((kl, vl)) or _blob_packer(kl, vl)
        add(pack(off + i, kl, k, vl, v))
    return b.build(), b"".join(parts), array("i", custs).tobytes(), array("q", amounts).tobytes()


class _Builder:
    """Builds batches and keeps the books (expected reads) of the partitions it owns.

    One per worker process (or one in-process): every batch of a partition is built by the same builder,
    in offset order, so its checksum stream never leaves the builder; only the batches do."""

    def __init__(self, seed, keys, partitions):
        self.tables = _Tables(seed, keys, partitions)
        self.books: dict = {}

    def _book(self, tp):
        book = self.books.get(tp)
        if book is None:
            book = self.books[tp] = _Book(*tp)
        return book

    def build(self, tp, spec, txn_id):
        data, blob, custs, amounts = _build(self.tables, spec)
        self._book(tp).add(spec.first_offset, blob, spec.count, custs, amounts, txn_id)
        return data

    def zombie(self, tp, spec):
        return _build(self.tables, spec)[0]

    def end(self, tp, txn_id, committed):
        self._book(tp).end(txn_id, committed)

    def open(self, tp):
        self._book(tp).txn_counts["open"] += 1

    @staticmethod
    def empty_result(leo):
        sha = hashlib.sha256().hexdigest()
        return {"last_stable_offset": leo, "batches": 0, "transactions": {"committed": 0, "aborted": 0, "open": 0},
                "read_committed": (0, sha, {}), "read_uncommitted": (0, sha)}  # fmt: skip

    def results(self, leos):
        out = {}
        for tp, book in self.books.items():
            out[tp] = {
                "last_stable_offset": book.last_stable_offset(leos[tp]),
                "batches": book.batches,
                "transactions": dict(book.txn_counts),
                "read_committed": (book.committed_count, book.committed.hexdigest(), book.sums()),
                "read_uncommitted": (book.uncommitted_count, book.uncommitted.hexdigest()),
            }
        return out


def _worker_main(inq, outq, args):  # pragma: no cover - runs in a child process (covered via the results)
    try:
        builder = _Builder(*args)
        while True:
            msg = inq.get()
            if msg is None:
                break
            op, a = msg
            r = getattr(builder, op)(*a)
            if op in ("build", "zombie", "results"):
                outq.put(("ok", r))
    except BaseException:  # noqa: BLE001 - report anything to the parent
        import traceback

        outq.put(("error", traceback.format_exc()))


class _LocalWorkers:
    """The builder in this process (``workers=0``)."""

    def __init__(self, args, tps):
        self.builder = _Builder(*args)
        self.ready: dict = {tp: deque() for tp in tps}

    def dispatch(self, op, tp, *a):
        r = getattr(self.builder, op)(tp, *a)
        if op in ("build", "zombie"):
            self.ready[tp].append(r)

    def next_batch(self, tp):
        return self.ready[tp].popleft()

    def results(self, leos):
        return self.builder.results(leos)

    def close(self):
        pass


class _ProcessWorkers:
    """Builders in ``n`` child processes; partition ``i`` (in ``tps`` order) belongs to builder ``i % n``."""

    def __init__(self, args, tps, n):
        import multiprocessing

        ctx = multiprocessing.get_context()
        self.n = n
        self.owner = {tp: i % n for i, tp in enumerate(tps)}
        self.inqs = [ctx.Queue(maxsize=512) for _ in range(n)]
        self.outqs = [ctx.Queue() for _ in range(n)]
        self.procs = [ctx.Process(target=_worker_main, args=(self.inqs[i], self.outqs[i], args), daemon=True)
                      for i in range(n)]  # fmt: skip
        for p in self.procs:
            p.start()

    def dispatch(self, op, tp, *a):
        self.inqs[self.owner[tp]].put((op, (tp, *a)))

    def _get(self, w):
        import queue as _queue

        while True:
            try:
                status, r = self.outqs[w].get(timeout=5)
                break
            except _queue.Empty:
                if not self.procs[w].is_alive():
                    raise RuntimeError(f"generator worker {w} died (exit code {self.procs[w].exitcode})") from None
        if status == "error":
            raise RuntimeError(f"generator worker {w} failed:\n{r}")
        return r

    def next_batch(self, tp):
        # a builder answers its build/zombie requests in order, and each partition has one builder
        return self._get(self.owner[tp])

    def results(self, leos):
        out = {}
        for w in range(self.n):
            self.inqs[w].put(("results", (leos,)))
            out.update(self._get(w))
        return out

    def close(self):
        for q in self.inqs:
            try:
                q.put(None, timeout=1)
            except Exception:  # noqa: BLE001 - a full queue of a worker that is going away anyway
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join()


class _Clock:
    def __init__(self, start):
        self.now = start

    def __call__(self):
        return self.now


def _choose_compressions(compression):
    if compression == "mixed":
        return COMPRESSIONS
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS + ('mixed',)}, got {compression!r}")
    return (compression,)


class _Event(NamedTuple):
    kind: str  # begin / send / retry / end / zombie / open
    ts: int
    actor: str = "txn"  # txn / idem / plain
    i: int = 0
    tp: tuple | None = None
    spec: _Spec | None = None
    commit: bool = False
    parts: tuple = ()


class _Planner:
    """Every decision of the workload, drawn from one seeded RNG, as a stream of :class:`_Event`.

    The planner predicts each partition's log end offset (data batches and markers), so a batch can be
    built -- by a worker process -- before it is appended; the executor checks each prediction."""

    def __init__(self, *, rng, tps, codecs, producers, idempotent_producers, plain_producers, abort_ratio,
                 zombie_ratio, retry_ratio, open_transactions, records, batch_records):  # fmt: skip
        self.rng = rng
        self.tps = tps
        self.codecs = codecs
        self.producers = producers
        self.idempotent = idempotent_producers
        self.plain = plain_producers
        self.abort_ratio = abort_ratio
        self.zombie_ratio = zombie_ratio
        self.retry_ratio = retry_ratio
        self.open_transactions = open_transactions
        self.records = records
        self.lo, self.hi = batch_records
        self.now = START_TIMESTAMP
        self.leo = {tp: 0 for tp in tps}
        self.order_id = 0
        self.txn_parts = [set() for _ in range(producers)]

    def _tick(self):
        self.now += self.rng.randint(1, 20)
        return self.now

    def _spec(self, tp, n, *, consume=True):
        r = self.rng
        spec = _Spec(r.getrandbits(63), tp[1], n, r.choice(self.codecs), self.now, self.order_id, self.leo[tp])
        self.order_id += n
        if consume:
            self.leo[tp] += n
        return spec

    def _end(self, i, commit, ts, kind="end", tp=None, spec=None):
        parts = tuple(sorted(self.txn_parts[i]))
        for p in parts:
            self.leo[p] += 1  # the marker
        self.txn_parts[i] = set()
        return _Event(kind, ts, "txn", i, tp, spec, commit, parts)

    def _send(self, actor, i, tp, n, ts):
        if actor == "txn":
            self.txn_parts[i].add(tp)
        return _Event("send", ts, actor, i, tp, self._spec(tp, n))

    def events(self):
        rng = self.rng
        tps = self.tps
        actors = [("txn", i) for i in range(self.producers)] + [("idem", i) for i in range(self.idempotent)] + \
                 [("plain", i) for i in range(self.plain)]  # fmt: skip
        weights = [1.0] * self.producers + [0.5] * self.idempotent + [0.5] * self.plain
        # the final phase: transactions left open, then non-transactional data behind them
        tail_batches = self.open_transactions + (1 if (self.idempotent or self.plain) else 0)
        reserve = min(self.records // 2, tail_batches * min(self.hi, 10)) if tail_batches else 0
        budget = self.records - reserve
        plan = [0] * self.producers  # batches left in each producer's open transaction
        while budget > 0:
            ts = self._tick()
            actor, i = rng.choices(actors, weights)[0]
            tp = tps[rng.randrange(len(tps))]
            n = min(rng.randint(self.lo, self.hi), budget)
            budget -= n
            if actor == "txn" and plan[i] == 0:
                yield _Event("begin", ts, "txn", i)
                plan[i] = rng.randint(1, 5)
            yield self._send(actor, i, tp, n, ts)
            if actor != "plain" and rng.random() < self.retry_ratio:
                yield _Event("retry", ts, actor, i, tp)
            if actor == "txn":
                plan[i] -= 1
                if plan[i] == 0:
                    if self.zombie_ratio and rng.random() < self.zombie_ratio:
                        parts = sorted(self.txn_parts[i])
                        ztp = parts[rng.randrange(len(parts))]
                        spec = self._spec(ztp, rng.randint(1, 5), consume=False)
                        # the new instance aborts the old one's transaction, then the old one writes
                        yield self._end(i, False, ts, "zombie", ztp, spec)
                    else:
                        yield self._end(i, rng.random() >= self.abort_ratio, ts)
        for i in range(self.producers):  # finish every transaction still in flight
            if plan[i]:
                yield self._end(i, rng.random() >= self.abort_ratio, self._tick())
        left = reserve
        per = max(1, left // tail_batches) if tail_batches else 0
        for i in range(self.open_transactions):
            if left <= 0:
                break
            ts = self._tick()
            tp = tps[rng.randrange(len(tps))]
            n = min(per, left)
            left -= n
            yield _Event("begin", ts, "txn", i)
            yield self._send("txn", i, tp, n, ts)
            yield _Event("open", ts, "txn", i, tp)
        if left > 0 and (self.idempotent or self.plain):
            ts = self._tick()
            tp = tps[rng.randrange(len(tps))]
            yield self._send("idem" if self.idempotent else "plain", 0, tp, left, ts)


def default_segment_bytes(records: int, bytes_per_record: float, partitions: int) -> int:
    """:func:`generate`'s segment size when none is given: each partition's expected log in about
    ``SEGMENTS_PER_PARTITION`` segments (so transactions span segments at any size), in whole MiB, from
    Kafka's smallest ``log.segment.bytes`` (1 MiB) to its default (1 GiB)."""
    per_partition = records * bytes_per_record / max(partitions, 1)
    mib = -(-int(per_partition) // (SEGMENTS_PER_PARTITION << 20))
    return min(max(mib << 20, MIN_SEGMENT_BYTES), MAX_SEGMENT_BYTES)


def _estimate_bytes_per_record(tables_args, codecs, batch_records, seed) -> float:
    """Log bytes per record of a few sample batches (deterministic), to turn ``target_bytes`` into records."""
    tables = _Tables(*tables_args)
    r = random.Random(seed * 31 + 7)
    total = records = 0
    for codec in codecs:
        for _ in range(2):
            n = max(batch_records[0], min(batch_records[1], 200))
            spec = _Spec(r.getrandbits(63), r.randrange(tables_args[2]), n, codec, START_TIMESTAMP, 0, 0)
            total += len(_build(tables, spec)[0])
            records += n
    return total / records


def generate(path, *, topics=("orders",), partitions: int = 3, records=DEFAULT_RECORDS, producers: int = 4,
             abort_ratio: float = 0.1, zombie_ratio: float = 0.02, open_transactions: int = 1,
             compression: str = "mixed", seed: int = 0, segment_bytes: int | None = None,
             idempotent_producers: int = 1, plain_producers: int = 1, retry_ratio: float = 0.01,
             target_bytes: int | None = None, keys: int = 10_000, batch_records: tuple = (20, 400),
             transaction_version: int = 2, txn_state_partitions: int = 50, validate: bool = False,
             workers: int | None = None, overwrite: bool = False,
             write_buffer_bytes: int = WRITE_BUFFER_BYTES, consumer_group: str | None = "etl") -> Manifest:  # fmt: skip
    """Write the workload described in the module docstring into ``path``; returns its :class:`Manifest`.

    ``records`` data records are written (exactly; default 100 000).  With ``target_bytes`` the record
    count is derived from a deterministic estimate of log bytes per record, so the log comes out close to
    that size (an explicitly given ``records`` still caps it).  ``batch_records`` bounds the records per batch; ``keys`` is the number
    of distinct customers.  ``workers`` processes build the batches (default: as many as the CPUs it may use, at most 4,
    none on a single CPU; 0 builds them in this process) -- the output does not depend on it.
    ``segment_bytes`` defaults to :func:`default_segment_bytes` (1 MiB while a partition's log stays
    under 16 MiB, then a sixteenth of it, up to Kafka's 1 GiB); the manifest records the size used.
    ``validate=True`` has the writers decode every batch as ``LogValidator`` does (slower; the batches
    are built by kafkatx, so the default skips it -- CRC, framing and producer checks always run).  ``path`` must be missing or empty unless ``overwrite``.
    The writers hold appends and write them ``write_buffer_bytes`` (2 MiB) at a time (see ``PartitionWriter``;
    0: one write per append, as a broker): the same files, cached where the file system allows in 2 MiB
    pages, which a read right after maps 2 MiB at a time.  (On a VM that hands free memory back to its host,
    such pages cost the host's page faults again when first used: there 0 may generate faster.)
    """
    topics = (topics,) if isinstance(topics, str) else tuple(topics)
    if not topics or not all(_legal_topic(t) for t in topics):
        raise ValueError(f"invalid topic names {topics!r} (Kafka allows 1-249 of [a-zA-Z0-9._-])")
    if len(set(topics)) != len(topics) or "__transaction_state" in topics:
        raise ValueError(f"invalid topic names {topics!r} (duplicates, or the coordinator's own topic)")
    if partitions <= 0 or producers < 0 or idempotent_producers < 0 or plain_producers < 0:
        raise ValueError("partitions must be positive and producer counts non-negative")
    if producers + idempotent_producers + plain_producers == 0:
        raise ValueError("at least one producer is needed")
    if not 0 <= open_transactions <= producers:
        raise ValueError(f"open_transactions must be between 0 and producers ({producers}), got {open_transactions}")
    for name, r in (("abort_ratio", abort_ratio), ("zombie_ratio", zombie_ratio), ("retry_ratio", retry_ratio)):
        if not 0.0 <= r <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {r}")
    if records is DEFAULT_RECORDS:
        records = None if target_bytes is not None else int(DEFAULT_RECORDS)
    if records is None and target_bytes is None:
        raise ValueError("give records, target_bytes or both")
    if records is not None and records < 0:
        raise ValueError(f"records must not be negative, got {records}")
    if target_bytes is not None and target_bytes < 0:
        raise ValueError(f"target_bytes must not be negative, got {target_bytes}")
    lo, hi = batch_records
    if not 1 <= lo <= hi:
        raise ValueError(f"batch_records must be (min, max) with 1 <= min <= max, got {batch_records!r}")
    if keys <= 0:
        raise ValueError(f"keys must be positive, got {keys}")
    if isinstance(write_buffer_bytes, bool) or not isinstance(write_buffer_bytes, int) or write_buffer_bytes < 0:
        raise ValueError(f"write_buffer_bytes must be an int >= 0, got {write_buffer_bytes!r}")
    codecs = _choose_compressions(compression)
    if workers is None:
        cpus = usable_cpus()
        workers = 0 if cpus < 2 else min(cpus, 4)
    path = os.fspath(path)
    existed = os.path.exists(path)
    if existed and os.listdir(path):
        if not overwrite:
            raise FileExistsError(f"{path} is not empty (pass overwrite=True to replace it)")
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)

    from ..txncoord import IdempotentProducer, TransactionalProducer, TransactionCoordinator  # (import cycle)

    tables_args = (seed, keys, partitions)
    per = None
    if target_bytes is not None:
        per = _estimate_bytes_per_record(tables_args, codecs, batch_records, seed)
        by_bytes = int(target_bytes / per)
        records = by_bytes if records is None else min(records, by_bytes)
    tps = [(t, p) for t in topics for p in range(partitions)]
    if segment_bytes is None:
        if per is None:
            per = _estimate_bytes_per_record(tables_args, codecs, batch_records, seed)
        segment_bytes = default_segment_bytes(records, per, len(tps))
    planner = _Planner(rng=random.Random(seed), tps=tps, codecs=codecs, producers=producers,
                       idempotent_producers=idempotent_producers, plain_producers=plain_producers,
                       abort_ratio=abort_ratio, zombie_ratio=zombie_ratio, retry_ratio=retry_ratio,
                       open_transactions=open_transactions, records=records, batch_records=batch_records)  # fmt: skip
    clock = _Clock(START_TIMESTAMP)
    # appends written 2 MiB at a time: the segments are then cached as a read from disk caches them (see
    # PartitionWriter's write_buffer_bytes), and a read of the new directory maps them 2 MiB at a time
    writer_options = dict(segment_bytes=segment_bytes, validate_records=validate, write_buffer_bytes=write_buffer_bytes)
    coord = TransactionCoordinator(path, num_partitions=txn_state_partitions, transaction_version=transaction_version,
                                   clock=clock, first_producer_id=1000, writer_options=writer_options)  # fmt: skip
    stats = {"duplicates": 0, "zombies": 0, "records": 0, "bytes": 0, "committed": 0, "aborted": 0,
             "fenced": 0, "open": 0}  # fmt: skip
    pool = _ProcessWorkers(tables_args, tps, workers) if workers > 0 else _LocalWorkers(tables_args, tps)
    try:
        txn = [TransactionalProducer(coord, f"txn-producer-{i}", clock=clock) for i in range(producers)]
        idem = [IdempotentProducer(coord, clock=clock) for _ in range(idempotent_producers)]
        for tp in tps:
            coord.writer(*tp)  # every partition exists, even one that gets no data
        inputs = [0] * producers  # each transactional producer's committed input offset
        _execute(planner.events(), pool, 64 * max(workers, 1) if workers else 0, coord, txn, idem, stats, clock,
                 consumer_group, inputs)  # fmt: skip
        expected = pool.results(planner.leo)
    except (RecordBatchTooLargeError, RecordTooLargeError) as exc:
        # a workload that cannot be written whole is not written at all
        coord.close()
        shutil.rmtree(path)
        if existed:
            os.makedirs(path)  # (as it was: empty, or emptied by overwrite)
        limit = (f"segment_bytes={segment_bytes}; raise segment_bytes or lower batch_records"
                 if isinstance(exc, RecordBatchTooLargeError) else
                 "the writers' max.message.bytes; lower batch_records")  # fmt: skip
        raise type(exc)(
            f"{exc}: batches of up to {hi} records do not fit in {limit} (--batch-records; nothing was written)"
        ) from None
    finally:
        pool.close()

    # the expectations, checked against what the writers themselves report
    parts_out = {}
    key_bytes = [b"customer-%04d" % c for c in range(keys)]
    for tp in tps:
        w = coord.writer(*tp)
        leo = w.log_end_offset
        exp = expected.get(tp) or _Builder.empty_result(leo)
        if exp["last_stable_offset"] != w.last_stable_offset or leo != planner.leo[tp]:  # pragma: no cover
            raise AssertionError(f"{tp}: expected LSO {exp['last_stable_offset']} / LEO {planner.leo[tp]}, the "
                                 f"writer says {w.last_stable_offset} / {leo}")  # fmt: skip
        rc_count, rc_sha, sums = exp["read_committed"]
        ru_count, ru_sha = exp["read_uncommitted"]
        parts_out[f"{tp[0]}-{tp[1]}"] = {
            "topic": tp[0],
            "partition": tp[1],
            "log_end_offset": leo,
            "last_stable_offset": exp["last_stable_offset"],
            "segments": len(w.segments),
            "batches": exp["batches"],
            "transactions": exp["transactions"],
            "read_committed": {
                "records": rc_count,
                "sha256": rc_sha,
                "amount_cents_by_key": {key_bytes[c].decode(): v for c, v in sorted(sums.items())},
            },
            "read_uncommitted": {"records": ru_count, "sha256": ru_sha},
        }
    state_parts = coord.state_partitions
    offsets_out = {}
    if consumer_group is not None:
        from ..grouplog import CONSUMER_OFFSETS_TOPIC, group_partition_for

        offsets_out = {"group": consumer_group,
                       "partition": f"{CONSUMER_OFFSETS_TOPIC}-{group_partition_for(consumer_group)}",
                       "offsets": {f"{INPUT_TOPIC}-{i}": n for i, n in enumerate(inputs) if n}}  # fmt: skip
    coord.close()
    params = dict(topics=list(topics), partitions=partitions, records=records, producers=producers,
                  abort_ratio=abort_ratio, zombie_ratio=zombie_ratio, open_transactions=open_transactions,
                  compression=compression, segment_bytes=segment_bytes, idempotent_producers=idempotent_producers,
                  plain_producers=plain_producers, retry_ratio=retry_ratio, target_bytes=target_bytes, keys=keys,
                  batch_records=list(batch_records), transaction_version=transaction_version,
                  txn_state_partitions=txn_state_partitions, gzip_level=GZIP_LEVEL,
                  consumer_group=consumer_group)  # fmt: skip
    manifest = Manifest(
        seed=seed,
        params=params,
        partitions=parts_out,
        duplicates_rejected=stats["duplicates"],
        zombie_writes_rejected=stats["zombies"],
        records=stats["records"],
        transactions={
            "committed": stats["committed"],
            "aborted": stats["aborted"],
            "fenced": stats["fenced"],
            "open": stats["open"],
        },  # fmt: skip
        transactional_ids=[f"txn-producer-{i}" for i in range(producers)],
        transaction_state_partitions=[f"__transaction_state-{n}" for n in state_parts],
        bytes=stats["bytes"],
        consumer_offsets=offsets_out,
    )
    manifest.write(path)
    return manifest


def _execute(events, pool, window, coord, txn, idem, stats, clock, group=None, inputs=None):  # noqa: C901
    """Run the planner's events against the coordinator and writers (one event switch); ``group``: the
    consumer group whose input offsets each transaction commits (``inputs``, updated on commit).

    Events are pulled ``window`` ahead of execution and their batches requested from the builders at
    once, so the builders work while this process appends."""
    queue: deque = deque()
    in_txn: dict = {}  # records each transactional producer sent in its open transaction
    events = iter(events)
    exhausted = False

    def pull():
        nonlocal exhausted
        try:
            ev = next(events)
        except StopIteration:
            exhausted = True
            return
        kind = ev.kind
        if kind == "send":
            tid = f"txn-producer-{ev.i}" if ev.actor == "txn" else None
            pool.dispatch("build", ev.tp, ev.spec, tid)
        elif kind in ("end", "zombie"):
            if kind == "zombie":
                pool.dispatch("zombie", ev.tp, ev.spec)
            for p in ev.parts:
                pool.dispatch("end", p, f"txn-producer-{ev.i}", ev.commit)
        elif kind == "open":
            pool.dispatch("open", ev.tp)
        queue.append(ev)

    while True:
        while not exhausted and (len(queue) <= window or not queue):
            pull()
        if not queue:
            break
        ev = queue.popleft()
        kind = ev.kind
        clock.now = ev.ts
        if kind == "send":
            tp, spec = ev.tp, ev.spec
            data = pool.next_batch(tp)
            if ev.actor == "plain":
                info = coord.writer(*tp).append(data)
            else:
                info = (txn[ev.i] if ev.actor == "txn" else idem[ev.i]).send_batch(tp[0], tp[1], data)
            if info.duplicate or info.first_offset != spec.first_offset or info.records_count != spec.count:
                raise AssertionError(
                    f"{tp}: batch planned at offset {spec.first_offset} went to "
                    f"{info.first_offset} (duplicate={info.duplicate})"
                )  # pragma: no cover
            stats["records"] += spec.count
            stats["bytes"] += info.size_in_bytes
            if ev.actor == "txn":
                in_txn[ev.i] = in_txn.get(ev.i, 0) + spec.count
        elif kind == "retry":
            producer = txn[ev.i] if ev.actor == "txn" else idem[ev.i]
            again = producer.resend_last(*ev.tp)
            if not again.duplicate:  # pragma: no cover - the writer must recognise it
                raise AssertionError(f"a retried batch on {ev.tp} was not answered as a duplicate")
            stats["duplicates"] += 1
        elif kind == "begin":
            txn[ev.i].begin_transaction()
            in_txn[ev.i] = 0
        elif kind == "end":
            p = txn[ev.i]
            if tuple(sorted(p.partitions_in_transaction)) != ev.parts:  # pragma: no cover
                raise AssertionError(f"{p.transactional_id}: planned partitions {ev.parts} differ")
            if group is not None:
                consumed = inputs[ev.i] + in_txn.get(ev.i, 0)
                p.send_offsets_to_transaction({(INPUT_TOPIC, ev.i): consumed}, group)
                if ev.commit:
                    inputs[ev.i] = consumed
            p.commit_transaction() if ev.commit else p.abort_transaction()
            stats["committed" if ev.commit else "aborted"] += 1
        elif kind == "zombie":
            old = txn[ev.i]
            # the new instance fences the old one and aborts its transaction
            txn[ev.i] = type(old)(coord, old.transactional_id, clock=clock)
            stats["fenced"] += 1
            data = pool.next_batch(ev.tp)
            try:
                old.send_batch(ev.tp[0], ev.tp[1], data)
            except InvalidProducerEpochError:
                stats["zombies"] += 1
            else:  # pragma: no cover - the writer must refuse it
                raise AssertionError(f"a zombie write to {ev.tp} was accepted")
        elif kind == "open":
            stats["open"] += 1


# ------------------------------------------------------------------------------------ CLI
def _size(text: str) -> int:
    t = text.strip().upper().replace("_", "")
    mult = 1
    for suffix, m in (("KB", 10**3), ("MB", 10**6), ("GB", 10**9), ("KIB", 1 << 10), ("MIB", 1 << 20),
                      ("GIB", 1 << 30), ("K", 10**3), ("M", 10**6), ("G", 10**9)):  # fmt: skip
        if t.endswith(suffix):
            t, mult = t[: -len(suffix)], m
            break
    try:
        value = float(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(value)


def _ratio(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return v


def build_parser(prog: str = "kafkatx generate") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Write a deterministic exactly-once workload as a Kafka "
                                "log directory, with manifest.json describing what readers must see.")  # fmt: skip
    p.add_argument("path", help="directory to create (must be missing or empty unless --overwrite)")
    p.add_argument("--records", type=_size, default=None, help="data records to write (default 100000; "
                   "suffixes K/M/G)")  # fmt: skip
    p.add_argument("--bytes", dest="target_bytes", type=_size, default=None,
                   help="stop once this many log bytes were written (e.g. 1GB); combined with --records, "
                        "whichever comes first")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--topics", default="orders", help="comma-separated topic names (default: orders)")
    p.add_argument("--partitions", type=int, default=3)
    p.add_argument("--producers", type=int, default=4, help="transactional producers")
    p.add_argument("--idempotent-producers", type=int, default=1)
    p.add_argument("--plain-producers", type=int, default=1)
    p.add_argument("--abort-ratio", type=_ratio, default=0.1)
    p.add_argument("--zombie-ratio", type=_ratio, default=0.02)
    p.add_argument("--retry-ratio", type=_ratio, default=0.01)
    p.add_argument("--open-transactions", type=int, default=1)
    p.add_argument("--compression", default="mixed", choices=COMPRESSIONS + ("mixed",))
    p.add_argument("--segment-bytes", type=_size, default=None,
                   help="segment size (default: a sixteenth of a partition's log, 1 MiB to 1 GiB)")
    p.add_argument("--batch-records", type=int, nargs=2, default=(20, 400), metavar=("MIN", "MAX"),
                   help="records per batch, drawn between MIN and MAX (default 20 400); small segments need small "
                        "batches")  # fmt: skip
    p.add_argument("--keys", type=int, default=10_000, help="distinct customer keys")
    p.add_argument("--transaction-version", type=int, default=2, choices=(0, 1, 2))
    p.add_argument("--consumer-group", default="etl", help="the group whose input offsets the transactions commit "
                   "to __consumer_offsets (default etl)")  # fmt: skip
    p.add_argument("--no-consumer-offsets", dest="consumer_group", action="store_const", const=None,
                   help="commit no offsets (no __consumer_offsets partition)")  # fmt: skip
    p.add_argument("--validate", action="store_true", help="have the writers decode every batch (slower)")
    p.add_argument("--workers", type=int, default=None, help="processes building batches (default: CPUs, "
                   "at most 4; 0: none)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="delete PATH first if it is not empty")
    p.add_argument("--write-buffer-bytes", type=_size, default=WRITE_BUFFER_BYTES, metavar="N",
                   help="appends held and written N bytes at a time (default 2MiB; 0: one write per append)")
    p.add_argument("--quiet", action="store_true")
    return p


def main_generate(argv=None) -> int:
    """``kafkatx generate PATH [options]``; returns the exit code (0 ok, 1 error, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    records = args.records
    if records is None and args.target_bytes is None:
        records = 100_000
    t0 = time.perf_counter()
    try:
        m = generate(args.path, topics=[t for t in args.topics.split(",") if t], partitions=args.partitions,
                     records=records, producers=args.producers, abort_ratio=args.abort_ratio,
                     zombie_ratio=args.zombie_ratio, open_transactions=args.open_transactions,
                     compression=args.compression, seed=args.seed, segment_bytes=args.segment_bytes,
                     idempotent_producers=args.idempotent_producers, plain_producers=args.plain_producers,
                     retry_ratio=args.retry_ratio, target_bytes=args.target_bytes, keys=args.keys,
                     transaction_version=args.transaction_version, validate=args.validate, workers=args.workers,
                     overwrite=args.overwrite, batch_records=tuple(args.batch_records),
                     write_buffer_bytes=args.write_buffer_bytes, consumer_group=args.consumer_group)  # fmt: skip
    except (ValueError, FileExistsError, KafkaTxError, OSError) as exc:
        print(f"kafkatx generate: error: {exc}", file=sys.stderr)
        return 1 if not isinstance(exc, ValueError) or isinstance(exc, KafkaTxError) else 2
    dt = time.perf_counter() - t0
    if not args.quiet:
        committed = sum(p["read_committed"]["records"] for p in m.partitions.values())
        print(f"wrote {m.records} records ({m.bytes / 1e6:.1f} MB of log) to {args.path} in {dt:.1f} s "
              f"({m.bytes / 1e6 / dt if dt else 0:.0f} MB/s): {len(m.partitions)} partitions, "
              f"{m.transactions['committed']} committed / {m.transactions['aborted']} aborted / "
              f"{m.transactions['fenced']} fenced / {m.transactions['open']} open transactions, "
              f"{committed} records visible to read_committed, {m.duplicates_rejected} duplicates and "
              f"{m.zombie_writes_rejected} zombie writes rejected")  # fmt: skip
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_generate())
