"""Pure-Python twin of ``kafkatx._codec``: the same names, results and exceptions.

It is the reference the compiled module is tested against, and the fallback selected with
``KAFKATX_NO_EXTENSIONS=1`` (for PyPy, or a platform without a wheel).  Keep it simple and obviously
right; speed lives in ``_codec.pyx``.
"""

from __future__ import annotations

import heapq
import os
import struct
import time

from . import _control, _legacy
from ._common import (
    ARROW_COLUMNS,
    BUILT,
    INT64_MAX,
    BUILDING_ERROR,
    INT64_MIN,
    RecordList,
    RecordSummary,
    arrow_schema,
    as_bytes,
    as_headers,
    byte_view,
    bytes_error,
    check_builder_args,
    check_offsets_fit,
    check_records_per_batch,
    encode_table,
    header_key_bytes,
    i64,
    illegal_offset,
    int64_arg,
    isolation_flag,
    new_aborted_pairs,
    summary_of,
    timestamp_type_bits,
)
from . import compression as _compression
from ._consts import (
    COMPRESSION_CODEC_MASK,
    COMPRESSION_NAMES,
    CONTROL_FLAG_MASK,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    DELETE_HORIZON_FLAG_MASK,
    ATTRIBUTES_OFFSET,
    INT32_MAX,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from .errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressedSizeError,
    InvalidAppendError,
    InvalidRecordError,
    KafkaTxError,
    UnsupportedCompressionError,
)

BACKEND = "python"

__all__ = [
    "BACKEND",
    "crc32c",
    "Record",
    "RecordBatch",
    "BatchIterator",
    "RecordList",
    "ReadCommittedFilter",
    "BatchBuilder",
    "iter_batches",
    "decode_records",
    "increment_sequence",
    "decrement_sequence",
    "scan_batches",
    "decode_arrow",
    "encode_arrow",
    "arrow_schema",
    "ARROW_COLUMNS",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header
_BE_I32 = struct.Struct(">i")
_BE_I16 = struct.Struct(">h")

# ----------------------------------------------------------------------------------------- CRC-32C
_CRC32C_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC32C_TABLE.append(_c)
_CRC32C_TABLE = tuple(_CRC32C_TABLE)


def populate(data, start: int = 0, end: int = -1) -> bool:
    """The compiled ``populate`` maps pages in without the GIL; pure Python cannot without holding it, so
    here a memory-mapped ``data`` only gets ``MADV_WILLNEED`` (the kernel reads the file ahead) and
    anything else nothing.  A hint only: nothing about ``data`` changes.  Returns False (not populated)."""
    import mmap

    with memoryview(data) as view:  # (a TypeError for what is not a buffer, as in the compiled codec)
        n = view.nbytes
    end = n if end < 0 or end > n else end
    start = max(start, 0)
    if start < end and isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_WILLNEED") and not data.closed:
        aligned = start - start % mmap.PAGESIZE
        try:
            data.madvise(mmap.MADV_WILLNEED, aligned, end - aligned)
        except (OSError, ValueError):
            pass
    return False


def populate_many(items) -> int:
    """``populate`` for each ``(data, start, end)``; items whose buffer cannot be had are skipped.
    Returns how many were populated (none here)."""
    for data, start, end in list(items):
        try:
            populate(data, start, end)
        except (ValueError, BufferError):
            pass
    return 0


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of a bytes-like object; pass a previous result as ``crc`` to continue it."""
    table = _CRC32C_TABLE
    c = (crc ^ 0xFFFFFFFF) & 0xFFFFFFFF
    for b in memoryview(data).cast("B"):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


# ---------------------------------------------------------------------------------------- sequences
def _i32(x: int) -> int:
    """Java int arithmetic: wrap to a signed 32-bit value."""
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence`` (Java int arithmetic): after 2147483647 comes 0."""
    if sequence > _i32(INT32_MAX - increment):
        return _i32(increment - (INT32_MAX - sequence) - 1)
    return _i32(sequence + increment)


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: before 0 comes 2147483647."""
    if sequence < decrement:
        return _i32(INT32_MAX - (decrement - sequence) + 1)
    return _i32(sequence - decrement)


# ------------------------------------------------------------------------------------------ varints
def _read_varint(buf, pos: int, end: int, base: int, boffset):
    """Zigzag int32 varint as Java's ByteUtils.readVarint (lenient about excess bits)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise InvalidRecordError("truncated varint", base + pos, boffset)
        b = buf[pos]
        pos += 1
        if b & 0x80:
            value |= (b & 0x7F) << shift
            shift += 7
            if shift > 28:
                raise InvalidRecordError(
                    "varint is too long, the most significant bit in the 5th byte is set", base + pos - 1, boffset
                )
        else:
            value |= b << shift
            break
    value &= 0xFFFFFFFF
    return (value >> 1) ^ -(value & 1), pos


def _read_varlong(buf, pos: int, end: int, base: int, boffset):
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise InvalidRecordError("truncated varlong", base + pos, boffset)
        b = buf[pos]
        pos += 1
        if b & 0x80:
            value |= (b & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise InvalidRecordError(
                    "varlong is too long, the most significant bit in the 10th byte is set", base + pos - 1, boffset
                )
        else:
            value |= b << shift
            break
    value &= 0xFFFFFFFFFFFFFFFF
    return (value >> 1) ^ -(value & 1), pos


def _zigzag_varint(out: bytearray, v: int) -> None:
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _varint_size(v: int) -> int:
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


# ------------------------------------------------------------------------------------------ records
class Record:
    """One record: ``offset, timestamp, key, value, headers`` (+ its producer ``sequence``)."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers", "sequence")

    def __init__(self, offset, timestamp, key, value, headers=(), sequence=-1):
        self.offset = int(offset)
        self.timestamp = int(timestamp)
        self.key = as_bytes(key, "key")
        self.value = as_bytes(value, "value")
        self.headers = as_headers(headers)
        self.sequence = int(sequence)

    def _tuple(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.sequence)

    def __eq__(self, other):
        if not hasattr(other, "sequence") or not hasattr(other, "headers"):
            return NotImplemented
        return self._tuple() == (other.offset, other.timestamp, other.key, other.value, other.headers, other.sequence)

    __hash__ = None

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r}, sequence={self.sequence})"
        )


def _decode_v2_records(buf, pos, end, base, batch, out, fetch_offset, limit_offset):
    """Decode ``batch.records_count`` records from buf[pos:end]; ``base`` maps positions to the caller's."""
    boff = batch.base_offset
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    log_append = batch.attributes & TIMESTAMP_TYPE_MASK
    max_ts = batch.max_timestamp
    base_seq = batch.base_sequence
    count = batch.records_count
    for _ in range(count):
        if pos >= end:
            raise InvalidRecordError("incorrect declared batch size, premature EOF reached", base + pos, boff)
        start = pos
        length, pos = _read_varint(buf, pos, end, base, boff)
        body = pos
        if length < 0 or length > end - pos:
            raise InvalidRecordError(
                f"invalid record size: expected {length} bytes in record payload, "
                f"but the buffer has only {end - pos} remaining bytes",
                base + start,
                boff,
            )
        rend = pos + length
        if length < 1:
            raise InvalidRecordError(
                f"invalid record size: expected to read {length} bytes in record payload, but instead read 1",
                base + start,
                boff,
            )
        pos += 1  # attributes: no bits defined, ignored
        ts_delta, pos = _read_varlong(buf, pos, rend, base, boff)
        off_delta, pos = _read_varint(buf, pos, rend, base, boff)
        klen, pos = _read_varint(buf, pos, rend, base, boff)
        if klen >= 0:
            if klen > rend - pos:
                raise InvalidRecordError("found invalid record structure: key runs past the record", base + pos, boff)
            key = bytes(buf[pos : pos + klen])
            pos += klen
        else:
            key = None
        vlen, pos = _read_varint(buf, pos, rend, base, boff)
        if vlen >= 0:
            if vlen > rend - pos:
                raise InvalidRecordError(
                    "found invalid record structure: value runs past the record", base + pos, boff
                )
            value = bytes(buf[pos : pos + vlen])
            pos += vlen
        else:
            value = None
        hcount, pos = _read_varint(buf, pos, rend, base, boff)
        if hcount < 0 or hcount > rend - pos:
            raise InvalidRecordError(f"found invalid number of record headers {hcount}", base + pos, boff)
        if hcount:
            hs = []
            for _h in range(hcount):
                hklen, pos = _read_varint(buf, pos, rend, base, boff)
                if hklen < 0:
                    raise InvalidRecordError("invalid negative header key size", base + pos, boff)
                if hklen > rend - pos:
                    raise InvalidRecordError("header key runs past the record", base + pos, boff)
                hkey = bytes(buf[pos : pos + hklen]).decode("utf-8", "surrogateescape")
                pos += hklen
                hvlen, pos = _read_varint(buf, pos, rend, base, boff)
                if hvlen >= 0:
                    if hvlen > rend - pos:
                        raise InvalidRecordError("header value runs past the record", base + pos, boff)
                    hval = bytes(buf[pos : pos + hvlen])
                    pos += hvlen
                else:
                    hval = None
                hs.append((hkey, hval))
            headers = tuple(hs)
        else:
            headers = ()
        if pos != rend:
            raise InvalidRecordError(
                f"invalid record size: expected to read {length} bytes in record payload, but instead read "
                f"{pos - body}",
                base + start,
                boff,
            )
        offset = base_offset + off_delta
        if not INT64_MIN <= offset <= INT64_MAX:
            offset = i64(offset)  # Java long arithmetic (DefaultRecord.readFrom)
        if offset < fetch_offset or offset >= limit_offset:
            continue
        if log_append:
            ts = max_ts
        else:
            ts = base_ts + ts_delta
            if not INT64_MIN <= ts <= INT64_MAX:
                ts = i64(ts)
        seq = increment_sequence(base_seq, off_delta) if base_seq >= 0 else -1
        out.append(Record(offset, ts, key, value, headers, seq))
    if pos != end:
        raise InvalidRecordError(
            "incorrect declared batch size, records still remaining in file", base + pos, boff
        )


def _in_payload(exc, start):
    """Re-point an error found in a decompressed payload at the payload's start in the caller's buffer."""
    return type(exc)(f"{exc.reason} (at byte {exc.position} of the decompressed payload)", start, exc.base_offset)


# ------------------------------------------------------------------------------------------ batches
def _entry_size(buf, pos: int, end: int):
    """Size of the complete entry at ``buf[pos]`` (positions in ``buf``), or None when ``buf[:end]`` ends
    before it (a truncated tail); CorruptRecordError for a size or magic no entry can have."""
    left = end - pos
    if left < LOG_OVERHEAD:
        return None
    size = struct.unpack_from(">i", buf, pos + 8)[0]
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})", pos
        )
    if left < 17:
        return None
    magic = struct.unpack_from(">b", buf, pos + 16)[0]
    if magic < 0 or magic > 2:
        raise CorruptRecordError(f"invalid magic found in record: {magic}", pos + 16)
    total = size + LOG_OVERHEAD
    return total if left >= total else None


