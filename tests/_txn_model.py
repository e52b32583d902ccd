"""A model of one partition written by several producers, for test_read_committed_model.py.

``Scenario`` plays a plan (drawn by hypothesis) of client actions: transactional producers (TV1 or
TV2) that send, retry, commit, abort, get fenced by an epoch bump and keep writing as zombies;
idempotent producers (retries, sequence gaps, epoch bumps); a plain producer.  Every write goes
through ``kafkatx.producer_state.ProducerStateManager`` as a broker's would (``check_and_update`` or
``append`` for client data, ``append_marker`` for the coordinator's markers), and is written to the
log only if the manager accepts it, at the offsets a broker assigns.

Independently of the manager, the model keeps its own copy of the leader's per-producer state
(kafka-format.md section 11: epoch, the last five batches, coordinator epoch, open transaction) and
predicts the manager's answer for every write: appended, duplicate (with the original offsets), or the
exact exception type.  It also records what a consumer must see: every data record with the
transaction it belongs to, each transaction's outcome, the aborted transactions (with the LSO at their
marker, section 7.2) and the last stable offset (first offset of the earliest open transaction).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from _txn_helpers import TS, data, key_of, marker, value_of
from kafkatx.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaTxError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkatx.producer_state import ProducerStateManager

INT_MAX = (1 << 31) - 1
SEQ_SPACE = 1 << 31
APPEND, DUP = "append", "dup"


@dataclass
class Producer:
    pid: int
    kind: str  # "txn", "idem" or "plain"
    tv: int = 0  # transaction.version of a transactional producer (1 or 2)
    epoch: int = -1
    seq: dict = field(default_factory=dict)  # epoch -> next sequence of the instance using that epoch
    old_epochs: list = field(default_factory=list)  # epochs of fenced instances (zombies)
    coord_epoch: int = 0
    sent: list = field(default_factory=list)  # accepted data batches: (epoch, first_seq, n, txn, base_offset)


@dataclass
class Entry:
    """The leader's state of one producer, as section 11 describes it (the model's own copy)."""

    epoch: int
    window: deque = field(default_factory=lambda: deque(maxlen=5))  # (first_seq, last_seq, first_off, last_off)
    coord_epoch: int = -1
    txn_first: int | None = None


def last_seq_of(first_seq: int, n: int) -> int:
    return (first_seq + n - 1) % SEQ_SPACE


class Scenario:
    def __init__(self, codec, start: int):
        self.codec = codec
        self.start = start
        self.manager = ProducerStateManager()
        self.manager.update_map_end_offset(start)
        self.entries: dict[int, Entry] = {}
        self.next_offset = start
        self.batches: list = []  # (base_offset, last_offset, bytes)
        self.records: list = []  # (offset, timestamp, key, value, sequence, txn_id)
        self.outcome: dict = {}  # txn_id (pid, first offset) -> "open" | "commit" | "abort"
        self.aborted: list = []  # (pid, first, marker offset, LSO at the marker), in marker order
        self.committed: list = []  # (pid, first, marker offset)
        self.events: list = []  # (what, predicted) for hypothesis.event / debugging

    # ------------------------------------------------------------------------------ results
    @property
    def log(self) -> bytes:
        return b"".join(b for _f, _l, b in self.batches)

    @property
    def open_txns(self) -> dict:
        return {pid: first for (pid, first), how in self.outcome.items() if how == "open"}

    @property
    def lso(self) -> int:
        return min(self.open_txns.values(), default=self.next_offset)

    def visible(self, isolation: str) -> list:
        """(offset, timestamp, key, value, sequence) of what a consumer must get."""
        out = []
        lso = self.lso
        for off, ts, k, v, seq, tid in self.records:
            if isolation == "read_committed":
                if tid is not None and self.outcome[tid] != "commit":
                    continue
                if off >= lso:
                    continue
            out.append((off, ts, k, v, seq))
        return out

    def bytes_before(self, offset: int) -> int:
        """Bytes of the batches whose base offset is below ``offset``."""
        return sum(len(b) for base, _l, b in self.batches if base < offset)

    # ------------------------------------------------------------------------- predictions
    def predict_data(self, pid, epoch, first_seq, last_seq, txn):
        e = self.entries.get(pid)
        if e is None:
            return APPEND, None  # no state: any epoch, any sequence
        if epoch == e.epoch:
            for w in e.window:
                if (w[0], w[1]) == (first_seq, last_seq):
                    return DUP, w
        if epoch < e.epoch:
            return InvalidProducerEpochError, None
        if epoch > e.epoch:
            if first_seq != 0:
                return OutOfOrderSequenceError, None
        else:
            last = e.window[-1][1] if e.window else -1
            if not (first_seq == last + 1 or (first_seq == 0 and last == INT_MAX)):
                return OutOfOrderSequenceError, None
        if e.txn_first is not None and not txn:
            return InvalidTxnStateError, None
        return APPEND, None

    def predict_marker(self, pid, epoch, coord_epoch, tv):
        e = self.entries.get(pid)
        cur = e.epoch if e is not None else -1
        if epoch < cur:
            return InvalidProducerEpochError
        if tv >= 2 and e is not None and epoch == cur and e.txn_first is not None:
            return InvalidProducerEpochError
        if e is not None and e.coord_epoch > coord_epoch:
            return TransactionCoordinatorFencedError
        return APPEND

    # ------------------------------------------------------------------------------ writes
    def write_data(self, p: Producer, epoch, first_seq, n, txn, compression, via_append):
        base = self.next_offset
        last = base + n - 1
        pid = p.pid
        raw = data(self.codec, base, n, pid=pid, epoch=epoch, seq=first_seq, txn=txn, compression=compression)
        if pid >= 0:
            last_seq = last_seq_of(first_seq, n)
            want, orig = self.predict_data(pid, epoch, first_seq, last_seq, txn)
            got, got_orig = self._manager_data(raw, pid, epoch, first_seq, last_seq, base, last, txn, via_append)
            self.events.append((f"data {p.kind}", want if isinstance(want, str) else want.__name__))
            assert got == want, (pid, epoch, first_seq, n, txn, want, got)
            if want == DUP:
                assert got_orig == (orig[2], orig[3]), (got_orig, orig)
            if want != APPEND:
                return want
            e = self.entries.get(pid)
            if e is None:
                e = self.entries[pid] = Entry(epoch)
            if epoch != e.epoch:
                e.window.clear()
                e.epoch = epoch
            e.window.append((first_seq, last_seq, base, last))
            if txn and e.txn_first is None:
                e.txn_first = base
                self.outcome[(pid, base)] = "open"
            tid = (pid, e.txn_first) if txn else None
        else:
            tid = None
        for i, off in enumerate(range(base, last + 1)):
            seq = (first_seq + i) % SEQ_SPACE if first_seq >= 0 else -1
            self.records.append((off, TS + off, key_of(off), value_of(off), seq, tid))
        self.batches.append((base, last, raw))
        self.next_offset = last + 1
        if pid >= 0:
            p.sent.append((epoch, first_seq, n, txn, base))
        return APPEND

    def _manager_data(self, raw, pid, epoch, first_seq, last_seq, base, last, txn, via_append):
        m = self.manager
        try:
            if via_append:
                (batch,) = list(self.codec.iter_batches(raw))
                res = m.append(batch)
                if res.duplicate:
                    return DUP, (res.first_offset, res.last_offset)
                assert (res.first_offset, res.last_offset) == (base, last)
                return APPEND, None
            dup = m.check_and_update(pid, epoch, first_seq, last_seq, base, last, TS + last, txn)
            if dup is not None:
                return DUP, (dup.first_offset, dup.last_offset)
            return APPEND, None
        except KafkaTxError as exc:
            return type(exc), None

    def write_marker(self, p: Producer, kind: str, epoch: int, coord_epoch: int):
        pid = p.pid
        off = self.next_offset
        tv = 2 if p.tv == 2 else 0
        want = self.predict_marker(pid, epoch, coord_epoch, tv)
        try:
            completed = self.manager.append_marker(
                pid, epoch, control_type=0 if kind == "abort" else 1, coordinator_epoch=coord_epoch, offset=off,
                timestamp=TS + off, transaction_version=tv,
            )  # fmt: skip
            got = APPEND
        except KafkaTxError as exc:
            got = type(exc)
        self.events.append((f"marker {kind}", want if isinstance(want, str) else want.__name__))
        assert got == want, (pid, kind, epoch, coord_epoch, want, got)
        if want != APPEND:
            return want
        e = self.entries.get(pid)
        if e is None:
            e = self.entries[pid] = Entry(epoch)
        if e.txn_first is not None:
            others = [first for (q, first), how in self.outcome.items() if how == "open" and q != pid]
            lso = min(others, default=off + 1)
            tid = (pid, e.txn_first)
            self.outcome[tid] = kind
            if kind == "abort":
                self.aborted.append((pid, e.txn_first, off, lso))
            else:
                self.committed.append((pid, e.txn_first, off))
            assert completed is not None
            assert (completed.producer_id, completed.first_offset, completed.last_offset, completed.is_aborted,
                    completed.last_stable_offset) == (pid, e.txn_first, off, kind == "abort", lso)  # fmt: skip
        else:
            assert completed is None  # an empty transaction ends nothing
        if epoch != e.epoch:
            e.window.clear()
            e.epoch = epoch
        e.coord_epoch = coord_epoch
        e.txn_first = None
        self.batches.append((off, off, marker(kind, pid, epoch, off, coord_epoch)))
        self.next_offset = off + 1
        return APPEND

    # ---------------------------------------------------------------------- client actions
    def send(self, p: Producer, n, compression, via_append, *, txn=None, seq_shift=0):
        if p.kind == "plain":
            return self.write_data(p, -1, -1, n, False, compression, via_append)
        txn = (p.kind == "txn") if txn is None else txn
        first = (p.seq[p.epoch] + seq_shift) % SEQ_SPACE
        got = self.write_data(p, p.epoch, first, n, txn, compression, via_append)
        if got == APPEND:
            p.seq[p.epoch] = (first + n) % SEQ_SPACE
        return got

    def retry(self, p: Producer, back: int, compression, via_append):
        """Send one of the producer's accepted batches again (same epoch, sequences and flags)."""
        if not p.sent:
            return None
        epoch, first_seq, n, txn, _base = p.sent[-min(back, len(p.sent))]
        return self.write_data(p, epoch, first_seq, n, txn, compression, via_append)

    def zombie(self, p: Producer, n, compression, via_append):
        """A fenced instance (an older epoch) keeps writing."""
        if not p.old_epochs:
            return None
        epoch = p.old_epochs[-1]
        first = p.seq.get(epoch, 0)
        got = self.write_data(p, epoch, first, n, p.kind == "txn", compression, via_append)
        if got == APPEND:
            p.seq[epoch] = (first + n) % SEQ_SPACE
        return got

    def end_txn(self, p: Producer, kind: str, stale: bool = False):
        """The coordinator writes the marker (TV2: with the producer's epoch bumped)."""
        coord = p.coord_epoch - 1 if stale else p.coord_epoch
        epoch = p.epoch + 1 if p.tv == 2 else p.epoch
        got = self.write_marker(p, kind, epoch, coord)
        if got == APPEND and p.tv == 2:
            self._new_epoch(p, epoch)
        return got

    def bump(self, p: Producer):
        """InitProducerId: a new instance with a higher epoch; an open transaction is aborted (new epoch)."""
        new = p.epoch + 1
        e = self.entries.get(p.pid)
        outcome = "no marker"
        if p.kind == "txn" and e is not None and e.txn_first is not None:
            assert self.write_marker(p, "abort", new, p.coord_epoch) == APPEND
            outcome = "open transaction aborted"
        self._new_epoch(p, new)
        return outcome

    @staticmethod
    def _new_epoch(p: Producer, epoch: int):
        p.old_epochs.append(p.epoch)
        p.epoch = epoch
        p.seq.setdefault(epoch, 0)
