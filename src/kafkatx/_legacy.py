"""Legacy (magic v0/v1) message entries, shared by both codec backends.

Legacy data is rare (Kafka 4 writes only v2) and never hot, so one plain implementation serves the
compiled codec and its twin alike; each passes in its own ``Record`` class.
"""

from __future__ import annotations

import struct
import zlib

from . import compression as _compression
from ._consts import LOG_OVERHEAD, RECORD_OVERHEAD_V0, TIMESTAMP_TYPE_MASK
from ._common import i64
from .errors import (
    CorruptRecordError,
    CrcMismatchError,
    InvalidRecordError,
    KafkaTxError,
    UnsupportedCompressionError,
)

_ENTRY = struct.Struct(">qi")


def legacy_crc(buf, position: int, size: int) -> int:
    """CRC-32 (IEEE) of a legacy message: from its magic byte to its end."""
    return zlib.crc32(memoryview(buf)[position + 16 : position + size]) & 0xFFFFFFFF


def _message(buf, pos: int, end: int, where: int, offset: int):
    """Parse the legacy message at buf[pos:end] (after the 12-byte entry header).  Its key and value are read
    from where they start, as Kafka's LegacyRecord reads them: bytes after the value are not looked at."""
    magic = buf[pos + 4]
    p = pos + 6
    ts = -1
    if magic == 1:
        ts = struct.unpack_from(">q", buf, p)[0]
        p += 8
    parts = []
    for what in ("key", "value"):
        if end - p < 4:
            raise CorruptRecordError(f"legacy message {what} length runs past the message", where, offset)
        (n,) = struct.unpack_from(">i", buf, p)
        p += 4
        if n < 0:
            parts.append(None)
            continue
        if n > end - p:
            raise CorruptRecordError(f"legacy message {what} of {n} bytes runs past the message", where, offset)
        parts.append(bytes(buf[p : p + n]))
        p += n
    return ts, parts[0], parts[1]


def parse_legacy(buf, position: int, size: int, max_decompressed: int, verify_crc: bool, Record):
    """Decode one legacy entry of ``size`` bytes at ``position``.

    Returns ``(base_offset, last_offset, crc, attributes, timestamp, records)``.  With ``verify_crc`` the
    entry's CRC is checked first (CrcMismatchError), then those of the messages inside a compressed wrapper.
    A compressed wrapper is inflated here; its inner messages are read as Kafka's consumer reads them
    (``AbstractLegacyRecordBatch.DeepRecordsIterator``): their magic need not match the wrapper's (only the
    broker's validator insists), and under a v1 wrapper their offsets are relative, the wrapper offset being
    the absolute offset of the last inner message (unless it is 0), never below the last inner offset.
    Offsets and their shift are Java long arithmetic (wrapped to int64).
    """
    offset = _ENTRY.unpack_from(buf, position)[0]
    magic = buf[position + 16]
    overhead = 22 if magic == 1 else 14
    if size - LOG_OVERHEAD < overhead:
        raise CorruptRecordError(
            f"legacy message size {size - LOG_OVERHEAD} is smaller than the minimum {overhead}", position, offset
        )
    crc = struct.unpack_from(">I", buf, position + 12)[0]
    if verify_crc:
        computed = legacy_crc(buf, position, size)
        if computed != crc:
            raise CrcMismatchError(f"record is corrupt (stored crc = {crc}, computed crc = {computed})", position,
                                   offset)  # fmt: skip
    attributes = buf[position + 17]
    cid = attributes & 0x07
    if cid > 3:
        raise UnsupportedCompressionError(f"invalid legacy compression type id {cid}", position + 17, offset)
    ts, key, value = _message(buf, position + 12, position + size, position, offset)
    if not cid:
        return offset, offset, crc, attributes, ts, [Record(offset, ts, key, value, (), -1)]
    if value is None:
        raise CorruptRecordError("compressed legacy wrapper has a null value", position, offset)
    try:
        inner = _compression.decompress(cid, value, max_decompressed, magic)
    except KafkaTxError as exc:
        raise type(exc)(f"{exc.reason} (legacy wrapper payload)", position, offset) from None
    entries = []
    p = 0
    n = len(inner)
    # (Kafka's DataLogInputStream.nextBatch: an entry whose header or message is cut short by the end of the
    # inflated bytes ends them, a size below the minimum raises)
    while n - p >= LOG_OVERHEAD:
        ioff, isize = _ENTRY.unpack_from(inner, p)
        if isize < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"invalid inner legacy entry size {isize} in compressed wrapper", position, offset)
        if isize > n - p - LOG_OVERHEAD:
            break
        mstart = p + LOG_OVERHEAD
        mend = mstart + isize
        imagic = inner[mstart + 4]
        if imagic > 1:
            raise CorruptRecordError(f"invalid magic {imagic} of an inner legacy message", position, offset)
        if isize < (22 if imagic == 1 else 14):
            raise CorruptRecordError(f"inner legacy message of {isize} bytes is too short", position, offset)
        if inner[mstart + 5] & 0x07:
            raise CorruptRecordError("nested compression in a legacy wrapper", position, offset)
        if verify_crc:
            stored = struct.unpack_from(">I", inner, mstart)[0]
            computed = zlib.crc32(inner[mstart + 4 : mend]) & 0xFFFFFFFF
            if stored != computed:
                raise CrcMismatchError(
                    f"inner legacy message is corrupt (stored crc = {stored}, computed crc = {computed})",
                    position,
                    offset,
                )
        its, ikey, ival = _message(inner, mstart, mend, position, offset)
        entries.append((ioff, imagic, its, ikey, ival))
        p = mend
    if not entries:
        raise CorruptRecordError("compressed legacy wrapper holds no messages", position, offset)
    shift = 0
    if magic == 1 and offset != 0:
        last_inner = entries[-1][0]
        if offset < last_inner:
            raise InvalidRecordError(
                f"found invalid wrapper offset in compressed v1 message set, wrapper offset '{offset}' is less "
                f"than the last inner message offset '{last_inner}' and it is not zero",
                position,
                offset,
            )
        shift = i64(offset - last_inner)
    # LOG_APPEND_TIME on a v1 wrapper stamps its v1 messages (LegacyRecord.timestamp); a v0 message has none
    log_append = magic == 1 and attributes & TIMESTAMP_TYPE_MASK
    records = [Record(i64(o + shift), ts if log_append and m == 1 else its, k, v, (), -1)
               for o, m, its, k, v in entries]  # fmt: skip
    return records[0].offset, offset, crc, attributes, ts, records
