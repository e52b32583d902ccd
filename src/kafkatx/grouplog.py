"""``__consumer_offsets``: the group coordinator's log records, and the offsets it loads from them.

Every record of the ``__consumer_offsets`` topic has a key that starts with an ``int16`` record type and a
value (null for a tombstone) that starts with an ``int16`` version; the body of each is the Kafka message
of that type and version (``group-coordinator/src/main/resources/common/message``).  kafkatx decodes and
encodes the record types of committed offsets and classic groups, the ones exactly-once applications
write through ``sendOffsetsToTransaction``:

=====  ==========================================  =================================================
type   key                                         value
=====  ==========================================  =================================================
0      ``LegacyOffsetCommitKey`` (group, topic,    ``LegacyOffsetCommitValue``, version 0 only
       partition): Kafka 0.8.2's offset commits
1      ``OffsetCommitKey`` (the same fields)       ``OffsetCommitValue`` versions 0-4 (4 flexible)
2      ``GroupMetadataKey`` (group)                ``GroupMetadataValue`` versions 0-4 (4 flexible);
                                                   members' subscription and assignment are the
                                                   consumer protocol's bytes
=====  ==========================================  =================================================

Both kinds of offset commit decode to :class:`OffsetCommitKey` / :class:`OffsetCommitValue` (the key
remembers its ``record_type``).  Record types 3 and up (the consumer, share and streams group records of
KIP-848, KIP-932 and KIP-1071) are returned as :class:`OtherKey`, not decoded; their values are left
alone.  The decoders are strict: truncated input, a length past the end, a value version the record
type does not have, invalid UTF-8 and bytes left over raise :class:`~kafkatx.errors.GroupLogError` with
the byte position.  (Kafka ignores bytes left over; it never writes any.)

:func:`load_offsets` replays a ``__consumer_offsets`` partition as the group coordinator loads it:
offsets committed outside a transaction take effect at once; those of a transaction
(``TxnOffsetCommit``) wait as pending under the producer id until its COMMIT marker (then the one with
the higher record offset wins, as Kafka keeps it) or ABORT marker (then they are dropped); a tombstone
deletes an offset and any pending commit of it.  :func:`key_json` and :func:`value_json` give the JSON
Kafka's ``kafka-dump-log.sh --offsets-decoder`` prints (``kafkatx dump --offsets-decoder``).
"""

from __future__ import annotations

import base64
import os
import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import GroupLogError
from .txnlog import _Reader as _TxnLogReader
from .txnlog import _skip_tagged, _uvarint, txn_partition_for

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "DEFAULT_OFFSETS_PARTITIONS",
    "group_partition_for",
    "OffsetCommitKey",
    "GroupMetadataKey",
    "OtherKey",
    "OffsetCommitValue",
    "GroupMetadataValue",
    "MemberMetadata",
    "ConsumerProtocolSubscription",
    "ConsumerProtocolAssignment",
    "GroupLogRecord",
    "CommittedOffset",
    "OffsetsState",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
    "encode_group_records",
    "decode_group_records",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "key_json",
    "value_json",
    "load_offsets",
]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions


def group_partition_for(group_id: str, partition_count: int = DEFAULT_OFFSETS_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode) % partitionCount``
    (the group coordinator's ``partitionFor``, the same function as the transaction log's)."""
    return txn_partition_for(group_id, partition_count)


# ------------------------------------------------------------------------------------------ messages
class OffsetCommitKey(NamedTuple):
    """The key of a committed offset: record type 1 (``OffsetCommitKey``) or 0 (``LegacyOffsetCommitKey``)."""

    group: str
    topic: str
    partition: int
    record_type: int = 1


class GroupMetadataKey(NamedTuple):
    """The key of a classic group's metadata (record type 2)."""

    group: str


class OtherKey(NamedTuple):
    """A key of a record type kafkatx does not decode (3 and up): the type and the whole key's bytes."""

    record_type: int
    data: bytes


