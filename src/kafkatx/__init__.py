"""kafkatx: Apache Kafka's exactly-once data (record batches, transactions, logs) at C speed."""

from __future__ import annotations

from ._backend import BACKEND
from .batch import (
    ARROW_COLUMNS,
    arrow_schema,
    decode_arrow,
    encode_arrow,
    BatchBuilder,
    BatchIterator,
    ReadCommittedFilter,
    Record,
    RecordBatch,
    RecordList,
    RecordSummary,
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
    InvalidTimestampError,
    KafkaTxError,
    UnsupportedCompressionError,
)

__version__ = "0.1.0"


def __getattr__(name):  # kafkatx.to_pandas without importing pandas/pyarrow at `import kafkatx`
    if name == "to_pandas":
        from .arrow import to_pandas

        return to_pandas
    raise AttributeError(f"module 'kafkatx' has no attribute {name!r}")

__all__ = [
    "BACKEND",
    "__version__",
    "BatchBuilder",
    "BatchIterator",
    "ReadCommittedFilter",
    "Record",
    "RecordBatch",
    "RecordList",
    "RecordSummary",
    "crc32c",
    "decode_records",
    "decrement_sequence",
    "increment_sequence",
    "iter_batches",
    "scan_batches",
    "decode_arrow",
    "encode_arrow",
    "arrow_schema",
    "ARROW_COLUMNS",
    "to_pandas",
    "KafkaTxError",
    "CorruptRecordError",
    "CrcMismatchError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "DecompressionError",
    "DecompressedSizeError",
    "UnsupportedCompressionError",
    "InvalidAppendError",
]
