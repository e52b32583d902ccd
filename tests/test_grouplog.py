"""kafkatx.grouplog: ``__consumer_offsets`` keys and values, the offsets the group coordinator loads from them,
and ``kafkatx dump --offsets-decoder``.

Byte layouts are spelled out here with ``struct`` from Kafka's message schemas (OffsetCommitKey/Value,
LegacyOffsetCommitKey/Value, GroupMetadataKey/Value in ``group-coordinator/src/main/resources/common/message``),
not taken from the encoder; the consumer protocol's subscription and assignment are checked against
kafka-python 3, whose encoder is generated from Kafka's own ConsumerProtocol*.json; the JSON against the
strings Kafka's DumpLogSegmentsTest expects of ``--offsets-decoder``.
"""

from __future__ import annotations

import json
import struct
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkatx import cli
from kafkatx.errors import GroupLogError, KafkaTxError
from kafkatx.grouplog import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    OtherKey,
    decode_assignment,
    decode_group_records,
    decode_key,
    decode_subscription,
    decode_value,
    encode_assignment,
    encode_group_records,
    encode_key,
    encode_subscription,
    encode_value,
    key_json,
    load_offsets,
    value_json,
)
from kafkatx.transactions import encode_marker

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

T0 = 1_700_000_000_000


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def compact(text: str) -> bytes:
    raw = text.encode()
    assert len(raw) < 127
    return bytes([len(raw) + 1]) + raw


# ------------------------------------------------------------------------------------------ bytes
def test_keys_by_hand():
    assert decode_key(struct.pack(">h", 1) + s16("g") + s16("orders") + struct.pack(">i", 3)) == \
        OffsetCommitKey("g", "orders", 3)  # fmt: skip
    assert decode_key(struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 0)) == \
        OffsetCommitKey("g", "t", 0, record_type=0)  # fmt: skip
    assert decode_key(struct.pack(">h", 2) + s16("grp")) == GroupMetadataKey("grp")
    raw = struct.pack(">h", 3) + s16("grp")
    assert decode_key(raw) == OtherKey(3, raw)
    for key in (OffsetCommitKey("g", "orders", 3), OffsetCommitKey("g", "t", 0, 0), GroupMetadataKey("grp")):
        assert decode_key(encode_key(key)) == key


def test_offset_commit_values_by_hand():
    body = struct.pack(">q", 42)
    cases = {
        0: (struct.pack(">h", 0) + body + s16("m") + struct.pack(">q", T0),
            OffsetCommitValue(42, "m", T0, version=0)),
        1: (struct.pack(">h", 1) + body + s16("m") + struct.pack(">qq", T0, T0 + 5),
            OffsetCommitValue(42, "m", T0, expire_timestamp=T0 + 5, version=1)),
        2: (struct.pack(">h", 2) + body + s16("m") + struct.pack(">q", T0), OffsetCommitValue(42, "m", T0, version=2)),
        3: (struct.pack(">h", 3) + body + struct.pack(">i", 7) + s16("m") + struct.pack(">q", T0),
            OffsetCommitValue(42, "m", T0, 7, version=3)),
        4: (struct.pack(">h", 4) + body + struct.pack(">i", 7) + compact("m") + struct.pack(">q", T0) + b"\0",
            OffsetCommitValue(42, "m", T0, 7, version=4)),
    }  # fmt: skip
    key = OffsetCommitKey("g", "t", 0)
    for version, (raw, want) in cases.items():
        assert decode_value(key, raw) == want, version
        assert encode_value(key, want) == raw, version
    # version 4 skips tagged fields it does not know
    tagged = cases[4][0][:-1] + bytes([1, 9, 2]) + b"xy"
    assert decode_value(key, tagged) == cases[4][1]
    # the legacy record type's value has version 0 only, the current one 0-4
    legacy = OffsetCommitKey("g", "t", 0, record_type=0)
    assert decode_value(legacy, cases[0][0]) == cases[0][1]
    with pytest.raises(GroupLogError, match="value version 1 is not one Kafka has"):
        decode_value(legacy, cases[1][0])
    with pytest.raises(GroupLogError, match=r"value version 5 is not one Kafka has \(it has 0-4\) \(at byte 0\)"):
        decode_value(key, struct.pack(">h", 5) + cases[4][0][2:])
    assert decode_value(key, None) is None


