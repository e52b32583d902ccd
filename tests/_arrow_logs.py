"""Hypothesis strategies for transactional partition logs, with their expected records, for test_arrow.py.

A log is a sequence of batches of several producers at consecutive (sometimes gapped) offsets: plain
(producer -1), idempotent (2000) and transactional ones (1001..1003) whose transactions are committed,
aborted or left open, with COMMIT/ABORT markers written by ``kafkatx.transactions.encode_marker``.
Batches are built with the compiled ``BatchBuilder`` (checked byte for byte against Kafka elsewhere);
what a reader must return is worked out here from the strategy's own choices, not by kafkatx's readers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

import _spec
from _strategies import CODECS
from kafkatx import _codec as builder_codec
from kafkatx.transactions import encode_marker

TXN_PIDS = (1001, 1002, 1003)
PLAIN, IDEMPOTENT = -1, 2000
EPOCHS = {1001: 0, 1002: 3, 1003: 7, IDEMPOTENT: 1, PLAIN: -1}

headers_st = st.lists(
    st.tuples(st.sampled_from(["", "a", "trace-id", "ключ", "k\u00e9"]), st.one_of(st.none(), st.binary(max_size=8))),
    max_size=3,
)
record_st = st.fixed_dictionaries(
    {
        "key": st.one_of(st.none(), st.binary(max_size=12)),
        "value": st.one_of(st.none(), st.binary(max_size=40)),
        "headers": headers_st,
        "timestamp": st.one_of(st.just(-1), st.integers(0, 1 << 42)),
        "gap": st.sampled_from([1, 1, 1, 2, 5]),  # > 1: offsets removed by compaction inside the batch
    }
)
step_st = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["data", "data", "data", "commit", "abort"]),
        "pid": st.sampled_from(TXN_PIDS + (PLAIN, IDEMPOTENT)),
        "records": st.lists(record_st, min_size=1, max_size=5),
        "compression": st.sampled_from(CODECS),
        "log_append_time": st.one_of(st.none(), st.none(), st.integers(0, 1 << 42)),
        "skip": st.sampled_from([0, 0, 0, 3]),  # whole batches removed by compaction before this one
    }
)


@dataclass
class Log:
    data: bytes
    start: int
    end: int  # the log end offset
    records: list = field(
        default_factory=list
    )  # (offset, ts, key, value, headers, seq, pid, epoch, txn, ts_type, txn_id)
    aborted: list = field(default_factory=list)  # (pid, first_offset) of each aborted transaction
    outcome: dict = field(default_factory=dict)  # txn_id -> "commit" | "abort" | "open"

    @property
    def open_first_offsets(self) -> list:
        return [first for (pid, first), how in self.outcome.items() if how == "open"]

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset."""
        return min(self.open_first_offsets, default=self.end)

    def expected(self, isolation: str, last_stable_offset=None) -> list:
        """The records a consumer sees, as 10-tuples (the txn id dropped), given the TRUE aborted list."""
        out = []
        for r in self.records:
            if isolation == "read_committed":
                if r[10] is not None and self.outcome[r[10]] == "abort":
                    continue
                if last_stable_offset is not None and r[0] >= last_stable_offset:
                    continue
            out.append(r[:10])
        return out


@st.composite
def logs(draw, max_steps: int = 10):
    start = draw(st.sampled_from([0, 0, 17, (1 << 40) + 3]))
    seqs = {pid: draw(st.sampled_from([0, 5, (1 << 31) - 3])) for pid in TXN_PIDS + (IDEMPOTENT,)}
    steps = draw(st.lists(step_st, min_size=1, max_size=max_steps))
    offset = start
    parts = []
    log = Log(b"", start, start)
    open_txn: dict = {}  # pid -> first offset
    for step in steps:
        offset += step["skip"]
        pid = step["pid"]
        if step["kind"] in ("commit", "abort") and pid in TXN_PIDS:
            parts.append(
                encode_marker(step["kind"], producer_id=pid, producer_epoch=EPOCHS[pid], base_offset=offset,
                              coordinator_epoch=2, timestamp=1_700_000_000_000)
            )  # fmt: skip
            first = open_txn.pop(pid, None)
            if first is not None:  # a marker with no open transaction (an empty one) ends nothing
                log.outcome[(pid, first)] = step["kind"]
                if step["kind"] == "abort":
                    log.aborted.append((pid, first))
            offset += 1
            continue
        txn = pid in TXN_PIDS
        txn_id = None
        if txn:
            txn_id = (pid, open_txn.setdefault(pid, offset))
            log.outcome.setdefault(txn_id, "open")
        base_seq = seqs.get(pid, -1)
        lat = step["log_append_time"]
        kw = dict(base_offset=offset, producer_id=pid, producer_epoch=EPOCHS[pid], base_sequence=base_seq,
                  transactional=txn, compression=step["compression"], partition_leader_epoch=5)  # fmt: skip
        if lat is not None:
            kw.update(timestamp_type="log_append_time", log_append_time=lat)
        b = builder_codec.BatchBuilder(**kw)
        off = offset - 1
        for i, r in enumerate(step["records"]):
            off = offset if i == 0 else off + r["gap"]
            b.append(r["value"], key=r["key"], timestamp=r["timestamp"], headers=r["headers"], offset=off)
            seq = _spec.inc_seq(base_seq, off - offset) if base_seq >= 0 else -1
            log.records.append(
                (off, lat if lat is not None else r["timestamp"], r["key"], r["value"], tuple(r["headers"]), seq,
                 pid, EPOCHS[pid], txn, 1 if lat is not None else 0, txn_id)
            )  # fmt: skip
        parts.append(b.build())
        if base_seq >= 0:
            seqs[pid] = _spec.inc_seq(base_seq, off - offset + 1)
        offset = off + 1
    log.data = b"".join(parts)
    log.end = offset
    return log


@st.composite
def aborted_lists(draw, log: Log):
    """The log's aborted transactions in random order, with duplicates; sometimes a random subset or extras.

    A subset or extra entries make the consumer hide other data than the log's markers say (it trusts the
    list, as Kafka's does): only differential tests use those (``exact`` tells which kind was drawn).
    """
    entries = list(log.aborted)
    exact = draw(st.booleans())
    if not exact:
        entries = draw(st.lists(st.sampled_from(entries), unique=True)) if entries else []
        extra = draw(st.lists(st.tuples(st.sampled_from(TXN_PIDS), st.integers(log.start, log.end)), max_size=2))
        entries += extra
    entries += draw(st.lists(st.sampled_from(entries), max_size=2)) if entries else []
    return draw(st.permutations(entries)), exact


def split_points(draw, n: int, max_cuts: int = 8) -> list:
    """Sorted cut positions in (0, n) for chunking a buffer of ``n`` bytes."""
    if n < 2:
        return []
    return sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=max_cuts))))
