"""Compression codecs of Kafka record batches, read and write, with a bound on inflation.

Both backends call these functions; the codecs themselves come from well-kept packages
(``zlib``, ``cramjam`` for snappy, ``lz4``, ``zstandard``).  What lives here is Kafka's framing:

* gzip: RFC 1952, concatenated members accepted (``GZIPInputStream``).
* snappy: xerial framing (``\\x82SNAPPY\\0`` + version + compat + BE-length-prefixed raw blocks,
  headers may repeat) as Java writes it, or one raw snappy block as librdkafka writes it.
  We write xerial framing with 32 KiB chunks, as snappy-java does.
* lz4: one LZ4 frame with independent blocks (Kafka rejects linked blocks).  For magic v0 the header
  checksum is the pre-KIP-57 broken variant; it is repaired before decoding, as librdkafka does.
* zstd: one or more frames, with or without a content size; skippable frames are skipped.

Every decompressor stops at ``max_size`` bytes of output and raises :class:`DecompressedSizeError`
instead of growing further, so a small compressed payload can never make us allocate without bound.

lz4 payloads, and zstd frames of a bounded size, inflate in one call (cramjam's ``decompress_into``,
without the GIL) into a buffer sized by a walk of their block headers.  The decoders' own path,
:func:`decompress_view`, reuses one such buffer per thread: a fresh zero-filled buffer for every batch
costs more in page faults than the inflation itself (glibc hands a freed block of that size back to the
kernel, and the next one faults in again).  The exception is the common zstd payload, a single frame whose
output is bounded by ``ZSTD_OWN_OUTPUT_MAX``: it inflates with the thread's reused ``zstandard``
decompression context into a ``bytes`` of its walked bound, since creating a context for every call (as
``decompress_into`` does) costs about 10 us a payload, a tenth of the inflation of a 120 KB batch; where
the compiled codec can load the system's libzstd it gives this module an inflater of such a frame into the
reused buffer instead (``_zstd_into``, ``_zstd_bytes``).  The compiled decoders inflate the payloads
producers write in C before they come here (``_codec._inflate_fast``); what they leave, and every payload
of the pure-Python twin, comes here.
"""

from __future__ import annotations

import functools
import importlib
import os
import struct
import threading
import zlib

from ._common import as_int, byte_view
from ._consts import COMPRESSION_IDS, COMPRESSION_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import DecompressedSizeError, DecompressionError, InvalidAppendError, UnsupportedCompressionError

