"""Type stubs shared by the compiled codec ``kafkatx._codec`` and its twin ``kafkatx._codec_py``."""

from array import array
from typing import Any, Callable, Iterable, Iterator, Literal

from ._common import RecordList as RecordList
from ._common import RecordSummary as RecordSummary
from ._control import ControlRecord

BACKEND: str
_Buffer = Any  # bytes, bytearray, memoryview, mmap: anything exporting a contiguous byte buffer

def crc32c(data: _Buffer, crc: int = 0) -> int: ...
def populate(data: _Buffer, start: int = 0, end: int = -1) -> bool: ...
def populate_many(items: Iterable[tuple[_Buffer, int, int]]) -> int: ...
def increment_sequence(sequence: int, increment: int) -> int: ...
def decrement_sequence(sequence: int, decrement: int) -> int: ...

class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    sequence: int
    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        sequence: int = -1,
    ) -> None: ...

class RecordBatch:
    """One entry of a log: a v2 record batch, or a legacy (magic 0/1) message or compressed wrapper.

    ``last_offset`` is ``base_offset + last_offset_delta`` in Java long arithmetic (it wraps past 2^63-1),
    as are the records' offsets and timestamps.  A legacy compressed wrapper is read as Kafka's consumer
    reads it: inner messages of the other legacy magic are taken (a v0 message has no timestamp), and a v1
    wrapper whose non-zero offset is below its last inner offset raises InvalidRecordError.
    """

    position: int
    size_in_bytes: int
    base_offset: int
    last_offset: int
    next_offset: int
    last_offset_delta: int
    magic: int
    crc: int
    attributes: int
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"]
    timestamp_type: Literal["create_time", "log_append_time", "no_timestamp_type"]
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    delete_horizon_ms: int | None
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    partition_leader_epoch: int
    records_count: int
    is_valid: bool
    def __init__(
        self,
        data: _Buffer,
        position: int = 0,
        size: int | None = None,
        max_decompressed_size: int = ...,
        verify_crc: bool = True,
    ) -> None:
        """Open the entry at byte ``position`` of ``data`` (``size`` bytes, else as its header says).

        With ``verify_crc`` (the default) its CRC is checked here: CRC-32C of a v2 batch, CRC-32 of a legacy
        entry and of the messages in a compressed wrapper (CrcMismatchError); ``verify_crc=False`` opens a
        damaged entry (``is_valid``, ``validate_crc()`` tell).  Error positions are in ``data``, not
        relative to ``position``."""
    def compute_crc(self) -> int: ...
    def validate_crc(self) -> None: ...
    def tobytes(self) -> bytes: ...
    def records(self) -> list[Record]: ...
    def record_summary(self) -> RecordSummary: ...
    def __iter__(self) -> Iterator[Record]: ...
    def first_control_type(self) -> int: ...
    def control_record(self) -> ControlRecord | None: ...

class BatchIterator(Iterator[RecordBatch]):
    valid_bytes: int
    trailing_bytes: int
    position: int
    def __next__(self) -> RecordBatch: ...

def iter_batches(data: _Buffer, *, verify_crc: bool = True, max_decompressed_size: int = ...) -> BatchIterator: ...

class ReadCommittedFilter:
    last_stable_offset: int | None
    next_offset: int | None
    pending_bytes: int
    def __init__(
        self,
        aborted_transactions: Iterable[tuple[int, int]] | None = None,
        *,
        isolation: Literal["read_committed", "read_uncommitted"] = "read_committed",
        last_stable_offset: int | None = None,
        fetch_offset: int | None = None,
        verify_crc: bool = True,
        max_decompressed_size: int = ...,
        inflate_threads: int | None = None,
    ) -> None: ...
    def add_aborted_transactions(self, aborted_transactions: Iterable[tuple[int, int]]) -> None: ...
    def discard_pending(self) -> int: ...
    def feed(self, data: _Buffer) -> RecordList: ...
    def feed_arrow(
        self,
        data: _Buffer,
        *,
        columns: Iterable[str] | None = None,
        large_binary: bool = False,
        binary_view: bool = False,
    ) -> Any: ...
    def feed_arrow_parts(
        self,
        parts: Iterable[_Buffer],
        *,
        columns: Iterable[str] | None = None,
        large_binary: bool = False,
        binary_view: bool = False,
    ) -> Any: ...

def decode_records(
    data: _Buffer,
    *,
    isolation: Literal["read_committed", "read_uncommitted"] = "read_uncommitted",
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    last_stable_offset: int | None = None,
    fetch_offset: int | None = None,
    verify_crc: bool = True,
    max_decompressed_size: int = ...,
    inflate_threads: int | None = None,
) -> RecordList: ...

def decode_arrow(
    data: _Buffer,
    *,
    isolation: Literal["read_committed", "read_uncommitted"] = "read_uncommitted",
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    last_stable_offset: int | None = None,
    fetch_offset: int | None = None,
    verify_crc: bool = True,
    columns: Iterable[str] | None = None,
    large_binary: bool = False,
    binary_view: bool = False,
    max_decompressed_size: int = ...,
    inflate_threads: int | None = None,
) -> Any: ...

