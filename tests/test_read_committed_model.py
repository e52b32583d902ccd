"""Model-based test of read_committed: producers write a partition through ProducerStateManager, and
every reader of the resulting log must agree with what the model says a consumer sees.

The plan (hypothesis) drives transactional producers (TV1 and TV2: commit, abort, retries, zombie
writes after an epoch bump, coordinator failover with a stale marker, transactions left open),
idempotent producers (retries, sequence gaps, epoch bumps) and a plain producer, with random
compression per batch.  ``_txn_model.Scenario`` predicts each answer of the producer-state manager
(appended / duplicate with the original offsets / exact exception type) from section 11 of
kafka-format.md, and records each record's transaction, each transaction's outcome, the aborted list
and the LSO.  Then, on both backends: decode_records and decode_arrow (whole log, aborted list
shuffled; payloads inflated on the calling thread or ahead on 1-2 threads, in half the plans on the
compiled codec's C workers), ReadCommittedFilter over random
byte chunks and over Fetch-like chunks (each with the
broker's aborted list for its range), the pending bytes beyond the LSO once the open transactions end,
transactions.aborted_transactions / last_stable_offset / scan_transactions, and rebuild_from_log.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from _txn_helpers import arrow_tuples
from _txn_model import APPEND, INT_MAX, Producer, Scenario
from kafkatx.producer_state import ProducerStateManager, rebuild_from_log
from kafkatx.transactions import aborted_transactions, last_stable_offset, scan_transactions

CODECS = ["none", "none", "gzip", "snappy", "lz4", "zstd"]
# plans drawn with fast_codecs keep only lz4 and zstd: with inflate_threads the compiled codec then inflates
# on its C workers, which take a call only if the system's libraries inflate every payload of it
FAST = {"gzip": "lz4", "snappy": "zstd"}
ACTIONS = (["send"] * 5 + ["burst"] * 2 + ["commit"] * 2 + ["abort"] * 2 + ["retry"] * 3
           + ["gap", "bump", "zombie", "send_nontxn", "failover", "stale_commit", "stale_abort"])  # fmt: skip
RC, RU = "read_committed", "read_uncommitted"
COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

producers_st = st.fixed_dictionaries(
    {
        # (transaction.version, first epoch, first sequence)
        "txn": st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(0, 3), st.sampled_from([0, 0, INT_MAX - 2])),
                        min_size=1, max_size=3),  # fmt: skip
        "idem": st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0, INT_MAX - 2])), max_size=2),
    }
)
step_st = st.tuples(
    st.sampled_from(ACTIONS),
    st.sampled_from([0, 0, 0, 0, 1, 1, 2, 3, 4, 5]),  # which producer (mostly the first: long runs, retries)
    st.integers(1, 4),  # records
    st.sampled_from(CODECS),
    st.sampled_from([1, 1, 2, 3, 4, 5, 5, 6, 6, 7]),  # how far back a retry goes, batches in a burst, a gap
    st.booleans(),  # ProducerStateManager.append(batch) instead of check_and_update
)


def plans(min_steps, max_steps):
    return st.fixed_dictionaries(
        {
            "start": st.sampled_from([0, 0, 1000, 1 << 40]),
            "producers": producers_st,
            "steps": st.lists(step_st, min_size=min_steps, max_size=max_steps),
            "closing": st.lists(st.sampled_from(["commit", "abort"]), min_size=6, max_size=6),
            "fetch_offset": st.booleans(),
            "fast_codecs": st.booleans(),
        }
    )


def make_producers(cfg) -> list:
    out = []
    for i, (tv, epoch, seq) in enumerate(cfg["txn"]):
        out.append(Producer(1001 + i, "txn", tv=tv, epoch=epoch, seq={epoch: seq}))
    for i, (epoch, seq) in enumerate(cfg["idem"]):
        out.append(Producer(2001 + i, "idem", epoch=epoch, seq={epoch: seq}))
    out.append(Producer(-1, "plain"))
    return out


def play(codec, plan) -> tuple:
    sc = Scenario(codec, plan["start"])
    producers = make_producers(plan["producers"])
    codecs = [FAST.get(c, c) for c in CODECS] if plan["fast_codecs"] else CODECS
    for action, which, n, compression, extra, via_append in plan["steps"]:
        if plan["fast_codecs"]:
            compression = FAST.get(compression, compression)
        p = producers[which % len(producers)]
        if p.kind == "plain" and action != "burst" or (
                p.kind == "idem" and action not in ("send", "burst", "retry", "gap", "bump", "zombie")):
            action = "send"
        if action == "send":
            got = sc.send(p, n, compression, via_append)
        elif action == "burst":  # several batches in a row (fills the five-batch de-duplication window)
            for i in range(extra):
                got = sc.send(p, n, codecs[i % len(codecs)], via_append)
        elif action == "send_nontxn":  # a transactional producer's idempotent batch
            got = sc.send(p, n, compression, via_append, txn=False)
        elif action == "gap":
            got = sc.send(p, n, compression, via_append, seq_shift=extra % 4 or 1)
        elif action == "retry":
            got = sc.retry(p, extra, compression, via_append)
        elif action == "zombie":
            got = sc.zombie(p, n, compression, via_append)
        elif action == "bump":
            got = sc.bump(p)
        elif action in ("commit", "abort"):
            got = sc.end_txn(p, action)
        elif action == "failover":
            p.coord_epoch += 1
            got = None
        else:  # a marker from the previous coordinator epoch
            got = sc.end_txn(p, action[6:], stale=True) if p.coord_epoch > 0 else None
        if got is not None:
            event(f"{action} ({p.kind}): {got if isinstance(got, str) else got.__name__}")
    return sc, producers


def close_all(sc, producers, kinds):
    """Phase 2: the coordinator ends every open transaction."""
    by_pid = {p.pid: p for p in producers}
    for i, pid in enumerate(sorted(sc.open_txns)):
        assert sc.end_txn(by_pid[pid], kinds[i % len(kinds)]) == APPEND


def rows(records) -> list:
    return [(r.offset, r.timestamp, r.key, r.value, r.sequence) for r in records]


def cut(data, n, max_cuts=8) -> list:
    """Random byte boundaries in a buffer of n bytes."""
    if n < 2:
        return [0, n]
    points = data.draw(st.lists(st.integers(1, n - 1), max_size=max_cuts), label="cuts")
    return [0] + sorted(set(points)) + [n]


def check_scenario(codec, plan, data):
    sc, producers = play(codec, plan)
    log = sc.log
    start, end, lso = sc.start, sc.next_offset, sc.lso
    aborted = [(pid, first) for pid, first, _m, _l in sc.aborted]
    want_rc, want_ru = sc.visible(RC), sc.visible(RU)
    event(f"open transactions: {len(sc.open_txns)}; aborted: {len(aborted)}")
    event(f"batches: {len(sc.batches) // 10 * 10}+")

    # the manager agrees with the model about open transactions and the LSO
    m = sc.manager
    assert [(t.producer_id, t.first_offset) for t in m.ongoing_transactions()] == sorted(
        sc.open_txns.items(), key=lambda kv: kv[1])
    m.on_high_watermark_updated(end)
    assert m.last_stable_offset(end) == lso

    # whole log, aborted list shuffled (with a duplicate), on decode_records and decode_arrow
    lst = data.draw(st.permutations(aborted + aborted[:1]), label="aborted order")
    # a fetch that starts at some offset of the log (possibly inside a batch, or at its end)
    fetch_at = data.draw(st.integers(start, end), label="fetch offset") if plan["fetch_offset"] else None
    fetch = {} if fetch_at is None else {"fetch_offset": fetch_at}
    # payloads inflated on the calling thread or ahead on background threads: the same result either way
    ahead = {"inflate_threads": data.draw(st.sampled_from([0, 0, 1, 2, None]), label="inflate threads")}
    if ahead["inflate_threads"] and hasattr(codec, "_ahead_kind"):
        event(f"compiled codec inflating ahead with: {codec._ahead_kind(log)}")
    want_rc = [r for r in want_rc if fetch_at is None or r[0] >= fetch_at]
    want_next = max(fetch_at, lso) if fetch_at is not None else (lso if lso > start else None)
    res = codec.decode_records(log, isolation=RC, aborted_transactions=lst, last_stable_offset=lso, **fetch, **ahead)
    assert rows(res) == want_rc
    assert res.next_offset == want_next
    assert res.valid_bytes == sc.bytes_before(lso) and res.trailing_bytes == len(log) - res.valid_bytes
    rb = codec.decode_arrow(log, isolation=RC, aborted_transactions=lst, last_stable_offset=lso, **fetch, **ahead)
    assert arrow_tuples(rb) == [(o, k, v, s) for o, _t, k, v, s in want_rc]
    assert rb.column("timestamp").cast("int64").to_pylist() == [t for _o, t, _k, _v, _s in want_rc]
    assert rb.schema.metadata[b"next_offset"] == str(want_next).encode()
    # read_uncommitted ignores the list and the LSO
    res = codec.decode_records(log, isolation=RU, aborted_transactions=lst, last_stable_offset=lso, **ahead)
    assert rows(res) == want_ru
    assert res.next_offset == (end if sc.batches else None)
    rb = codec.decode_arrow(log, isolation=RU, aborted_transactions=lst, last_stable_offset=lso, **ahead)
    assert arrow_tuples(rb) == [(o, k, v, s) for o, _t, k, v, s in want_ru]

    # one filter over random byte chunks (records, and Arrow from a twin filter)
    f = codec.ReadCommittedFilter(lst, last_stable_offset=lso, **fetch, **ahead)
    fa = codec.ReadCommittedFilter(lst, last_stable_offset=lso, **fetch, **ahead)
    got, got_arrow = [], []
    bounds = cut(data, len(log))
    for a, b in zip(bounds, bounds[1:]):
        got += f.feed(log[a:b])
        got_arrow += arrow_tuples(fa.feed_arrow(log[a:b]))
    assert rows(got) == want_rc
    assert got_arrow == [(o, k, v, s) for o, _t, k, v, s in want_rc]
    assert f.next_offset == want_next == fa.next_offset
    assert f.pending_bytes == len(log) - sc.bytes_before(lso)

    # Fetch-like chunks at batch boundaries, each with the broker's aborted list for its range
    n = len(sc.batches)
    idx = sorted(set(data.draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=5), label="fetch cuts")))
    idx = [0] + [i for i in idx if 0 < i < n] + [n]
    shared = codec.ReadCommittedFilter(last_stable_offset=lso, **fetch)
    got_shared, got_fresh = [], []
    for i, j in zip(idx, idx[1:]):
        chunk_batches = sc.batches[i:j]
        if not chunk_batches:
            continue
        lo = chunk_batches[0][0]
        hi = sc.batches[j][0] if j < n else end
        entries = [(pid, first) for pid, first, mk, _l in sc.aborted if mk >= lo and first < hi]
        chunk = b"".join(b for _f, _l, b in chunk_batches)
        shared.add_aborted_transactions(data.draw(st.permutations(entries), label="chunk list"))
        got_shared += shared.feed(chunk)
        fresh = codec.ReadCommittedFilter(entries, last_stable_offset=lso, fetch_offset=max(lo, fetch_at or lo))
        got_fresh += fresh.feed(chunk)
    assert rows(got_shared) == want_rc
    assert rows(got_fresh) == want_rc

    # what the log itself says about its transactions
    assert set(aborted_transactions(log, start_offset=start)) == set(aborted)
    assert last_stable_offset(log, start_offset=start) == lso
    s = scan_transactions(log, start_offset=start)
    assert s.open == sc.open_txns
    assert s.aborted == [(pid, first, mk) for pid, first, mk, _l in sc.aborted]
    assert s.committed == sc.committed
    assert s.log_end_offset == end
    _m, rebuilt = rebuild_from_log(log, manager=_fresh_manager(start))
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset) for a in rebuilt] == sc.aborted
    assert [(t.producer_id, t.first_offset) for t in _m.ongoing_transactions()] == sorted(
        sc.open_txns.items(), key=lambda kv: kv[1])

    # phase 2: the open transactions end; the filter returns what it held back beyond the old LSO
    close_all(sc, producers, plan["closing"])
    log2 = sc.log
    extra = log2[len(log):]
    final = [r for r in sc.visible(RC) if fetch_at is None or r[0] >= fetch_at]
    assert sc.lso == sc.next_offset
    f.add_aborted_transactions([(pid, first) for pid, first, _m2, _l in sc.aborted])
    f.last_stable_offset = sc.lso
    later = list(f.feed(b""))
    for a in range(0, len(extra), 50):
        later += f.feed(extra[a : a + 50])
    assert rows(got) + rows(later) == final
    want_end = sc.next_offset if (sc.batches or fetch) else None
    assert f.next_offset == want_end and f.pending_bytes == 0
    res = codec.decode_records(log2, isolation=RC, aborted_transactions=[(a[0], a[1]) for a in sc.aborted], **fetch)
    assert rows(res) == final and res.next_offset == want_end


def _fresh_manager(start):
    m = ProducerStateManager()
    m.update_map_end_offset(start)
    return m


@settings(max_examples=300, **COMMON)
@given(plan=plans(6, 30), data=st.data())
def test_read_committed_model(codec, plan, data):
    check_scenario(codec, plan, data)


@pytest.mark.slow
@settings(max_examples=500, **COMMON)
@given(plan=plans(25, 80), data=st.data())
def test_read_committed_model_long_logs(codec, plan, data):
    check_scenario(codec, plan, data)
