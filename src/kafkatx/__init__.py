"""kafkatx: Apache Kafka's exactly-once data (record batches, transactions, logs) at C speed."""

from __future__ import annotations

from ._backend import BACKEND
from .batch import (
    BatchBuilder,
    BatchIterator,
    ReadCommittedFilter,
    Record,
    RecordBatch,
    RecordList,
    crc32c,
    decode_records,
    decrement_sequence,
    increment_sequence,
    iter_batches,
    scan_batches,
)
from .errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressedSizeError,
    DecompressionError,
    InvalidAppendError,
    InvalidRecordError,
    KafkaTxError,
    UnsupportedCompressionError,
)

__version__ = "0.1.0"

__all__ = [
    "BACKEND",
    "__version__",
    "BatchBuilder",
    "BatchIterator",
    "ReadCommittedFilter",
    "Record",
    "RecordBatch",
    "RecordList",
    "crc32c",
    "decode_records",
    "decrement_sequence",
    "increment_sequence",
    "iter_batches",
    "scan_batches",
    "KafkaTxError",
    "CorruptRecordError",
    "CrcMismatchError",
    "InvalidRecordError",
    "DecompressionError",
    "DecompressedSizeError",
    "UnsupportedCompressionError",
    "InvalidAppendError",
]