class BatchBuilder:
    """Builds one v2 record batch, byte for byte as Kafka's ``MemoryRecordsBuilder`` does.

    Its fields are read-only.  Every argument is checked as it is given, the same way on both backends:
    the constructor raises InvalidAppendError for a header field out of Kafka's rules and for a
    ``compression_level`` outside the codec's KIP-390 range (gzip 1..9 or -1, lz4 1..17, zstd
    -131072..22; none and snappy ignore it), TypeError for a level that is not an integer, and for
    ``log_append_time`` the int64 rule of :meth:`append`'s timestamp; ``zstd_frames`` other than 1 or 2
    is a ValueError (TypeError if it is not an integer).  A builder may be initialised again to build
    another batch, but not while ``build()`` runs on another thread (RuntimeError).

    The compiled builder compresses a large zstd payload in pieces on two cores, some on a worker thread,
    where the process may use two CPUs.  By default (``zstd_frames=1``) a payload of more than 64 KiB of
    records is one frame joined from pieces (``_codec._zstd_join_layout()``), each compressed with the
    records before it (up to one pass's window) as history, the parts queued for the worker as soon as the records
    after them begin, where the libzstd it loads allows (python-zstandard's does; else one pass); the
    pure-Python twin writes that frame in one pass, so the bytes differ between the backends there and
    the records do not.  ``zstd_frames=2`` writes a payload of ``compression.ZSTD_SPLIT_MIN`` (64 KiB) or more as two
    frames, its bytes' halves, compressed at once, the same bytes on both backends; Kafka's classes read
    such payloads, kafka-python 2.0.2 does not.  Other codecs ignore it.
    """

    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    partition_leader_epoch: int
    log_append_time: int | None
    delete_horizon_ms: int | None
    records_count: int
    last_offset: int | None
    def __init__(
        self,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        compression: str | int = "none",
        compression_level: int | None = None,
        timestamp_type: Literal["create_time", "log_append_time"] = "create_time",
        partition_leader_epoch: int = -1,
        log_append_time: int | None = None,
        delete_horizon_ms: int | None = None,
        zstd_frames: Literal[1, 2] = 1,
    ) -> None: ...
    def size_in_bytes(self) -> int: ...
    def append(
        self,
        value: _Buffer | None,
        key: _Buffer | None = None,
        *,
        timestamp: int | None = None,
        headers: Iterable[tuple[str | bytes, _Buffer | None]] = (),
        offset: int | None = None,
    ) -> int:
        """Append one record; returns its offset (the next one, or ``offset``).

        ``timestamp`` and ``offset`` are integers (anything with ``__index__`` but a bool: a float, a str or
        a bool is a TypeError) in int64 (else OverflowError).  InvalidAppendError for what MemoryRecordsBuilder refuses:
        an offset not above the previous one (also the one after 2^63-1, which Java's long wraps), a
        negative timestamp other than -1, a builder already built; and for a key, value or header that is
        not a C-contiguous buffer (or None), or a header key that UTF-8 cannot encode.  The timestamp delta
        is written in Java long arithmetic (it wraps).  A refused append leaves the builder as it was."""
    def build(self) -> bytes:
        """The batch (``b""`` if nothing was appended).  It closes the builder, as MemoryRecordsBuilder's
        close(): append() afterwards raises InvalidAppendError; build() again returns the same bytes."""

def encode_arrow(
    table: Any,
    *,
    records_per_batch: int = 1000,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: str | int = "none",
    compression_level: int | None = None,
    timestamp_type: Literal["create_time", "log_append_time"] = "create_time",
    partition_leader_epoch: int = -1,
    timestamp: int | None = None,
    zstd_frames: Literal[1, 2] = 1,
) -> bytes:
    """The rows of a pyarrow Table/RecordBatch as consecutive v2 batches.  The arguments are checked first,
    as BatchBuilder checks them (``timestamp`` as append's); the rows' offsets must end by 2^63-1.  Columns
    ``value``, ``key``, ``timestamp``, ``headers`` are written; decode_arrow's other columns (``offset``,
    ``producer_id``, ``sequence``, ...) are accepted and ignored: offsets run on from ``base_offset``."""

def scan_batches(data: _Buffer, *, verify_crc: bool = False, verify_control: bool = False) -> dict[str, array | int]: ...
def scan_batches_fd(fd: int, start: int, end: int, *, verify_control: bool = False) -> dict[str, array | int]: ...
def replay_transactions(
    position: Any, base_offset: Any, producer_id: Any, attributes: Any, magic: Any, size_in_bytes: Any,
    control_type: Any, open_txns: dict[int, int], opened_at: dict[int, tuple], aborted: list, segment: Any,
    high_watermark: int, from_offset: int | None = None, resolve: Callable[[int], int] | None = None,
    entry: Callable[..., Any] | None = None,
) -> int | None: ...
