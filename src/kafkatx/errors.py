"""Exception hierarchy shared by the compiled codec and its pure-Python twin.

Every error raised for bad input is a :class:`KafkaTxError`.  Errors about the
bytes themselves say where: ``position`` is the byte position in the buffer the
caller passed in (or in the decompressed payload, as the message says) and
``base_offset`` the base offset of the batch being read, when known.
"""

from __future__ import annotations

__all__ = [
    "KafkaTxError",
    "CorruptRecordError",
    "CrcMismatchError",
    "InvalidRecordError",
    "UnsupportedCompressionError",
    "DecompressionError",
    "DecompressedSizeError",
    "InvalidAppendError",
]


class KafkaTxError(Exception):
    """Base class of every error kafkatx raises."""


class CorruptRecordError(KafkaTxError, ValueError):
    """The bytes are not a valid Kafka record batch (Kafka's CorruptRecordException)."""

    def __init__(self, message: str, position: int | None = None, base_offset: int | None = None):
        where = []
        if position is not None:
            where.append(f"at byte {position}")
        if base_offset is not None:
            where.append(f"in batch with base offset {base_offset}")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.reason = message
        self.position = position
        self.base_offset = base_offset

    def __reduce__(self):  # keep pickling (multiprocessing, Spark) lossless
        return (type(self), (self.reason, self.position, self.base_offset))


class CrcMismatchError(CorruptRecordError):
    """The stored CRC of a batch (CRC-32C) or legacy message (CRC-32) does not match its bytes."""


class InvalidRecordError(CorruptRecordError):
    """A record inside a batch is malformed (Kafka's InvalidRecordException)."""


class DecompressionError(CorruptRecordError):
    """A compressed payload could not be decompressed."""


class UnsupportedCompressionError(KafkaTxError):
    """Unknown compression id, or a codec whose library is not installed."""

    def __init__(self, message: str, position: int | None = None, base_offset: int | None = None):
        super().__init__(message if position is None else f"{message} (at byte {position})")
        self.reason = message
        self.position = position
        self.base_offset = base_offset

    def __reduce__(self):
        return (type(self), (self.reason, self.position, self.base_offset))


class DecompressedSizeError(KafkaTxError):
    """A compressed payload inflates beyond the configured ``max_decompressed_size``."""

    def __init__(self, message: str, position: int | None = None, base_offset: int | None = None):
        suffix = [] if position is None else [f"at byte {position}"]
        if base_offset is not None:
            suffix.append(f"in batch with base offset {base_offset}")
        super().__init__(f"{message} ({', '.join(suffix)})" if suffix else message)
        self.reason = message
        self.position = position
        self.base_offset = base_offset

    def __reduce__(self):
        return (type(self), (self.reason, self.position, self.base_offset))


class InvalidAppendError(KafkaTxError, ValueError):
    """A BatchBuilder append (or builder argument) breaks Kafka's rules."""