@dataclass(frozen=True)
class OffsetCommitValue:
    """A committed offset (``OffsetCommitValue``; with a type 0 key, ``LegacyOffsetCommitValue``).
    ``leader_epoch`` exists from version 3, ``expire_timestamp`` only in version 1; ``version`` is the one
    the value was read at, or is written at."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1
    version: int = 3


@dataclass(frozen=True)
class MemberMetadata:
    """One member of a classic group; ``subscription`` and ``assignment`` are the group protocol's bytes
    (:func:`decode_subscription` / :func:`decode_assignment` read the consumer protocol's)."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes = b""
    assignment: bytes = b""
    rebalance_timeout: int = 0
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupMetadataValue:
    """A classic group (``GroupMetadataValue``): ``protocol_type`` is ``"consumer"`` for consumer groups."""

    protocol_type: str
    generation: int
    protocol: str | None = None
    leader: str | None = None
    members: tuple = ()
    current_state_timestamp: int = -1
    version: int = 3


@dataclass(frozen=True)
class ConsumerProtocolSubscription:
    """What a classic consumer group member subscribed to (``ConsumerProtocolSubscription``, versions 0-3):
    ``owned_partitions`` is a tuple of ``(topic, (partition, ...))``."""

    topics: tuple
    user_data: bytes | None = None
    owned_partitions: tuple = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 3


@dataclass(frozen=True)
class ConsumerProtocolAssignment:
    """What a classic consumer group member was assigned (``ConsumerProtocolAssignment``, versions 0-3):
    ``assigned_partitions`` is a tuple of ``(topic, (partition, ...))``."""

    assigned_partitions: tuple
    user_data: bytes | None = None
    version: int = 3


def _f(name: str, kind, first: int = 0, last: int | None = None, nullable: int | None = None) -> tuple:
    """A field: (JSON name, attribute -- the name in snake case --, type, first version, last version or None,
    first nullable version or None).  Types: int16/int32/int64, string, bytes, []int32, []string, or a tuple
    of fields (an array of structs)."""
    return (name, re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name), kind, first, last, nullable)


_OFFSET_COMMIT_KEY = (_f("group", "string"), _f("topic", "string"), _f("partition", "int32"))
_GROUP_KEY = (_f("group", "string"),)
_LEGACY_OFFSET_VALUE = (_f("offset", "int64"), _f("metadata", "string"), _f("commitTimestamp", "int64"))
_OFFSET_VALUE = (_f("offset", "int64"), _f("leaderEpoch", "int32", 3), _f("metadata", "string"),
                 _f("commitTimestamp", "int64"), _f("expireTimestamp", "int64", 1, 1))  # fmt: skip
_MEMBER = (_f("memberId", "string"), _f("groupInstanceId", "string", 3, nullable=3), _f("clientId", "string"),
           _f("clientHost", "string"), _f("rebalanceTimeout", "int32", 1), _f("sessionTimeout", "int32"),
           _f("subscription", "bytes"), _f("assignment", "bytes"))  # fmt: skip
_GROUP_VALUE = (_f("protocolType", "string"), _f("generation", "int32"), _f("protocol", "string", nullable=0),
                _f("leader", "string", nullable=0), _f("currentStateTimestamp", "int64", 2),
                _f("members", _MEMBER))  # fmt: skip
_TOPIC_PARTITIONS = (_f("topic", "string"), _f("partitions", "[]int32"))
_SUBSCRIPTION = (_f("topics", "[]string"), _f("userData", "bytes", nullable=0),
                 _f("ownedPartitions", _TOPIC_PARTITIONS, 1), _f("generationId", "int32", 2),
                 _f("rackId", "string", 3, nullable=3))  # fmt: skip
_ASSIGNMENT = (_f("assignedPartitions", _TOPIC_PARTITIONS), _f("userData", "bytes", nullable=0))

# record type -> (key fields, value fields, value versions, first flexible value version)
_TYPES = {
    0: (_OFFSET_COMMIT_KEY, _LEGACY_OFFSET_VALUE, range(0, 1), None),
    1: (_OFFSET_COMMIT_KEY, _OFFSET_VALUE, range(0, 5), 4),
    2: (_GROUP_KEY, _GROUP_VALUE, range(0, 5), 4),
}
_PROTOCOL_VERSIONS = range(0, 4)  # the consumer protocol's subscription and assignment (never flexible)
_SUBSCRIPTION_WHAT, _ASSIGNMENT_WHAT = "consumer protocol subscription", "consumer protocol assignment"

_I16 = struct.Struct(">h")
_INTS = {"int16": struct.Struct(">h"), "int32": struct.Struct(">i"), "int64": struct.Struct(">q")}


