"""Exception hierarchy shared by the compiled codec and its pure-Python twin.

Every error raised for bad input is a :class:`KafkaTxError`.  Errors about the
bytes themselves say where: ``position`` is the byte position in the buffer the
caller passed in (or in the decompressed payload, as the message says) and
``base_offset`` the base offset of the batch being read, when known.  An error
raised by ``ReadCommittedFilter.feed`` also has ``records``: the records that call
decoded before the error (``next_offset`` is past them); one raised by
``feed_arrow_parts`` has ``part``: the index of the part it was decoding, and
``carried_bytes``: how many bytes of an incomplete batch from the parts before it
came first in the bytes ``position`` counts in.  One raised by
``kafkatx.arrow.decode_column`` (or a ``map_in_arrow_decoder`` function) has ``row``:
the row of the column holding the bad byte, and ``position`` is a byte of that row.
"""

from __future__ import annotations

__all__ = [
    "KafkaTxError",
    "CorruptRecordError",
    "CrcMismatchError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "UnsupportedCompressionError",
    "DecompressionError",
    "DecompressedSizeError",
    "InvalidAppendError",
]


class KafkaTxError(Exception):
    """Base class of every error kafkatx raises."""


class _BatchError(KafkaTxError):
    """Base of the errors about bytes in the caller's buffer: they say which byte and which batch."""

    def __init__(self, message: str, position: int | None = None, base_offset: int | None = None):
        where = []
        if position is not None:
            where.append(f"at byte {position}")
        if base_offset is not None:
            where.append(f"in batch with base offset {base_offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.reason = message
        self.position = position
        self.base_offset = base_offset

    def __reduce__(self):  # keep pickling (multiprocessing, Spark) lossless
        return (type(self), (self.reason, self.position, self.base_offset))


class CorruptRecordError(_BatchError, ValueError):
    """The bytes are not a valid Kafka record batch (Kafka's CorruptRecordException)."""


class CrcMismatchError(CorruptRecordError):
    """The stored CRC of a batch (CRC-32C) or legacy message (CRC-32) does not match its bytes."""


class InvalidRecordError(CorruptRecordError):
    """A record inside a batch is malformed (Kafka's InvalidRecordException)."""


class InvalidTimestampError(InvalidRecordError):
    """A record's timestamp or the batch's timestamp type is not accepted (Kafka's InvalidTimestampException)."""


class DecompressionError(CorruptRecordError):
    """A compressed payload could not be decompressed."""


class UnsupportedCompressionError(_BatchError):
    """Unknown compression id, or a codec whose library is not installed."""


class DecompressedSizeError(_BatchError):
    """A compressed payload inflates beyond the configured ``max_decompressed_size``."""


class InvalidAppendError(KafkaTxError, ValueError):
    """A BatchBuilder append (or builder argument) breaks Kafka's rules."""


# --- transactions and producer state


class _WhereError(KafkaTxError, ValueError):
    """Base of the file-format errors below: the message says which file and which byte position."""

    def __init__(self, message: str, position: int | None = None, file: str | None = None):
        where = []
        if file is not None:
            where.append(f"in {file}")
        if position is not None:
            where.append(f"at byte {position}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.reason = message
        self.position = position
        self.file = file

    def __reduce__(self):
        return (type(self), (self.reason, self.position, self.file))


class CorruptIndexError(_WhereError):
    """A ``.txnindex`` file is not valid (Kafka's CorruptIndexException, e.g. an entry below the segment base)."""


class InvalidTxnIndexVersionError(CorruptIndexError):
    """A ``.txnindex`` entry has a version above 0 (Kafka throws KafkaException "Unexpected aborted transaction version")."""


class TxnIndexAppendError(KafkaTxError, ValueError):
    """An aborted transaction appended out of order (its last offset is not above the previous one)."""


class CorruptSnapshotError(_WhereError):
    """A producer-state ``.snapshot`` file is not valid (Kafka's CorruptSnapshotException)."""


class TxnLogError(_WhereError):
    """A ``__transaction_state`` key or value is malformed (truncated, bad length, unknown status...)."""


class UnknownTxnValueVersionError(TxnLogError):
    """A ``__transaction_state`` value has a version other than 0 or 1."""


class GroupLogError(_WhereError):
    """A ``__consumer_offsets`` key or value is malformed (truncated, bad length, a version the record type
    does not have...), or a key or value cannot be written."""


class IllegalTransitionError(KafkaTxError, ValueError):
    """A transaction state change that the coordinator's (or the client's) state table forbids."""

    def __init__(self, message: str, from_state=None, to_state=None):
        super().__init__(message)
        self.reason = message
        self.from_state = from_state
        self.to_state = to_state

    def __reduce__(self):
        return (type(self), (self.reason, self.from_state, self.to_state))


class ProducerStateError(KafkaTxError):
    """Base of the partition leader's idempotence / transaction checks (section 11 of kafka-format.md)."""

    def __init__(self, message: str, producer_id: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.reason = message
        self.producer_id = producer_id
        self.offset = offset

    def __reduce__(self):
        return (type(self), (self.reason, self.producer_id, self.offset))


class OutOfOrderSequenceError(ProducerStateError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER: the batch's first sequence does not follow the producer's last one."""


class InvalidProducerEpochError(ProducerStateError):
    """INVALID_PRODUCER_EPOCH: the batch (or marker) carries an epoch older than the producer's current one."""


class InvalidTxnStateError(ProducerStateError):
    """INVALID_TXN_STATE: non-transactional data from a producer whose transaction is still open."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """TRANSACTION_COORDINATOR_FENCED: a marker from a coordinator epoch older than the last one seen."""


__all__ += [  # noqa: PLE0605
    "CorruptIndexError",
    "InvalidTxnIndexVersionError",
    "TxnIndexAppendError",
    "CorruptSnapshotError",
    "TxnLogError",
    "GroupLogError",
    "UnknownTxnValueVersionError",
    "IllegalTransitionError",
    "ProducerStateError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "TransactionCoordinatorFencedError",
]
