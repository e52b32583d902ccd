"""``__transaction_state``: the transaction coordinator's log records and state machines.

Records of the ``__transaction_state`` topic are ordinary non-transactional v2 batches whose records
have a key and a value (kafka-format.md section 9):

* key: ``int16 version = 0`` then the transactional id as a classic string (int16 length + UTF-8).
  :func:`decode_txn_key` returns the id as ``str``; a key with any other version is returned as an
  :class:`UnknownKey` (the coordinator skips such records; newer Kafka calls it ``UnknownKeyVersion``),
  not raised, so a reader of the whole topic keeps going.  Malformed bytes raise
  :class:`~kafkatx.errors.TxnLogError`.
* value: ``int16 version`` (0 non-flexible, 1 flexible with tagged fields) then the body; a null
  value is a tombstone (:func:`decode_txn_value` returns None).  Versions other than 0 and 1 raise
  :class:`~kafkatx.errors.UnknownTxnValueVersionError`.

Both decoders are strict: truncated input, lengths running past the end, unknown status ids, a
known tagged field of the wrong size and bytes left over after the value all raise a
:class:`~kafkatx.errors.TxnLogError` naming the byte position.  (Kafka ignores bytes left over after a
key or value; it never writes any, so rejecting them loses nothing Kafka produces.)

:func:`key_json` and :func:`value_json` give a decoded key and value in the JSON shape Kafka's tools print
(``kafka-dump-log.sh --transaction-log-decoder``; ``kafkatx dump --transaction-log-decoder`` prints them).

Also here: :func:`txn_partition_for` (which ``__transaction_state`` partition holds an id), the
coordinator's :class:`TransactionState` table (:func:`can_transition` / :func:`transition`, with a
``transaction_version`` switch for the KIP-890 additions) and the producer client's
:class:`ClientTransactionState` table (:func:`client_can_transition` / :func:`client_transition`).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from ._common import byte_view
from .errors import IllegalTransitionError, TxnLogError, UnknownTxnValueVersionError

__all__ = [
    "TXN_KEY_VERSION",
    "TransactionState",
    "ClientTransactionState",
    "TxnMetadataValue",
    "UnknownKey",
    "TxnLogRecord",
    "encode_txn_key",
    "decode_txn_key",
    "encode_txn_value",
    "decode_txn_value",
    "encode_txn_record",
    "encode_txn_records",
    "decode_txn_records",
    "key_json",
    "value_json",
    "java_string_hash",
    "txn_partition_for",
    "can_transition",
    "transition",
    "valid_previous_states",
    "client_can_transition",
    "client_transition",
    "client_valid_previous_states",
]

TXN_KEY_VERSION = 0
DEFAULT_PARTITION_COUNT = 50


# ------------------------------------------------------------------------------------------- states
class TransactionState(enum.IntEnum):
    """Coordinator transaction states; the value is the ``TransactionStatus`` int8 stored in the log."""

    Empty = 0
    Ongoing = 1
    PrepareCommit = 2
    PrepareAbort = 3
    CompleteCommit = 4
    CompleteAbort = 5
    Dead = 6
    PrepareEpochFence = 7

    @property
    def expiration_allowed(self) -> bool:
        """Whether a transactional id in this state may expire (Empty, CompleteCommit, CompleteAbort)."""
        return self in (TransactionState.Empty, TransactionState.CompleteCommit, TransactionState.CompleteAbort)


_S = TransactionState
# valid previous states, 2024 trunk (TransactionState.scala)
_PREVIOUS_TV0 = {
    _S.Empty: frozenset({_S.Empty, _S.CompleteCommit, _S.CompleteAbort}),
    _S.Ongoing: frozenset({_S.Ongoing, _S.Empty, _S.CompleteCommit, _S.CompleteAbort}),
    _S.PrepareCommit: frozenset({_S.Ongoing}),
    _S.PrepareAbort: frozenset({_S.Ongoing, _S.PrepareEpochFence}),
    _S.CompleteCommit: frozenset({_S.PrepareCommit}),
    _S.CompleteAbort: frozenset({_S.PrepareAbort}),
    _S.Dead: frozenset({_S.Empty, _S.CompleteAbort, _S.CompleteCommit}),
    _S.PrepareEpochFence: frozenset({_S.Ongoing}),
}
# transaction.version 2 (KIP-890): a client may abort when unsure of the state
_PREVIOUS_TV2 = dict(_PREVIOUS_TV0)
_PREVIOUS_TV2[_S.PrepareAbort] = _PREVIOUS_TV0[_S.PrepareAbort] | {_S.Empty, _S.CompleteCommit, _S.CompleteAbort}


def _state(x, enum_cls, what):
    try:
        return enum_cls(x) if not isinstance(x, str) else enum_cls[x]
    except (ValueError, KeyError):
        raise IllegalTransitionError(f"unknown {what} {x!r}") from None


def valid_previous_states(target, *, transaction_version: int = 2) -> frozenset:
    """The states from which the coordinator may move to ``target``."""
    table = _PREVIOUS_TV2 if transaction_version >= 2 else _PREVIOUS_TV0
    return table[_state(target, TransactionState, "transaction state")]


def can_transition(from_state, to_state, *, transaction_version: int = 2) -> bool:
    """Whether the coordinator may move a transaction from ``from_state`` to ``to_state``.

    ``transaction_version`` < 2 uses the 2024 table; >= 2 adds PrepareAbort from Empty,
    CompleteCommit and CompleteAbort (KIP-890).
    """
    f = _state(from_state, TransactionState, "transaction state")
    return f in valid_previous_states(to_state, transaction_version=transaction_version)


def transition(from_state, to_state, *, transaction_version: int = 2) -> TransactionState:
    """``to_state`` as a :class:`TransactionState`, or :class:`IllegalTransitionError`."""
    f = _state(from_state, TransactionState, "transaction state")
    t = _state(to_state, TransactionState, "transaction state")
    if not can_transition(f, t, transaction_version=transaction_version):
        raise IllegalTransitionError(
            f"transaction state transition from {f.name} to {t.name} is not allowed "
            f"(transaction.version {transaction_version}); valid previous states of {t.name}: "
            f"{sorted(s.name for s in valid_previous_states(t, transaction_version=transaction_version))}",
            f,
            t,
        )
    return t


class ClientTransactionState(enum.IntEnum):
    """The producer client's ``TransactionManager.State`` (Java declaration order)."""

    UNINITIALIZED = 0
    INITIALIZING = 1
    READY = 2
    IN_TRANSACTION = 3
    COMMITTING_TRANSACTION = 4
    ABORTING_TRANSACTION = 5
    ABORTABLE_ERROR = 6
    FATAL_ERROR = 7