def _present(f, version: int) -> bool:
    return version >= f[3] and (f[4] is None or version <= f[4])


# ------------------------------------------------------------------------------------------ reading
class _Reader(_TxnLogReader):
    """The transaction log's bounds-checked reader, raising :class:`~kafkatx.errors.GroupLogError`."""

    __slots__ = ()

    def fail(self, msg: str, pos: int | None = None, cls=GroupLogError) -> GroupLogError:
        return super().fail(msg, pos, cls)

    def value(self, st, name: str):
        return self.unpack(st, name)[0]

    def length(self, name: str, flexible: bool, wide: bool = False) -> int:
        """A string/bytes/array length: -1 for null; checked against what is left (``wide``: 4 bytes)."""
        start = self.pos
        if flexible:
            n = self.uvarint(f"{name} length") - 1
        else:
            n = self.value(_INTS["int32" if wide else "int16"], f"{name} length")
            if n < -1:
                raise self.fail(f"{name} length {n} is negative", start)
        if n > self.end - self.pos:
            raise self.fail(f"{name} length {n} runs past the end ({self.end - self.pos} bytes left)", start)
        return n


def _read_string(r: _Reader, name: str, flexible: bool, nullable: bool, where: str) -> str | None:
    start = r.pos
    n = r.length(name, flexible)
    if n == -1:
        if not nullable:
            raise r.fail(f"{name} is null, which {where} does not allow", start)
        return None
    return r.utf8(n, name)


def _read_struct(r: _Reader, fields, version: int, flexible: bool, where: str) -> dict:
    out = {}
    for f in fields:
        name, attr, kind = f[0], f[1], f[2]
        if not _present(f, version):
            continue
        nullable = f[5] is not None and version >= f[5]
        if kind in _INTS:
            out[attr] = r.value(_INTS[kind], name)
            continue
        if kind == "string":
            out[attr] = _read_string(r, name, flexible, nullable, f"{where} version {version}")
            continue
        start = r.pos
        n = r.length(name, flexible, wide=True)
        if n == -1:
            if not nullable:
                raise r.fail(f"{name} is null, which {where} version {version} does not allow", start)
            out[attr] = None
        elif kind == "bytes":
            out[attr] = r.raw(n, name)
        elif kind == "[]int32":
            if 4 * n > r.end - r.pos:
                raise r.fail(f"{name}: {n} int32s run past the end", start)
            out[attr] = struct.unpack_from(f">{n}i", r.buf, r.pos)
            r.pos += 4 * n
        elif kind == "[]string":
            out[attr] = tuple(_read_string(r, f"{name} element", flexible, False, where) for _ in range(n))
        else:  # an array of structs
            out[attr] = tuple(_read_struct(r, kind, version, flexible, where) for _ in range(n))
    if flexible:
        _skip_tagged(r, where)
    return out


def _version_of(r: _Reader, versions, what: str) -> int:
    version = r.value(_I16, f"{what} version")
    if version not in versions:
        raise r.fail(f"{what} version {version} is not one Kafka has (it has {versions.start}-{versions.stop - 1})", 0)
    return version


def decode_key(data) -> OffsetCommitKey | GroupMetadataKey | OtherKey:
    """The key of a ``__consumer_offsets`` record (see the module docstring)."""
    if data is None:
        raise GroupLogError("__consumer_offsets key: null key (every record of the topic has one)")
    r = _Reader(data, "__consumer_offsets key")
    record_type = r.value(_I16, "record type")
    known = _TYPES.get(record_type)
    if known is None:
        return OtherKey(record_type, bytes(r.buf))
    d = _read_struct(r, known[0], 0, False, f"record type {record_type} key")
    r.done()
    if record_type == 2:
        return GroupMetadataKey(d["group"])
    return OffsetCommitKey(d["group"], d["topic"], d["partition"], record_type)


def _record_type(key) -> int:
    if isinstance(key, OffsetCommitKey):
        return key.record_type
    if isinstance(key, GroupMetadataKey):
        return 2
    raise GroupLogError(f"not a key kafkatx decodes the values of: {key!r}")


