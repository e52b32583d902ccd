"""Transactions: control records and markers, read_committed filtering, the LSO and aborted lists.

Expected values come from Kafka's golden vectors (tests/vectors/java-golden, java-storage) and from the
rules in kafka-format.md sections 5, 7, 10, 11 and 13, written out literally for hand-built logs.  Every
peer bug listed in peers.md ("Bugs the peers shipped") has its own test.  Every codec call runs on both
backends through the ``codec`` fixture, and every decode also checks ``decode_arrow`` against
``decode_records`` (``_txn_helpers.decode_checked``).
"""

from __future__ import annotations

import itertools
import json
import struct
import tempfile

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
from _txn_helpers import (
    CONTROL,
    TRANSACTIONAL,
    TS,
    control_batch,
    control_key,
    data,
    decode_checked,
    empty_batch,
    expected_records,
    key_of,
    marker,
    marker_value,
    offsets,
    rec_tuple,
    value_of,
    with_base_offset,
)
from conftest import STORAGE, load_golden
from kafkatx.errors import (
    CorruptRecordError,
    KafkaTxError,
    DecompressionError,
    InvalidProducerEpochError,
    InvalidRecordError,
)
from kafkatx.producer_state import ProducerStateManager
from kafkatx.txnindex import AbortedTxn
from kafkatx.transactions import (
    aborted_transactions,
    control_records,
    encode_marker,
    last_stable_offset,
    scan_transactions,
)

P, Q, R = 1001, 1002, 1003
ISOLATIONS = ["read_uncommitted", "read_committed"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RC = "read_committed"
RU = "read_uncommitted"


def rc(codec, log, aborted=None, **kw):
    return decode_checked(codec, log, isolation=RC, aborted_transactions=aborted, **kw)


def ru(codec, log, **kw):
    return decode_checked(codec, log, isolation=RU, **kw)


def one_batch(codec, raw):
    (batch,) = list(codec.iter_batches(raw))
    return batch


# ------------------------------------------------------------------------------- control goldens
@pytest.mark.parametrize("variant", CODECS + ["canonical"])
@pytest.mark.parametrize("kind", ["commit", "abort"])
def test_golden_control_record(codec, kind, variant):
    raw, meta = load_golden(f"control_{kind}_{variant}")
    jb = meta["batches"][0]
    jr = jb["records"][0]
    want = jr["control"]
    batch = one_batch(codec, raw)
    assert batch.is_control and batch.is_transactional
    assert batch.compression == jb["compression"]
    cr = batch.control_record()
    assert cr.type == want["type"].lower() == kind
    assert cr.type_id == want["type_id"]
    assert cr.key_version == want["key_version"]
    assert cr.marker_version == want["marker_version"]
    assert cr.coordinator_epoch == want["coordinator_epoch"]
    assert (cr.offset, cr.timestamp) == (jr["offset"], jr["timestamp"])
    assert cr.is_marker
    assert batch.first_control_type() == want["type_id"]
    assert [c.type for c in control_records(codec.iter_batches(raw))] == [kind]
    for iso in ISOLATIONS:
        res = decode_checked(codec, raw, isolation=iso)
        assert res == [] and res.next_offset == jb["last_offset"] + 1 == 205


@pytest.mark.parametrize("kind", ["commit", "abort"])
def test_encode_marker_is_byte_identical_to_java(kind):
    raw, meta = load_golden(f"control_{kind}_canonical")
    spec = meta["spec"]["batches"][0]
    m = spec["end_txn_marker"]
    out = encode_marker(
        m["type"], producer_id=spec["producer_id"], producer_epoch=spec["producer_epoch"],
        base_offset=spec["base_offset"], partition_leader_epoch=spec["partition_leader_epoch"],
        coordinator_epoch=m["coordinator_epoch"], timestamp=m["timestamp"],
    )  # fmt: skip
    assert out == raw
    assert len(out) == 78


def test_encode_marker_matches_the_markers_of_segment_mixed():
    raw, meta = load_golden("segment_mixed")
    for spec, jb in zip(meta["spec"]["batches"], meta["batches"]):
        if "end_txn_marker" not in spec:
            continue
        m = spec["end_txn_marker"]
        out = encode_marker(
            m["type"].lower(), producer_id=spec["producer_id"], producer_epoch=spec["producer_epoch"],
            base_offset=spec["base_offset"], partition_leader_epoch=spec["partition_leader_epoch"],
            coordinator_epoch=m["coordinator_epoch"], timestamp=m["timestamp"],
        )  # fmt: skip
        assert out == raw[jb["position"] : jb["position"] + jb["size_in_bytes"]]


# ----------------------------------------------------------------------------------- KRaft types
KRAFT_TYPES = [(2, "leader_change"), (3, "snapshot_header"), (4, "snapshot_footer"), (5, "kraft_version"),
               (6, "kraft_voters"), (7, "unknown"), (99, "unknown"), (0x7FFF, "unknown")]  # fmt: skip


@pytest.mark.parametrize("type_id,name", KRAFT_TYPES)
def test_kraft_control_types_by_name(codec, type_id, name):
    value = b"\x00\x00\x00\x01\x00"  # KRaftVersionRecord v0: Version 0, KRaftVersion 1, no tagged fields
    raw = control_batch(40, control_key(type_id), value)
    batch = one_batch(codec, raw)
    assert batch.is_control and not batch.is_transactional and batch.producer_id == -1
    cr = batch.control_record()
    assert (cr.type, cr.type_id, cr.key_version) == (name, type_id, 0)
    assert cr.value == value
    assert cr.marker_version is None and cr.coordinator_epoch is None and not cr.is_marker
    assert batch.first_control_type() == type_id
    for iso in ISOLATIONS:
        res = decode_checked(codec, raw, isolation=iso)
        assert res == [] and res.next_offset == 41


@pytest.mark.parametrize("type_id", [2, 6, 99])
def test_non_abort_control_batch_of_the_producer_does_not_end_its_abort(codec, type_id):
    """Java removes a producer from the aborted set only at a control batch whose first record is ABORT."""
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)
           + control_batch(2, control_key(type_id), b"\x00\x00", pid=P, epoch=0, txn=True)
           + data(codec, 3, pid=P, epoch=0, seq=2, txn=True)
           + marker("abort", P, 0, 4)
           + data(codec, 5))  # fmt: skip
    res = rc(codec, log, [(P, 0)])
    assert [rec_tuple(r) for r in res] == expected_records([5])
    assert res.next_offset == 6
    assert offsets(ru(codec, log)) == [0, 1, 3, 5]


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_aborted_batch_straddling_the_lso_stays_pending(codec, compression):
    """The LSO rule holds for a batch of an aborted transaction too: reaching past the LSO, it is kept
    for the next chunk (nothing of it is returned either way), exactly as a visible batch is."""
    log = data(codec, 0, 5, pid=P, epoch=0, seq=0, txn=True, compression=compression) + data(codec, 5, 1)
    kw = dict(isolation=RC, aborted_transactions=[(P, 0)], last_stable_offset=2)
    recs = codec.decode_records(log, **kw)
    assert list(recs) == [] and recs.next_offset == 2
    assert (recs.valid_bytes, recs.trailing_bytes) == (0, len(log))
    meta = codec.decode_arrow(log, **kw).schema.metadata
    assert (meta[b"next_offset"], meta[b"valid_bytes"], meta[b"trailing_bytes"]) == (b"2", b"0", str(len(log)).encode())
    # once the LSO is past it, the aborted batch is consumed and the next one decoded
    f = codec.ReadCommittedFilter([(P, 0)], isolation=RC, last_stable_offset=2)
    assert list(f.feed(log)) == [] and f.pending_bytes == len(log)
    f.last_stable_offset = 6
    assert offsets(f.feed(b"")) == [5] and f.pending_bytes == 0