def _member_bytes(version: int, flexible: bool) -> bytes:
    s = compact if flexible else s16

    def b(data):
        return (bytes([len(data) + 1]) if flexible else struct.pack(">i", len(data))) + data

    out = s("m-1")
    if version >= 3:
        out += s("inst") if version >= 3 else b""
    out += s("client") + s("host")
    if version >= 1:
        out += struct.pack(">i", 300_000)
    out += struct.pack(">i", 45_000) + b(b"SUB") + b(b"ASG")
    return out + (b"\0" if flexible else b"")


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_values_by_hand(version):
    flexible = version >= 4
    s = compact if flexible else s16
    raw = struct.pack(">h", version) + s("consumer") + struct.pack(">i", 9) + s("range") + s("m-1")
    if version >= 2:
        raw += struct.pack(">q", T0)
    raw += (bytes([2]) if flexible else struct.pack(">i", 1)) + _member_bytes(version, flexible)
    raw += b"\0" if flexible else b""
    member = MemberMetadata("m-1", "client", "host", 45_000, b"SUB", b"ASG",
                            300_000 if version >= 1 else 0, "inst" if version >= 3 else None)  # fmt: skip
    want = GroupMetadataValue("consumer", 9, "range", "m-1", (member,), T0 if version >= 2 else -1, version)
    key = GroupMetadataKey("grp")
    assert decode_value(key, raw) == want
    assert encode_value(key, want) == raw


def test_nullable_fields_and_what_is_not_nullable():
    key = GroupMetadataKey("grp")
    empty = GroupMetadataValue("", 0, None, None, (), version=3)
    raw = encode_value(key, empty)
    assert raw == struct.pack(">hhihhqi", 3, 0, 0, -1, -1, -1, 0)
    assert decode_value(key, raw) == empty
    flexible = GroupMetadataValue("", 0, None, None, (), version=4)
    assert encode_value(key, flexible) == struct.pack(">h", 4) + b"\x01" + struct.pack(">i", 0) + b"\0\0" + \
        struct.pack(">q", -1) + b"\x01\0"  # fmt: skip
    with pytest.raises(GroupLogError, match="protocolType is null, which record type 2 value version 3 does not allow"):
        decode_value(key, struct.pack(">hh", 3, -1) + raw[4:])
    with pytest.raises(GroupLogError, match="is None, which version 3 does not allow"):
        encode_value(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, None))


# ------------------------------------------------------------------------------------------ consumer protocol
@settings(max_examples=60, deadline=None)
@given(version=st.integers(0, 3), topics=st.lists(st.text(max_size=8), max_size=3),
       user_data=st.none() | st.binary(max_size=6), gen=st.integers(-1, 1000), rack=st.none() | st.text(max_size=5),
       owned=st.lists(st.tuples(st.text(max_size=5), st.lists(st.integers(0, 2**31 - 1), max_size=3)), max_size=3))
def test_subscription_matches_kafka_python_generated_from_kafkas_schema(version, topics, user_data, gen, rack, owned):  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = KpSubscription(version=version, topics=topics, user_data=user_data, generation_id=gen, rack_id=rack,
                                owned_partitions=[KpSubscription.TopicPartition(topic=t, partitions=p)
                                                  for t, p in owned]).encode()  # fmt: skip
    mine = decode_subscription(theirs)
    assert mine.version == version and list(mine.topics) == topics and mine.user_data == user_data
    assert [(t, list(p)) for t, p in mine.owned_partitions] == ([(t, p) for t, p in owned] if version >= 1 else [])
    assert mine.generation_id == (gen if version >= 2 else -1)
    assert mine.rack_id == (rack if version >= 3 else None)
    assert encode_subscription(mine) == theirs


@pytest.mark.parametrize("version", range(4))
def test_assignment_matches_kafka_python(version):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        theirs = KpAssignment(version=version, user_data=b"\x01", assigned_partitions=[
            KpAssignment.TopicPartition(topic="a", partitions=[0, 5]),
            KpAssignment.TopicPartition(topic="b", partitions=[])]).encode()  # fmt: skip
    mine = decode_assignment(theirs)
    assert mine == ConsumerProtocolAssignment((("a", (0, 5)), ("b", ())), b"\x01", version)
    assert encode_assignment(mine) == theirs