def decode_value(key, data) -> OffsetCommitValue | GroupMetadataValue | None:
    """The value of a record with ``key`` (from :func:`decode_key`); None for a tombstone."""
    if data is None:
        return None
    record_type = _record_type(key)
    _key_fields, fields, versions, flexible_from = _TYPES[record_type]
    r = _Reader(data, f"__consumer_offsets value (record type {record_type})")
    version = _version_of(r, versions, "value")
    flexible = flexible_from is not None and version >= flexible_from
    d = _read_struct(r, fields, version, flexible, f"record type {record_type} value")
    r.done()
    if record_type == 2:
        d["members"] = tuple(MemberMetadata(**m) for m in d["members"])
        return GroupMetadataValue(**d, version=version)
    return OffsetCommitValue(**d, version=version)


def _decode_protocol(data, fields, what: str) -> dict:
    r = _Reader(data, what)
    version = _version_of(r, _PROTOCOL_VERSIONS, what)
    d = _read_struct(r, fields, version, False, what)
    r.done()
    d["version"] = version
    return d


def decode_subscription(data) -> ConsumerProtocolSubscription:
    """A classic consumer group member's ``subscription`` bytes (:class:`MemberMetadata`)."""
    d = _decode_protocol(data, _SUBSCRIPTION, _SUBSCRIPTION_WHAT)
    d["owned_partitions"] = tuple((p["topic"], p["partitions"]) for p in d.get("owned_partitions", ()))
    return ConsumerProtocolSubscription(**d)


def decode_assignment(data) -> ConsumerProtocolAssignment:
    """A classic consumer group member's ``assignment`` bytes (:class:`MemberMetadata`)."""
    d = _decode_protocol(data, _ASSIGNMENT, _ASSIGNMENT_WHAT)
    d["assigned_partitions"] = tuple((p["topic"], p["partitions"]) for p in d["assigned_partitions"])
    return ConsumerProtocolAssignment(**d)


# ------------------------------------------------------------------------------------------ writing
def _write_length(n: int, flexible: bool, wide: bool) -> bytes:
    if flexible:
        return _uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def _write_string(v: str, flexible: bool, what: str) -> bytes:
    raw = v.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise GroupLogError(f"{what} is {len(raw)} UTF-8 bytes, more than a Kafka string holds (32767)")
    return _write_length(len(raw), flexible, False) + raw


def _write_struct(fields, values, version: int, flexible: bool, where: str) -> bytes:
    out = bytearray()
    for f in fields:
        name, attr, kind = f[0], f[1], f[2]
        if not _present(f, version):
            continue
        v = values[attr] if isinstance(values, dict) else getattr(values, attr)
        if kind in _INTS:
            out += _INTS[kind].pack(v)
            continue
        if v is None:
            if f[5] is None or version < f[5]:
                raise GroupLogError(f"{where}: {name} is None, which version {version} does not allow")
            out += _write_length(-1, flexible, kind != "string")
        elif kind == "string":
            out += _write_string(v, flexible, f"{where}: {name}")
        elif kind == "bytes":
            out += _write_length(len(v), flexible, True) + bytes(v)
        elif kind == "[]int32":
            out += _write_length(len(v), flexible, True) + struct.pack(f">{len(v)}i", *v)
        elif kind == "[]string":
            out += _write_length(len(v), flexible, True) + b"".join(_write_string(t, flexible, where) for t in v)
        else:
            out += _write_length(len(v), flexible, True)
            for item in v:
                out += _write_struct(kind, item, version, flexible, where)
    if flexible:
        out += b"\x00"  # no tagged fields
    return bytes(out)


def encode_key(key) -> bytes:
    """Key bytes for an :class:`OffsetCommitKey` or :class:`GroupMetadataKey`."""
    record_type = _record_type(key)
    return _I16.pack(record_type) + _write_struct(_TYPES[record_type][0], key._asdict(), 0, False, "key")


def encode_value(key, value) -> bytes | None:
    """Value bytes for ``value`` at its ``version`` (None: a tombstone, None)."""
    if value is None:
        return None
    record_type = _record_type(key)
    _key_fields, fields, versions, flexible_from = _TYPES[record_type]
    want = GroupMetadataValue if record_type == 2 else OffsetCommitValue
    if not isinstance(value, want):
        raise GroupLogError(f"a record type {record_type} key takes a {want.__name__}, not {type(value).__name__}")
    if value.version not in versions:
        raise GroupLogError(f"record type {record_type} has value versions {versions.start}-{versions.stop - 1}, "
                            f"not {value.version}")  # fmt: skip
    flexible = flexible_from is not None and value.version >= flexible_from
    return _I16.pack(value.version) + _write_struct(fields, value, value.version, flexible, "value")


