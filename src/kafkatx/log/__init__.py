"""A Kafka partition directory: segments, indexes, checkpoints, and reads with Kafka's isolation rules.

``kafkatx.log.index``: offset / time indexes, segment file names, checkpoint files.
``kafkatx.log.reader``: :func:`open_partition`, :func:`open_log_dir`, :class:`Partition` reads.
``kafkatx.log.writer``: :class:`PartitionWriter`, appending like a broker leader (and recovering like one).
``kafkatx.log.generate``: :func:`generate`, a realistic exactly-once workload with a manifest of what to expect.
``kafkatx.log.audit``: :func:`find_hanging_transactions`, ``kafka-transactions.sh find-hanging`` on the files.
"""

from __future__ import annotations

from .index import (
    DEFAULT_MAX_INDEX_SIZE,
    INDEX_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    NO_TIMESTAMP,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    CheckpointError,
    IndexFullError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    parse_segment_file_name,
    read_checkpoint,
    segment_file_name,
    write_checkpoint,
)
from .reader import (
    DEFAULT_CHUNK_BYTES,
    CorruptSegmentError,
    LogDir,
    LogInconsistencyError,
    LogRead,
    OffsetOutOfRangeError,
    Partition,
    Segment,
    TruncatedTail,
    open_log_dir,
    open_partition,
    parse_partition_dir_name,
    wait_for_release,
)

from .writer import (
    AppendInfo,
    LogClosedError,
    LogSegmentOffsetOverflowError,
    LogWriterError,
    PartitionWriter,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecoveryInfo,
    UnexpectedAppendOffsetError,
)
from .generate import Manifest, generate, main_generate, record_checksum  # noqa: E402  (generate imports txncoord lazily)
from .audit import HangingTransaction, find_hanging_transactions, transaction_states

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE",
    "INDEX_SUFFIX",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "NO_TIMESTAMP",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SNAPSHOT_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "CheckpointError",
    "IndexFullError",
    "InvalidOffsetError",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "parse_segment_file_name",
    "read_checkpoint",
    "segment_file_name",
    "write_checkpoint",
    "DEFAULT_CHUNK_BYTES",
    "CorruptSegmentError",
    "LogDir",
    "LogInconsistencyError",
    "LogRead",
    "OffsetOutOfRangeError",
    "Partition",
    "Segment",
    "TruncatedTail",
    "open_log_dir",
    "open_partition",
    "parse_partition_dir_name",
    "wait_for_release",
    "AppendInfo",
    "LogClosedError",
    "LogSegmentOffsetOverflowError",
    "LogWriterError",
    "PartitionWriter",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RecoveryInfo",
    "UnexpectedAppendOffsetError",
    "Manifest",
    "generate",
    "main_generate",
    "record_checksum",
    "HangingTransaction",
    "find_hanging_transactions",
    "transaction_states",
]