def _check_codec(cid, position, base_offset):
    if cid > 4:
        raise UnsupportedCompressionError(f"unknown compression type id {cid}", position, base_offset)


class RecordBatch:
    """One entry of a log: a v2 record batch, or a legacy (magic 0/1) message or compressed wrapper."""

    __slots__ = (
        "_buf", "position", "size_in_bytes", "magic", "base_offset", "last_offset_delta",
        "partition_leader_epoch", "crc", "attributes", "base_timestamp", "max_timestamp",
        "producer_id", "producer_epoch", "base_sequence", "records_count", "_max_decompressed",
        "_legacy_records", "_legacy_last_offset", "_verify",
    )  # fmt: skip

    def __init__(self, data, position=0, size=None, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                 verify_crc=True):  # fmt: skip
        buf = byte_view(data)
        if position < 0 or position > len(buf):
            raise ValueError(f"position {position} is outside the buffer of {len(buf)} bytes")
        if size is None:
            size = _entry_size(buf, position, len(buf))
            if size is None:
                raise CorruptRecordError("incomplete entry", position)
        elif size < LOG_OVERHEAD + 5 or size > len(buf) - position:
            raise ValueError(f"size {size} does not fit the buffer at position {position}")
        self._buf = buf
        self._verify = verify_crc
        self.position = position
        self.size_in_bytes = size
        self._max_decompressed = max_decompressed_size
        self._legacy_records = None
        magic = struct.unpack_from(">b", buf, position + 16)[0]
        self.magic = magic
        if magic >= 2:
            if size < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"record batch size {size} is smaller than the minimum {RECORD_BATCH_OVERHEAD}", position
                )
            (
                self.base_offset, _length, self.partition_leader_epoch, _magic, self.crc, attributes,
                self.last_offset_delta, self.base_timestamp, self.max_timestamp, self.producer_id,
                self.producer_epoch, self.base_sequence, self.records_count,
            ) = _HEADER.unpack_from(buf, position)  # fmt: skip
            self.attributes = attributes & 0xFFFF
            _check_codec(attributes & 0x07, position + 21, self.base_offset)
            if self.records_count < 0:
                raise InvalidRecordError(
                    f"found invalid record count {self.records_count}", position + 57, self.base_offset
                )
            if verify_crc:
                self.validate_crc()
        else:
            self._init_legacy(buf, position, size, magic)  # (the legacy parser checks the CRCs)

    # -- legacy ------------------------------------------------------------------------------------
    def _init_legacy(self, buf, position, size, magic):
        (
            self.base_offset, self._legacy_last_offset, self.crc, self.attributes, ts, self._legacy_records,
        ) = _legacy.parse_legacy(buf, position, size, self._max_decompressed, self._verify, Record)  # fmt: skip
        self.partition_leader_epoch = -1
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.base_timestamp = ts
        self.max_timestamp = ts
        self.last_offset_delta = self._legacy_last_offset - self.base_offset
        self.records_count = len(self._legacy_records)

    # -- derived fields ----------------------------------------------------------------------------
    @property
    def last_offset(self) -> int:
        if self.magic < 2:
            return self._legacy_last_offset
        return i64(self.base_offset + self.last_offset_delta)  # (Java long arithmetic, as lastOffset())

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES[self.attributes & 0x07]

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "no_timestamp_type"
        return "log_append_time" if self.attributes & TIMESTAMP_TYPE_MASK else "create_time"

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self):
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    # -- CRC ---------------------------------------------------------------------------------------
    def compute_crc(self) -> int:
        start = self.position
        end = start + self.size_in_bytes
        if self.magic >= 2:
            return crc32c(memoryview(self._buf)[start + 21 : end])
        return _legacy.legacy_crc(self._buf, start, self.size_in_bytes)

    @property
    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate_crc(self) -> None:
        computed = self.compute_crc()
        if computed != self.crc:
            raise CrcMismatchError(
                f"record is corrupt (stored crc = {self.crc}, computed crc = {computed})",
                self.position,
                self.base_offset,
            )

    def tobytes(self) -> bytes:
        return bytes(memoryview(self._buf)[self.position : self.position + self.size_in_bytes])

    # -- records -----------------------------------------------------------------------------------
    def _decode_into(self, out, fetch_offset=-(1 << 63), limit_offset=1 << 63, ahead=None):
        if self.magic < 2:
            self._legacy_into(out, fetch_offset, limit_offset)
            return
        if self.records_count == 0:
            return  # an empty (cleaned) batch: never look at its payload
        start = self.position + RECORD_BATCH_OVERHEAD
        end = self.position + self.size_in_bytes
        cid = self.attributes & 0x07
        if cid == 0:
            _decode_v2_records(self._buf, start, end, 0, self, out, fetch_offset, limit_offset)
            return
        payload = None
        if ahead is not None:  # a compression.InflateAhead over this batch's buffer
            try:
                payload = ahead.take(start)
            except (CorruptRecordError, DecompressedSizeError) as exc:
                raise type(exc)(f"{exc.reason} (compressed payload)", start, self.base_offset) from None
        if payload is None:
            payload = self._inflate(start, end, cid)
        try:
            _decode_v2_records(payload, 0, len(payload), 0, self, out, fetch_offset, limit_offset)
        except CorruptRecordError as exc:
            raise _in_payload(exc, start) from None

    def _inflate(self, start, end, cid):
        try:
            return _compression.decompress(cid, memoryview(self._buf)[start:end], self._max_decompressed, 2)
        except (CorruptRecordError, DecompressedSizeError) as exc:
            raise type(exc)(f"{exc.reason} (compressed payload)", start, self.base_offset) from None

    def _legacy_into(self, out, fetch_offset, limit_offset):
        for r in self._legacy_records:
            if fetch_offset <= r.offset < limit_offset:
                out.append(r)

    def records(self) -> list:
        out = []
        self._decode_into(out)
        return out

    def record_summary(self) -> RecordSummary:
        """How many records, their smallest and largest timestamp other than -1, whether their offset deltas
        are 0, 1, 2, ... (see the compiled codec)."""
        return summary_of(self.records(), self.base_offset)

    def __iter__(self):
        return iter(self.records())

    def control_record(self):
        """The parsed first control record of a control batch (a marker's type and coordinator epoch),
        or ``None`` for a data batch or an empty (cleaned) control batch."""
        if not self.is_control or self.records_count == 0:
            return None
        return _control.parse_control_record(self.records()[0], self.position, self.base_offset)

    def first_control_type(self) -> int:
        """Type of the first control record (0 ABORT, 1 COMMIT, ...), or -1 if not a marker batch."""
        if not self.is_control or self.records_count == 0:
            return -1
        out = []
        self._decode_into(out)
        key = out[0].key
        if key is None or len(key) < 4:
            raise InvalidRecordError("control record key is shorter than 4 bytes", self.position, self.base_offset)
        version, ctype = struct.unpack_from(">hh", key)
        if version < 0:
            raise InvalidRecordError(
                f"invalid version {version} of control record key, may indicate data corruption",
                self.position,
                self.base_offset,
            )
        return ctype

    def __repr__(self):
        return (
            f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, magic={self.magic}, records_count={self.records_count}, "
            f"compression={self.compression!r}, producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence}, "
            f"is_transactional={self.is_transactional}, is_control={self.is_control})"
        )