# ------------------------------------------------------------------------------------------ JSON
def _kafka_test_member(subscription: bytes, assignment: bytes) -> GroupMetadataValue:
    member = MemberMetadata("member", "client", "host", 100, subscription, assignment, 1000, "instance")
    return GroupMetadataValue("consumer", 10, "range", "member", (member,), version=4)


def test_json_is_what_kafkas_dump_log_segments_test_expects():
    """The two GroupMetadataValue cases of Kafka's DumpLogSegmentsTest.testOffsetsMessageParser: the consumer
    protocol decoded where it decodes (a subscription written by ConsumerProtocol at version 3), base64 where
    it does not."""
    key = GroupMetadataKey("group")
    sub = encode_subscription(ConsumerProtocolSubscription(("foo",), None, (("foo", (0,)),), 0, "rack", version=3))
    asg = encode_assignment(ConsumerProtocolAssignment((("foo", (0,)),), None, version=3))
    value = decode_value(key, encode_value(key, _kafka_test_member(sub, asg)))
    assert cli._jackson(key_json(key)) == '{"type":"2","data":{"group":"group"}}'
    head = ('{"version":"4","data":{"protocolType":"consumer","generation":10,"protocol":"range","leader":"member",'
            '"currentStateTimestamp":-1,"members":[{"memberId":"member","groupInstanceId":"instance","clientId":"client",'
            '"clientHost":"host","rebalanceTimeout":1000,"sessionTimeout":100,')  # fmt: skip
    assert cli._jackson(value_json(key, value)) == head + (
        '"subscription":{"topics":["foo"],"userData":null,"ownedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"generationId":0,"rackId":"rack"},"assignment":{"assignedPartitions":[{"topic":"foo","partitions":[0]}],'
        '"userData":null}}]}}')  # fmt: skip
    raw = _kafka_test_member(b"Subscription", b"Assignment")
    assert cli._jackson(value_json(key, raw)) == head + (
        '"subscription":"U3Vic2NyaXB0aW9u","assignment":"QXNzaWdubWVudA=="}]}}')
    # a group of another protocol type keeps its bytes as base64 even when they would decode
    other = GroupMetadataValue("connect", 1, "p", "member", raw.members, version=0)
    data = value_json(key, other)["data"]
    assert data["members"][0]["subscription"] == "U3Vic2NyaXB0aW9u"
    assert "currentStateTimestamp" not in data and "groupInstanceId" not in data["members"][0]


def test_offset_commit_json_fields_by_version():
    key = OffsetCommitKey("g", "t", 2)
    assert key_json(key) == {"type": "1", "data": {"group": "g", "topic": "t", "partition": 2}}
    assert key_json(OffsetCommitKey("g", "t", 2, 0))["type"] == "0"
    names = {v: list(value_json(key, OffsetCommitValue(1, "m", T0, 4, 9, version=v))["data"]) for v in range(5)}
    base = ["offset", "metadata", "commitTimestamp"]
    assert names == {0: base, 1: base + ["expireTimestamp"], 2: base,
                     3: ["offset", "leaderEpoch", "metadata", "commitTimestamp"],
                     4: ["offset", "leaderEpoch", "metadata", "commitTimestamp"]}  # fmt: skip


# ------------------------------------------------------------------------------------------ bad bytes
def _samples():
    sub = encode_subscription(ConsumerProtocolSubscription(("foo", "bar"), b"u", (("foo", (0, 1)),), 3, "r"))
    yield GroupMetadataKey("grp"), _kafka_test_member(sub, b"")
    yield GroupMetadataKey("grp"), GroupMetadataValue("consumer", 1, None, None, (), version=2)
    for v in range(5):
        yield OffsetCommitKey("g", "topic", 1), OffsetCommitValue(99, "meta", T0, 3, -1, version=v)