# ---------------------------------------------------------------------------- Java's parse rules
@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"])
def test_control_key_shorter_than_4_bytes_is_invalid(codec, key):
    raw = control_batch(0, key, marker_value(1), pid=P, epoch=0, txn=True)
    batch = one_batch(codec, raw)
    with pytest.raises(InvalidRecordError):
        batch.control_record()
    with pytest.raises(InvalidRecordError):
        batch.first_control_type()
    # Java's consumer parses the key of a producer's control batch under read_committed only
    with pytest.raises(InvalidRecordError):
        codec.decode_records(raw, isolation=RC)
    with pytest.raises(InvalidRecordError):
        codec.decode_arrow(raw, isolation=RC)
    res = ru(codec, raw)
    assert res == [] and res.next_offset == 1


@pytest.mark.parametrize("version", [-1, -2, -32768])
def test_control_key_negative_version_is_invalid(codec, version):
    raw = control_batch(0, control_key(0, version), marker_value(1), pid=P, epoch=0, txn=True)
    batch = one_batch(codec, raw)
    with pytest.raises(InvalidRecordError):
        batch.control_record()
    with pytest.raises(InvalidRecordError):
        batch.first_control_type()
    with pytest.raises(InvalidRecordError):
        codec.decode_records(raw, isolation=RC)
    with pytest.raises(InvalidRecordError):
        codec.decode_arrow(raw, isolation=RC)


@pytest.mark.parametrize("version", [1, 5, 0x7FFF])
def test_control_key_version_above_0_is_read_as_version_0(codec, version):
    raw = control_batch(0, control_key(0, version), marker_value(9), pid=P, epoch=0, txn=True)
    cr = one_batch(codec, raw).control_record()
    assert (cr.type, cr.type_id, cr.coordinator_epoch) == ("abort", 0, 9)
    raw = control_batch(0, control_key(1, version), marker_value(9), pid=P, epoch=0, txn=True)
    assert one_batch(codec, raw).control_record().type == "commit"
    # and it ends the producer's abort like a version-0 ABORT marker
    log = (data(codec, 0, pid=P, epoch=0, seq=0, txn=True)
           + control_batch(1, control_key(0, version), marker_value(9), pid=P, epoch=0, txn=True)
           + data(codec, 2, pid=P, epoch=0, seq=1, txn=True)
           + marker("commit", P, 0, 3))  # fmt: skip
    res = rc(codec, log, [(P, 0)])
    assert offsets(res) == [2] and res.next_offset == 4


def test_control_key_longer_than_4_bytes_reads_the_first_4(codec):
    raw = control_batch(0, control_key(1) + b"\xff\xff", marker_value(3), pid=P, epoch=0, txn=True)
    cr = one_batch(codec, raw).control_record()
    assert (cr.type, cr.coordinator_epoch) == ("commit", 3)


@pytest.mark.parametrize("value", [None, b"", b"\x00\x00\x00\x00\x00"])
def test_marker_value_shorter_than_6_bytes_is_invalid(codec, value):
    raw = control_batch(0, control_key(0), value, pid=P, epoch=0, txn=True)
    batch = one_batch(codec, raw)
    with pytest.raises(InvalidRecordError):
        batch.control_record()
    assert batch.first_control_type() == 0  # the key alone is fine
    # the consumer reads only the key (ControlRecordType.parse): still an ABORT for read_committed
    log = data(codec, 0, pid=P, epoch=0, seq=0, txn=True) + with_base_offset(raw, 1) + data(codec, 2)
    res = rc(codec, log, [(P, 0)])
    assert offsets(res) == [2] and res.next_offset == 3


def test_marker_value_negative_version_is_invalid(codec):
    raw = control_batch(0, control_key(1), marker_value(4, version=-1), pid=P, epoch=0, txn=True)
    with pytest.raises(InvalidRecordError):
        one_batch(codec, raw).control_record()


@pytest.mark.parametrize("value", [marker_value(77, version=1), marker_value(77, version=3) + b"\x00\x00",
                                   marker_value(77) + b"\x01"])  # fmt: skip
def test_marker_value_newer_version_or_longer_is_read_as_version_0(codec, value):
    raw = control_batch(0, control_key(1), value, pid=P, epoch=0, txn=True)
    cr = one_batch(codec, raw).control_record()
    assert (cr.type, cr.coordinator_epoch) == ("commit", 77)


# ----------------------------------------------------------------------------- empty control batch
def test_empty_control_batch_is_not_an_abort_marker(codec):
    empty = empty_batch(2, pid=P, epoch=0, attributes=CONTROL | TRANSACTIONAL)
    batch = one_batch(codec, empty)
    assert batch.is_control and batch.records_count == 0
    assert batch.control_record() is None
    assert batch.first_control_type() == -1
    assert batch.records() == []
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)
           + empty
           + data(codec, 3, pid=P, epoch=0, seq=2, txn=True)
           + marker("abort", P, 0, 4)
           + data(codec, 5, pid=P, epoch=0, seq=3, txn=True)
           + marker("commit", P, 0, 6))  # fmt: skip
    res = rc(codec, log, [(P, 0)])
    assert offsets(res) == [5]  # offset 3 would leak if the empty batch were taken for an ABORT
    assert res.next_offset == 7
    assert offsets(ru(codec, log)) == [0, 1, 3, 5]
    assert [c.type for c in control_records(codec.iter_batches(log))] == ["abort", "commit"]
    s = scan_transactions(log)
    assert s.aborted == [(P, 0, 4)] and s.committed == [(P, 5, 6)] and s.open == {}
    # an empty control batch at the end still moves next_offset past it
    tail = log + empty_batch(7, 3, pid=Q, epoch=0, attributes=CONTROL | TRANSACTIONAL)
    assert rc(codec, tail, [(P, 0)]).next_offset == 11
    assert scan_transactions(tail).open == {}


def test_empty_control_batch_does_not_end_an_open_transaction(codec):
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)
           + empty_batch(2, pid=P, epoch=0, attributes=CONTROL | TRANSACTIONAL))  # fmt: skip
    s = scan_transactions(log)
    assert s.open == {P: 0} and s.last_stable_offset == 0 and s.log_end_offset == 3
    assert last_stable_offset(log) == 0
    res = rc(codec, log, last_stable_offset=0, fetch_offset=0)
    assert res == [] and res.next_offset == 0


# ---------------------------------------------------------------------- bugs the peers shipped
def test_control_records_never_returned_as_data(codec):
    """kafka-python handed control records (keys like 00 00 00 01) to applications for six years."""
    gz_commit = with_base_offset(load_golden("control_commit_gzip")[0], 9)  # pid 4242, compressed marker
    log = (data(codec, 0)
           + data(codec, 1, 2, pid=P, epoch=0, seq=0, txn=True)
           + marker("commit", P, 0, 3)
           + data(codec, 4, pid=Q, epoch=0, seq=0, txn=True)
           + marker("abort", Q, 0, 5)
           + control_batch(6, control_key(2), b"\x00\x00\x00\x00\x00\x01\x00\x00\x00")
           + control_batch(7, control_key(99), None)
           + data(codec, 8)
           + gz_commit
           + data(codec, 10))  # fmt: skip
    control_keys = {control_key(t) for t in (0, 1, 2, 99)}
    cases = [
        (dict(isolation=RU), [0, 1, 2, 4, 8, 10]),
        (dict(isolation=RU, aborted_transactions=[(Q, 4)]), [0, 1, 2, 4, 8, 10]),
        (dict(isolation=RC), [0, 1, 2, 4, 8, 10]),
        (dict(isolation=RC, aborted_transactions=[(Q, 4)]), [0, 1, 2, 8, 10]),
        (dict(isolation=RC, aborted_transactions=[(Q, 4)], fetch_offset=3), [8, 10]),
    ]
    for kw, want in cases:
        res = decode_checked(codec, log, **kw)
        assert [rec_tuple(r) for r in res] == expected_records(want, {1: 0, 2: 1, 4: 0})
        assert not any(r.key in control_keys for r in res)
        assert res.next_offset == 11
        f = codec.ReadCommittedFilter(kw.get("aborted_transactions"), isolation=kw["isolation"],
                                      fetch_offset=kw.get("fetch_offset"))  # fmt: skip
        got = []
        for i in range(0, len(log), 37):
            got += f.feed(log[i : i + 37])
        assert offsets(got) == want and f.next_offset == 11