class BatchIterator:
    """Iterates the entries of a buffer; ``valid_bytes``/``trailing_bytes`` tell where it stopped."""

    __slots__ = ("_buf", "_view", "_pos", "_end", "_verify", "_max", "_done")

    def __init__(self, data, verify_crc=True, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        view = byte_view(data)
        self._view = view
        self._buf = view
        self._pos = 0
        self._end = len(view)
        self._verify = verify_crc
        self._max = max_decompressed_size
        self._done = False

    @property
    def valid_bytes(self) -> int:
        """Bytes of complete entries returned so far."""
        return self._pos

    @property
    def trailing_bytes(self) -> int:
        """Bytes after the last complete entry (a truncated tail, once iteration stopped)."""
        return self._end - self._pos

    @property
    def position(self) -> int:
        return self._pos

    def __iter__(self):
        return self

    def __next__(self) -> RecordBatch:
        if self._done:
            raise StopIteration
        pos = self._pos
        total = _entry_size(self._buf, pos, self._end)
        if total is None:
            self._done = True
            raise StopIteration
        batch = RecordBatch(self._buf, pos, total, self._max, self._verify)  # (its CRC checked there)
        self._pos = pos + total
        return batch


def iter_batches(data, *, verify_crc: bool = True, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Iterate the batches in ``data`` (bytes, bytearray, memoryview, mmap) without copying it."""
    return BatchIterator(data, verify_crc, max_decompressed_size)


# --------------------------------------------------------------------------------- read_committed
def _compressed_spans(view, end: int) -> list:
    """(payload start, end, codec id) of the complete compressed v2 data batches with records in
    ``view[:end]``, in order (what compression.InflateAhead inflates; anything malformed ends the list)."""
    spans = []
    pos = 0
    while end - pos >= RECORD_BATCH_OVERHEAD:
        (length,) = _BE_I32.unpack_from(view, pos + LENGTH_OFFSET)
        if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end - pos < length + LOG_OVERHEAD:
            break
        size = length + LOG_OVERHEAD
        if view[pos + MAGIC_OFFSET] == 2:
            (attributes,) = _BE_I16.unpack_from(view, pos + ATTRIBUTES_OFFSET)
            (count,) = _BE_I32.unpack_from(view, pos + RECORDS_COUNT_OFFSET)
            if attributes & COMPRESSION_CODEC_MASK and not attributes & CONTROL_FLAG_MASK and count > 0:
                spans.append((pos + RECORD_BATCH_OVERHEAD, pos + size, attributes & COMPRESSION_CODEC_MASK))
        pos += size
    return spans


class ReadCommittedFilter:
    """Kafka's consumer visibility rules, carried across successive chunks of one partition.

    Feed it the record bytes of one partition in order (consecutive Fetch responses, or a segment in
    arbitrary pieces); an incomplete batch at the end of a chunk is kept and completed by the next one.
    A Fetch response's cut-off last batch (and a batch held back at the last stable offset) is sent again
    whole by the next fetch, from ``next_offset``: between Fetch responses, and before a fetch that starts
    over from an older offset, call :meth:`discard_pending`.
    One thread at a time: another thread feeding it or adding aborted transactions while it decodes gets a
    RuntimeError.
    """

    def __init__(
        self,
        aborted_transactions=None,
        *,
        isolation: str = "read_committed",
        last_stable_offset=None,
        fetch_offset=None,
        verify_crc: bool = True,
        max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
        inflate_threads: int | None = None,
    ):
        # (int64, as the compiled filter keeps them: the same TypeError/OverflowError on both backends)
        if last_stable_offset is not None:
            last_stable_offset = int64_arg(last_stable_offset, "last_stable_offset")
        if fetch_offset is not None:
            fetch_offset = int64_arg(fetch_offset, "fetch_offset")
        self._committed = isolation_flag(isolation)
        self._heap = []
        self._seen = set()
        self._aborted_pids = {}  # producer id -> first offset of the aborted transaction it is inside of
        self.last_stable_offset = last_stable_offset
        self.next_offset = fetch_offset
        self._verify = verify_crc
        self._max = max_decompressed_size
        self._threads = _compression.check_inflate_threads(inflate_threads)
        self._pending = b""
        self._busy = False  # decoding: another thread touching the filter gets a RuntimeError
        if aborted_transactions:
            self.add_aborted_transactions(aborted_transactions)

    def _check_idle(self):
        if self._busy:
            raise RuntimeError("this ReadCommittedFilter is decoding on another thread: a filter reads one "
                               "partition's log in order, from one thread at a time")

    def add_aborted_transactions(self, aborted_transactions) -> None:
        """Add ``(producer_id, first_offset)`` pairs, in any order (duplicates are ignored)."""
        if not self._committed:
            return  # under read_uncommitted the list is ignored, as Kafka's consumer does
        self._check_idle()
        self._busy = True  # (iterating the argument runs Python code: a feed on another thread meanwhile raises)
        try:
            for pair in new_aborted_pairs(aborted_transactions, self._seen):
                heapq.heappush(self._heap, pair)
        finally:
            self._busy = False

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete batch held back until the next chunk completes it."""
        return len(self._pending)

    def discard_pending(self) -> int:
        """Drop the bytes held back (:attr:`pending_bytes`), as a consumer drops the cut-off end of a Fetch
        response: the next fetch, from ``next_offset``, sends that batch again whole.  Returns how many."""
        self._check_idle()
        n = len(self._pending)
        self._pending = b""
        return n

    def feed(self, data) -> RecordList:
        """Decode one chunk; returns the visible records (``next_offset`` tells where to go on).

        An error raised at a damaged batch carries, in its ``records`` attribute, the visible records
        decoded before it (what the call would have returned up to there: ``next_offset`` is past them, as
        Kafka's consumer hands out the records before a corrupt one); the damaged batch and what follows
        are held back (:attr:`pending_bytes`)."""
        return self._feed(data, None)

    def feed_arrow(self, data, *, columns=None, large_binary: bool = False, binary_view: bool = False):
        """Like :meth:`feed`, but the visible records come back as one ``pyarrow.RecordBatch``.

        The schema metadata carries ``next_offset``, ``valid_bytes`` and ``trailing_bytes``.  (The
        twin builds ``binary_view`` columns from copies; only the compiled codec points into ``data``.)
        """
        schema = arrow_schema(columns, large_binary, binary_view)
        pairs = []
        res = self._feed(data, pairs)
        return _to_arrow(pairs, schema, large_binary, res)

    def feed_arrow_parts(self, parts, *, columns=None, large_binary: bool = False, binary_view: bool = False):
        """:meth:`feed_arrow` over each of ``parts`` in turn, all visible records in one RecordBatch.

        ``valid_bytes`` is the sum over the parts; an error names the failing part in its ``part``
        attribute (its position counts from the start of the bytes decoded with that part: those of an
        incomplete batch carried over from the parts before it, ``carried_bytes`` of them, then the part)."""
        schema = arrow_schema(columns, large_binary, binary_view)
        pairs = []
        valid = 0
        res = None
        for k, data in enumerate(parts):
            carried = len(self._pending)
            try:
                res = self._feed(data, pairs)
            except KafkaTxError as exc:
                exc.part = k
                exc.carried_bytes = carried
                raise
            valid += res.valid_bytes
        total = RecordList()
        total.valid_bytes = valid
        total.trailing_bytes = res.trailing_bytes if res is not None else len(self._pending)
        total.next_offset = self.next_offset
        return _to_arrow(pairs, schema, large_binary, total)

    def _feed(self, data, pairs):
        self._check_idle()
        self._busy = True
        try:
            return self._feed_idle(data, pairs)
        finally:
            self._busy = False

    def _feed_idle(self, data, pairs):
        if self._pending:
            data = self._pending + bytes(data)
        out = RecordList()
        it = BatchIterator(data, self._verify, self._max)
        lso = self.last_stable_offset if self._committed else None
        limit = (1 << 63) if lso is None else lso
        consumed = 0
        ahead = None
        if self._threads > 0:  # (INFLATE_AUTO: inline here, see compression.check_inflate_threads)
            spans = _compressed_spans(it._view, it._end)
            if len(spans) >= 2:
                ahead = _compression.InflateAhead(it._view, spans, self._max, threads=self._threads)
        try:
            for batch in it:
                if batch.base_offset >= limit:
                    break  # beyond the last stable offset: kept pending until the LSO moves
                self._process(batch, out, limit, pairs, ahead)
                if batch.last_offset >= limit:
                    break  # straddles the LSO: records below it are out, the batch stays pending
                consumed = batch.position + batch.size_in_bytes
        except KafkaTxError as exc:
            if pairs is None:  # feed(): the records before the error go with it
                exc.records = out
            raise
        finally:
            if ahead is not None:
                ahead.close()
            self._pending = bytes(it._view[consumed:])
            out.valid_bytes = consumed
            out.trailing_bytes = it._end - consumed
            out.next_offset = self.next_offset
        return out

    def _process(self, batch, out, limit, pairs, ahead=None):
        """Kafka's consumer rules for one batch.  Records below the next offset to fetch are skipped (a
        fetch that starts inside a batch, or a batch fed again), as Kafka's consumer does."""
        last = batch.last_offset
        floor = -(1 << 63) if self.next_offset is None else self.next_offset
        if self._committed and batch.producer_id >= 0:
            heap = self._heap
            while heap and heap[0][0] <= last:
                first, pid = heapq.heappop(heap)  # (the later first offset is the transaction it is inside of)
                self._aborted_pids[pid] = max(first, self._aborted_pids.get(pid, first))
            if batch.is_control:
                # An ABORT ends the producer's aborted transaction only if that began at or before the marker:
                # always so in log order, as Kafka's consumer sees markers, but an ABORT fed again (a fetch
                # that starts over below where the filter got to) lies below the producer's later aborted
                # transaction, already entered, and must not end it.
                if batch.first_control_type() == 0 and self._aborted_pids.get(batch.producer_id, last + 1) <= last:
                    del self._aborted_pids[batch.producer_id]
            elif batch.is_transactional and batch.producer_id in self._aborted_pids:
                self._advance(min(last + 1, limit, INT64_MAX))
                return
        if not batch.is_control:  # control records are never returned
            if pairs is None:
                batch._decode_into(out, floor, limit, ahead)
            else:
                recs = []
                batch._decode_into(recs, floor, limit, ahead)
                pairs.extend((r, batch) for r in recs)
        # (after a batch ending at 2^63-1, Long.MAX_VALUE, the next offset stays there: past it Java's long
        # wraps, and the compiled codec keeps offsets in int64)
        self._advance(min(last + 1, limit, INT64_MAX))

    def _advance(self, offset):
        if self.next_offset is None or offset > self.next_offset:
            self.next_offset = offset


def decode_records(
    data,
    *,
    isolation: str = "read_uncommitted",
    aborted_transactions=None,
    last_stable_offset=None,
    fetch_offset=None,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    inflate_threads: int | None = None,
) -> RecordList:
    """All visible data records of all batches in ``data``, as Kafka's consumer would return them.

    Control records are never returned.  Under ``read_committed``, records of aborted transactions
    (``aborted_transactions`` as ``(producer_id, first_offset)`` pairs, any order) and records at or
    beyond ``last_stable_offset`` are hidden.  A truncated final batch is left out and counted in
    ``trailing_bytes``.
    """
    f = ReadCommittedFilter(
        aborted_transactions,
        isolation=isolation,
        last_stable_offset=last_stable_offset,
        fetch_offset=fetch_offset,
        verify_crc=verify_crc,
        max_decompressed_size=max_decompressed_size,
        inflate_threads=inflate_threads,
    )
    return f.feed(data)


_buffer_cache_limit = 256 << 20


def buffer_cache_limit(limit=None):
    """The compiled codec's cache of idle column memory, same contract; this twin builds its columns
    through pyarrow directly and caches nothing, so only the number is kept."""
    global _buffer_cache_limit
    old = _buffer_cache_limit
    if limit is not None:
        if limit < 0:
            raise ValueError(f"the buffer cache limit must be >= 0, got {limit}")
        _buffer_cache_limit = limit
    return old


def buffer_cache_bytes():
    """Bytes of idle column memory in the cache now: always 0 for this twin."""
    return 0


def decode_arrow(
    data,
    *,
    isolation: str = "read_uncommitted",
    aborted_transactions=None,
    last_stable_offset=None,
    fetch_offset=None,
    verify_crc: bool = True,
    columns=None,
    large_binary: bool = False,
    binary_view: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    inflate_threads: int | None = None,
):
    """The visible records of ``data`` as one ``pyarrow.RecordBatch`` (see the compiled codec's docs)."""
    f = ReadCommittedFilter(
        aborted_transactions,
        isolation=isolation,
        last_stable_offset=last_stable_offset,
        fetch_offset=fetch_offset,
        verify_crc=verify_crc,
        max_decompressed_size=max_decompressed_size,
        inflate_threads=inflate_threads,
    )
    return f.feed_arrow(data, columns=columns, large_binary=large_binary, binary_view=binary_view)


def _to_arrow(pairs, schema, large_binary, res):
    import pyarrow as pa

    limit = None if large_binary else INT32_MAX
    getters = {
        "offset": lambda r, b: r.offset,
        "timestamp": lambda r, b: r.timestamp if r.timestamp != -1 else None,
        "timestamp_type": lambda r, b: -1 if b.magic == 0 else (1 if b.attributes & TIMESTAMP_TYPE_MASK else 0),
        "key": lambda r, b: r.key,
        "value": lambda r, b: r.value,
        "headers": lambda r, b: [
            {"key": k.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), "value": v} for k, v in r.headers
        ],
        "producer_id": lambda r, b: b.producer_id,
        "producer_epoch": lambda r, b: b.producer_epoch,
        "sequence": lambda r, b: r.sequence,
        "is_transactional": lambda r, b: b.is_transactional,
    }
    arrays = []
    for field in schema:
        get = getters[field.name]
        values = [get(r, b) for r, b in pairs]
        if limit is not None and field.name in ("key", "value"):
            if sum(len(v) for v in values if v is not None) > limit:
                raise DecompressedSizeError(
                    "decoded keys or values pass 2 GiB, the limit of 32-bit Arrow offsets: "
                    "decode smaller pieces or pass large_binary=True"
                )
        arrays.append(pa.array(values, type=field.type))
    meta = {"next_offset": str(res.next_offset), "valid_bytes": str(res.valid_bytes),
            "trailing_bytes": str(res.trailing_bytes)}  # fmt: skip
    return pa.RecordBatch.from_arrays(arrays, schema=schema.with_metadata(meta))


# -------------------------------------------------------------------------------------------- encode
class BatchBuilder:
    """Builds one v2 record batch, byte for byte as Kafka's ``MemoryRecordsBuilder`` does."""

    __slots__ = ("_base_offset", "_producer_id", "_producer_epoch", "_base_sequence", "_transactional",
                 "_partition_leader_epoch", "_log_append_time", "_delete_horizon_ms", "_cid", "_level", "_frames",
                 "_ts_type", "_records", "_count", "_last_offset", "_first_ts", "_max_ts", "_built",
                 "_building")  # fmt: skip

    def __init__(
        self,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        compression="none",
        compression_level=None,
        timestamp_type: str = "create_time",
        partition_leader_epoch: int = -1,
        log_append_time=None,
        delete_horizon_ms=None,
        zstd_frames: int = 1,
    ):
        if getattr(self, "_building", 0):
            raise RuntimeError(BUILDING_ERROR)
        self._building = 0
        base_offset, producer_id, producer_epoch, base_sequence, partition_leader_epoch, delete_horizon_ms = (
            check_builder_args(base_offset, producer_id, producer_epoch, base_sequence, transactional,
                               partition_leader_epoch, delete_horizon_ms)
        )  # fmt: skip
        ts_bits = timestamp_type_bits(timestamp_type)
        self._cid = _compression.codec_id(compression)
        self._level = _compression.check_level(self._cid, compression_level)
        self._frames = _compression.check_zstd_frames(zstd_frames)
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._transactional = bool(transactional)
        self._partition_leader_epoch = partition_leader_epoch
        self._ts_type = ts_bits
        if log_append_time is not None:
            log_append_time = int64_arg(log_append_time, "log_append_time")
        elif self._ts_type:
            log_append_time = time.time_ns() // 1_000_000
        self._log_append_time = log_append_time
        self._delete_horizon_ms = delete_horizon_ms
        self._records = bytearray()
        self._count = 0
        self._last_offset = None
        self._first_ts = None
        self._max_ts = -1
        self._built = False
        if delete_horizon_ms is not None:
            self._first_ts = delete_horizon_ms

    # read-only, as the compiled builder's: the batch header is fixed once records are in it
    base_offset = property(lambda self: self._base_offset)
    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    base_sequence = property(lambda self: self._base_sequence)
    transactional = property(lambda self: self._transactional)
    partition_leader_epoch = property(lambda self: self._partition_leader_epoch)
    log_append_time = property(lambda self: self._log_append_time)
    delete_horizon_ms = property(lambda self: self._delete_horizon_ms)

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def last_offset(self):
        return self._last_offset

    def size_in_bytes(self) -> int:
        """Size of the batch if built now, before compression."""
        return RECORD_BATCH_OVERHEAD + len(self._records) if self._count else 0

    def append(self, value, key=None, *, timestamp=None, headers=(), offset=None) -> int:
        """Append one record; returns its offset."""
        if self._built:
            raise InvalidAppendError(BUILT)
        last = self._last_offset
        if offset is None:
            if last is None:
                offset = self._base_offset
            elif last == INT64_MAX:  # Java's lastOffset + 1 wraps, and MemoryRecordsBuilder refuses it
                raise illegal_offset(i64(last + 1), last)
            else:
                offset = last + 1
        else:
            offset = int64_arg(offset, "offset")
            if last is not None and offset <= last:
                raise illegal_offset(offset, last)
            if offset < self._base_offset:
                raise InvalidAppendError(f"offset {offset} is below the batch base offset {self._base_offset}")
        delta = offset - self._base_offset
        if delta > INT32_MAX:
            raise InvalidAppendError(f"offset {offset} is more than 2^31-1 past the base offset")
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        else:
            timestamp = int64_arg(timestamp, "timestamp")
            if timestamp < 0 and timestamp != -1:
                raise InvalidAppendError(f"invalid negative timestamp {timestamp}")
        if self._count == INT32_MAX:
            raise InvalidAppendError("a batch holds at most 2^31-1 records")
        first_ts = timestamp if self._first_ts is None else self._first_ts
        ts_delta = i64(timestamp - first_ts)  # Java long arithmetic, as MemoryRecordsBuilder
        body = bytearray(b"\x00")
        _zigzag_varint(body, ts_delta)
        _zigzag_varint(body, delta)
        _append_bytes(body, key, "key")
        _append_bytes(body, value, "value")
        hs = list(headers) if headers else ()
        _zigzag_varint(body, len(hs))
        for h in hs:
            try:
                hk, hv = h
            except (TypeError, ValueError):
                raise InvalidAppendError(f"a header must be a (key, value) pair, got {h!r}") from None
            if hk is None:
                raise InvalidAppendError("invalid null header key found in headers")
            if isinstance(hk, str):
                hk = header_key_bytes(hk)
            _append_bytes(body, hk, "header key")
            _append_bytes(body, hv, "header value")
        if len(body) > INT32_MAX:
            raise InvalidAppendError("record larger than 2^31-1 bytes")
        rec = self._records
        _zigzag_varint(rec, len(body))
        rec += body
        if len(rec) + RECORD_BATCH_OVERHEAD > INT32_MAX:
            del rec[len(rec) - len(body) - _varint_size(len(body)) :]
            raise InvalidAppendError("batch larger than 2^31-1 bytes")
        self._first_ts = first_ts
        self._count += 1
        self._last_offset = offset
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        return offset

    def build(self) -> bytes:
        """The finished batch (empty bytes if nothing was appended, as Kafka returns an empty set).

        Like MemoryRecordsBuilder.close(), it ends the appends: append() afterwards raises
        InvalidAppendError.  Building again returns the same bytes."""
        self._built = True
        if not self._count:
            return b""
        self._building += 1
        try:
            return self._build()
        finally:
            self._building -= 1

    def _build(self) -> bytes:
        payload = (self._records if self._cid == 0 else
                   _compression.compress(self._cid, self._records, self._level, self._frames))
        return _write_batch(
            self._base_offset,
            self._partition_leader_epoch,
            self._cid | self._ts_type | (TRANSACTIONAL_FLAG_MASK if self._transactional else 0)
            | (DELETE_HORIZON_FLAG_MASK if self._delete_horizon_ms is not None else 0),
            self._last_offset - self._base_offset,
            self._first_ts,
            self._log_append_time if self._ts_type else self._max_ts,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
            payload,
        )


def _append_bytes(out: bytearray, data, what: str) -> None:
    if data is None:
        out.append(0x01)  # zigzag(-1)
        return
    try:
        mv = memoryview(data)
    except TypeError:
        raise bytes_error(data, what) from None
    if not mv.c_contiguous:
        raise bytes_error(data, what)
    n = mv.nbytes
    _zigzag_varint(out, n)
    out += mv.cast("B") if mv.ndim != 1 or mv.itemsize != 1 else mv


def _write_batch(base_offset, leader_epoch, attributes, last_offset_delta, base_ts, max_ts, producer_id,
                 producer_epoch, base_sequence, count, payload) -> bytes:  # fmt: skip
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        out, 0, base_offset, length, leader_epoch, 2, 0, attributes, last_offset_delta, base_ts, max_ts,
        producer_id, producer_epoch, base_sequence, count,
    )  # fmt: skip
    out[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


# --------------------------------------------------------------------------------------------- scans
_SCAN_COLUMNS = (
    ("position", "q"), ("base_offset", "q"), ("last_offset", "q"), ("producer_id", "q"), ("max_timestamp", "q"),
    ("base_sequence", "i"), ("records_count", "i"), ("size_in_bytes", "i"), ("producer_epoch", "h"),
    ("attributes", "h"), ("magic", "b"), ("control_type", "h"),
)  # fmt: skip

# control_type values that are not a control record type (see scan_batches)
CONTROL_NONE, CONTROL_CRC, CONTROL_UNKNOWN = -1, -2, -3
_SCAN_WINDOW = 65536  # the largest control batch scan_batches_fd reads whole


def scan_batches(data, *, verify_crc: bool = False, verify_control: bool = False) -> dict:
    """Header fields of every complete batch in ``data`` as columns, without decoding any record.

    Returns a dict of ``array.array`` columns (``position, base_offset, last_offset, producer_id,
    max_timestamp`` int64; ``base_sequence, records_count, size_in_bytes`` int32; ``producer_epoch,
    attributes, control_type`` int16; ``magic`` int8) plus ``valid_bytes`` and ``trailing_bytes``.  Legacy
    entries report their entry offset and ``records_count`` -1.  ``control_type``: see the compiled
    codec's ``scan_batches``.
    """
    view = data if isinstance(data, (bytes, bytearray)) else byte_view(data)
    return _scan_entries(lambda pos, left: (view, pos, left), len(view), view if verify_crc else None,
                         lambda pos, total: (view, pos), verify_control and not verify_crc)  # fmt: skip


def scan_batches_fd(fd: int, start: int, end: int, *, verify_control: bool = False) -> dict:
    """``scan_batches(file bytes [start, end))`` of the open file ``fd`` (positions relative to
    ``start``), reading only each entry's header and each control batch (``os.pread``).  No CRC check but
    ``verify_control``'s.  Same columns, same errors; OSError if a read fails."""
    if start < 0 or end < start:
        raise ValueError(f"bad file range [{start}, {end})")
    size = end - start  # (trailing_bytes are counted to the end asked for)
    end = max(start, min(end, os.fstat(fd).st_size))  # a file cut since its size was taken ends sooner

    def window(pos, left):
        header = os.pread(fd, min(left, RECORD_BATCH_OVERHEAD), start + pos)
        short = len(header) < min(left, RECORD_BATCH_OVERHEAD)  # the file is shorter than it was
        return header, 0, len(header) if short else left

    def whole(pos, total):
        if total > _SCAN_WINDOW:
            return None, 0
        data = os.pread(fd, total, start + pos)
        return (data, 0) if len(data) == total else (None, 0)

    cols = _scan_entries(window, end - start, None, whole, verify_control)
    cols["trailing_bytes"] = size - cols["valid_bytes"]
    return cols


def _control_type(whole, pos, total, attrs, count, crc, verify) -> int:
    """The control_type column's value for the v2 batch at ``pos`` (``whole(pos, total)``: its bytes)."""
    if not attrs & CONTROL_FLAG_MASK or count == 0:
        return CONTROL_NONE
    if attrs & COMPRESSION_CODEC_MASK or count != 1:
        return CONTROL_UNKNOWN  # (Kafka writes one record per marker batch, uncompressed)
    buf, at = whole(pos, total)
    if buf is None:
        return CONTROL_UNKNOWN
    if verify and crc32c(memoryview(buf)[at + 21 : at + total]) != crc:
        return CONTROL_CRC
    try:
        ctype = RecordBatch(buf, at, total, DEFAULT_MAX_DECOMPRESSED_SIZE, False).first_control_type()
    except KafkaTxError:
        return CONTROL_UNKNOWN
    return ctype if ctype >= 0 else CONTROL_UNKNOWN


def _scan_entries(window, end: int, crc_view, whole, verify_control: bool) -> dict:
    """The scan behind both: ``window(pos, left)`` gives ``(buffer, at, left)``, the entry at ``pos``
    starting at ``buffer[at]`` with at least ``min(left, RECORD_BATCH_OVERHEAD)`` bytes there;
    ``crc_view``: the whole input, to check CRCs in; ``whole(pos, total)``: ``(buffer, at)`` holding the
    whole entry, or ``(None, 0)``."""
    import array

    cols = {name: array.array(code) for name, code in _SCAN_COLUMNS}
    pos = 0
    while True:
        buf, at, left = window(pos, end - pos)
        if left < LOG_OVERHEAD:
            break
        size = struct.unpack_from(">i", buf, at + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})", pos
            )
        if left < 17:
            break
        magic = struct.unpack_from(">b", buf, at + 16)[0]
        if magic < 0 or magic > 2:
            raise CorruptRecordError(f"invalid magic found in record: {magic}", pos + 16)
        total = size + LOG_OVERHEAD
        if left < total:
            break
        if magic >= 2:
            if total < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"record batch is smaller than the minimum {RECORD_BATCH_OVERHEAD} bytes", pos
                )
            (boff, _l, _ple, _m, crc, attrs, lod, _bts, maxts, pid, epoch, bseq, count) = _HEADER.unpack_from(buf, at)
            if crc_view is not None and crc32c(memoryview(crc_view)[pos + 21 : pos + total]) != crc:
                RecordBatch(crc_view, pos, total, DEFAULT_MAX_DECOMPRESSED_SIZE, True)  # (raises CrcMismatchError)
            ctype = _control_type(whole, pos, total, attrs, count, crc, verify_control)
            row = (pos, boff, i64(boff + lod), pid, maxts, bseq, count, total, epoch, attrs, magic, ctype)
        else:
            (boff,) = struct.unpack_from(">q", buf, at)
            maxts = struct.unpack_from(">q", buf, at + 18)[0] if magic == 1 and total >= 26 else -1
            row = (pos, boff, boff, -1, maxts, -1, -1, total, -1, buf[at + 17], magic, CONTROL_NONE)
        for (name, _code), v in zip(_SCAN_COLUMNS, row):
            cols[name].append(v)
        pos += total
    cols["valid_bytes"] = pos
    cols["trailing_bytes"] = end - pos
    return cols


