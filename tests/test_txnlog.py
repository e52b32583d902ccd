"""kafkatx.txnlog: __transaction_state keys and values (kafka-format.md 9.1-9.2), the partition
function, and the coordinator's and client's transaction state tables (9.3, 9.4)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkatx
from kafkatx.errors import IllegalTransitionError, KafkaTxError, TxnLogError, UnknownTxnValueVersionError
from kafkatx.txnlog import (
    ClientTransactionState,
    TransactionState,
    TxnMetadataValue,
    UnknownKey,
    can_transition,
    client_can_transition,
    client_transition,
    decode_txn_key,
    decode_txn_records,
    decode_txn_value,
    encode_txn_key,
    encode_txn_record,
    encode_txn_records,
    encode_txn_value,
    java_string_hash,
    transition,
    txn_partition_for,
)

# The two examples of kafka-format.md 9.2, copied from the document.
DOC_V0_HEX = (
    "0000 00000000000003e8 0003 0000ea60 01 00000001 0001 74 00000001 00000000 0000018bcfe56864 0000018bcfe56800"
)
DOC_V1_HEX = (
    "0001 00000000000003e8 0003 0000ea60 01 02 02 74 02 00000000 00 0000018bcfe56864 0000018bcfe56800 01 02 02 0002"
)
S = TransactionState


def _hex(s):
    return bytes.fromhex(s.replace(" ", ""))


def doc_value(**kw):
    fields = dict(
        producer_id=1000, producer_epoch=3, transaction_timeout_ms=60000, state=S.Ongoing, partitions={"t": [0]},
        last_update_timestamp_ms=1700000000100, start_timestamp_ms=1700000000000,
    )  # fmt: skip
    fields.update(kw)
    return TxnMetadataValue(**fields)


# ------------------------------------------------------------------------------------ doc examples
def test_doc_example_v0():
    assert 0x18BCFE56864 == 1700000000100 and 0x18BCFE56800 == 1700000000000
    v = doc_value()
    assert encode_txn_value(v) == _hex(DOC_V0_HEX)  # version chosen automatically: 0
    assert encode_txn_value(v, 0) == _hex(DOC_V0_HEX)
    assert decode_txn_value(_hex(DOC_V0_HEX)) == v


def test_doc_example_v1():
    v = doc_value(client_transaction_version=2)
    assert encode_txn_value(v) == _hex(DOC_V1_HEX)
    assert encode_txn_value(v, 1) == _hex(DOC_V1_HEX)
    got = decode_txn_value(_hex(DOC_V1_HEX))
    assert got == v and got.client_transaction_version == 2 and got.state is S.Ongoing


def test_doc_example_key():
    assert encode_txn_key("tx1") == _hex("0000 0003 747831")
    assert decode_txn_key(_hex("0000 0003 747831")) == "tx1"


# ----------------------------------------------------------------------------------------- keys
def test_key_unknown_version_is_reported_not_raised():
    raw = _hex("0001 0003 747831")
    assert decode_txn_key(raw) == UnknownKey(1, raw)
    assert decode_txn_key(_hex("ffff")) == UnknownKey(-1, _hex("ffff"))


def test_key_errors():
    raw = encode_txn_key("héllo-wörld")
    for n in range(len(raw)):
        with pytest.raises(TxnLogError):
            decode_txn_key(raw[:n])
    with pytest.raises(TxnLogError, match="unexpected bytes"):
        decode_txn_key(raw + b"\x00")
    with pytest.raises(TxnLogError, match="negative") as ei:
        decode_txn_key(_hex("0000 ffff"))
    assert ei.value.position == 2
    with pytest.raises(TxnLogError, match="UTF-8") as ei:
        decode_txn_key(_hex("0000 0002 41ff"))
    assert ei.value.position == 5
    with pytest.raises(TxnLogError):
        decode_txn_key(None)
    with pytest.raises(TxnLogError):
        encode_txn_key("x" * 40000)


@given(st.text(max_size=60))
def test_key_round_trip(tid):
    raw = encode_txn_key(tid)
    assert raw[:2] == b"\x00\x00" and struct.unpack(">h", raw[2:4])[0] == len(tid.encode("utf-8", "surrogatepass"))
    assert decode_txn_key(raw) == tid


# --------------------------------------------------------------------------------------- values
def test_tombstone():
    assert decode_txn_value(None) is None
    assert encode_txn_value(None) is None
    with pytest.raises(TxnLogError, match="Dead"):
        encode_txn_value(doc_value(state=S.Dead))


def test_tagged_fields_written_only_when_not_default_in_tag_order():
    base = encode_txn_value(doc_value(), 1)
    assert base.endswith(_hex("0000018bcfe56800 00"))  # v1 with every tagged field at its default
    head = base[:-1]
    cases = [
        ({"previous_producer_id": 7}, "01 00 08 0000000000000007"),
        ({"next_producer_id": 9}, "01 01 08 0000000000000009"),
        ({"client_transaction_version": 1}, "01 02 02 0001"),
        ({"next_producer_epoch": 0}, "01 03 02 0000"),
        (
            {"next_producer_epoch": 5, "previous_producer_id": 1, "client_transaction_version": 2,
             "next_producer_id": 2},
            "04 00 08 0000000000000001 01 08 0000000000000002 02 02 0002 03 02 0005",
        ),
    ]  # fmt: skip
    for kw, tail in cases:
        v = doc_value(**kw)
        assert encode_txn_value(v) == head + _hex(tail), kw
        assert decode_txn_value(head + _hex(tail)) == v
        with pytest.raises(TxnLogError):
            encode_txn_value(v, 0)  # v0 cannot carry tagged fields


def test_unknown_tags_are_skipped():
    v = doc_value(client_transaction_version=2, next_producer_epoch=4)
    raw = encode_txn_value(v)
    head = raw[: raw.rindex(_hex("0000018bcfe56800")) + 8]
    # unknown tags 9 and 200 (two-byte uvarint tag), interleaved with the known ones
    tagged = _hex("04 02 02 0002 09 03 aabbcc 03 02 0004") + _hex("c801 00")
    assert decode_txn_value(head + tagged) == v
    # an unknown tag inside a partitions element is skipped too
    elem_plain = _hex("02 74 02 00000000 00")
    elem_tagged = _hex("02 74 02 00000000 01 05 02 ffff")
    assert elem_plain in raw
    assert decode_txn_value(raw.replace(elem_plain, elem_tagged)) == v


def test_unknown_value_version():
    for version in (2, -1, 100):
        raw = struct.pack(">h", version) + _hex(DOC_V0_HEX)[2:]
        with pytest.raises(UnknownTxnValueVersionError) as ei:
            decode_txn_value(raw)
        assert isinstance(ei.value, TxnLogError) and ei.value.position == 0
    with pytest.raises(UnknownTxnValueVersionError):
        encode_txn_value(doc_value(), 2)


def test_unknown_status_and_bad_sizes():
    raw = bytearray(_hex(DOC_V0_HEX))
    raw[16] = 8  # status byte: 2 version + 8 pid + 2 epoch + 4 timeout
    with pytest.raises(TxnLogError, match="unknown transaction status 8") as ei:
        decode_txn_value(bytes(raw))
    assert ei.value.position == 16
    v1 = _hex(DOC_V1_HEX)
    with pytest.raises(TxnLogError, match="size 3"):
        decode_txn_value(v1[:-4] + _hex("02 03 000002"))  # ClientTransactionVersion is an int16
    with pytest.raises(TxnLogError, match="unexpected bytes"):
        decode_txn_value(_hex(DOC_V0_HEX) + b"\x00")
    with pytest.raises(TxnLogError, match="longer than 5 bytes"):
        decode_txn_value(v1[:17] + _hex("ffffffffff01"))  # the partitions count
    # a huge partitions count does not allocate: it is checked against the bytes left
    with pytest.raises(TxnLogError, match="exceeds"):
        decode_txn_value(_hex(DOC_V0_HEX)[:17] + struct.pack(">i", 1 << 30))
    with pytest.raises(TxnLogError, match="null"):
        decode_txn_value(v1[:17] + _hex("02 00"))  # a null topic in a v1 element


@pytest.mark.parametrize("raw_hex", [DOC_V0_HEX, DOC_V1_HEX])
def test_every_truncation_raises(raw_hex):
    raw = _hex(raw_hex)
    for n in range(len(raw)):
        with pytest.raises(KafkaTxError) as ei:
            decode_txn_value(raw[:n])
        assert isinstance(ei.value, TxnLogError)
        assert ei.value.position is not None and 0 <= ei.value.position <= n


values = st.builds(
    TxnMetadataValue,
    producer_id=st.integers(-(1 << 63), (1 << 63) - 1),
    producer_epoch=st.integers(-(1 << 15), (1 << 15) - 1),
    transaction_timeout_ms=st.integers(-(1 << 31), (1 << 31) - 1),
    state=st.sampled_from([s for s in S if s is not S.Dead]),
    partitions=st.one_of(
        st.none(),
        st.dictionaries(st.text(max_size=12), st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=5),
                        max_size=4),  # fmt: skip
    ),
    last_update_timestamp_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    start_timestamp_ms=st.integers(-(1 << 63), (1 << 63) - 1),
    previous_producer_id=st.one_of(st.just(-1), st.integers(-(1 << 63), (1 << 63) - 1)),
    next_producer_id=st.one_of(st.just(-1), st.integers(-(1 << 63), (1 << 63) - 1)),
    client_transaction_version=st.one_of(st.just(0), st.integers(-(1 << 15), (1 << 15) - 1)),
    next_producer_epoch=st.one_of(st.just(-1), st.integers(-(1 << 15), (1 << 15) - 1)),
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_value_round_trip_and_truncation(v):
    tagged = (v.previous_producer_id, v.next_producer_id, v.client_transaction_version,
              v.next_producer_epoch) != (-1, -1, 0, -1)  # fmt: skip
    raw1 = encode_txn_value(v, 1)
    assert struct.unpack(">h", raw1[:2])[0] == 1
    assert decode_txn_value(raw1) == v
    if not tagged:
        raw0 = encode_txn_value(v, 0)
        assert decode_txn_value(raw0) == v
        # v0 is fixed-width: 2+8+2+4+1 + array + 16
        parts = v.partitions or {}
        size = 17 + 4 + sum(2 + len(t.encode()) + 4 + 4 * len(p) for t, p in parts.items()) + 16
        assert len(raw0) == size
    else:
        with pytest.raises(TxnLogError):
            encode_txn_value(v, 0)
    for n in range(0, len(raw1), max(1, len(raw1) // 25)):
        with pytest.raises(TxnLogError):
            decode_txn_value(raw1[:n])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_never_escapes_as_another_exception(raw):
    for prefix in (b"\x00\x00", b"\x00\x01", b""):
        try:
            decode_txn_value(prefix + raw)
        except KafkaTxError:
            pass
        try:
            decode_txn_key(prefix + raw)
        except KafkaTxError:
            pass


def test_partitions_null_empty_and_populated():
    for parts in (None, {}, {"a": [], "b": [3, 1, 2]}):
        for version in (0, 1):
            v = doc_value(partitions=parts, state=S.Empty if parts is None else S.CompleteCommit)
            assert decode_txn_value(encode_txn_value(v, version)).partitions == parts
    # null vs empty on the wire: v0 int32 -1 / 0, v1 uvarint 0 / 1
    v0_null = encode_txn_value(doc_value(partitions=None, state=S.Empty), 0)
    assert v0_null[17:21] == _hex("ffffffff")
    assert encode_txn_value(doc_value(partitions={}), 0)[17:21] == _hex("00000000")
    assert encode_txn_value(doc_value(partitions=None), 1)[17] == 0
    assert encode_txn_value(doc_value(partitions={}), 1)[17] == 1


# ----------------------------------------------------------------------------------- records
def test_txn_records_in_a_batch():
    v = doc_value(client_transaction_version=2)
    data = encode_txn_records([("tx1", v), ("tx2", None)], base_offset=40, timestamp=1700000000000)
    (batch,) = kafkatx.iter_batches(data)
    assert (batch.base_offset, batch.last_offset, batch.producer_id, batch.is_transactional, batch.is_control) == (
        40, 41, -1, False, False,
    )  # fmt: skip
    assert batch.compression == "none"
    recs = batch.records()
    assert recs[0].key == _hex("0000 0003 747831") and recs[0].value == _hex(DOC_V1_HEX)
    assert recs[1].value is None
    got = decode_txn_records(data)
    assert [(r.offset, r.timestamp, r.transactional_id, r.value) for r in got] == [
        (40, 1700000000000, "tx1", v),
        (41, 1700000000000, "tx2", None),
    ]
    one = encode_txn_record("tx1", doc_value(), timestamp=5)
    assert decode_txn_records(one)[0].value == doc_value()


# ---------------------------------------------------------------------------------- partitions
def _hash_by_formula(s: str) -> int:
    """sum(c_i * 31^(n-1-i)) mod 2^32 over UTF-16 code units, as a signed int32."""
    raw = s.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    h = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_java_string_hash_known_values():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # the famous Integer.MIN_VALUE hash
    # outside the BMP: two UTF-16 code units (D83D DE00)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    for s in ("tx1", "my-transactional-id", "ünïcödé", "a\U0001f600b" * 7, "x" * 500):
        assert java_string_hash(s) == _hash_by_formula(s)


def test_txn_partition_for():
    assert txn_partition_for("polygenelubricants") == 0  # Utils.abs(INT_MIN) = 0
    assert txn_partition_for("hello") == 99162322 % 50
    assert txn_partition_for("tx1") == abs(_hash_by_formula("tx1")) % 50
    assert txn_partition_for("tx1", 7) == abs(_hash_by_formula("tx1")) % 7
    neg = next(s for s in ("a" * i for i in range(1, 60)) if _hash_by_formula(s) < 0)
    assert txn_partition_for(neg, 13) == (-_hash_by_formula(neg)) % 13
    with pytest.raises(ValueError):
        txn_partition_for("x", 0)


@given(st.text(max_size=40), st.integers(1, 200))
def test_txn_partition_in_range(tid, n):
    p = txn_partition_for(tid, n)
    assert 0 <= p < n
    h = _hash_by_formula(tid)
    assert p == (0 if h == -(1 << 31) else abs(h)) % n


# ----------------------------------------------------------------------------- state tables
# kafka-format.md 9.3, "valid previous states (2024)" column, typed in from the document.
DOC_PREVIOUS_2024 = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}
# "added in newer trunk (TV2)" column
DOC_TV2_ADDED = {"PrepareAbort": {"Empty", "CompleteCommit", "CompleteAbort"}}
DOC_IDS = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4, "CompleteAbort": 5,
           "Dead": 6, "PrepareEpochFence": 7}  # fmt: skip
DOC_EXPIRATION_ALLOWED = {"Empty", "CompleteCommit", "CompleteAbort"}


def test_state_ids_match_the_doc():
    assert {s.name: int(s) for s in S} == DOC_IDS


@pytest.mark.parametrize("tv", [0, 1, 2])
def test_every_state_pair(tv):
    for to_name, prev in DOC_PREVIOUS_2024.items():
        allowed = prev | (DOC_TV2_ADDED.get(to_name, set()) if tv >= 2 else set())
        for from_name in DOC_IDS:
            expected = from_name in allowed
            assert can_transition(S[from_name], S[to_name], transaction_version=tv) is expected, (from_name, to_name)
            assert can_transition(DOC_IDS[from_name], to_name, transaction_version=tv) is expected
            if expected:
                assert transition(from_name, to_name, transaction_version=tv) is S[to_name]
            else:
                with pytest.raises(IllegalTransitionError) as ei:
                    transition(S[from_name], S[to_name], transaction_version=tv)
                assert ei.value.from_state is S[from_name] and ei.value.to_state is S[to_name]
                assert isinstance(ei.value, KafkaTxError)


def test_expiration_allowed():
    assert {s.name for s in S if s.expiration_allowed} == DOC_EXPIRATION_ALLOWED


def test_unknown_states():
    with pytest.raises(IllegalTransitionError):
        can_transition(8, 0)
    with pytest.raises(IllegalTransitionError):
        transition("Empty", "Finished")


# kafka-format.md 9.4, typed in from the document ("FATAL_ERROR: any state (terminal)")
DOC_CLIENT = {
    "UNINITIALIZED": {"READY", "ABORTABLE_ERROR"},
    "INITIALIZING": {"UNINITIALIZED", "ABORTING_TRANSACTION"},
    "READY": {"INITIALIZING", "COMMITTING_TRANSACTION", "ABORTING_TRANSACTION"},
    "IN_TRANSACTION": {"READY"},
    "COMMITTING_TRANSACTION": {"IN_TRANSACTION"},
    "ABORTING_TRANSACTION": {"IN_TRANSACTION", "ABORTABLE_ERROR"},
    "ABORTABLE_ERROR": {"IN_TRANSACTION", "COMMITTING_TRANSACTION", "ABORTABLE_ERROR", "INITIALIZING"},
}
CLIENT_NAMES = list(DOC_CLIENT) + ["FATAL_ERROR"]


def test_every_client_state_pair():
    assert [c.name for c in ClientTransactionState] == CLIENT_NAMES
    for to_name in CLIENT_NAMES:
        for from_name in CLIENT_NAMES:
            expected = True if to_name == "FATAL_ERROR" else from_name in DOC_CLIENT[to_name]
            assert client_can_transition(from_name, to_name) is expected, (from_name, to_name)
            if expected:
                assert client_transition(ClientTransactionState[from_name], to_name).name == to_name
            else:
                with pytest.raises(IllegalTransitionError, match="Invalid transition attempted"):
                    client_transition(from_name, to_name)
    # FATAL_ERROR is terminal: nothing leaves it except FATAL_ERROR itself
    assert [t for t in CLIENT_NAMES if client_can_transition("FATAL_ERROR", t)] == ["FATAL_ERROR"]