@pytest.mark.parametrize("aborted", [None, [], [(P, 3)], [(P, 10)], [(Q, 7)], [(Q, 12)]])
def test_log_with_only_an_abort_marker(codec, aborted):
    """aiokafka crashed (set.remove of a producer never seen) on a log holding only an ABORT marker."""
    log = marker("abort", P, 0, 10)
    for kw in ({}, {"fetch_offset": 10}):
        res = rc(codec, log, aborted, **kw)
        assert res == [] and res.next_offset == 11
    res = ru(codec, log)
    assert res == [] and res.next_offset == 11
    # the producer's next transaction is not hidden by anything left over from that ABORT
    f = codec.ReadCommittedFilter(aborted)
    assert f.feed(log) == [] and f.next_offset == 11
    res = f.feed(data(codec, 11, pid=P, epoch=0, seq=0, txn=True) + marker("commit", P, 0, 12))
    assert offsets(res) == [11] and res.next_offset == 13
    s = scan_transactions(log)
    assert (s.aborted, s.committed, s.open, s.last_stable_offset, s.log_end_offset) == ([], [], {}, 11, 11)
    assert aborted_transactions(log) == []


def test_abort_marker_without_matching_list_entry_does_not_leak_later_aborts(codec):
    """librdkafka: an empty aborted transaction's ABORT popped the entry of a later real one."""
    log = (marker("abort", P, 0, 0)  # an empty transaction: no data, no list entry
           + data(codec, 1, 2, pid=P, epoch=0, seq=0, txn=True)
           + data(codec, 3)
           + marker("abort", P, 0, 4)
           + data(codec, 5, pid=P, epoch=0, seq=2, txn=True)
           + marker("commit", P, 0, 6))  # fmt: skip
    res = rc(codec, log, [(P, 1)])
    assert offsets(res) == [3, 5] and res.next_offset == 7
    f = codec.ReadCommittedFilter([(P, 1)])
    first = f.feed(log[:78])
    assert first == [] and first.next_offset == 1
    assert offsets(f.feed(log[78:])) == [3, 5] and f.next_offset == 7
    # an empty ABORT between two aborted transactions of the same producer
    log = (data(codec, 0, pid=P, epoch=0, seq=0, txn=True)
           + marker("abort", P, 0, 1)
           + marker("abort", P, 0, 2)  # empty
           + data(codec, 3, 2, pid=P, epoch=0, seq=1, txn=True)
           + marker("abort", P, 0, 5)
           + data(codec, 6))  # fmt: skip
    for entries in ([(P, 0), (P, 3)], [(P, 3), (P, 0)]):
        res = rc(codec, log, entries)
        assert offsets(res) == [6] and res.next_offset == 7
    assert aborted_transactions(log) == [(P, 0), (P, 3)]


def _three_aborts_log(codec):
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)  # aborted
           + marker("abort", P, 0, 2)
           + data(codec, 3, pid=Q, epoch=0, seq=0, txn=True)  # aborted
           + data(codec, 4, pid=P, epoch=0, seq=2, txn=True)  # committed
           + marker("commit", P, 0, 5)
           + marker("abort", Q, 0, 6)
           + data(codec, 7, 2, pid=P, epoch=0, seq=3, txn=True)  # aborted
           + marker("abort", P, 0, 9)
           + data(codec, 10))  # fmt: skip
    return log, [(P, 0), (Q, 3), (P, 7)]


def test_unsorted_aborted_list(codec):
    """Redpanda sends aborted lists out of order; every permutation must give the same result."""
    log, entries = _three_aborts_log(codec)
    seqs = {4: 2}
    for perm in itertools.permutations(entries):
        for lst in (list(perm), list(perm) + [perm[0]]):
            res = rc(codec, log, lst)
            assert [rec_tuple(r) for r in res] == expected_records([4, 10], seqs), lst
            assert res.next_offset == 11
            f = codec.ReadCommittedFilter()
            for e in lst:
                f.add_aborted_transactions([e])
            assert offsets(f.feed(log)) == [4, 10] and f.next_offset == 11
    assert sorted(aborted_transactions(log)) == sorted(entries)


def test_aborted_list_ignored_under_read_uncommitted(codec):
    """franz-go applied an aborted list that arrived with a read_uncommitted fetch."""
    log, entries = _three_aborts_log(codec)
    everything = [0, 1, 3, 4, 7, 8, 10]
    for kw in ({}, {"last_stable_offset": 3}, {"last_stable_offset": 0}):
        res = ru(codec, log, aborted_transactions=entries, **kw)
        assert offsets(res) == everything and res.next_offset == 11
    f = codec.ReadCommittedFilter(entries, isolation=RU)
    f.add_aborted_transactions(entries)
    assert offsets(f.feed(log)) == everything


def test_marker_for_another_producer_before_the_abort(codec):
    """brod stopped at the first control record instead of the ABORT of the same producer."""
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)
           + data(codec, 2, pid=Q, epoch=0, seq=0, txn=True)
           + marker("commit", Q, 0, 3)
           + data(codec, 4, pid=Q, epoch=0, seq=1, txn=True)
           + marker("abort", Q, 0, 5)
           + data(codec, 6, pid=P, epoch=0, seq=2, txn=True)
           + marker("abort", P, 0, 7)
           + data(codec, 8))  # fmt: skip
    res = rc(codec, log, [(P, 0), (Q, 4)])
    assert offsets(res) == [2, 8] and res.next_offset == 9
    # another producer's empty ABORT (no entry) inside P's aborted transaction
    log = (data(codec, 0, pid=P, epoch=0, seq=0, txn=True)
           + marker("abort", Q, 0, 1)
           + data(codec, 2, pid=P, epoch=0, seq=1, txn=True)
           + control_batch(3, control_key(2), b"\x00\x00")  # a KRaft control batch too
           + data(codec, 4, pid=P, epoch=0, seq=2, txn=True)
           + marker("abort", P, 0, 5)
           + data(codec, 6))  # fmt: skip
    res = rc(codec, log, [(P, 0)])
    assert offsets(res) == [6] and res.next_offset == 7


def test_next_offset_after_trailing_marker(codec):
    """librdkafka/Spark/Pinot/Hudi: lag stuck at 1 because the trailing marker's offset was never passed on."""
    body = data(codec, 0, 3, pid=P, epoch=0, seq=0, txn=True)
    committed = body + marker("commit", P, 0, 3)
    for iso in ISOLATIONS:
        res = decode_checked(codec, committed, isolation=iso)
        assert offsets(res) == [0, 1, 2] and res.next_offset == 4
    aborted = body + marker("abort", P, 0, 3)
    res = rc(codec, aborted, [(P, 0)])
    assert res == [] and res.next_offset == 4
    res = ru(codec, aborted)
    assert offsets(res) == [0, 1, 2] and res.next_offset == 4
    # chunk by chunk: the chunk holding only the marker still moves next_offset
    for log, entries, want in ((committed, None, [0, 1, 2]), (aborted, [(P, 0)], [])):
        f = codec.ReadCommittedFilter(entries)
        assert offsets(f.feed(log[:-78])) == want and f.next_offset == 3
        tail = f.feed(log[-78:])
        assert tail == [] and tail.next_offset == 4 == f.next_offset


def test_next_offset_after_trailing_aborted_batch(codec):
    log = data(codec, 0) + data(codec, 1, 3, pid=P, epoch=0, seq=0, txn=True)  # its ABORT not fetched yet
    res = rc(codec, log, [(P, 1)])
    assert offsets(res) == [0] and res.next_offset == 4