_C = ClientTransactionState
_CLIENT_PREVIOUS = {
    _C.UNINITIALIZED: frozenset({_C.READY, _C.ABORTABLE_ERROR}),
    _C.INITIALIZING: frozenset({_C.UNINITIALIZED, _C.ABORTING_TRANSACTION}),
    _C.READY: frozenset({_C.INITIALIZING, _C.COMMITTING_TRANSACTION, _C.ABORTING_TRANSACTION}),
    _C.IN_TRANSACTION: frozenset({_C.READY}),
    _C.COMMITTING_TRANSACTION: frozenset({_C.IN_TRANSACTION}),
    _C.ABORTING_TRANSACTION: frozenset({_C.IN_TRANSACTION, _C.ABORTABLE_ERROR}),
    _C.ABORTABLE_ERROR: frozenset({_C.IN_TRANSACTION, _C.COMMITTING_TRANSACTION, _C.ABORTABLE_ERROR, _C.INITIALIZING}),
    _C.FATAL_ERROR: frozenset(_C),  # from any state; terminal
}


def client_valid_previous_states(target) -> frozenset:
    return _CLIENT_PREVIOUS[_state(target, ClientTransactionState, "client transaction state")]


def client_can_transition(from_state, to_state) -> bool:
    f = _state(from_state, ClientTransactionState, "client transaction state")
    return f in client_valid_previous_states(to_state)