def _pairs(pairs) -> tuple:
    return tuple({"topic": t, "partitions": tuple(ps)} for t, ps in pairs)


def encode_subscription(sub: ConsumerProtocolSubscription) -> bytes:
    """The consumer protocol's bytes for a subscription, at its ``version``."""
    if sub.version not in _PROTOCOL_VERSIONS:
        raise GroupLogError(f"the consumer protocol has versions 0-3, not {sub.version}")
    values = {"topics": tuple(sub.topics), "user_data": sub.user_data, "owned_partitions": _pairs(sub.owned_partitions),
              "generation_id": sub.generation_id, "rack_id": sub.rack_id}  # fmt: skip
    return _I16.pack(sub.version) + _write_struct(_SUBSCRIPTION, values, sub.version, False, "subscription")


def encode_assignment(a: ConsumerProtocolAssignment) -> bytes:
    """The consumer protocol's bytes for an assignment, at its ``version``."""
    if a.version not in _PROTOCOL_VERSIONS:
        raise GroupLogError(f"the consumer protocol has versions 0-3, not {a.version}")
    values = {"assigned_partitions": _pairs(a.assigned_partitions), "user_data": a.user_data}
    return _I16.pack(a.version) + _write_struct(_ASSIGNMENT, values, a.version, False, "assignment")


# ------------------------------------------------------------------------------------------ as JSON
def _b64(data) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _json_struct(fields, values, version: int) -> dict:
    out = {}
    for f in fields:
        name, attr, kind = f[0], f[1], f[2]
        if not _present(f, version):
            continue
        v = values[attr] if isinstance(values, dict) else getattr(values, attr)
        if v is None:
            out[name] = None
        elif kind == "bytes":
            out[name] = _b64(v)
        elif kind in ("[]int32", "[]string"):
            out[name] = list(v)
        elif isinstance(kind, tuple):
            out[name] = [_json_struct(kind, item, version) for item in v]
        else:
            out[name] = v
    return out


def key_json(key) -> dict:
    """A key as ``kafka-dump-log.sh --offsets-decoder`` prints it: the record type as a string and the key's
    fields."""
    record_type = _record_type(key)
    return {"type": str(record_type), "data": _json_struct(_TYPES[record_type][0], key._asdict(), 0)}


def _protocol_json(data, fields, what: str) -> dict | str:
    """The consumer protocol's bytes as Kafka's tool shows them: decoded where they decode, else base64."""
    try:
        d = _decode_protocol(data, fields, what)
    except GroupLogError:
        return _b64(data)
    return _json_struct(fields, d, d["version"])


def value_json(key, value) -> dict:
    """A value as ``kafka-dump-log.sh --offsets-decoder`` prints it: the version as a string and the fields
    of the message at that version; a consumer group's subscriptions and assignments decoded (base64
    where they do not decode, as Kafka's tool leaves them)."""
    record_type = _record_type(key)
    data = _json_struct(_TYPES[record_type][1], value, value.version)
    if record_type == 2 and value.protocol_type == "consumer":
        for m, member in zip(data["members"], value.members):
            m["subscription"] = _protocol_json(member.subscription, _SUBSCRIPTION, _SUBSCRIPTION_WHAT)
            m["assignment"] = _protocol_json(member.assignment, _ASSIGNMENT, _ASSIGNMENT_WHAT)
    return {"version": str(value.version), "data": data}


# ------------------------------------------------------------------------------------------ records
class GroupLogRecord(NamedTuple):
    """One decoded ``__consumer_offsets`` record, with its batch's producer id (-1 outside transactions)."""

    offset: int
    timestamp: int
    producer_id: int
    key: OffsetCommitKey | GroupMetadataKey | OtherKey
    value: OffsetCommitValue | GroupMetadataValue | None


def encode_group_records(items, *, base_offset: int = 0, timestamp: int | None = None, producer_id: int = -1,
                         producer_epoch: int = -1, base_sequence: int = -1,
                         transactional: bool = False) -> bytes:  # fmt: skip
    """One v2 batch of ``(key, value_or_None)`` records, uncompressed; ``transactional`` with a producer id
    for the offsets of a ``TxnOffsetCommit``."""
    from .batch import BatchBuilder

    b = BatchBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                     base_sequence=base_sequence, transactional=transactional)  # fmt: skip
    for key, value in items:
        b.append(encode_value(key, value), encode_key(key), timestamp=timestamp)
    return b.build()