def replay_transactions(position, base_offset, producer_id, attributes, magic, size_in_bytes, control_type,
                        open_txns: dict, opened_at: dict, aborted: list, segment, high_watermark: int,
                        from_offset=None, resolve=None, entry=None):
    """Replay one segment's batch headers through Kafka's transaction rules; see the compiled codec."""
    n = len(base_offset)
    if min(len(position), len(producer_id), len(attributes), len(magic), len(size_in_bytes), len(control_type)) < n:
        raise ValueError("the header columns differ in length")
    unreplicated = None
    for i in range(n):
        a = attributes[i]
        pid = producer_id[i]
        if not a & TRANSACTIONAL_FLAG_MASK or magic[i] < 2 or pid < 0:
            continue
        b = base_offset[i]
        if from_offset is not None and b < from_offset:
            continue  # before the snapshot: its state is in open_txns
        pid = int(pid)
        if not a & CONTROL_FLAG_MASK:
            if pid not in open_txns:
                open_txns[pid] = int(b)
                opened_at[pid] = (segment, int(position[i]), int(size_in_bytes[i]))
            continue
        first = open_txns.get(pid)
        if first is None:
            continue  # a marker without data on this partition
        ctype = control_type[i]
        if ctype < CONTROL_NONE:
            if resolve is None:
                raise ValueError(f"the control batch of row {i} needs resolve()")
            ctype = resolve(i)
        if ctype not in (0, 1):
            continue  # empty control batch (cleaned) or not a transaction marker
        del open_txns[pid]
        if b >= high_watermark and (unreplicated is None or first < unreplicated):
            unreplicated = first
        if ctype == 0:
            lso = min(open_txns.values()) if open_txns else int(b) + 1
            aborted.append((pid, first, int(b), lso) if entry is None else entry(pid, first, int(b), lso))
    return unreplicated


