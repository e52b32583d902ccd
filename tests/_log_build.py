"""Build Kafka partition directories on disk for the log-layer tests, with an independent model.

The builder appends batches the way a broker's ``LogSegment.append`` lays them out (roll when the next
batch would pass ``segment_bytes``, an offset-index entry ``(batch last offset, batch position)`` and a
time-index ``maybeAppend`` once more than ``index_interval`` bytes were written since the last entry, a
final time-index entry on roll) and keeps its own model of every record and transaction.  The expected
results of a read, the LSO and the ``.txnindex`` entries all come from that model, never from
``kafkatx.log.reader``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import kafkatx
from kafkatx.log.index import OffsetIndex, TimeIndex, segment_file_name
from kafkatx.transactions import encode_marker
from kafkatx.txnindex import AbortedTxn, write_txnindex


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple
    producer_id: int
    txn: int | None  # index into PartitionBuilder.txns, None if not transactional


class BatchInfo(NamedTuple):
    segment: int  # index of the segment
    position: int
    size: int
    base_offset: int
    last_offset: int
    kind: str  # "data" or "marker"


class _Seg:
    def __init__(self, base):
        self.base = base
        self.data = bytearray()
        self.index = []  # (offset, position)
        self.time = []  # (timestamp, offset) as maybeAppend would keep them
        self.aborted = []  # AbortedTxn
        self.since_index = 0
        self.max_ts = -1
        self.max_ts_offset = base

    def maybe_time(self, ts, offset):
        if not self.time or ts > self.time[-1][0]:
            if ts > -1:
                self.time.append((ts, offset))


class PartitionBuilder:
    def __init__(
        self,
        root,
        topic="t",
        partition=0,
        *,
        segment_bytes=2048,
        index_interval=200,
        base_offset=0,
        max_index_size=4096,
    ):
        self.dir = os.path.join(os.fspath(root), f"{topic}-{partition}")
        os.makedirs(self.dir, exist_ok=True)
        self.topic = topic
        self.partition = partition
        self.segment_bytes = segment_bytes
        self.index_interval = index_interval
        self.max_index_size = max_index_size
        self.segs = [_Seg(base_offset)]
        self.next_offset = base_offset
        self.records: list[Rec] = []
        self.batches: list[BatchInfo] = []
        self.txns: list[dict] = []  # {"pid", "first", "outcome", "marker"}
        self.txn_open: dict[int, int] = {}  # pid -> txn index
        self.seq: dict[int, int] = {}
        self.ts = 1_700_000_000_000

    # ------------------------------------------------------------------ appends
    def roll(self):
        seg = self.segs[-1]
        if seg.max_ts >= 0:
            seg.maybe_time(seg.max_ts, seg.max_ts_offset)  # the entry written on roll
        self.segs.append(_Seg(self.next_offset))

    def _append(self, data: bytes, base: int, last: int, max_ts: int, kind: str):
        seg = self.segs[-1]
        if seg.data and len(seg.data) + len(data) > self.segment_bytes:
            self.roll()
            seg = self.segs[-1]
        pos = len(seg.data)
        if max_ts > seg.max_ts:
            seg.max_ts, seg.max_ts_offset = max_ts, last
        if seg.since_index > self.index_interval:
            seg.index.append((last, pos))
            seg.maybe_time(seg.max_ts, seg.max_ts_offset)
            seg.since_index = 0
        seg.data += data
        seg.since_index += len(data)
        self.batches.append(BatchInfo(len(self.segs) - 1, pos, len(data), base, last, kind))

    def data(self, n, *, pid=-1, epoch=0, txn=False, compression="none", value_size=12, null_key_every=0, headers=()):
        base = self.next_offset
        seq = self.seq.get(pid, 0)
        b = kafkatx.BatchBuilder(
            base_offset=base,
            producer_id=pid,
            producer_epoch=epoch if pid >= 0 else -1,
            base_sequence=seq if pid >= 0 else -1,
            transactional=txn,
            compression=compression,
        )
        txn_id = None
        if txn:
            if pid not in self.txn_open:
                self.txn_open[pid] = len(self.txns)
                self.txns.append({"pid": pid, "first": base, "outcome": None, "marker": None})
            txn_id = self.txn_open[pid]
        for i in range(n):
            off = base + i
            key = None if null_key_every and i % null_key_every == 0 else f"key-{off}".encode()
            value = (f"value-{off}-" + "x" * (off % value_size)).encode()
            self.ts += 1
            b.append(value, key, timestamp=self.ts, headers=headers)
            hs = tuple((k, v) for k, v in headers)
            self.records.append(Rec(off, key, value, self.ts, hs, pid, txn_id))
        if pid >= 0:
            self.seq[pid] = seq + n
        self._append(b.build(), base, base + n - 1, self.ts, "data")
        self.next_offset += n
        return base

    def marker(self, pid, kind, *, epoch=0):
        off = self.next_offset
        data = encode_marker(kind, producer_id=pid, producer_epoch=epoch, base_offset=off, timestamp=self.ts)
        self._append(data, off, off, self.ts, "marker")
        txn_id = self.txn_open.pop(pid, None)
        if txn_id is not None:
            t = self.txns[txn_id]
            t["outcome"], t["marker"] = kind, off
            if kind == "abort":
                others = [self.txns[i]["first"] for i in self.txn_open.values()]
                lso = min(others) if others else off + 1
                self.segs[-1].aborted.append(AbortedTxn(pid, t["first"], off, lso))
        self.next_offset += 1
        return off

    # ------------------------------------------------------------------ model
    @property
    def log_end_offset(self) -> int:
        return self.next_offset

    def first_unstable(self, high_watermark=None):
        hw = self.next_offset if high_watermark is None else high_watermark
        firsts = [t["first"] for t in self.txns if t["outcome"] is None or t["marker"] >= hw]
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark=None) -> int:
        hw = self.next_offset if high_watermark is None else high_watermark
        first = self.first_unstable(hw)
        return hw if first is None else min(first, hw)

    def expected(self, isolation="read_committed", start=None, end=None, high_watermark=None) -> list[Rec]:
        hw = self.next_offset if high_watermark is None else high_watermark
        upper = self.last_stable_offset(hw) if isolation == "read_committed" else hw
        if end is not None:
            upper = min(upper, end)
        lo = -1 if start is None else start
        out = []
        for r in self.records:
            if not lo <= r.offset < upper:
                continue
            if isolation == "read_committed" and r.txn is not None and self.txns[r.txn]["outcome"] != "commit":
                continue
            out.append(r)
        return out

    def segment_of(self, offset) -> int:
        for i, b in enumerate(self.batches):
            if b.base_offset <= offset <= b.last_offset:
                return b.segment
        raise KeyError(offset)

    def seg_path(self, i, suffix=".log"):
        return os.path.join(self.dir, segment_file_name(self.segs[i].base, suffix))

    # ------------------------------------------------------------------ files
    def write(self, *, preallocate_active=True):
        """Write every segment's files; the active segment's indexes keep a zero preallocated tail."""
        for i, seg in enumerate(self.segs):
            with open(self.seg_path(i, ".log"), "wb") as fh:
                fh.write(seg.data)
            ix = OffsetIndex(self.seg_path(i, ".index"), seg.base, max_index_size=self.max_index_size, writable=True)
            for off, pos in seg.index:
                ix.append(off, pos)
            ix.close()
            tix = TimeIndex(self.seg_path(i, ".timeindex"), seg.base, max_index_size=self.max_index_size, writable=True)
            for ts, off in seg.time:
                tix.append(ts, off)
            tix.close()
            active = i == len(self.segs) - 1
            if active and preallocate_active:
                for suffix in (".index", ".timeindex"):
                    with open(self.seg_path(i, suffix), "r+b") as fh:
                        fh.truncate(self.max_index_size - self.max_index_size % (8 if suffix == ".index" else 12))
            if seg.aborted:
                write_txnindex(self.seg_path(i, ".txnindex"), seg.aborted, fsync=False)
        return self.dir


def rec_tuple(r):
    """The fields a reader's Record and the model share, for comparisons."""
    return (r.offset, r.key, r.value, r.timestamp, tuple(tuple(h) for h in r.headers))