def client_transition(from_state, to_state) -> ClientTransactionState:
    f = _state(from_state, ClientTransactionState, "client transaction state")
    t = _state(to_state, ClientTransactionState, "client transaction state")
    if f not in _CLIENT_PREVIOUS[t]:
        raise IllegalTransitionError(f"Invalid transition attempted from state {f.name} to state {t.name}", f, t)
    return t


# --------------------------------------------------------------------------------------- partition
def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (int32) over the UTF-16 code units of ``s``."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (u,) in struct.iter_unpack(">H", units):
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def txn_partition_for(transactional_id: str, partition_count: int = DEFAULT_PARTITION_COUNT) -> int:
    """The ``__transaction_state`` partition of a transactional id: ``Utils.abs(hashCode) % partitionCount``.

    Kafka's ``Utils.abs`` maps INT_MIN to 0.
    """
    if not isinstance(partition_count, int) or partition_count <= 0:
        raise ValueError(f"partition_count must be a positive integer, got {partition_count!r}")
    h = java_string_hash(transactional_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % partition_count


# ------------------------------------------------------------------------------------------ reading
class _Reader:
    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, data, what):
        self.buf = byte_view(data)
        self.pos = 0
        self.end = len(self.buf)
        self.what = what

    def fail(self, msg, pos=None, cls=TxnLogError):
        return cls(f"{self.what}: {msg}", self.pos if pos is None else pos)

    def need(self, n, field_name):
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"truncated: {field_name} needs {n} bytes, {self.end - self.pos} left")

    def unpack(self, st, field_name):
        self.need(st.size, field_name)
        v = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def uvarint(self, field_name):
        start = self.pos
        value = 0
        for i in range(5):
            if self.pos >= self.end:
                raise self.fail(f"truncated unsigned varint ({field_name})", start)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                return value
        raise self.fail(f"unsigned varint longer than 5 bytes ({field_name})", start)

    def raw(self, n, field_name):
        self.need(n, field_name)
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def utf8(self, n, field_name):
        start = self.pos
        data = self.raw(n, field_name)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field_name} is not valid UTF-8 ({exc.reason})", start + exc.start) from None

    def done(self):
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} unexpected bytes after the end")


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")
_VALUE_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


class UnknownKey(NamedTuple):
    """A ``__transaction_state`` key whose version is not 0 (skipped by the coordinator)."""

    version: int
    data: bytes


def encode_txn_key(transactional_id: str) -> bytes:
    """Key bytes for a transactional id: ``int16 0`` + int16 length + UTF-8."""
    raw = transactional_id.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise TxnLogError(f"transactional id is {len(raw)} UTF-8 bytes, more than a Kafka string holds (32767)")
    return struct.pack(">hh", TXN_KEY_VERSION, len(raw)) + raw


def decode_txn_key(data):
    """The transactional id (``str``) of a key, or :class:`UnknownKey` for a key version other than 0."""
    if data is None:
        raise TxnLogError("__transaction_state key: null key")
    r = _Reader(data, "__transaction_state key")
    (version,) = r.unpack(_I16, "key version")
    if version != TXN_KEY_VERSION:
        return UnknownKey(version, bytes(r.buf))
    (n,) = r.unpack(_I16, "TransactionalId length")
    if n < 0:
        raise r.fail(f"TransactionalId length {n} is negative (null is not allowed)", r.pos - 2)
    tid = r.utf8(n, "TransactionalId")
    r.done()
    return tid