__all__ = ["compress", "decompress", "codec_id", "codec_name", "check_level", "DEFAULT_MAX_DECOMPRESSED_SIZE"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"

LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = 0xFD2FB528
ZSTD_MAX_WINDOW = 1 << 27  # libzstd's default decoder limit, which Kafka does not raise
ZSTD_BLOCK_MAX = 128 * 1024


def codec_id(name: str | int | None) -> int:
    """Map ``"none" | "gzip" | "snappy" | "lz4" | "zstd"`` (or an id 0-4) to Kafka's compression id."""
    if name is None:
        return NONE
    if isinstance(name, int) and not isinstance(name, bool):
        if 0 <= name <= 4:
            return name
        raise UnsupportedCompressionError(f"unknown compression type id {name}")
    try:
        return COMPRESSION_IDS[str(name).lower()]
    except KeyError:
        raise UnsupportedCompressionError(
            f"unknown compression {name!r}; expected one of {', '.join(COMPRESSION_NAMES)}"
        ) from None


# KIP-390 compression levels (GzipCompression, Lz4Compression, ZstdCompression): (lowest, highest, and the
# words of the error); gzip also takes -1, Deflater.DEFAULT_COMPRESSION.  snappy and none have no level.
_LEVELS = {GZIP: (1, 9, "1..9 (or -1, the default)"), LZ4: (1, 17, "1..17"), ZSTD: (-131072, 22, "-131072..22")}


def check_level(cid: int, level):
    """``level`` if it is a valid compression level for codec ``cid`` (None: the codec's default).

    A level that is not an integer is a TypeError; one outside the codec's range (KIP-390) an
    InvalidAppendError (a ValueError).  Codecs without levels (none, snappy) ignore any integer.
    """
    if level is None:
        return None
    value = as_int(level)
    if value is None:
        raise TypeError(f"compression_level must be an integer or None, got {type(level).__name__}")
    level = value
    bounds = _LEVELS.get(cid)
    if bounds is not None and not (bounds[0] <= level <= bounds[1] or (cid == GZIP and level == -1)):
        raise InvalidAppendError(f"{COMPRESSION_NAMES[cid]} compression level must be {bounds[2]}, got {level}")
    return level


def codec_name(cid: int) -> str:
    if 0 <= cid <= 4:
        return COMPRESSION_NAMES[cid]
    raise UnsupportedCompressionError(f"unknown compression type id {cid}")


@functools.lru_cache(maxsize=None)
def _import(module: str, codec: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - these are declared dependencies
        raise UnsupportedCompressionError(
            f"{codec} compression needs the {module.split('.')[0]!r} package: pip install {module.split('.')[0]}"
        ) from exc


def _contiguous(data):
    """``data`` itself when the compressors can read it in place (a C-contiguous byte buffer, as the
    builders pass: a view of their own buffer), else a ``bytes`` copy of it."""
    if type(data) is bytes:
        return data
    mv = memoryview(data)
    return mv if mv.c_contiguous and mv.itemsize == 1 else bytes(mv)


def _too_big(max_size: int) -> DecompressedSizeError:
    return DecompressedSizeError(
        f"decompressed payload exceeds max_decompressed_size={max_size} bytes; "
        "raise the limit if the data is trusted"
    )


# --------------------------------------------------------------------------------------------- gzip
def _gunzip(data, max_size: int) -> bytes:
    out = []
    total = 0
    buf = bytes(data)
    while True:
        d = zlib.decompressobj(wbits=31)
        try:
            while True:
                chunk = d.decompress(buf, max_size + 1 - total)
                total += len(chunk)
                if total > max_size:
                    raise _too_big(max_size)
                out.append(chunk)
                if d.eof or not d.unconsumed_tail:
                    break
                buf = d.unconsumed_tail
        except zlib.error as exc:
            raise DecompressionError(f"invalid gzip payload: {exc}") from None
        if not d.eof:
            raise DecompressionError("truncated gzip payload: the stream ends before its trailer")
        rest = d.unused_data
        # GZIPInputStream.readTrailer tries a following member only if more than 26 bytes are left in its
        # buffer with the trailer's 8 (the end of a payload is), and only if that member's header parses: a
        # malformed one (not the gzip magic, another method, cut short) is ignored
        if len(rest) > 18 and _gzip_header_end(rest) is not None:
            buf = rest
            continue
        return b"".join(out)


def _gzip_header_end(buf):
    """Where the gzip member header at the start of ``buf`` ends, as java.util.zip.GZIPInputStream.readHeader
    reads it (the magic, method 8, the flags' optional fields, a header CRC that matches), or None."""
    n = len(buf)
    if n < 10 or buf[0] != 0x1F or buf[1] != 0x8B or buf[2] != 8:
        return None
    flg = buf[3]
    pos = 10
    if flg & 0x04:  # FEXTRA
        if n - pos < 2:
            return None
        pos += 2 + (buf[pos] | buf[pos + 1] << 8)
    for flag in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flg & flag:
            end = buf.find(b"\0", pos)
            if end < 0:
                return None
            pos = end + 1
    if flg & 0x02:  # FHCRC: the low 16 bits of the CRC-32 of the header so far
        if n - pos < 2 or (buf[pos] | buf[pos + 1] << 8) != zlib.crc32(buf[:pos]) & 0xFFFF:
            return None
        pos += 2
    return pos if pos <= n else None


def _gzip(data, level: int | None) -> bytes:
    lvl = -1 if level is None else check_level(GZIP, level)
    # the 10-byte header java.util.zip.GZIPOutputStream writes: no flags, mtime 0, XFL 0, OS 255
    data = _contiguous(data)
    c = zlib.compressobj(lvl, zlib.DEFLATED, -15)
    body = c.compress(data) + c.flush()
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(memoryview(data).cast("B")) & 0xFFFFFFFF)
    return _GZIP_HEADER + body + trailer


# ------------------------------------------------------------------------------------------- snappy
def _uvarint_prefix(block, pos: int) -> int:
    """The uncompressed length that starts a raw snappy block (uvarint, at most 5 bytes)."""
    value = 0
    shift = 0
    for i in range(5):
        if pos + i >= len(block):
            break
        b = block[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    raise DecompressionError("invalid snappy block: bad uncompressed-length prefix")


def _unsnappy_raw(snappy, block, budget: int, max_size: int) -> bytes:
    if len(block) == 0:
        raise DecompressionError("empty snappy block")
    n = _uvarint_prefix(block, 0)
    if n > budget:
        raise _too_big(max_size)
    try:
        return bytes(snappy.decompress_raw(bytes(block)))
    except Exception as exc:  # cramjam raises its own DecompressionError type
        raise DecompressionError(f"invalid snappy payload: {exc}") from None


_XERIAL_HEAD = struct.unpack(">i", XERIAL_MAGIC[:4])[0]  # the magic's first 4 bytes read as a chunk length


def _unsnappy(data, max_size: int) -> bytes:
    snappy = _import("cramjam", "snappy").snappy
    mv = memoryview(data)
    if len(mv) < 16 or bytes(mv[:8]) != XERIAL_MAGIC:
        # librdkafka (and snappy-java's reader for unframed input): the whole payload is one raw block
        return _unsnappy_raw(snappy, mv, max_size, max_size)
    out = []
    total = 0
    pos = 16
    end = len(mv)
    while end - pos >= 4:  # (snappy-java's SnappyInputStream ends where fewer than 4 bytes are left)
        (n,) = struct.unpack_from(">i", mv, pos)
        if n == _XERIAL_HEAD:  # concatenated stream: a header where a chunk length was expected
            if end - pos < 16:
                raise DecompressionError(f"truncated xerial snappy header at payload byte {pos}")
            if bytes(mv[pos : pos + 8]) != XERIAL_MAGIC:
                break  # snappy-java: a header that is not one ends the stream
            pos += 16
            continue
        if n < 0 or n > end - pos - 4:
            raise DecompressionError(
                f"xerial snappy chunk at payload byte {pos} declares {n} bytes, {end - pos - 4} remain"
            )
        chunk = _unsnappy_raw(snappy, mv[pos + 4 : pos + 4 + n], max_size - total, max_size)
        total += len(chunk)
        out.append(chunk)
        pos += 4 + n
    return b"".join(out)


def _snappy(data) -> bytes:
    snappy = _import("cramjam", "snappy").snappy
    mv = memoryview(_contiguous(data))
    parts = [XERIAL_HEADER]
    for start in range(0, len(mv), XERIAL_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(mv[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


# ---------------------------------------------------------------------------------- output buffers
# A thread keeps its reusable buffer only up to this size; a larger payload gets a buffer of its own.
SCRATCH_KEEP_MAX = 8 << 20


class _Sink:
    """Where one lz4 or zstd payload inflates to: ``open(bound)`` gives writable room of ``bound`` bytes,
    ``close(n)`` the result (its first ``n`` bytes).  Reusing: the thread's buffer, handed back as a
    read-only memoryview; otherwise a fresh ``bytes``."""

    __slots__ = ("reuse", "buf", "home")

    def __init__(self, reuse: bool, home=None):
        self.reuse = reuse
        self.buf = None
        self.home = _scratch if home is None else home  # what keeps the reusable buffer (its ``buf``)

    def open(self, bound: int) -> memoryview:
        buf = getattr(self.home, "buf", None) if self.reuse else None
        if buf is None or len(buf) < bound:
            buf = bytearray(max(bound, 1))
            if self.reuse and bound <= SCRATCH_KEEP_MAX:
                self.home.buf = buf  # (a view of the old one someone still holds stays valid)
        self.buf = buf
        return memoryview(buf)

    def close(self, n: int):
        if self.reuse:
            return memoryview(self.buf).toreadonly()[:n]
        with memoryview(self.buf) as mv:
            return bytes(mv[:n])


_scratch = threading.local()


def _inflate_into(sink: _Sink, codec: str, parts) -> bytes | memoryview:
    """Inflate ``parts`` (compressed frame, bound of its output) one after the other with cramjam's
    ``decompress_into`` (``codec`` "lz4" or "zstd", without the GIL) into one room of the bounds' sum."""
    module = getattr(_import("cramjam", codec), codec)
    out = sink.open(sum(bound for _, bound in parts))
    total = 0
    try:
        for src, bound in parts:
            total += module.decompress_into(src, out[total : total + bound])
    except Exception as exc:  # cramjam.DecompressionError
        raise DecompressionError(f"invalid {codec} payload: {exc}") from None
    finally:
        out.release()
    return sink.close(total)


# ---------------------------------------------------------------------------------------------- lz4
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (all an LZ4 frame descriptor ever needs)."""
    n = len(data)
    assert n < 16
    h = (seed + _P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


@functools.lru_cache(maxsize=64)
def _lz4_header_checksum(descriptor: bytes) -> int:
    return (_xxh32_short(descriptor) >> 8) & 0xFF


def _lz4_check_header(mv, magic: int) -> bytes | None:
    """Kafka's Lz4BlockInputStream header checks; returns a repaired header for magic v0, else None."""
    if len(mv) < 7 or bytes(mv[:4]) != LZ4_MAGIC:
        raise DecompressionError("invalid lz4 payload: missing LZ4 frame magic 04224d18")
    flg = mv[4]
    bd = mv[5]
    if (flg >> 6) != 1:
        raise DecompressionError(f"invalid lz4 frame: unsupported version {(flg >> 6)} in FLG {flg:#04x}")
    if flg & 0x03:
        raise DecompressionError(f"invalid lz4 frame: reserved FLG bits set ({flg:#04x})")
    if not flg & 0x20:
        raise DecompressionError("invalid lz4 frame: dependent (linked) blocks are not supported by Kafka")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise DecompressionError(f"invalid lz4 frame: bad block descriptor {bd:#04x}")
    desc_end = 6 + (8 if flg & 0x08 else 0)
    if len(mv) < desc_end + 1:
        raise DecompressionError("truncated lz4 frame header")
    hc = _lz4_header_checksum(bytes(mv[4:desc_end]))
    if magic == 0:
        # pre-KIP-57 writers hashed magic+FLG+BD; Kafka ignores HC for v0, so repair it for the decoder
        if mv[desc_end] != hc:
            return bytes(mv[:desc_end]) + bytes([hc])
        return None
    if mv[desc_end] != hc:
        raise DecompressionError(
            f"invalid lz4 frame: header checksum {mv[desc_end]:#04x}, expected {hc:#04x}"
        )
    return None


# An LZ4 block of n bytes inflates to at most 255 bytes per byte (a match length grows by 255 per
# extension byte), plus the few bytes a token's own lengths carry: the output bound of a compressed block.
_LZ4_EXPANSION = 255
_LZ4_TOKEN_SLACK = 64


_U32LE = struct.Struct("<I").unpack_from


def _lz4_frame_end(mv, desc_end: int):
    """Walk the blocks of the frame; return (end of frame, upper bound of its output, blocks), the blocks
    as ``(start, size, room)``: ``room`` the most a compressed block may inflate to, 0 for a stored one."""
    flg = mv[4]
    block_max = 1 << (8 + 2 * ((mv[5] >> 4) & 7))  # 4: 64 KiB ... 7: 4 MiB
    block_checksum = 4 if flg & 0x10 else 0
    pos = desc_end + 1
    end = len(mv)
    bound = 0
    blocks = []
    while True:
        if end - pos < 4:
            raise DecompressionError(f"truncated lz4 payload: block header missing at payload byte {pos}")
        (size,) = _U32LE(mv, pos)
        pos += 4
        n = size & 0x7FFFFFFF
        if not n:
            break  # end mark (Kafka's Lz4BlockInputStream takes one with the stored bit set too)
        if n > block_max:
            raise DecompressionError(f"invalid lz4 block of {n} bytes (maximum {block_max}) at payload byte {pos - 4}")
        if n + block_checksum > end - pos:
            raise DecompressionError(f"truncated lz4 payload: block at payload byte {pos - 4} runs past the end")
        # a stored block is its own size; a compressed one at most block_max and 255x its size
        room = 0 if size & 0x80000000 else min(block_max, _LZ4_EXPANSION * n + _LZ4_TOKEN_SLACK)
        blocks.append((pos, n, room))
        bound += room or n
        pos += n + block_checksum
    if flg & 0x04:  # content checksum (read, not verified, by Kafka)
        if end - pos < 4:
            raise DecompressionError("truncated lz4 payload: content checksum missing")
        pos += 4
    return pos, bound, blocks


def _unlz4(data, max_size: int, magic: int, sink: _Sink):
    mv = memoryview(data)
    repaired = _lz4_check_header(mv, magic)
    flg = mv[4]
    desc_end = 6 + (8 if flg & 0x08 else 0)
    frame_end, bound, blocks = _lz4_frame_end(mv, desc_end)  # bytes after the end mark are ignored, as Kafka
    if not flg & 0x10 and bound <= max_size:
        # no block checksums to verify: the blocks inflate one by one (liblz4's block decoder, a quarter
        # faster than its frame decoder over Kafka's 64 KiB blocks); the content checksum is not verified,
        # as Kafka does not verify it
        return _inflate_lz4_blocks(sink, mv, blocks, bound)
    if flg & 0x0C:
        # the frame decoder would check the content size and verify the content checksum, which Kafka
        # does not: a header without them (and its checksum) goes in front of the blocks
        hdr = bytes(mv[:4]) + bytes([flg & ~0x0C, mv[5]])
        body = mv[desc_end + 1 : frame_end - 4 if flg & 0x04 else frame_end]
        src = hdr + bytes([_lz4_header_checksum(hdr[4:])]) + bytes(body)
    elif repaired is not None:
        src = repaired + bytes(mv[len(repaired) : frame_end])
    else:
        src = mv[:frame_end]
    if bound > max_size:
        # the bound is loose (255x per block); inflate with a stop at max_size to learn the real size
        return _unlz4_limited(src, max_size)
    return _inflate_into(sink, "lz4", [(src, bound)])


def _inflate_lz4_blocks(sink: _Sink, mv, blocks, bound: int):
    """Inflate the blocks of one lz4 frame (``(start, size, room)`` from :func:`_lz4_frame_end`) one
    after the other into one room of ``bound`` bytes: compressed ones with cramjam's block decoder
    (without the GIL), each into at most its ``room``, stored ones copied."""
    block_into = _import("cramjam", "lz4").lz4.decompress_block_into
    out = sink.open(bound)
    total = 0
    try:
        for start, n, room in blocks:
            if room:
                total += block_into(mv[start : start + n], out[total : total + room])
            else:
                out[total : total + n] = mv[start : start + n]
                total += n
    except Exception as exc:  # cramjam.DecompressionError
        raise DecompressionError(f"invalid lz4 payload: {exc}") from None
    finally:
        out.release()
    return sink.close(total)


def _unlz4_limited(src, max_size: int) -> bytes:
    frame = _import("lz4.frame", "lz4")
    try:
        d = frame.LZ4FrameDecompressor()
        out = d.decompress(bytes(src), max_length=max_size + 1)
    except RuntimeError as exc:
        raise DecompressionError(f"invalid lz4 payload: {exc}") from None
    if len(out) > max_size or not d.eof:
        raise _too_big(max_size)
    return out


def _lz4(data, level: int | None) -> bytes:
    frame = _import("lz4.frame", "lz4")
    check_level(LZ4, level)
    # Kafka: level 9 (the default) uses the fast compressor, other levels the high-compression one
    lvl = 0 if level in (None, 9) else min(level, 16)
    return frame.compress(
        _contiguous(data),
        compression_level=lvl,
        block_size=frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


# --------------------------------------------------------------------------------------------- zstd
def _zstd_window(descriptor: int) -> int:
    """The window size a zstd frame's window descriptor byte gives (RFC 8878 3.1.1.1.2)."""
    base = 1 << (10 + (descriptor >> 3))
    return base + (base >> 3) * (descriptor & 7)


def _zstd_frames(mv):
    """Walk zstd frame and block headers; yield (start, end, upper_bound_of_output) per data frame.

    The walk is what lets us reject truncated frames and bound the output before inflating anything.
    """
    pos = 0
    end = len(mv)
    if end == 0:
        raise DecompressionError("empty zstd payload")
    while pos < end:
        if end - pos < 4:
            raise DecompressionError(f"truncated zstd frame magic at payload byte {pos}")
        (magic,) = _U32LE(mv, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
            if end - pos < 8:
                raise DecompressionError(f"truncated zstd skippable frame at payload byte {pos}")
            (n,) = _U32LE(mv, pos + 4)
            if n > end - pos - 8:
                raise DecompressionError(f"truncated zstd skippable frame at payload byte {pos}")
            pos += 8 + n
            continue
        if magic != ZSTD_MAGIC:
            raise DecompressionError(f"invalid zstd payload: bad frame magic {magic:#010x} at payload byte {pos}")
        start = pos
        if end - pos < 5:
            raise DecompressionError(f"truncated zstd frame header at payload byte {pos}")
        fhd = mv[pos + 4]
        fcs_flag = fhd >> 6
        single_segment = (fhd >> 5) & 1
        checksum = (fhd >> 2) & 1
        did_flag = fhd & 3
        if fhd & 0x08:
            raise DecompressionError(f"invalid zstd frame header descriptor {fhd:#04x}")
        hdr = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[did_flag]
        fcs_len = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        if end - pos < hdr + fcs_len:
            raise DecompressionError(f"truncated zstd frame header at payload byte {pos}")
        content_size = None
        if fcs_len:
            raw = bytes(mv[pos + hdr : pos + hdr + fcs_len])
            content_size = int.from_bytes(raw, "little") + (256 if fcs_len == 2 else 0)
        window = content_size if single_segment else _zstd_window(mv[pos + 5])
        if window > ZSTD_MAX_WINDOW:  # (Kafka's streaming decoder refuses it: windowLogMax stays at 27)
            raise DecompressionError(f"zstd frame at payload byte {pos} needs a window of {window} bytes, more than "
                                     f"the {ZSTD_MAX_WINDOW} a decoder takes")  # fmt: skip
        pos += hdr + fcs_len
        bound = 0
        while True:
            if end - pos < 3:
                raise DecompressionError(f"truncated zstd block header at payload byte {pos}")
            bh = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            last = bh & 1
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            pos += 3
            if btype == 0:  # raw
                need, out = bsize, bsize
            elif btype == 1:  # RLE
                need, out = 1, bsize
            elif btype == 2:  # compressed
                need, out = bsize, ZSTD_BLOCK_MAX
            else:
                raise DecompressionError(f"invalid zstd block type 3 at payload byte {pos - 3}")
            if need > end - pos:
                raise DecompressionError(f"truncated zstd block at payload byte {pos - 3}")
            pos += need
            bound += out
            if last:
                break
        if checksum:
            if end - pos < 4:
                raise DecompressionError(f"truncated zstd frame checksum at payload byte {pos}")
            pos += 4
        if content_size is not None:
            if content_size > bound:
                raise DecompressionError(
                    f"invalid zstd frame at payload byte {start}: it declares {content_size} bytes of content, "
                    f"its blocks hold at most {bound}"
                )
            bound = content_size
        yield start, pos, bound


# Frames whose output bound (from the block walk) is at most this are inflated in one call into room of
# that size; larger bounds stream, so a small frame of many tiny blocks cannot make us reserve its bound.
ZSTD_ONE_SHOT_MAX = 8 << 20
# A single frame bounded by this inflates into a bytes of its own with the thread's reused context (nothing
# zero-fills it first; decoding the benchmark's 1,000 zstd batches over and over, a fresh process counts no
# more page faults this way than with the reusable buffer); larger ones go into the reusable buffer.
ZSTD_OWN_OUTPUT_MAX = 1 << 20

_local = threading.local()


def _zstd_decompressor(zstd=None):
    """One decompression context per thread (contexts are reusable but not thread-safe)."""
    dctx = getattr(_local, "zstd", None)
    if dctx is None:
        if zstd is None:
            zstd = _import("zstandard", "zstd")
        dctx = _local.zstd = zstd.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    return dctx


# Where the compiled codec can load the system's libzstd (``kafkatx._codec.ZSTD_SYSTEM_VERSION``, see
# ``_c/syslib.h``: ~10% faster here than python-zstandard, and it inflates into the decoder's reused buffer)
# it sets these to its inflaters of zstd frames: ``_zstd_into(src, out)`` -> bytes written into ``out``
# or < 0 if rejected, ``_zstd_bytes(src, bound)`` -> a new bytes or None if rejected.  None: python-zstandard.
_zstd_into = None
_zstd_bytes = None


def _unzstd(data, max_size: int, sink: _Sink):
    mv = memoryview(data)
    frames = list(_zstd_frames(mv))
    total_bound = sum(bound for _, _, bound in frames)
    # what producers write (one frame, or two with zstd_frames=2) comes first: it is on every zstd batch's
    # path.  libzstd inflates frames that follow each other in one call.
    if 0 < total_bound <= ZSTD_OWN_OUTPUT_MAX and total_bound <= max_size:
        start, stop = frames[0][0], frames[-1][1]
        if sink.reuse and _zstd_into is not None:
            out = sink.open(total_bound)
            try:  # (the room is exactly the bound: the thread's buffer may be larger, from an earlier payload)
                n = _zstd_into(mv[start:stop], out[:total_bound])
            finally:
                out.release()
            if n >= 0:
                return sink.close(n)
        elif not sink.reuse and _zstd_bytes is not None:
            out = _zstd_bytes(mv[start:stop], total_bound)
            if out is not None:
                return out
        if len(frames) == 1:  # python-zstandard, also to name the error where libzstd rejected the frame
            try:
                return _zstd_decompressor().decompress(mv[start:stop], max_output_size=total_bound)
            except Exception as exc:  # zstandard.ZstdError
                raise DecompressionError(f"invalid zstd payload: {exc}") from None
    if total_bound > max_size or not all(0 < bound <= ZSTD_ONE_SHOT_MAX for _, _, bound in frames):
        return _unzstd_streaming(mv, frames, max_size)
    # every frame in one call into the room its walk bounds (about twice as fast as a streaming object)
    return _inflate_into(sink, "zstd", [(mv[start:stop], bound) for start, stop, bound in frames])


def _unzstd_streaming(mv, frames, max_size: int) -> bytes:
    """Frames whose bound is too large to reserve: inflated with a stop at ``max_size``."""
    zstd = _import("zstandard", "zstd")
    dctx = _zstd_decompressor(zstd)
    out = []
    total = 0
    for start, stop, bound in frames:
        frame = mv[start:stop]
        try:
            if total + bound <= max_size:
                d = dctx.decompressobj()
                chunk = d.decompress(frame)
                if not d.eof:
                    raise DecompressionError("truncated zstd frame")
            else:
                with dctx.stream_reader(frame) as r:
                    chunk = r.read(max_size - total + 1)
        except zstd.ZstdError as exc:
            raise DecompressionError(f"invalid zstd payload: {exc}") from None
        total += len(chunk)
        if total > max_size:
            raise _too_big(max_size)
        out.append(chunk)
    return out[0] if len(out) == 1 else b"".join(out)


# With ``zstd_frames=2`` (the builders' and encode_arrow's option) a zstd payload of this many record bytes
# or more is written as two frames, the first half of the records' bytes and the second, which the compiled
# builders compress on two cores at once (``_c/deflate.h``); here both are compressed in turn, cut in the
# same place.  zstd's format lets frames follow each other (RFC 8878), and Kafka's Java classes, aiokafka
# and kafka-python 3.0 read such payloads (checked in the tests); kafka-python 2.0.2 and kafka-python-ng
# inflate only the first frame, so a consumer on those would fail on the batch, which is why one frame is
# the default.  In one frame (the default) the compiled builders join a payload of more than 64 KiB from
# pieces (``_codec._zstd_join_layout``: parts of 64 KiB, then as long as the records before them up to
# one pass's window at the level), each compressed with the records before it (up to as many) as history,
# where the libzstd they load exports what that takes (``_codec._zstd_joins()``; python-zstandard's
# does); this module, and so the
# pure-Python twin, compresses one frame in one pass: the same records in other bytes.  What it costs: 1.3%
# more bytes on 110 KB of JSON-like records a batch as two frames, none on the benchmark's records; a
# joined frame 0.6% smaller than one pass on the benchmark's records, from 0.6% smaller (level 1) to 0.8%
# larger (level 3) on 110 KB to 1.1 MB of small JSON rows, 3% larger at level 1 on 45 KB documents sent
# forty times, and up to 1.5x one pass at level 1 (1.3x at level 3) on a random 200 KB value sent eight
# times, where libzstd's fast match finders skip through a piece's fresh random bytes and miss copies.
# Worst found: 90 KB documents sent in turn six at a time at level 1 (each back 450 KB later) 2.9x, ten of
# 100-300 KB at level 3 (2 MB later) 2.1x, the oldest entries of a densely indexed history lost from the
# hash tables; within 1% on JSON rows and log lines of 4 MB and at level 9 on all of these.
ZSTD_SPLIT_MIN = 64 << 10


def check_zstd_frames(n) -> int:
    """``zstd_frames`` of the builders: 1 (the default: one frame) or 2 (two frames from ZSTD_SPLIT_MIN on),
    as an int (anything with ``__index__`` but a bool; else a TypeError, and a ValueError for other ints)."""
    value = as_int(n)
    if value is None:
        raise TypeError(f"zstd_frames must be the integer 1 or 2, got {type(n).__name__}")
    if value not in (1, 2):
        raise ValueError(f"zstd_frames must be 1 or 2, got {value}")
    return value


def _zstd(data, level: int | None, frames: int = 1) -> bytes:
    zstd = _import("zstandard", "zstd")
    cctx = _zstd_compressor(zstd, 3 if level is None else check_level(ZSTD, level))
    data = byte_view(_contiguous(data))
    if frames == 1 or len(data) < ZSTD_SPLIT_MIN:
        return cctx.compress(data)
    cut = len(data) // 2
    return cctx.compress(data[:cut]) + cctx.compress(data[cut:])


def _zstd_compressor(zstd, level: int):
    """A reusable compression context per thread and level (creating one costs as much as compressing)."""
    cache = getattr(_local, "zstd_c", None)
    if cache is None:
        cache = _local.zstd_c = {}
    cctx = cache.get(level)
    if cctx is None:
        # like zstd-jni's stream: no checksum, no content size in the frame header
        cctx = cache[level] = zstd.ZstdCompressor(level=level, write_checksum=False, write_content_size=False)
    return cctx


# ------------------------------------------------------------------------------------------- public
def decompress(cid: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, magic: int = 2) -> bytes:
    """Inflate one batch payload (or legacy wrapper value) compressed with codec ``cid``."""
    return _decompress(cid, data, max_size, magic, _Sink(False))


def decompress_view(cid: int, data, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE, magic: int = 2):
    """:func:`decompress` for a decoder that is done with the result before it inflates anything else on
    the same thread: lz4 and zstd payloads come back as a read-only memoryview of the thread's reusable
    buffer (valid until the thread's next call), other codecs, and zstd payloads of one frame that inflates
    to at most ``ZSTD_OWN_OUTPUT_MAX`` bytes, as ``bytes``."""
    return _decompress(cid, data, max_size, magic, _Sink(True))


# ------------------------------------------------------------------------------------- inflate ahead
MAX_INFLATE_THREADS = 64
INFLATE_AUTO = -1  # check_inflate_threads(None) where a background inflater may pay (see there)


@functools.cache
def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS tells it), read once."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_inflate_threads(n) -> int:
    """``inflate_threads`` of the decoders: an int from 0 (inflate on the decoding thread) to 64, or None
    (the default), which is ``INFLATE_AUTO`` where the process may use two CPUs and 0 where it may not.

    Under ``INFLATE_AUTO`` the compiled decoders inflate a call's payloads on one background C thread when
    the system's libraries inflate all of them and their blocks promise enough work to repay the thread
    (``_codec._auto_ahead_pays``), and inline otherwise; the pure-Python
    twin always inflates inline then (its Python workers cost more than they save)."""
    if n is None:
        return INFLATE_AUTO if usable_cpus() >= 2 else 0
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_INFLATE_THREADS:
        raise ValueError(f"inflate_threads must be None or an int from 0 to {MAX_INFLATE_THREADS}, got {n!r}")
    return n


class _Slot:
    __slots__ = ("buf",)

    def __init__(self):
        self.buf = None


class InflateAhead:
    """Inflates the compressed payloads of one decode call on background threads, ahead of the decoder.

    ``spans`` are the ``(start, end, codec id)`` of the v2 payloads in ``view``, in the order the decoder
    meets them; ``threads`` workers take them in that order, at most ``depth`` ahead of the batch the
    decoder holds, so memory stays bounded whatever the input.  The decoder asks with :meth:`take` and
    gets exactly what :func:`decompress` (``keep``) or :func:`decompress_view` would have given it, or the
    error they would have raised -- raised only when the decoder reaches that batch, so errors come in
    the order of the log, as without the threads.  Without ``keep`` a payload lives in one of ``depth``
    reusable buffers and is valid until the decoder's next :meth:`take`.  A decoder that would wait
    inflates the next span no worker has taken instead (within the same bound), so with N workers N + 1
    threads inflate whenever the decoder is ahead.  The inflation itself (libzstd, liblz4, zlib, snappy)
    runs without the GIL; Python work between payloads takes it briefly.

    :meth:`close` (always called, also on error) stops and joins the workers; the decode call that made
    the object returns only after that, so nothing reads ``view`` once the call is over.

    The compiled decoders use this class only for calls that need Python to inflate: where the system's
    libraries inflate every payload in C, their workers are C threads following the same rules
    (``_c/ahead.h``), which spares each payload ~10-20 us of Python under the GIL.
    """

    def __init__(self, view, spans, max_size: int, *, threads: int = 1, keep: bool = False, depth: int = 0):
        self._view = view
        self._spans = spans
        self._max = max_size
        self._keep = keep
        self._depth = max(depth, threads + 3)  # (the decoder's batch, one queued per worker, and slack)
        self._slots = [_Slot() for _ in range(self._depth)]
        # slots being written: a span is taken only when its slot is free, since one whose batch the
        # decoder skipped may still be inflating into the slot that a later span shares
        self._inflight: set = set()
        self._cond = threading.Condition()
        self._results: dict = {}  # span index -> (payload, error)
        self._claimed = 0  # the next span a worker takes
        self._current = -1  # the span the decoder holds
        self._next = 0  # the first span the decoder may still ask for
        self._closed = False
        self._running = threads  # workers not yet returned (a decoder never waits on none)
        self.caller_inflated = 0  # spans the decoder inflated itself while waiting (see take)
        self._threads = []
        for _ in range(threads):
            t = threading.Thread(target=self._work, name="kafkatx-inflate", daemon=True)
            t.start()
            self._threads.append(t)

    def _work(self):
        try:
            self._inflate_spans()
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def _inflate_spans(self):
        spans, cond = self._spans, self._cond
        n = len(spans)
        while True:
            with cond:
                while not self._closed and self._claimed < n and not self._may_take(self._claimed, self._current):
                    cond.wait()
                j = self._claimed
                if self._closed or j >= n:
                    return
                self._claimed = j + 1
                self._inflight.add(j % self._depth)
            result = self._inflate(j)
            with cond:
                self._inflight.discard(j % self._depth)
                if j >= self._current:  # (the decoder has not gone past it)
                    self._results[j] = result
                cond.notify_all()

    def _may_take(self, k: int, current: int) -> bool:
        """Span ``k`` may be inflated now: within ``depth`` of the decoder's span, its slot free (locked)."""
        return k < current + self._depth and k % self._depth not in self._inflight

    def _inflate(self, j: int):
        """``(payload, None)`` or ``(None, error)`` for span ``j``, into its ring slot (called unlocked)."""
        start, end, cid = self._spans[j]
        try:
            sink = _Sink(not self._keep, self._slots[j % self._depth])
            return (_decompress(cid, self._view[start:end], self._max, 2, sink), None)
        except Exception as exc:  # handed to the decoder, which raises it at this batch
            return (None, exc.with_traceback(None))

    def take(self, start: int):
        """The inflated payload that starts at byte ``start`` of the view (raising its error, if it had
        one); None if no span starts there (the caller inflates it itself).  Spans before ``start`` that
        were not asked for (skipped batches) are dropped."""
        spans = self._spans
        j = self._next
        while j < len(spans) and spans[j][0] < start:
            j += 1
        if j == len(spans) or spans[j][0] != start:
            self._next = j
            return None
        self._next = j + 1
        cond = self._cond
        with cond:
            if self._current < j - 1:
                for k in [k for k in self._results if k < j]:
                    del self._results[k]
                if self._claimed < j:
                    self._claimed = j  # nobody inflates the skipped ones any more
            self._current = j
            cond.notify_all()
            while j not in self._results:
                if not self._running:  # pragma: no cover - workers end only at close or past the last span
                    return None  # (the caller inflates it itself)
                k = self._claimed
                if k < len(spans) and self._may_take(k, j):
                    # rather than wait, inflate the next span no worker has taken (maybe this one): the
                    # decoder's thread is idle whenever the workers are behind
                    self._claimed = k + 1
                    self._inflight.add(k % self._depth)
                    self.caller_inflated += 1
                    cond.release()
                    try:
                        result = self._inflate(k)
                    finally:
                        cond.acquire()
                        self._inflight.discard(k % self._depth)
                    self._results[k] = result  # (k >= j: the decoder is not past it)
                    cond.notify_all()
                    continue
                cond.wait()
            payload, exc = self._results.pop(j)
        if exc is not None:
            raise exc
        return payload

    def close(self):
        with self._cond:
            self._closed = True
            self._results.clear()
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        self._threads = []


def _decompress(cid: int, data, max_size: int, magic: int, sink: _Sink):
    data = byte_view(data)  # (the frame walks below index single bytes)
    if cid == GZIP:
        return _gunzip(data, max_size)
    if cid == SNAPPY:
        return _unsnappy(data, max_size)
    if cid == LZ4:
        return _unlz4(data, max_size, magic, sink)
    if cid == ZSTD:
        if magic < 2:
            raise DecompressionError("zstd is not valid in a legacy (magic v0/v1) wrapper")
        return _unzstd(data, max_size, sink)
    if cid == NONE:
        return bytes(data)
    raise UnsupportedCompressionError(f"unknown compression type id {cid}")


def compress(cid: int, data, level: int | None = None, zstd_frames: int = 1) -> bytes:
    """Compress a batch payload the way Kafka's Java producer frames it (``zstd_frames``: see
    ``ZSTD_SPLIT_MIN``)."""
    if cid == GZIP:
        return _gzip(data, level)
    if cid == SNAPPY:
        return _snappy(data)
    if cid == LZ4:
        return _lz4(data, level)
    if cid == ZSTD:
        return _zstd(data, level, check_zstd_frames(zstd_frames))
    if cid == NONE:
        return bytes(data)
    raise UnsupportedCompressionError(f"unknown compression type id {cid}")