def standard_scenario(b: PartitionBuilder, *, upto=None):
    """Several segments; plain, idempotent and transactional producers; every compression; a transaction
    starting in one segment and aborted in a later one; an empty aborted transaction; an open transaction
    at the end (LSO below the log end) followed by more data.  ``upto`` stops after that many events."""
    comps = ["none", "gzip", "snappy", "lz4", "zstd"]
    ev = [
        lambda: b.data(3),
        lambda: b.data(2, pid=100, txn=True, compression="zstd"),  # txn A: aborted segments later
        lambda: b.data(4, pid=200, compression="gzip", headers=[("h", b"1"), ("e", None)]),  # idempotent
        lambda: b.data(2, pid=101, txn=True, null_key_every=2),  # txn B: committed
        lambda: b.marker(105, "abort"),  # an abort with no data on this partition: no .txnindex entry
    ]
    for i in range(14):
        c = comps[i % len(comps)]
        ev.append(lambda c=c, i=i: b.data(1 + i % 4, pid=200 if i % 3 == 0 else -1, compression=c, value_size=40))
        if i == 4:
            ev.append(lambda: b.data(3, pid=100, txn=True, compression="lz4"))
            ev.append(lambda: b.marker(101, "commit"))
        if i == 7:
            ev.append(lambda: b.data(2, pid=102, txn=True, compression="snappy"))  # txn C: committed
    ev += [
        lambda: b.marker(100, "abort"),
        lambda: b.data(2, pid=103, txn=True),  # txn D: aborted in the same segment
        lambda: b.data(5, compression="gzip", value_size=60),
        lambda: b.marker(103, "abort"),
        lambda: b.data(3, pid=102, txn=True, compression="zstd"),
        lambda: b.marker(102, "commit"),
        lambda: b.data(2, pid=100, txn=True),  # pid 100 again: committed
        lambda: b.marker(100, "commit"),
    ]
    for i in range(10):
        ev.append(lambda i=i: b.data(2 + i % 3, pid=200, compression=comps[(i + 2) % 5], value_size=50))
    ev += [
        lambda: b.data(2, pid=104, txn=True, compression="gzip"),  # txn E: still open at the end
        lambda: b.data(3, value_size=30),
        lambda: b.data(2, pid=106, txn=True),  # txn F: aborted after E started (LSO in its entry = E's first)
        lambda: b.marker(106, "abort"),
        lambda: b.data(4),  # plain, uncompressed last batch
    ]
    for e in ev[: len(ev) if upto is None else upto]:
        e()
    return len(ev)