@dataclass
class TxnMetadataValue:
    """A ``__transaction_state`` value (TransactionLogValue.json field names, snake_case)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: dict[str, list[int]] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    next_producer_epoch: int = -1

    def __post_init__(self):
        self.state = _value_state(self.state)


def _value_state(x):
    try:
        return TransactionState(x) if not isinstance(x, str) else TransactionState[x]
    except (ValueError, KeyError):
        raise TxnLogError(f"unknown transaction state {x!r}") from None


# (tag, attribute, struct, default), ascending tag order
_TAGGED = (
    (0, "previous_producer_id", _I64, -1),
    (1, "next_producer_id", _I64, -1),
    (2, "client_transaction_version", _I16, 0),
    (3, "next_producer_epoch", _I16, -1),
)
_TAG_BY_ID = {t[0]: t for t in _TAGGED}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _pack(st, value, field_name):
    try:
        return st.pack(value)
    except struct.error:
        raise TxnLogError(f"{field_name} {value!r} does not fit its field ({st.format})") from None


def encode_txn_value(value: TxnMetadataValue | None, version: int | None = None) -> bytes | None:
    """Value bytes (None for a tombstone).

    ``version`` None picks 1 when ``client_transaction_version >= 1`` or a tagged field is set (Kafka
    writes v1 once ``transaction.version >= 1``), else 0.  Version 0 cannot carry the tagged fields
    (non-default values raise :class:`TxnLogError`); version 1 writes each one only when it differs
    from its default, in ascending tag order.
    """
    if value is None:
        return None
    state = _value_state(value.state)
    if state is TransactionState.Dead:
        raise TxnLogError("the Dead state is never written as a value (write a tombstone, value None)")
    tagged = [(tag, attr, st, getattr(value, attr)) for tag, attr, st, default in _TAGGED
              if getattr(value, attr) != default]  # fmt: skip
    if version is None:
        version = 1 if (tagged or value.client_transaction_version >= 1) else 0
    if version not in (0, 1):
        raise UnknownTxnValueVersionError(f"cannot write __transaction_state value version {version} (0 or 1)")
    if version == 0 and tagged:
        raise TxnLogError(f"value version 0 cannot hold {', '.join(t[1] for t in tagged)} (tagged fields need v1)")
    try:
        out = bytearray(_I16.pack(version))
        out += _VALUE_HEAD.pack(value.producer_id, value.producer_epoch, value.transaction_timeout_ms, int(state))
    except struct.error as exc:
        raise TxnLogError(f"value field out of range: {exc}") from None
    parts = value.partitions
    if version == 0:
        if parts is None:
            out += _I32.pack(-1)
        else:
            out += _I32.pack(len(parts))
            for topic, ids in parts.items():
                raw = topic.encode("utf-8")
                if len(raw) > 0x7FFF:
                    raise TxnLogError(f"topic name of {len(raw)} bytes is too long")
                out += _I16.pack(len(raw)) + raw
                ids = list(ids)
                out += _I32.pack(len(ids))
                for p in ids:
                    out += _pack(_I32, p, "partition id")
    else:
        if parts is None:
            out += b"\x00"
        else:
            out += _uvarint(len(parts) + 1)
            for topic, ids in parts.items():
                raw = topic.encode("utf-8")
                if len(raw) > 0x7FFF:
                    raise TxnLogError(f"topic name of {len(raw)} bytes is too long")
                out += _uvarint(len(raw) + 1) + raw
                ids = list(ids)
                out += _uvarint(len(ids) + 1)
                for p in ids:
                    out += _pack(_I32, p, "partition id")
                out += b"\x00"  # no tagged fields in the partitions element
    try:
        out += _TIMESTAMPS.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    except struct.error as exc:
        raise TxnLogError(f"timestamp out of range: {exc}") from None
    if version == 1:
        out += _uvarint(len(tagged))
        for tag, attr, st, v in tagged:
            data = _pack(st, v, attr)
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


def _skip_tagged(r, where):
    count = r.uvarint(f"{where} tagged field count")
    for _ in range(count):
        r.uvarint(f"{where} tag")
        size = r.uvarint(f"{where} tagged field size")
        r.need(size, f"{where} tagged field data")
        r.pos += size


def decode_txn_value(data) -> TxnMetadataValue | None:
    """Decode value bytes (None -> None, a tombstone).  Unknown tagged fields are skipped."""
    if data is None:
        return None
    r = _Reader(data, "__transaction_state value")
    (version,) = r.unpack(_I16, "value version")
    if version not in (0, 1):
        raise r.fail(f"unknown value version {version} (expected 0 or 1)", 0, UnknownTxnValueVersionError)
    status_pos = r.pos + 14
    pid, epoch, timeout, status = r.unpack(_VALUE_HEAD, "value header")
    try:
        state = TransactionState(status)
    except ValueError:
        raise r.fail(f"unknown transaction status {status}", status_pos) from None
    parts: dict[str, list[int]] | None
    if version == 0:
        start = r.pos
        (n,) = r.unpack(_I32, "TransactionPartitions count")
        if n < -1:
            raise r.fail(f"invalid TransactionPartitions count {n}", start)
        parts = None if n == -1 else {}
        if n > 0 and n * 6 > r.end - r.pos:
            raise r.fail(f"TransactionPartitions count {n} exceeds the remaining {r.end - r.pos} bytes", start)
        for _ in range(max(n, 0)):
            lpos = r.pos
            (tl,) = r.unpack(_I16, "Topic length")
            if tl < 0:
                raise r.fail(f"Topic length {tl} is negative (null is not allowed)", lpos)
            topic = r.utf8(tl, "Topic")
            cpos = r.pos
            (k,) = r.unpack(_I32, "PartitionIds count")
            if k < 0:
                raise r.fail(f"PartitionIds count {k} is negative (null is not allowed)", cpos)
            r.need(4 * k, "PartitionIds")
            ids = list(struct.unpack_from(f">{k}i", r.buf, r.pos))
            r.pos += 4 * k
            parts.setdefault(topic, []).extend(ids)
    else:
        start = r.pos
        n1 = r.uvarint("TransactionPartitions count")
        parts = None if n1 == 0 else {}
        n = n1 - 1
        if n > r.end - r.pos:
            raise r.fail(f"TransactionPartitions count {n} exceeds the remaining {r.end - r.pos} bytes", start)
        for _ in range(max(n, 0)):
            lpos = r.pos
            tl1 = r.uvarint("Topic length")
            if tl1 == 0:
                raise r.fail("Topic is null (not allowed)", lpos)
            topic = r.utf8(tl1 - 1, "Topic")
            cpos = r.pos
            k1 = r.uvarint("PartitionIds count")
            if k1 == 0:
                raise r.fail("PartitionIds is null (not allowed)", cpos)
            k = k1 - 1
            r.need(4 * k, "PartitionIds")
            ids = list(struct.unpack_from(f">{k}i", r.buf, r.pos))
            r.pos += 4 * k
            _skip_tagged(r, "TransactionPartitions element")
            parts.setdefault(topic, []).extend(ids)
    last_update, start_ts = r.unpack(_TIMESTAMPS, "timestamps")
    extra = {}
    if version == 1:
        count = r.uvarint("tagged field count")
        for _ in range(count):
            tpos = r.pos
            tag = r.uvarint("tag")
            size = r.uvarint("tagged field size")
            known = _TAG_BY_ID.get(tag)
            if known is None:
                r.need(size, f"tagged field {tag}")
                r.pos += size  # unknown tag: skip
                continue
            _tag, attr, st, _default = known
            if size != st.size:
                raise r.fail(f"tagged field {tag} ({attr}) has size {size}, expected {st.size}", tpos)
            (extra[attr],) = r.unpack(st, attr)
    r.done()
    return TxnMetadataValue(pid, epoch, timeout, state, parts, last_update, start_ts, **extra)


# ------------------------------------------------------------------------------------------ as JSON
def key_json(transactional_id: str) -> dict:
    """A key as Kafka's tools show it (``kafka-dump-log.sh --transaction-log-decoder``): the record type as
    a string (``"0"``, TransactionLogKey's apiKey) and the fields of the generated ``TransactionLogKey``
    JSON converter."""
    return {"type": str(TXN_KEY_VERSION), "data": {"transactionalId": transactional_id}}


def value_json(value: TxnMetadataValue, version: int) -> dict:
    """A value written at ``version`` as Kafka's tools show it: the version as a string and the fields as
    the generated ``TransactionLogValue`` JSON converter writes them.

    Fields come in the order TransactionLogValue.json declares them, so ``previousProducerId`` and
    ``nextProducerId`` sit between ``producerId`` and ``producerEpoch``; a tagged field appears only at
    version 1 and only when it is not its default.  ``nextProducerEpoch`` (tag 3) comes last: the schema
    files read for this place it nowhere, so its position is kafkatx's choice.  ``transactionPartitions``
    is ``null`` where the value holds none (Kafka writes null for Empty), one entry per topic otherwise.
    """
    tagged = {attr: (getattr(value, attr) if version >= 1 and getattr(value, attr) != default else None)
              for _tag, attr, _st, default in _TAGGED}  # fmt: skip
    data = {"producerId": value.producer_id}
    for attr, name in (("previous_producer_id", "previousProducerId"), ("next_producer_id", "nextProducerId")):
        if tagged[attr] is not None:
            data[name] = tagged[attr]
    data["producerEpoch"] = value.producer_epoch
    data["transactionTimeoutMs"] = value.transaction_timeout_ms
    data["transactionStatus"] = int(_value_state(value.state))
    parts = value.partitions
    data["transactionPartitions"] = (
        None if parts is None else [{"topic": topic, "partitionIds": list(ids)} for topic, ids in parts.items()]
    )
    data["transactionLastUpdateTimestampMs"] = value.last_update_timestamp_ms
    data["transactionStartTimestampMs"] = value.start_timestamp_ms
    for attr, name in (("client_transaction_version", "clientTransactionVersion"),
                       ("next_producer_epoch", "nextProducerEpoch")):  # fmt: skip
        if tagged[attr] is not None:
            data[name] = tagged[attr]
    return {"version": str(version), "data": data}


# ------------------------------------------------------------------------------------------ records
class TxnLogRecord(NamedTuple):
    """One decoded ``__transaction_state`` record."""

    offset: int
    timestamp: int
    transactional_id: str | UnknownKey
    value: TxnMetadataValue | None


def encode_txn_records(items: Iterable, *, base_offset: int = 0, timestamp: int | None = None,
                       partition_leader_epoch: int = -1, version: int | None = None) -> bytes:  # fmt: skip
    """One non-transactional v2 batch of ``(transactional_id, value_or_None)`` records, no compression
    (the coordinator forces none)."""
    from .batch import BatchBuilder

    b = BatchBuilder(base_offset=base_offset, partition_leader_epoch=partition_leader_epoch)
    for tid, value in items:
        b.append(encode_txn_value(value, version), encode_txn_key(tid), timestamp=timestamp)
    return b.build()


def encode_txn_record(transactional_id: str, value: TxnMetadataValue | None, **kwargs) -> bytes:
    """A one-record ``__transaction_state`` batch (value None writes a tombstone)."""
    return encode_txn_records([(transactional_id, value)], **kwargs)


def decode_txn_records(data, *, verify_crc: bool = True) -> list[TxnLogRecord]:
    """Every record of a ``__transaction_state`` log buffer, decoded."""
    from .batch import iter_batches

    out = []
    for batch in iter_batches(data, verify_crc=verify_crc):
        if batch.is_control:
            continue
        for rec in batch.records():
            out.append(TxnLogRecord(rec.offset, rec.timestamp, decode_txn_key(rec.key), decode_txn_value(rec.value)))
    return out