def test_every_truncation_and_bit_flip_is_a_group_log_error_or_decodes():
    for key, value in _samples():
        kraw, vraw = encode_key(key), encode_value(key, value)
        for cut in range(len(kraw)):
            with pytest.raises(GroupLogError):
                decode_key(kraw[:cut])
        for cut in range(len(vraw)):
            with pytest.raises(GroupLogError):
                decode_value(key, vraw[:cut])
        with pytest.raises(GroupLogError, match="1 unexpected bytes after the end"):
            decode_value(key, vraw + b"\0")
        for i in range(len(vraw) * 8):
            flipped = bytearray(vraw)
            flipped[i // 8] ^= 1 << (i % 8)
            try:
                decode_value(key, bytes(flipped))
            except GroupLogError as exc:
                assert exc.position is not None and 0 <= exc.position <= len(vraw)
    good = encode_value(GroupMetadataKey("g"), GroupMetadataValue("c", 1, None, None, (
        MemberMetadata("m", "ab", "h", 1),), version=0))  # fmt: skip
    bad = good.replace(s16("ab"), s16("ab")[:3] + b"\xff")
    with pytest.raises(GroupLogError, match=r"clientId is not valid UTF-8 \(invalid start byte\) \(at byte 23\)"):
        decode_value(GroupMetadataKey("g"), bad)
    with pytest.raises(GroupLogError, match="null key"):
        decode_key(None)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=80), record_type=st.sampled_from([0, 1, 2]), version=st.integers(-2, 6))
def test_random_bytes_are_a_group_log_error_or_decode(data, record_type, version):
    """Any bytes after a record type or value version: a value, or a GroupLogError with a position inside them."""
    key = GroupMetadataKey("g") if record_type == 2 else OffsetCommitKey("g", "t", 0, record_type)
    for decode, raw in ((decode_key, struct.pack(">h", record_type) + data),
                        (lambda b: decode_value(key, b), struct.pack(">h", version) + data),
                        (decode_subscription, struct.pack(">h", version) + data),
                        (decode_assignment, struct.pack(">h", version) + data)):  # fmt: skip
        try:
            decode(raw)
        except GroupLogError as exc:
            assert exc.position is not None and 0 <= exc.position <= len(raw), exc


# ------------------------------------------------------------------------------------------ loading
def _commit(group, topic, partition, offset, version=3):
    return OffsetCommitKey(group, topic, partition), OffsetCommitValue(offset, "", T0, 1, version=version)


def _log():
    """A __consumer_offsets partition as a broker would hold it, every case of the coordinator's replay."""
    parts = []

    def batch(items, **kw):
        parts.append(encode_group_records(items, base_offset=sum(_count(p) for p in parts), timestamp=T0, **kw))

    def marker(kind, pid):
        parts.append(encode_marker(kind, producer_id=pid, producer_epoch=0, base_offset=sum(_count(p) for p in parts)))

    txn = {"transactional": True, "producer_epoch": 0, "base_sequence": 0}
    batch([_commit("plain", "in", 0, 10), _commit("plain", "in", 1, 20)])  # offsets 0-1
    batch([(GroupMetadataKey("plain"), GroupMetadataValue("consumer", 3, "range", "m", (), version=3))])  # 2
    batch([_commit("eos", "in", 0, 100), _commit("eos", "in", 1, 200)], producer_id=7, **txn)  # 3-4: committed below
    batch([_commit("eos", "in", 2, 300)], producer_id=8, **txn)  # 5: aborted below
    batch([_commit("eos", "in", 1, 250)])  # 6: a plain commit after txn 7's record: its record offset is higher
    marker("commit", 7)  # 7
    marker("abort", 8)  # 8
    batch([_commit("eos", "in", 3, 400)], producer_id=9, **txn)  # 9: still open
    batch([_commit("gone", "in", 0, 1)])  # 10
    batch([_commit("gone", "in", 0, 2)], producer_id=10, **txn)  # 11: pending, then removed by the tombstone
    batch([(OffsetCommitKey("gone", "in", 0), None), (GroupMetadataKey("plain"), None)])  # 12-13
    marker("commit", 10)  # 14: nothing left to commit
    batch([(GroupMetadataKey("late"), GroupMetadataValue("", 0, None, None, (), version=4))])  # 15
    return b"".join(parts)


def _count(batch: bytes) -> int:
    return struct.unpack_from(">i", batch, 23)[0] + 1  # last offset delta + 1