def encode_arrow(table, *, records_per_batch=1000, base_offset=0, producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False, compression="none", compression_level=None,
                 timestamp_type="create_time", partition_leader_epoch=-1, timestamp=None,
                 zstd_frames=1) -> bytes:  # fmt: skip
    """Encode the rows of a ``pyarrow.Table``/``RecordBatch`` as consecutive v2 record batches."""
    import pyarrow as pa

    base_offset, producer_id, producer_epoch, base_sequence, partition_leader_epoch, _ = check_builder_args(
        base_offset, producer_id, producer_epoch, base_sequence, transactional, partition_leader_epoch, None)
    # (in the compiled encode_arrow's order: the codec, its level, zstd_frames, the timestamp type)
    compression_level = _compression.check_level(_compression.codec_id(compression), compression_level)
    _compression.check_zstd_frames(zstd_frames)
    timestamp_type_bits(timestamp_type)
    default_ts = time.time_ns() // 1_000_000 if timestamp is None else int64_arg(timestamp, "timestamp")
    records_per_batch = check_records_per_batch(records_per_batch)
    table, tcol, header_rows = encode_table(table)
    names = set(table.column_names)

    def column(name):
        col = table.column(name)
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return [None if v is None else v.encode("utf-8") for v in col.to_pylist()]
        if not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)
                or pa.types.is_fixed_size_binary(t)):  # fmt: skip
            raise InvalidAppendError(f"column {name!r} must be binary or string, got {t}")
        return col.to_pylist()

    n = table.num_rows
    check_offsets_fit(base_offset, n)
    values = column("value")
    keys = column("key") if "key" in names else [None] * n
    stamps = [-1 if v is None else v for v in tcol.to_pylist()] if tcol is not None else [default_ts] * n
    headers = [hs or () for hs in header_rows] if header_rows is not None else [()] * n
    for i, ts in enumerate(stamps):
        if ts < 0 and ts != -1:
            raise InvalidAppendError(f"invalid negative timestamp {ts} in row {i}")
    out = []
    offset = base_offset
    seq = base_sequence
    for start in range(0, n, records_per_batch):
        stop = min(n, start + records_per_batch)
        b = BatchBuilder(
            base_offset=offset, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=seq,
            transactional=transactional, compression=compression, compression_level=compression_level,
            timestamp_type=timestamp_type, partition_leader_epoch=partition_leader_epoch, zstd_frames=zstd_frames,
        )  # fmt: skip
        for i in range(start, stop):
            b.append(values[i], keys[i], timestamp=stamps[i], headers=headers[i])
        out.append(b.build())
        offset += stop - start
        if seq >= 0:
            seq = increment_sequence(seq, stop - start)
    return b"".join(out)