def test_next_offset_after_compacted_gaps(codec):
    # a batch whose last record (offset 19) was removed by compaction keeps lastOffsetDelta 9
    recs = (_spec.raw_record(off_delta=0, key=key_of(10), value=value_of(10))
            + _spec.raw_record(off_delta=3, key=key_of(13), value=value_of(13)))  # fmt: skip
    compacted = _spec.v2_batch(recs, count=2, base_offset=10, last_offset_delta=9)
    assert one_batch(codec, compacted).last_offset == 19
    for iso in ISOLATIONS:
        res = decode_checked(codec, compacted, isolation=iso)
        assert offsets(res) == [10, 13] and res.next_offset == 20
    # whole batches removed between two batches, then an empty batch at the end
    log = data(codec, 0, 2) + compacted + empty_batch(30, 4)  # offsets 2-9 and 20-29 are gone
    for iso in ISOLATIONS:
        res = decode_checked(codec, log, isolation=iso)
        assert offsets(res) == [0, 1, 10, 13] and res.next_offset == 35
    # a truncated tail does not count
    cut = log + data(codec, 35, 3)[:-5]
    res = ru(codec, cut)
    assert offsets(res) == [0, 1, 10, 13] and res.next_offset == 35
    assert res.trailing_bytes == len(cut) - len(log)


def _records_section(n=20, base=0):
    return b"".join(_spec.raw_record(off_delta=i, key=key_of(base + i), value=value_of(base + i) * 3)
                    for i in range(n))  # fmt: skip


def _expect_compressed(codec, payload, cid, n=20):
    raw = _spec.v2_batch(payload, count=n, attributes=cid)
    res = ru(codec, raw)
    assert [(r.offset, r.key, r.value) for r in res] == [(i, key_of(i), value_of(i) * 3) for i in range(n)]
    assert res.next_offset == n