def _check_state(state):
    got = {k: (v.offset, v.record_offset) for k, v in state.offsets.items()}
    assert got == {("plain", "in", 0): (10, 0), ("plain", "in", 1): (20, 1), ("eos", "in", 0): (100, 3),
                   ("eos", "in", 1): (250, 6)}  # fmt: skip
    assert {pid: {k: v.offset for k, v in p.items()} for pid, p in state.pending.items()} == \
        {9: {("eos", "in", 3): 400}}  # fmt: skip
    assert list(state.groups) == ["late"] and state.groups["late"].version == 4
    assert state.other_records == 0


def test_load_offsets_replays_as_the_group_coordinator_does():
    _check_state(load_offsets(_log()))


def test_load_offsets_takes_a_transactional_commit_with_a_higher_record_offset():
    """A transaction's offsets written after a plain commit of the same partition replace it on COMMIT."""
    data = (encode_group_records([_commit("g", "t", 0, 5)], base_offset=0) +
            encode_group_records([_commit("g", "t", 0, 6)], base_offset=1, producer_id=3, producer_epoch=0,
                                 base_sequence=0, transactional=True) +
            encode_marker("commit", producer_id=3, producer_epoch=0, base_offset=2))  # fmt: skip
    assert load_offsets(data).offsets[("g", "t", 0)].offset == 6


def test_load_offsets_from_a_partition_directory_and_a_log_dir(tmp_path):
    part = tmp_path / "__consumer_offsets-7"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(_log())
    _check_state(load_offsets(part))
    _check_state(load_offsets(tmp_path))
    assert load_offsets(tmp_path / "__consumer_offsets-7").offsets == load_offsets(str(tmp_path)).offsets


def test_records_of_other_types_are_counted_not_decoded():
    other = struct.pack(">h", 5) + s16("grp")
    from kafkatx.batch import BatchBuilder

    b = BatchBuilder()
    b.append(b"\x00\x00whatever", other)
    data = b.build()
    (rec,) = decode_group_records(data)
    assert rec.key == OtherKey(5, other) and rec.value is None and rec.producer_id == -1
    assert load_offsets(data).other_records == 1


# ------------------------------------------------------------------------------------------ the CLI
def run(capfd, *argv):
    code = cli.main(list(argv))
    out, err = capfd.readouterr()
    return code, out, err


def test_dump_offsets_decoder(capfd, tmp_path):
    seg = tmp_path / "00000000000000000000.log"
    from kafkatx.batch import BatchBuilder

    b = BatchBuilder(base_offset=16)
    b.append(b"\x00\x00x", struct.pack(">h", 3) + s16("grp"), timestamp=T0)  # 16: a type kafkatx does not decode
    b.append(struct.pack(">h", 3) + b"\0", encode_key(OffsetCommitKey("g", "t", 0)), timestamp=T0)  # 17: truncated
    seg.write_bytes(_log() + b.build())
    code, out, err = run(capfd, "dump", "--offsets-decoder", "--skip-record-metadata", str(seg))
    lines = [line for line in out.splitlines() if line.startswith("|")]
    assert len(lines) == 18 - 3  # three markers, which --skip-record-metadata leaves out
    assert lines[0] == ('| key: {"type":"1","data":{"group":"plain","topic":"in","partition":0}} payload: '
                        f'{{"version":"3","data":{{"offset":10,"leaderEpoch":1,"metadata":"","commitTimestamp":{T0}}}}}')
    assert lines[2] == ('| key: {"type":"2","data":{"group":"plain"}} payload: {"version":"3","data":{"protocolType":'
                        '"consumer","generation":3,"protocol":"range","leader":"m","currentStateTimestamp":-1,'
                        '"members":[]}}')  # fmt: skip
    assert '| key: {"type":"2","data":{"group":"plain"}} payload: <DELETE>' in lines
    assert lines[-2] == ("| key: Record type 3 at offset 16 is not one kafkatx decodes (it reads types 0-2: offset "
                         "commits and classic groups), skipping.")  # fmt: skip
    assert lines[-1].startswith("| key: Error at offset 17, skipping. __consumer_offsets value (record type 1): "
                                "truncated: offset needs 8 bytes, 1 left")  # fmt: skip
    assert code == 1 and "1 record(s) are not __consumer_offsets records, the first at offset 17" in err
    code, out, _ = run(capfd, "dump", "--offsets-decoder", "--json", str(seg))
    records = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record" and "key" in o]
    assert records[0]["payload"]["data"]["offset"] == 10
    code, _, err = run(capfd, "dump", "--offsets-decoder", "--transaction-log-decoder", str(seg))
    assert code == 2 and "exclude each other" in err