def decode_group_records(data, *, verify_crc: bool = True) -> list[GroupLogRecord]:
    """Every data record of a ``__consumer_offsets`` log buffer, decoded (values of :class:`OtherKey`
    records are None)."""
    from .batch import iter_batches

    out = []
    for batch in iter_batches(data, verify_crc=verify_crc):
        if not batch.is_control:
            out += _batch_records(batch)
    return out


def _batch_records(batch) -> list[GroupLogRecord]:
    out = []
    for rec in batch.records():
        key = decode_key(rec.key)
        value = None if isinstance(key, OtherKey) else decode_value(key, rec.value)
        out.append(GroupLogRecord(rec.offset, rec.timestamp, batch.producer_id, key, value))
    return out


# ------------------------------------------------------------------------------------------ loading
@dataclass(frozen=True)
class CommittedOffset:
    """An offset as the group coordinator holds it, with the offset of the record that committed it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int
    record_offset: int


@dataclass
class OffsetsState:
    """What the group coordinator loads from ``__consumer_offsets``: ``offsets`` maps ``(group, topic,
    partition)`` to the :class:`CommittedOffset` a consumer of the group resumes from; ``pending`` maps a
    producer id to the offsets its open transaction committed (they take effect with its COMMIT marker);
    ``groups`` maps a classic group to its last :class:`GroupMetadataValue`; ``other_records`` counts the
    records of types kafkatx does not decode."""

    offsets: dict = field(default_factory=dict)
    pending: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)
    other_records: int = 0

    def replay_batch(self, batch) -> None:
        """Apply one batch (data or control) in log order."""
        if batch.is_control:
            c = batch.control_record()
            if c is not None and c.type in ("commit", "abort"):
                self._end_transaction(batch.producer_id, c.type == "commit")
            return
        for rec in _batch_records(batch):
            self._replay(rec)

    def _replay(self, rec: GroupLogRecord) -> None:
        key, value = rec.key, rec.value
        if isinstance(key, OtherKey):
            self.other_records += 1
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self.groups.pop(key.group, None)
            else:
                self.groups[key.group] = value
        else:
            where = (key.group, key.topic, key.partition)
            if value is None:
                self.offsets.pop(where, None)
                for pending in self.pending.values():
                    pending.pop(where, None)
                return
            committed = CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                                        value.expire_timestamp, rec.offset)  # fmt: skip
            if rec.producer_id == -1:
                self.offsets[where] = committed
            else:
                self.pending.setdefault(rec.producer_id, {})[where] = committed

    def _end_transaction(self, producer_id: int, commit: bool) -> None:
        pending = self.pending.pop(producer_id, None)
        if not commit or not pending:
            return
        for where, committed in pending.items():
            old = self.offsets.get(where)
            if old is None or committed.record_offset > old.record_offset:
                self.offsets[where] = committed


def load_offsets(source, *, verify_crc: bool = True) -> OffsetsState:
    """Replay ``__consumer_offsets`` as the group coordinator loads it (see the module docstring).

    ``source``: a log buffer (one partition's batches in order), a ``__consumer_offsets-N`` partition
    directory, or a broker log directory (every ``__consumer_offsets-N`` partition in it; a group's
    records all sit in one partition)."""
    from .batch import iter_batches

    state = OffsetsState()
    if not isinstance(source, (str, os.PathLike)):
        for batch in iter_batches(source, verify_crc=verify_crc):
            state.replay_batch(batch)
        return state
    from .log.reader import open_log_dir, open_partition

    path = os.fspath(source)
    with open_log_dir(path) as d:
        parts = [p for (topic, _n), p in sorted(d.items()) if topic == CONSUMER_OFFSETS_TOPIC]
        if not len(d):
            with open_partition(path, verify_crc=verify_crc) as p:
                _replay_partition(state, p)
            return state
        for p in parts:
            _replay_partition(state, p)
    return state


def _replay_partition(state: OffsetsState, part) -> None:
    from .batch import iter_batches

    for seg in part.segments:
        data = seg.mmap
        if len(data):
            for batch in iter_batches(data, verify_crc=part.verify_crc):
                state.replay_batch(batch)