def test_zstd_without_content_size_and_multiple_frames(codec):
    """kafka-python could not read zstd frames without a content size, nor several frames in one batch."""
    plain = _records_section()
    no_size = zstandard.ZstdCompressor(write_content_size=False)
    with_size = zstandard.ZstdCompressor(write_content_size=True, write_checksum=True)
    frame = no_size.compress(plain)
    assert not frame[4] & 0xC0 and not frame[4] & 0x20  # no Frame_Content_Size field
    _expect_compressed(codec, frame, 4)
    cuts = [0, 7, len(plain) // 2, len(plain)]  # frames split inside records
    frames = [(no_size if i % 2 == 0 else with_size).compress(plain[a:b])
              for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]  # fmt: skip
    _expect_compressed(codec, b"".join(frames), 4)
    skippable = struct.pack("<II", 0x184D2A50, 4) + b"skip"
    _expect_compressed(codec, frames[0] + skippable + frames[1] + frames[2], 4)


def test_lz4_linked_blocks_rejected(codec):
    """Python's lz4.frame writes linked blocks by default; Kafka cannot read them, neither must we."""
    n = 5000
    plain = _records_section(n)
    assert len(plain) > 2 * 65536  # several 64 KiB blocks
    linked = lz4.frame.compress(plain, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=True)
    assert not linked[4] & 0x20
    raw = _spec.v2_batch(linked, count=n, attributes=3)
    with pytest.raises(DecompressionError):
        codec.decode_records(raw)
    with pytest.raises(DecompressionError):
        codec.decode_arrow(raw)
    with pytest.raises(CorruptRecordError):
        one_batch(codec, raw).records()
    independent = lz4.frame.compress(plain, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    _expect_compressed(codec, independent, 3, n)
    # and the writer never produces linked blocks
    built = data(codec, 0, 50, compression="lz4")
    assert built[61:65] == b"\x04\x22\x4d\x18" and built[65] & 0x20


def test_raw_snappy_from_librdkafka(codec):
    """librdkafka writes raw snappy; Java writes xerial framing: read both."""
    plain = _records_section()
    _expect_compressed(codec, bytes(cramjam.snappy.compress_raw(plain)), 2)
    cut = len(plain) // 3
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for part in (plain[:cut], plain[cut:]):
        block = bytes(cramjam.snappy.compress_raw(part))
        xerial += struct.pack(">i", len(block)) + block
    _expect_compressed(codec, xerial, 2)
    built = data(codec, 0, 5, compression="snappy")
    assert built[61:69] == b"\x82SNAPPY\x00"


# --------------------------------------------------------------------- more from section 13
def test_non_transactional_batches_of_aborted_producer_are_delivered(codec):
    log = (data(codec, 0, pid=P, epoch=0, seq=0, txn=True)
           + data(codec, 1, 2, pid=P, epoch=0, seq=1, txn=False)  # no transactional bit
           + data(codec, 3, pid=P, epoch=0, seq=3, txn=True)
           + marker("abort", P, 0, 4)
           + data(codec, 5))  # fmt: skip
    res = rc(codec, log, [(P, 0)])
    assert [rec_tuple(r) for r in res] == expected_records([1, 2, 5], {1: 1, 2: 2})
    assert res.next_offset == 6


def test_hundreds_of_producers_inside_aborted_transactions_at_once(codec):
    """700 producers each open a transaction; their markers come in shuffled order, two in three ABORT,
    and after its marker each producer commits a second transaction while the others' are still open; the
    next producer in that order writes inside and outside its first transaction meanwhile.
    The decoder's set of producers inside an aborted transaction grows to hundreds and shrinks to none in
    arbitrary order; a producer left in it by mistake would hide its second transaction, one dropped by
    mistake would show aborted records."""
    import random

    rng = random.Random(7)
    pids = rng.sample(range(1, 1 << 40), 700)
    parts, offset, first, aborted, visible = [], 0, {}, [], []
    for pid in pids:
        parts.append(data(codec, offset, 2, pid=pid, epoch=0, seq=0, txn=True))
        first[pid] = offset
        offset += 2
    order = pids[:]
    rng.shuffle(order)
    for i, pid in enumerate(order):
        if i % 3:
            parts.append(marker("abort", pid, 0, offset))
            aborted.append((pid, first[pid]))
        else:
            parts.append(marker("commit", pid, 0, offset))
            visible += [first[pid], first[pid] + 1]
        offset += 1
        parts.append(data(codec, offset, pid=pid, epoch=0, seq=4, txn=True))  # its second transaction
        visible.append(offset)
        offset += 1
        if i + 1 < len(order):  # the next producer writes in its first transaction again, and outside it
            parts.append(data(codec, offset, pid=order[i + 1], epoch=0, seq=2, txn=True))
            if (i + 1) % 3 == 0:  # (to be committed)
                visible.append(offset)
            parts.append(data(codec, offset + 1, pid=order[i + 1], epoch=0, seq=3, txn=False))
            visible.append(offset + 1)
            offset += 2
    for pid in pids:
        parts.append(marker("commit", pid, 0, offset))
        offset += 1
    rng.shuffle(aborted)
    res = rc(codec, b"".join(parts), aborted)
    assert offsets(res) == sorted(visible)
    assert res.next_offset == offset


def test_filter_touched_from_another_thread_while_it_decodes(codec):
    """The compiled filter decodes without the GIL, aborted transactions and markers included (the twin
    lets other threads run between its bytecodes).  Another thread adding aborted transactions meanwhile
    gets a RuntimeError (the entries it would change are in use), never a crash, and a feed while that thread
    is adding gets one too; the decode's result is unaffected."""
    import threading

    parts, offset, aborted = [], 0, []
    for t in range(300):
        pid = 1000 + t % 7
        parts.append(data(codec, offset, 40, pid=pid, epoch=0, seq=0, txn=True))
        parts.append(marker("abort" if t % 2 else "commit", pid, 0, offset + 40))
        if t % 2:
            aborted.append((pid, offset))
        offset += 41
    log = b"".join(parts)
    want = codec.decode_arrow(log, isolation=RC, aborted_transactions=aborted)
    assert want.num_rows == 150 * 40
    f = codec.ReadCommittedFilter(aborted, isolation=RC)
    refused, stop = [], threading.Event()

    def add():
        while not stop.is_set():
            try:
                f.add_aborted_transactions([(1 << 50, 0)])  # a producer not in the log
            except RuntimeError as exc:
                refused.append(exc)

    def feed():
        while True:
            try:
                return f.feed_arrow(log)
            except RuntimeError as exc:  # (the other thread was adding: fed again)
                assert "another thread" in str(exc)

    thread = threading.Thread(target=add)
    thread.start()
    try:
        got = [feed()]
        for _ in range(500):  # (fed again: nothing new is returned, but the log is walked again)
            if refused:
                break
            got.append(feed())
    finally:
        stop.set()
        thread.join()
    assert got[0].equals(want)
    assert all(g.num_rows == 0 for g in got[1:])
    assert refused and "another thread" in str(refused[0])


def test_a_feed_while_aborted_transactions_are_being_added_is_refused(codec):
    """add_aborted_transactions runs Python code as it iterates its argument (a generator, a key's __index__),
    which lets another thread in: a feed meanwhile gets the RuntimeError a feed beside a feed gets, instead of
    reading entries being changed under it."""
    f = codec.ReadCommittedFilter(isolation=RC)
    log = data(codec, 0, 3, pid=7, epoch=0, seq=0, txn=True) + marker("abort", 7, 0, 3)
    seen = []

    def pairs():
        yield (9, 0)
        for feed in (f.feed, f.feed_arrow, lambda b: f.feed_arrow_parts([b[:20], b[20:]])):
            try:
                feed(log[:50])  # (an incomplete batch: it would be held back)
            except RuntimeError as exc:
                seen.append(exc)
        yield (7, 0)

    f.add_aborted_transactions(pairs())
    assert len(seen) == 3 and all("another thread" in str(e) for e in seen)
    assert f.pending_bytes == 0 and f.next_offset is None  # the refused feeds changed nothing
    assert offsets(f.feed(log)) == [] and f.next_offset == 4  # both pairs were added, the filter works on


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_control_batch_in_a_compressed_batch(codec, compression):
    pid, epoch = 4242, 3  # the goldens' producer
    abort = load_golden(f"control_abort_{compression}")[0]  # at offset 204
    commit = with_base_offset(load_golden(f"control_commit_{compression}")[0], 206)
    assert one_batch(codec, abort).compression == compression
    log = (data(codec, 200, 4, pid=pid, epoch=epoch, seq=0, txn=True, compression=compression)
           + abort
           + data(codec, 205, pid=pid, epoch=epoch, seq=4, txn=True, compression=compression)
           + commit
           + data(codec, 207, compression=compression))  # fmt: skip
    res = rc(codec, log, [(pid, 200)])
    assert [rec_tuple(r) for r in res] == expected_records([205, 207], {205: 4})
    assert res.next_offset == 208
    assert offsets(ru(codec, log)) == [200, 201, 202, 203, 205, 207]
    s = scan_transactions(log)
    assert s.aborted == [(pid, 200, 204)] and s.committed == [(pid, 205, 206)] and s.last_stable_offset == 208


def test_aborted_producer_batches_before_first_offset_are_kept(codec):
    log = (data(codec, 0, pid=P, epoch=0, seq=0)  # idempotent, before any transaction
           + data(codec, 1, 2, pid=P, epoch=0, seq=1, txn=True)
           + marker("commit", P, 0, 3)
           + data(codec, 4, 2, pid=P, epoch=0, seq=3, txn=True)
           + marker("abort", P, 0, 6))  # fmt: skip
    res = rc(codec, log, [(P, 4)])
    assert [rec_tuple(r) for r in res] == expected_records([0, 1, 2], {0: 0, 1: 1, 2: 2})
    assert res.next_offset == 7


def test_two_aborted_transactions_of_the_same_producer(codec):
    log = (data(codec, 0, 2, pid=P, epoch=0, seq=0, txn=True)
           + marker("abort", P, 0, 2)
           + data(codec, 3, pid=P, epoch=0, seq=2, txn=True)
           + marker("commit", P, 0, 4)
           + data(codec, 5, 2, pid=P, epoch=0, seq=3, txn=True)
           + marker("abort", P, 0, 7)
           + data(codec, 8, pid=P, epoch=0, seq=5, txn=True)
           + marker("commit", P, 0, 9))  # fmt: skip
    for entries in ([(P, 0), (P, 5)], [(P, 5), (P, 0)], [(P, 5), (P, 0), (P, 5)]):
        res = rc(codec, log, entries)
        assert offsets(res) == [3, 8] and res.next_offset == 10
    # the consumer trusts the list: a transaction missing from it is not hidden by its marker alone
    assert offsets(rc(codec, log, [(P, 0)])) == [3, 5, 6, 8]
    assert aborted_transactions(log) == [(P, 0), (P, 5)]


def test_epoch_bump_tv2(codec):
    """Under transaction.version 2 the marker's epoch is one higher than its transaction's data."""
    log = (data(codec, 0, 2, pid=P, epoch=4, seq=0, txn=True)
           + marker("abort", P, 5, 2)
           + data(codec, 3, pid=P, epoch=5, seq=0, txn=True)
           + marker("commit", P, 6, 4)
           + data(codec, 5, pid=P, epoch=6, seq=0, txn=True))  # still open
    res = rc(codec, log, [(P, 0)])
    assert [rec_tuple(r) for r in res] == expected_records([3, 5], {3: 0, 5: 0})
    assert offsets(rc(codec, log, [(P, 0)], last_stable_offset=5)) == [3]
    s = scan_transactions(log)
    assert s.aborted == [(P, 0, 2)] and s.committed == [(P, 3, 4)] and s.open == {P: 5}
    assert s.last_stable_offset == 5


def test_epoch_bump_tv2_producer_state():
    m = ProducerStateManager()
    assert m.check_and_update(P, 4, 0, 1, 0, 1, 10, True) is None
    c = m.append_marker(P, 5, control_type=0, coordinator_epoch=1, offset=2, timestamp=11, transaction_version=2)
    assert (c.producer_id, c.first_offset, c.last_offset, c.is_aborted) == (P, 0, 2, True)
    with pytest.raises(InvalidProducerEpochError):  # a zombie of the old epoch
        m.check_and_update(P, 4, 2, 2, 3, 3, 12, True)
    assert m.check_and_update(P, 5, 0, 0, 3, 3, 12, True) is None  # new epoch, sequence 0
    with pytest.raises(InvalidProducerEpochError):  # TV2: the marker must carry a bumped epoch
        m.append_marker(P, 5, control_type=1, coordinator_epoch=1, offset=4, timestamp=13, transaction_version=2)
    c = m.append_marker(P, 6, control_type=1, coordinator_epoch=1, offset=4, timestamp=13, transaction_version=2)
    assert (c.first_offset, c.last_offset, c.is_aborted) == (3, 4, False)


# -------------------------------------------------------------------------- LSO and scanning
def test_last_stable_offset_with_open_transactions(codec):
    log = (data(codec, 0, 2)
           + data(codec, 2, 2, pid=P, epoch=0, seq=0, txn=True)
           + marker("commit", P, 0, 4)
           + data(codec, 5, pid=Q, epoch=0, seq=0, txn=True)  # open
           + data(codec, 6)
           + data(codec, 7, 2, pid=R, epoch=0, seq=0, txn=True))  # open
    s = scan_transactions(log)
    assert s.open == {Q: 5, R: 7}
    assert s.committed == [(P, 2, 4)] and s.aborted == []
    assert (s.last_stable_offset, s.log_end_offset) == (5, 9)
    assert last_stable_offset(log) == 5
    assert [last_stable_offset(log, high_watermark=hw) for hw in (3, 5, 6, 100)] == [3, 5, 5, 5]
    assert scan_transactions(codec.iter_batches(log)) == s  # batches instead of a buffer
    res = rc(codec, log, last_stable_offset=5)
    assert offsets(res) == [0, 1, 2, 3] and res.next_offset == 5


def test_last_stable_offset_all_closed(codec):
    log = (data(codec, 0)
           + data(codec, 1, pid=P, epoch=0, seq=0, txn=True)
           + marker("abort", P, 0, 2)
           + data(codec, 3, pid=Q, epoch=0, seq=0, txn=True)
           + marker("commit", Q, 0, 4))  # fmt: skip
    s = scan_transactions(log)
    assert (s.last_stable_offset, s.log_end_offset, s.open) == (5, 5, {})
    assert last_stable_offset(log) == 5
    assert last_stable_offset(log, high_watermark=4) == 4
    assert aborted_transactions(log) == [(P, 1)]
    res = rc(codec, log, aborted_transactions(log), last_stable_offset=5)
    assert offsets(res) == [0, 3] and res.next_offset == 5


def test_last_stable_offset_of_an_empty_log():
    assert last_stable_offset(b"") == 0
    s = scan_transactions(b"", start_offset=42)
    assert (s.last_stable_offset, s.log_end_offset, s.aborted, s.open) == (42, 42, [], {})


def _txnindex_entries(path):
    raw = path.read_bytes()
    assert len(raw) % 34 == 0
    return [struct.unpack_from(">hqqqq", raw, i) for i in range(0, len(raw), 34)]


def test_aborted_transactions_of_segment_mixed_equal_the_java_txnindex(codec):
    raw, _meta = load_golden("segment_mixed")
    rec_dir = STORAGE / "recover_segment_mixed"
    assert raw == (rec_dir / "00000000000000000000.log").read_bytes()
    entries = _txnindex_entries(rec_dir / "00000000000000000000.txnindex")
    recover = json.loads((rec_dir / "recover.json").read_text())
    assert [(e[1], e[2], e[3], e[4]) for e in entries] == [
        (t["producer_id"], t["first_offset"], t["last_offset"], t["last_stable_offset"])
        for t in recover["txnindex"]["entries"]
    ]
    assert aborted_transactions(raw) == [(pid, first) for _v, pid, first, _last, _lso in entries]
    s = scan_transactions(raw)
    assert s.aborted == [(pid, first, last) for _v, pid, first, last, _lso in entries]
    assert s.committed == [(t["producer_id"], t["first_offset"], t["last_offset"])
                           for t in recover["completed_txns"] if not t["is_aborted"]]  # fmt: skip
    assert (s.open, s.last_stable_offset, s.log_end_offset) == ({}, 18, recover["map_end_offset"])
    # read_committed with that list: the aborted data (3-4 of 1001, 13-14 of 1003) and the markers go
    res = rc(codec, raw, list(reversed(aborted_transactions(raw))))
    assert offsets(res) == [0, 1, 2, 5, 6, 7, 8, 9, 11, 16, 17] and res.next_offset == 18
    assert offsets(ru(codec, raw)) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 14, 16, 17]


# ---------------------------------------------------------------------- fetch_offset and the LSO
@pytest.mark.parametrize("compression", CODECS)
def test_fetch_offset_inside_a_batch(codec, compression):
    log = data(codec, 10, 5, compression=compression) + data(codec, 15, 2, compression=compression)
    for fetch, want in ((10, list(range(10, 17))), (12, [12, 13, 14, 15, 16]), (14, [14, 15, 16]),
                        (16, [16]), (17, [])):  # fmt: skip
        for iso in ISOLATIONS:
            res = decode_checked(codec, log, isolation=iso, fetch_offset=fetch)
            assert [rec_tuple(r) for r in res] == expected_records(want)
            assert res.next_offset == 17
    # inside an aborted transaction, then past its marker
    log = (data(codec, 10, 5, pid=P, epoch=0, seq=0, txn=True, compression=compression)
           + marker("abort", P, 0, 15)
           + data(codec, 16, 2, compression=compression))  # fmt: skip
    for fetch in (10, 12, 15, 16):
        res = rc(codec, log, [(P, 10)], fetch_offset=fetch)
        assert offsets(res) == [16, 17] and res.next_offset == 18
    assert offsets(ru(codec, log, fetch_offset=13)) == [13, 14, 16, 17]


def _lso_log(codec):
    head = data(codec, 0, 2)
    rest = data(codec, 2, 2, pid=P, epoch=0, seq=0, txn=True) + data(codec, 4, 2)  # P's transaction is open
    return head, rest


def test_last_stable_offset_hides_records_and_holds_them_pending(codec):
    head, rest = _lso_log(codec)
    log = head + rest
    res = rc(codec, log, last_stable_offset=2)
    assert offsets(res) == [0, 1] and res.next_offset == 2
    assert res.valid_bytes == len(head) and res.trailing_bytes == len(rest)
    assert offsets(rc(codec, log, last_stable_offset=0)) == []
    for outcome in ("commit", "abort"):
        f = codec.ReadCommittedFilter(last_stable_offset=2)
        out = f.feed(log)
        assert offsets(out) == [0, 1] and out.next_offset == 2 and f.pending_bytes == len(rest)
        again = f.feed(b"")
        assert again == [] and f.pending_bytes == len(rest) and f.next_offset == 2
        # the broker writes the marker; the LSO moves to the log end
        if outcome == "abort":
            f.add_aborted_transactions([(P, 2)])
        f.last_stable_offset = 7
        out = f.feed(b"")
        assert offsets(out) == ([2, 3, 4, 5] if outcome == "commit" else [4, 5])
        assert out.next_offset == 6 and f.pending_bytes == 0
        out = f.feed(marker(outcome, P, 0, 6))
        assert out == [] and out.next_offset == 7


def test_last_stable_offset_pending_across_random_chunks(codec):
    head, rest = _lso_log(codec)
    log = head + rest
    for step in (1, 5, 13, 61, 64, 200):
        f = codec.ReadCommittedFilter(last_stable_offset=2)
        got = []
        for i in range(0, len(log), step):
            got += f.feed(log[i : i + step])
        assert offsets(got) == [0, 1] and f.next_offset == 2 and f.pending_bytes == len(rest)
        f.last_stable_offset = 6
        rb = f.feed_arrow(b"")
        assert rb.column("offset").to_pylist() == [2, 3, 4, 5]
        assert rb.schema.metadata[b"next_offset"] == b"6"


def test_last_stable_offset_inside_a_batch(codec):
    """An LSO that falls inside a batch: the records before it are returned, next_offset is the LSO."""
    log = data(codec, 0, 5) + data(codec, 5, 2)
    res = rc(codec, log, last_stable_offset=3)
    assert offsets(res) == [0, 1, 2] and res.next_offset == 3
    # the records at and after the LSO are returned once it moves (bytes after the LSO are kept)
    f = codec.ReadCommittedFilter(last_stable_offset=3)
    assert offsets(f.feed(log)) == [0, 1, 2]
    f.last_stable_offset = 7
    out = f.feed(b"")
    assert offsets(out) == [3, 4, 5, 6] and out.next_offset == 7


def test_filter_skips_records_below_next_offset_when_a_batch_is_fetched_again(codec):
    """A consumer that stopped inside a batch (LSO inside it) fetches from next_offset; the broker sends
    the whole batch again: records below next_offset are skipped (Java's CompletedFetch, 10.1 step 2)."""
    batch = data(codec, 0, 5)
    f = codec.ReadCommittedFilter(last_stable_offset=3)
    assert offsets(f.feed(batch)) == [0, 1, 2] and f.next_offset == 3
    f.last_stable_offset = 5
    got = offsets(f.feed(b"")) + offsets(f.feed(batch))  # the Fetch response from offset 3
    assert got == [3, 4] and f.next_offset == 5


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_an_abort_marker_fed_again_does_not_end_the_next_aborted_transaction(codec, compression):
    """Producer 7 aborts two transactions, 0-1 and 2-4.  A fetch that starts over below where the filter
    got to feeds the first ABORT again after the second transaction was entered: it must change nothing
    (it used to end the second transaction, and its record 3 came back); uncompressed input also takes the
    columnar fast path (feed_arrow), compressed the full one."""
    b0, b2, b3 = (data(codec, o, 1, pid=7, epoch=0, seq=o, txn=True, compression=compression) for o in (0, 2, 3))
    m1, m4 = marker("abort", 7, 0, 1), marker("abort", 7, 0, 4)
    c5 = data(codec, 5, 2, pid=7, epoch=0, seq=4, txn=True, compression=compression)
    m7 = marker("commit", 7, 0, 7)
    aborted = [(7, 0), (7, 2)]
    whole = b0 + m1 + b2 + b3 + m4 + c5 + m7
    assert offsets(rc(codec, whole, aborted)) == [5, 6]
    for pieces in ([b0 + m1 + b2, m1 + b2 + b3 + m4, c5 + m7], [b0 + m1 + b2, m1, b3 + m4 + m4 + c5 + m7],
                   [b0 + m1, b0 + m1 + b2 + b3, m1 + b2 + b3 + m4 + c5, m4 + c5 + m7]):  # fmt: skip
        f = codec.ReadCommittedFilter(aborted)
        assert [o for p in pieces for o in offsets(f.feed(p))] == [5, 6], pieces
        f = codec.ReadCommittedFilter(aborted)
        got = [o for p in pieces for o in f.feed_arrow(p, columns=["offset"]).column(0).to_pylist()]
        assert got == [5, 6] and f.next_offset == 8, pieces
    # a fetch from further back, with the aborted transactions of its response added: its ABORT markers end
    # the transactions they close, and the producer's next transaction (committed) is seen
    t1, q = data(codec, 0, 5, pid=9, epoch=0, seq=0, txn=True), data(codec, 6, 4)
    t2, t3 = data(codec, 10, 3, pid=9, epoch=0, seq=5, txn=True), data(codec, 14, 3, pid=9, epoch=0, seq=8, txn=True)
    m5, m13, m17 = marker("abort", 9, 0, 5), marker("abort", 9, 0, 13), marker("commit", 9, 0, 17)
    for feed in ("feed", "feed_arrow"):
        f = codec.ReadCommittedFilter([(9, 10)], fetch_offset=6)

        def got(chunk, feed=feed, f=f):
            out = getattr(f, feed)(chunk)
            return offsets(out) if feed == "feed" else out.column("offset").to_pylist()

        assert got(q + t2 + m13) == [6, 7, 8, 9]
        f.add_aborted_transactions([(9, 0), (9, 10)])
        assert got(t1 + m5 + q + t2 + m13) == []
        assert got(t3 + m17) == [14, 15, 16], feed
        # the same fetch from further back while the later aborted transaction is still open: its ABORT at 5
        # does not end it, and the transaction's next batch (13) stays hidden until its own ABORT (15)
        t2b = data(codec, 13, 2, pid=9, epoch=0, seq=8, txn=True)
        m15, c16 = marker("abort", 9, 0, 15), data(codec, 16, 1)
        f = codec.ReadCommittedFilter([(9, 10)], fetch_offset=6)
        assert got(q + t2, f=f) == [6, 7, 8, 9]
        f.add_aborted_transactions([(9, 0)])
        assert got(t1 + m5 + q + t2, f=f) == []
        assert got(t2b + m15 + c16, f=f) == [16], feed
    # a marker below the fetch offset that the filter never processed still counts, as in Kafka's consumer
    # (the broker's aborted list may name a transaction whose ABORT lies just below the fetch offset)
    for log in (b0 + m1 + c5 + m7, m1 + c5 + m7):
        f = codec.ReadCommittedFilter([(7, 0)], fetch_offset=2)
        assert offsets(f.feed(log)) == [5, 6]


def test_filter_offsets_are_int64_on_both_backends(codec):
    """fetch_offset and last_stable_offset are int64 (the compiled filter keeps them so): outside it an
    OverflowError, not an integer a TypeError, on both backends and through the one-call decoders."""
    log = data(codec, 0, 1)
    for name in ("fetch_offset", "last_stable_offset"):
        for bad, exc in ((1 << 63, OverflowError), (-(1 << 63) - 1, OverflowError), (1.5, TypeError),
                         ("3", TypeError), (True, TypeError)):  # fmt: skip
            with pytest.raises(exc, match=name):
                codec.ReadCommittedFilter([], **{name: bad})
            for decode in (codec.decode_records, codec.decode_arrow):
                with pytest.raises(exc, match=name):
                    decode(log, isolation="read_committed", **{name: bad})
    import numpy as np

    assert offsets(codec.ReadCommittedFilter([], fetch_offset=np.int64(0), last_stable_offset=np.int64(1)).feed(log)) == [0]


def test_discard_pending_between_fetch_responses(codec):
    """A Fetch response may end inside a batch, and a batch straddling the LSO is held back: the next fetch,
    from next_offset, sends that batch again whole, so the held-back bytes are dropped first (else they
    would be completed with the wrong bytes).  The same before a fetch that starts over from further back:
    the result is then a fresh filter's."""
    p1 = data(codec, 2, 1, pid=1, epoch=0, seq=0, txn=True)
    t0, t3 = data(codec, 0, 1, pid=2, epoch=0, seq=0, txn=True), data(codec, 3, 1, pid=2, epoch=0, seq=1, txn=True)
    a1, c4, c5 = marker("abort", 2, 0, 1), marker("commit", 1, 0, 4), marker("commit", 2, 0, 5)
    whole = t0 + a1 + p1 + t3 + c4 + c5
    fresh = offsets(codec.ReadCommittedFilter([(2, 0)], fetch_offset=0, last_stable_offset=6).feed(whole))
    assert fresh == [2, 3]
    # held back at the LSO, then a fetch from offset 0 with that response's aborted list and LSO
    f = codec.ReadCommittedFilter([], fetch_offset=2, last_stable_offset=2)
    assert offsets(f.feed(p1 + t3)) == [] and f.pending_bytes == len(p1 + t3)
    assert f.discard_pending() == len(p1 + t3) and f.pending_bytes == 0
    f.add_aborted_transactions([(2, 0)])
    f.last_stable_offset = 6
    assert offsets(f.feed(whole)) == fresh
    # a response cut inside its last batch; the next response, from next_offset, starts with that batch whole
    f = codec.ReadCommittedFilter([(2, 0)], fetch_offset=0)
    got = offsets(f.feed(whole[: len(t0 + a1 + p1) + 10]))
    assert f.next_offset == 3 and f.discard_pending() == 10
    got += offsets(f.feed(t3 + c4 + c5))
    assert got == fresh and f.next_offset == 6


# ------------------------------------------------------------------ marker types in header scans
def _scan_control_types(codec, log, tmp_path, *, verify_control):
    """control_type of scan_batches and of scan_batches_fd over the same bytes on disk."""
    path = tmp_path / "scan.log"
    path.write_bytes(log)
    in_memory = list(codec.scan_batches(log, verify_control=verify_control)["control_type"])
    with open(path, "rb") as fh:
        from_file = list(codec.scan_batches_fd(fh.fileno(), 0, len(log), verify_control=verify_control)["control_type"])
    return in_memory, from_file


def test_header_scans_read_marker_types(codec, tmp_path):
    """scan_batches' control_type: a marker's type without decoding its batch, equal to
    RecordBatch.first_control_type wherever it is given; -1 for data, empty control batches and legacy
    entries; -3 (not read) for what only first_control_type can decide: compressed, several records,
    malformed keys, and (from a file) a control batch over 64 KiB; -2 for a damaged one with
    verify_control."""
    big_value = marker_value(7) + bytes(70_000)
    mid_value = marker_value(7) + bytes(1_000)
    lz4_control = _spec.rebatch(control_batch(9, control_key(0), marker_value(0), pid=5, txn=True),
                                lz4.frame.compress(_spec.raw_record(key=control_key(0), value=marker_value(0)),
                                                   block_linked=False), 3)  # fmt: skip
    batches = [
        (data(codec, 0, 2, pid=5, epoch=0, seq=0, txn=True), -1, -1),
        (marker("commit", 5, 0, 2), 1, 1),
        (marker("abort", 5, 0, 3), 0, 0),
        (control_batch(4, control_key(5), marker_value(0), pid=5, txn=True), 5, 5),  # an unknown type
        (empty_batch(5, pid=5, epoch=0, attributes=CONTROL | TRANSACTIONAL), -1, -1),
        (control_batch(6, control_key(0), marker_value(0), pid=5, txn=True,
                       extra_records=[(control_key(1), marker_value(0))]), -3, -3),  # fmt: skip
        (control_batch(8, b"\x00\x00", marker_value(0), pid=5, txn=True), -3, -3),  # a 2-byte key
        (lz4_control, -3, -3),
        (control_batch(10, control_key(0, version=-1), marker_value(0), pid=5, txn=True), -3, -3),
        (control_batch(11, control_key(1), mid_value, pid=5, txn=True), 1, 1),  # read whole from a file too
        (control_batch(12, control_key(0), big_value, pid=5, txn=True), 0, -3),  # too large to read whole
        (data(codec, 13, 1), -1, -1),
    ]
    log = b"".join(b for b, _, _ in batches)
    in_memory, from_file = _scan_control_types(codec, log, tmp_path, verify_control=True)
    assert in_memory == [m for _, m, _ in batches]
    assert from_file == [f for _, _, f in batches]
    for (batch, want, _), got in zip(batches, in_memory):
        if got >= 0:
            assert codec.RecordBatch(batch).first_control_type() == want
    # large batches of data around the markers: the file scan peeks at headers instead of windows
    bulky = []
    for i in range(3):
        b = codec.BatchBuilder(base_offset=100 + 41 * i, producer_id=6, producer_epoch=0, base_sequence=40 * i,
                               transactional=True)  # fmt: skip
        for k in range(40):
            b.append(_spec.lcg_bytes(1_000, k), key=key_of(k), timestamp=TS)
        bulky.append(b.build())
    assert min(len(b) for b in bulky) > 32_768
    log2 = b"".join([bulky[0], marker("abort", 6, 0, 140), bulky[1], marker("commit", 6, 0, 181), bulky[2]])
    for verify in (False, True):
        assert _scan_control_types(codec, log2, tmp_path, verify_control=verify) == ([-1, 0, -1, 1, -1],) * 2
    # a damaged marker: -2 when checked, its type when not
    damaged = bytearray(log2)
    pos = len(bulky[0]) + len(marker("abort", 6, 0, 140)) - 2  # the coordinator epoch (before the header count)
    damaged[pos] ^= 0x01
    assert _scan_control_types(codec, bytes(damaged), tmp_path, verify_control=True) == ([-1, -2, -1, 1, -1],) * 2
    assert _scan_control_types(codec, bytes(damaged), tmp_path, verify_control=False) == ([-1, 0, -1, 1, -1],) * 2


def test_replay_transactions_follows_the_producer_state_rules(codec):
    """replay_transactions over hand-written header columns: data opens a transaction once, a marker
    closes it (ABORT: an entry with the LSO at the marker), a marker without data and an empty control
    batch change nothing, rows below from_offset are skipped, unread markers go through resolve(), and a
    marker at or above the high watermark is reported."""
    import array

    T, C = TRANSACTIONAL, CONTROL | TRANSACTIONAL
    rows = [  # (base offset, producer id, attributes, magic, control_type)
        (0, 1, T, 2, -1),  # pid 1 opens at 0
        (1, 2, T, 2, -1),  # pid 2 opens at 1
        (2, 1, T, 2, -1),  # pid 1 again: still the transaction opened at 0
        (3, 3, C, 2, 0),  # an ABORT of pid 3, which has no data here: nothing
        (4, 1, C, 2, -1),  # an empty control batch of pid 1: nothing
        (5, 1, C, 2, 0),  # pid 1 ABORTs: entry (1, 0, 5, lso 1: pid 2 is still open)
        (6, 4, 0, 2, -1),  # not transactional
        (7, 2, C, 2, -3),  # pid 2's marker, not read by the scan: resolve() says COMMIT
        (8, 5, T, 2, -1),  # pid 5 opens at 8
        (9, 5, C, 2, -2),  # damaged: resolve() says ABORT (a real reader would raise there)
        (10, 6, T, 1, -1),  # legacy magic: ignored
        (11, 7, T, 2, -1),  # pid 7 opens at 11 and stays open
    ]
    cols = {
        "position": array.array("q", [100 * i for i in range(len(rows))]),
        "base_offset": array.array("q", [r[0] for r in rows]),
        "producer_id": array.array("q", [r[1] for r in rows]),
        "attributes": array.array("h", [r[2] for r in rows]),
        "magic": array.array("b", [r[3] for r in rows]),
        "size_in_bytes": array.array("i", [100] * len(rows)),
        "control_type": array.array("h", [r[4] for r in rows]),
    }
    order = ("position", "base_offset", "producer_id", "attributes", "magic", "size_in_bytes", "control_type")
    resolved = {7: 1, 9: 0}
    asked = []

    def resolve(i):
        asked.append(i)
        return resolved[i]

    open_txns, opened_at, aborted = {}, {}, []
    unreplicated = codec.replay_transactions(*(cols[k] for k in order), open_txns, opened_at, aborted, "seg",
                                             9, None, resolve, AbortedTxn)  # fmt: skip
    assert aborted == [AbortedTxn(1, 0, 5, 1), AbortedTxn(5, 8, 9, 10)]
    assert open_txns == {7: 11} and opened_at[7] == ("seg", 1100, 100)
    assert asked == [7, 9]
    assert unreplicated == 8  # pid 5's transaction ended with a marker at the high watermark (9)
    # from a snapshot at offset 3 that holds pid 2 open since 1: rows below 3 are skipped
    open_txns, opened_at, aborted = {2: 1}, {}, []
    assert codec.replay_transactions(*(cols[k] for k in order), open_txns, opened_at, aborted, "seg", 100, 3,
                                     resolve, AbortedTxn) is None  # fmt: skip
    assert aborted == [AbortedTxn(5, 8, 9, 10)] and open_txns == {7: 11}  # pid 1's abort at 5: no data seen
    with pytest.raises(ValueError):
        codec.replay_transactions(*(cols[k] for k in order), {}, {}, [], "seg", 100)  # needs resolve()
    short = dict(cols, control_type=array.array("h", [-1]))
    with pytest.raises(ValueError):
        codec.replay_transactions(*(short[k] for k in order), {}, {}, [], "seg", 100)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_marker_types_of_mangled_control_records(codec, data):
    """A control batch whose record bytes are rewritten (and its CRC fixed to match): the header scan's
    control_type is what first_control_type returns when that returns a type, -3 when it raises or the
    type is negative, on both backends and both scans, and nothing is read past the batch."""
    kind = data.draw(st.sampled_from(["abort", "commit"]))
    batch = bytearray(marker(kind, 7, 1, 100))
    body = len(batch) - 61
    for _ in range(data.draw(st.integers(1, 4))):
        at = 61 + data.draw(st.integers(0, body - 1))
        batch[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))  # sometimes a shorter records section, length field adjusted
    if cut:
        del batch[len(batch) - cut :]
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    batch = _spec.fix_crc(bytes(batch))
    try:
        want = codec.RecordBatch(batch).first_control_type()
        want = want if want >= 0 else -3
    except KafkaTxError:
        want = -3
    for verify in (False, True):
        cols = codec.scan_batches(batch, verify_control=verify)
        assert list(cols["control_type"]) == [want]
        with tempfile.TemporaryFile() as fh:
            fh.write(batch)
            fh.flush()
            assert list(codec.scan_batches_fd(fh.fileno(), 0, len(batch), verify_control=verify)["control_type"]) == [want]