def test_errors_are_kafkatx_errors():
    assert issubclass(GroupLogError, KafkaTxError) and issubclass(GroupLogError, ValueError)


def test_offsets_command(capfd, tmp_path):
    """`kafkatx offsets`: each group's committed offsets with the partition's log end, last stable offset and
    lag where the partition is in the directory, and the offsets open transactions hold back."""
    from kafkatx.batch import BatchBuilder

    (tmp_path / "__consumer_offsets-0").mkdir()
    (tmp_path / "__consumer_offsets-0" / "00000000000000000000.log").write_bytes(_log())
    (tmp_path / "in-0").mkdir()
    b = BatchBuilder()
    for i in range(300):
        b.append(b"v%d" % i, timestamp=T0)
    (tmp_path / "in-0" / "00000000000000000000.log").write_bytes(b.build())
    code, out, err = run(capfd, "offsets", str(tmp_path))
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAST-STABLE-OFFSET", "LAG",
                       "LEADER-EPOCH", "COMMITTED-AT"]  # fmt: skip
    assert rows[1:5] == [["eos", "in", "0", "100", "300", "300", "200", "1", "3"],
                         ["eos", "in", "1", "250", "-", "-", "-", "1", "6"],
                         ["plain", "in", "0", "10", "300", "300", "290", "1", "0"],
                         ["plain", "in", "1", "20", "-", "-", "-", "1", "1"]]  # fmt: skip
    assert "  producerId 9: eos in-3 offset 400 (record 9)" in out.splitlines()
    code, out, _ = run(capfd, "offsets", "--group", "plain", str(tmp_path / "__consumer_offsets-0"))
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["GROUP", "plain", "plain"]
    code, out, _ = run(capfd, "offsets", "--json", str(tmp_path))
    objs = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [o["type"] for o in objs] == ["offset"] * 4 + ["pending"]
    assert objs[0] == {"type": "offset", "group": "eos", "topic": "in", "partition": 0, "offset": 100,
                       "leader_epoch": 1, "metadata": "", "commit_timestamp": T0, "expire_timestamp": -1,
                       "record_offset": 3, "log_end_offset": 300, "last_stable_offset": 300, "lag": 200}  # fmt: skip
    assert objs[1]["log_end_offset"] is None and objs[1]["lag"] is None
    assert objs[4] == {"type": "pending", "producer_id": 9, "group": "eos", "topic": "in", "partition": 3,
                       "offset": 400, "leader_epoch": 1, "metadata": "", "commit_timestamp": T0,
                       "expire_timestamp": -1, "record_offset": 9}  # fmt: skip
    code, _, err = run(capfd, "offsets", str(tmp_path / "missing"))
    assert code != 0 and "error:" in err


# ------------------------------------------------------------------------------------------ sendOffsetsToTransaction
def test_send_offsets_to_transaction_writes_what_the_group_coordinator_loads(tmp_path):
    """A consume-transform-produce loop through kafkatx.txncoord: the offsets of committed transactions count,
    those of aborted ones never, those of the open one wait; the __consumer_offsets partition holds them as
    the producer's transactional batches and the coordinator's markers."""
    from kafkatx.batch import iter_batches
    from kafkatx.grouplog import CONSUMER_OFFSETS_TOPIC, group_partition_for
    from kafkatx.log import open_partition
    from kafkatx.txncoord import ProducerFencedError, TransactionalProducer, TransactionCoordinator

    with TransactionCoordinator(tmp_path, offsets_partitions=8) as coord:
        p = TransactionalProducer(coord, "etl")
        for i, commit in enumerate((True, False, True)):
            p.begin_transaction()
            p.send("out", 0, [(b"k", b"v%d" % i)])
            p.send_offsets_to_transaction({("in", 0): 10 * (i + 1), ("in", 1): (5 * (i + 1), 3)}, "grp")
            (p.commit_transaction if commit else p.abort_transaction)()
        p.begin_transaction()
        p.send_offsets_to_transaction({("in", 0): 99}, "grp", metadata="open")
        assert (CONSUMER_OFFSETS_TOPIC, group_partition_for("grp", 8)) in p.partitions_in_transaction
        zombie_pid, zombie_epoch = p.producer_id, p.producer_epoch
        with pytest.raises(KafkaTxError, match="AddOffsetsToTxn comes first"):
            coord.txn_offset_commit("etl", zombie_pid, zombie_epoch, "other-group", {("in", 0): 1})
        fresh = TransactionalProducer(coord, "etl")  # a new instance fences the old one and aborts its transaction
        with pytest.raises(ProducerFencedError):
            p.send_offsets_to_transaction({("in", 0): 1000}, "grp")
        fresh.begin_transaction()
        fresh.send_offsets_to_transaction({("in", 2): 7}, "grp")
        fresh.commit_transaction()
    state = load_offsets(tmp_path)
    assert {k: (v.offset, v.leader_epoch) for k, v in state.offsets.items()} == {
        ("grp", "in", 0): (30, -1), ("grp", "in", 1): (15, 3), ("grp", "in", 2): (7, -1)}
    assert state.pending == {}  # the open transaction was aborted by the fencing instance
    part = tmp_path / f"{CONSUMER_OFFSETS_TOPIC}-{group_partition_for('grp', 8)}"
    data = b"".join(f.read_bytes() for f in sorted(part.glob("*.log")))
    batches = list(iter_batches(data))
    assert [(b.is_transactional, b.is_control, b.base_sequence) for b in batches if not b.is_control] == \
        [(True, False, 0)] * 5  # fmt: skip
    assert [b.control_record().type for b in batches if b.is_control] == ["commit", "abort", "commit", "abort",
                                                                          "commit"]  # fmt: skip
    with open_partition(part) as op:
        committed = [(r.offset, decode_value(decode_key(r.key), r.value).offset)
                     for r in op.read(isolation="read_committed")]  # fmt: skip
    assert [o for _, o in committed] == [10, 5, 30, 15, 7]


def test_a_damaged_offsets_partition_is_a_kafkatx_error_or_loads(tmp_path):
    """The replay of a __consumer_offsets partition whose .log was flipped, cut, zeroed or appended to at many
    places: offsets, or a KafkaTxError; never another exception (scripts/fuzz.py logdir does this at random)."""
    import random
    import shutil

    from _damage import DAMAGES, damage_file

    part = tmp_path / "src" / "__consumer_offsets-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(_log())
    rng = random.Random(32)
    outcomes = set()
    for i in range(150):
        work = tmp_path / f"w{i}" / "__consumer_offsets-0"
        shutil.copytree(part, work)
        damage_file(work / "00000000000000000000.log", DAMAGES[i % len(DAMAGES)], rng.random(), rng.randrange(1, 256))
        try:
            load_offsets(work)
            outcomes.add("loaded")
        except KafkaTxError as exc:
            outcomes.add(type(exc).__name__)
    assert "loaded" in outcomes and len(outcomes) > 1, outcomes


def test_offsets_command_counts_the_records_it_does_not_decode(capfd, tmp_path):
    from kafkatx.batch import BatchBuilder

    part = tmp_path / "__consumer_offsets-3"
    part.mkdir()
    b = BatchBuilder(base_offset=1)
    b.append(b"\x00\x00x", struct.pack(">h", 4) + s16("grp"), timestamp=T0)  # a type kafkatx does not decode
    (part / "00000000000000000000.log").write_bytes(encode_group_records([_commit("g", "t", 0, 5)]) + b.build())
    code, out, err = run(capfd, "offsets", str(tmp_path))
    assert code == 0, err
    assert out.splitlines()[1].split() == ["g", "t", "0", "5", "-", "-", "-", "1", "0"]
    assert "1 records of the consumer, share or streams group types (3 and up) are not decoded" in out
    code, out, _ = run(capfd, "offsets", "--json", str(tmp_path))
    assert [json.loads(line)["type"] for line in out.splitlines()] == ["offset", "not_decoded"]
    assert json.loads(out.splitlines()[1])["records"] == 1
