# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled codec for Kafka record batches (v2 and legacy v0/v1).

Same names, results and exceptions as the pure-Python twin ``kafkatx._codec_py``; the test suite runs
every codec test on both.  Every read goes through bounds-checked helpers on a ``const uint8_t*`` plus a
length; errors raise the shared exceptions of ``kafkatx.errors`` naming the byte position in the
caller's buffer and the batch base offset.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t)
from libc.string cimport memcmp, memcpy, memset
from libc.stdlib cimport calloc, malloc, realloc, free

import array
import importlib.machinery
import importlib.util
import os
import time

from . import _control, _legacy
from . import compression as _compression
from ._common import (ARROW_COLUMNS, BUILDING_ERROR, BUILT, TIMESTAMP_TYPE_BITS, RecordList, RecordSummary, arrow_schema,
                      bytes_error, check_builder_args, check_offsets_fit, check_records_per_batch, column_names,
                      encode_table, header_key_bytes, i64, illegal_offset, int64_arg, isolation_flag,
                      new_aborted_pairs, one_array, summary_of, timestamp_type_bits)
from ._common import as_bytes as _as_bytes, as_headers as _as_headers
from ._consts import COMPRESSION_IDS, COMPRESSION_NAMES, DEFAULT_MAX_DECOMPRESSED_SIZE
from .errors import (
    CorruptRecordError,
    CrcMismatchError,
    DecompressedSizeError,
    InvalidAppendError,
    InvalidRecordError,
    KafkaTxError,
    UnsupportedCompressionError,
)

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int _PyBytes_Resize(PyObject **string, Py_ssize_t newsize) except -1
    int PyBUF_READ
    bint PyBytes_CheckExact(object o)
    # (declared here without Cython's error check: a key without a UTF-8 form goes to _encode_headers)
    const char *_utf8_of "PyUnicode_AsUTF8AndSize"(object s, Py_ssize_t *size)
    void PyErr_Clear()
    PyObject **PySequence_Fast_ITEMS(object seq)
    Py_ssize_t PySequence_Fast_GET_SIZE(object seq)
    bint PyUnicode_IS_ASCII(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    void *PyUnicode_DATA(object s)

BACKEND = "cython"

# the layout constants of _codec.pxd, for the test that keeps kafkatx._consts in step with them
LAYOUT = {
    "LOG_OVERHEAD": LOG_OVERHEAD, "MAGIC_OFFSET": MAGIC_OFFSET, "HEADER_SIZE_UP_TO_MAGIC": HEADER_SIZE_UP_TO_MAGIC,
    "RECORD_OVERHEAD_V0": RECORD_OVERHEAD_V0, "LENGTH_OFFSET": LENGTH_OFFSET,
    "PARTITION_LEADER_EPOCH_OFFSET": PARTITION_LEADER_EPOCH_OFFSET, "MAGIC_V2_OFFSET": MAGIC_V2_OFFSET,
    "CRC_OFFSET": CRC_OFFSET, "ATTRIBUTES_OFFSET": ATTRIBUTES_OFFSET, "LAST_OFFSET_DELTA_OFFSET": LAST_OFFSET_DELTA_OFFSET,
    "BASE_TIMESTAMP_OFFSET": BASE_TIMESTAMP_OFFSET, "MAX_TIMESTAMP_OFFSET": MAX_TIMESTAMP_OFFSET,
    "PRODUCER_ID_OFFSET": PRODUCER_ID_OFFSET, "PRODUCER_EPOCH_OFFSET": PRODUCER_EPOCH_OFFSET,
    "BASE_SEQUENCE_OFFSET": BASE_SEQUENCE_OFFSET, "RECORDS_COUNT_OFFSET": RECORDS_COUNT_OFFSET,
    "RECORD_BATCH_OVERHEAD": RECORD_BATCH_OVERHEAD, "COMPRESSION_CODEC_MASK": COMPRESSION_CODEC_MASK,
    "TIMESTAMP_TYPE_MASK": TIMESTAMP_TYPE_MASK, "TRANSACTIONAL_FLAG_MASK": TRANSACTIONAL_FLAG_MASK,
    "CONTROL_FLAG_MASK": CONTROL_FLAG_MASK, "DELETE_HORIZON_FLAG_MASK": DELETE_HORIZON_FLAG_MASK,
}
CRC32C_IMPL = kx_crc32c_impl_name().decode()


# ---------------------------------------------------------------------- system libzstd and liblz4
# (_c/syslib.h) The decoders inflate the payloads producers write with these, in C (_inflate_fast);
# the compression module's paths use the first two where the libraries could be loaded.
def _zstd_frame_into(src, out):
    """Inflate the zstd frame(s) ``src`` into the writable buffer ``out`` with the system's libzstd (see
    ``_c/syslib.h``), without the GIL: the bytes written, or -1 if libzstd rejects it (corrupt, or more
    than ``len(out)`` bytes) and -2 if it could not make a context (the caller then asks python-zstandard,
    which names the error)."""
    cdef Py_buffer s, o
    cdef long long n
    PyObject_GetBuffer(src, &s, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(out, &o, PyBUF_WRITABLE)
        try:
            with nogil:
                n = kx_syszstd_decompress(o.buf, <size_t>o.len, s.buf, <size_t>s.len)
        finally:
            PyBuffer_Release(&o)
    finally:
        PyBuffer_Release(&s)
    return n


def _zstd_frame_bytes(src, Py_ssize_t bound):
    """``_zstd_frame_into`` into a new ``bytes`` of at most ``bound`` bytes; None where it gives < 0."""
    cdef Py_buffer s
    cdef long long n
    cdef object out = PyBytes_FromStringAndSize(NULL, bound)
    cdef char *dst = PyBytes_AS_STRING(out)
    cdef PyObject *sole
    PyObject_GetBuffer(src, &s, PyBUF_SIMPLE)
    try:
        with nogil:
            n = kx_syszstd_decompress(dst, <size_t>bound, s.buf, <size_t>s.len)
    finally:
        PyBuffer_Release(&s)
    if n < 0:
        return None
    if n == bound:
        return out
    # shrink in place rather than copy: a frame without a content size is bounded at 128 KiB a block
    sole = <PyObject *>out
    Py_INCREF(out)
    out = None  # ``sole`` now holds the only reference, as _PyBytes_Resize requires
    _PyBytes_Resize(&sole, <Py_ssize_t>n)  # on failure it frees the object, sets sole to NULL and raises
    out = <object>sole
    Py_DECREF(out)  # the reference ``sole`` held is now ``out``'s
    return out


if os.environ.get("KAFKATX_SYSTEM_LIBS") == "0":
    kx_syslib_disable()
# x*10000 + y*100 + z of the system libzstd and liblz4 the decoders use, 0 where there is none
# (python-zstandard and cramjam inflate everything then; KAFKATX_SYSTEM_LIBS=0 asks for that)
ZSTD_SYSTEM_VERSION = kx_syszstd_version()
LZ4_SYSTEM_VERSION = kx_syslz4_version()
if ZSTD_SYSTEM_VERSION:
    _compression._zstd_into = _zstd_frame_into
    _compression._zstd_bytes = _zstd_frame_bytes

cdef bint _SYS_ZSTD = ZSTD_SYSTEM_VERSION != 0
cdef bint _SYS_LZ4 = LZ4_SYSTEM_VERSION != 0


# The builders compress large zstd payloads in C (_c/deflate.h), in pieces on two cores: one frame joined from
# pieces (the default, past KX_ZSTD_PART record bytes) or two frames cut at half the bytes
# (zstd_frames=2, from compression.ZSTD_SPLIT_MIN on), with python-zstandard's own libzstd where its CFFI
# module exports it, else the system's; two frames must be cut where the twin cuts them.
if KX_ZSTD_SPLIT_MIN != _compression.ZSTD_SPLIT_MIN:
    raise ImportError("kafkatx._codec was built with another zstd_frames cut than compression.ZSTD_SPLIT_MIN")


def _zstandard_cffi_module():
    """The file of python-zstandard's CFFI module (found, not imported), or "" if there is none."""
    spec = importlib.util.find_spec("zstandard")
    for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_cffi" + suffix)
            if os.path.isfile(path):
                return path
    return ""


cdef int _ZSTD_DEFLATE = -1  # 1 / 0: whether kx_zstd_deflate can run (-1: not asked yet, see _zstd_compressor)


def _zstd_compressor():
    """``(version, bundled)`` of the libzstd the builders compress large zstd payloads with (looked for and
    loaded on the first call): ``bundled`` True for python-zstandard's own; ``(0, False)`` where there is
    none (the compression module then writes the same frames with python-zstandard, one after the other)."""
    global _ZSTD_DEFLATE
    cdef int bundled = 0
    cdef unsigned version
    if _ZSTD_DEFLATE < 0:
        kx_zstd_compressor_at(os.fsencode(_zstandard_cffi_module()))
    version = kx_zstd_compressor_version(&bundled)
    _ZSTD_DEFLATE = version != 0
    return version, bool(bundled) and version != 0


def _zstd_joins():
    """Whether the compiled builders write a one-frame zstd payload of more than ``_zstd_join_layout()[0]``
    record bytes joined from parts compressed on two cores (_c/deflate.h; the library must export libzstd's
    buffer-less functions, as python-zstandard's does).  False: one pass, the bytes compression._zstd writes."""
    return bool(_zstd_compressor()[0] and kx_zstd_joins())


def _zstd_join_layout(level=None):
    """``(part, big)`` at zstd ``level`` (None: 3): a joined frame's parts are ``part`` record bytes for
    the first, then as long as all the records before them, up to ``big`` (the window of one pass at the
    level, at most 64 MiB); what follows the last part (one to a part's length of bytes) is one piece, or
    two halves if it is longer than ``part``.  Each piece is compressed with the records before it, up to
    ``big`` of them, as its history."""
    lvl = 3 if level is None else _compression.check_level(4, level)
    if not _zstd_joins():
        raise RuntimeError("the compiled builders write no joined frames here (see _zstd_joins)")
    return KX_ZSTD_PART, kx_zstd_big(lvl)


# lz4 frame header checksums by FLG << 8 | BD (what Kafka's writers put in a frame descriptor without a
# content size), -1 until compression._lz4_header_checksum (xxHash32) has given one
cdef int16_t _LZ4_HC[65536]
memset(_LZ4_HC, 0xFF, sizeof(_LZ4_HC))  # every entry -1


cdef Py_ssize_t _lz4_frame_bound(const uint8_t *p, Py_ssize_t n) except -2:
    """What an lz4 frame as Kafka's producers write it inflates to at most (compression._lz4_frame_end's
    bound), or -1 for anything else: a header Kafka would reject, a content size or block checksums, a
    block past the payload or the end mark missing.  The Python path takes those, and names the error."""
    cdef uint8_t flg, bd
    cdef int hc
    cdef Py_ssize_t bound, end, last_room, last_size
    if n < 7 or _le32(p) != 0x184D2204U:
        return -1
    flg = p[4]
    bd = p[5]
    # FLG: version 01, independent blocks, no block checksums, no content size, no reserved bits or
    # dictionary id (a content checksum or not); BD: a block size of 64 KiB to 4 MiB, no reserved bits
    if (flg & 0xFB) != 0x60 or (bd & 0x8F) or ((bd >> 4) & 7) < 4:
        return -1
    hc = _LZ4_HC[(flg << 8) | bd]
    if hc < 0:
        hc = _LZ4_HC[(flg << 8) | bd] = _compression._lz4_header_checksum(bytes((flg, bd)))
    if p[6] != hc:
        return -1
    bound = _lz4_blocks(p, n, &end, &last_room, &last_size, NULL)
    if bound < 0 or (flg & 0x04 and n - end < 4):  # (the content checksum: read past, as Kafka does)
        return -1
    return bound


cdef Py_ssize_t _lz4_frame_inflate(const uint8_t *p, Py_ssize_t n, uint8_t *dst, Py_ssize_t cap) noexcept nogil:
    """Inflate the blocks of a frame _lz4_frame_bound accepted into dst[0, cap): the bytes written, -1 if
    liblz4 rejects a block."""
    cdef Py_ssize_t pos = 7, total = 0, m, room
    cdef Py_ssize_t block_max = (<Py_ssize_t>1) << (8 + 2 * ((p[5] >> 4) & 7))
    cdef uint32_t size
    cdef long long r
    while n - pos >= 4:
        size = _le32(p + pos)
        pos += 4
        m = size & 0x7FFFFFFFU
        if m == 0:  # the end mark (Kafka takes one with the stored bit set too)
            return total
        if m > n - pos:
            return -1
        if size & 0x80000000U:  # stored
            if m > cap - total:
                return -1
            memcpy(dst + total, p + pos, m)
            total += m
        else:
            room = min(block_max, LZ4_EXPANSION * m + LZ4_TOKEN_SLACK, cap - total)
            r = kx_syslz4_block(dst + total, <size_t>room, p + pos, <size_t>m)
            if r < 0:
                return -1
            total += <Py_ssize_t>r
        pos += m
    return -1


cdef Py_ssize_t _zstd_frame_bound(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """What a payload of one or more zstd data frames inflates to at most (the sum of compression._zstd_frames'
    bounds: a frame's content size when it has one, else its blocks' most), or -1 for anything else:
    skippable frames, bytes after the last frame, a header or block the walk would reject.  (libzstd
    inflates frames that follow each other in one call.)"""
    cdef Py_ssize_t pos = 0, total = 0, bound, end, last_cut
    while pos < n:
        if n - pos < 4 or _le32(p + pos) != 0xFD2FB528U:
            return -1
        bound = _zstd_frame(p, n, pos, &end, &last_cut, NULL)
        if bound < 0:
            return -1
        total += bound
        pos = end
    return total if n else -1


cdef bytes _compressed_batch(int cid, const uint8_t *records, Py_ssize_t n, object level, int frames,
                             kx_zstream *stream=NULL):
    """A new batch of ``RECORD_BATCH_OVERHEAD`` bytes (its header, for the caller to write) and the payload
    of ``records[0, n)`` compressed with codec ``cid`` as compression.compress writes it.  A large zstd
    payload is compressed here in C straight into the batch (see _zstd_compressor) in pieces, some on
    _c/deflate.h's worker thread where the process may use two CPUs: the two frames of ``zstd_frames=2``
    (``frames``) from ``ZSTD_SPLIT_MIN`` bytes on, else one frame joined from parts (_zstd_joins), some of
    which a builder's ``stream`` may hold already."""
    cdef bytes out
    cdef object payload
    cdef PyObject *sole
    cdef Py_ssize_t cap
    cdef long long got = -1
    cdef int lvl, threads
    cdef unsigned char *dst
    if cid == 4 and <size_t>n >= KX_ZSTD_SPLIT_MIN and (
            _ZSTD_DEFLATE > 0 or (_ZSTD_DEFLATE < 0 and _zstd_compressor()[0])) and kx_zstd_cuts(<size_t>n, frames):
        lvl = 3 if level is None else level
        threads = _compression.usable_cpus() >= 2
        cap = <Py_ssize_t>kx_zstd_deflate_bound(<size_t>n, frames, lvl)
        out = PyBytes_FromStringAndSize(NULL, RECORD_BATCH_OVERHEAD + cap)
        dst = <unsigned char *>PyBytes_AS_STRING(out) + RECORD_BATCH_OVERHEAD
        with nogil:
            if stream != NULL:
                got = kx_zstd_deflate_joined(dst, <size_t>cap, records, <size_t>n, lvl, threads, stream)
            else:
                got = kx_zstd_deflate(dst, <size_t>cap, records, <size_t>n, lvl, threads, frames)
        if got >= 0:
            if got == cap:
                return out
            sole = <PyObject *>out
            Py_INCREF(out)
            out = None  # as in _zstd_frame_bytes: ``sole`` holds the only reference
            _PyBytes_Resize(&sole, RECORD_BATCH_OVERHEAD + <Py_ssize_t>got)
            out = <bytes>sole
            Py_DECREF(out)
            return out
        # libzstd failed (no memory): python-zstandard writes it, or names the error
    view = PyMemoryView_FromMemory(<char *>records, n, PyBUF_READ)
    try:
        payload = _compression.compress(cid, view, level, frames)
    finally:
        view.release()
    out = PyBytes_FromStringAndSize(NULL, RECORD_BATCH_OVERHEAD + len(payload))
    memcpy(PyBytes_AS_STRING(out) + RECORD_BATCH_OVERHEAD, PyBytes_AS_STRING(payload), len(payload))
    return out


def _zstd_worker_jobs():
    """How many pieces (parts of joined frames, second frames) _c/deflate.h's worker thread has compressed in
    this process (for the tests)."""
    return kx_zstd_worker_jobs()


def _thread_resources():
    """``(libzstd contexts, inflation buffers)`` the threads hold now: one of each per thread that inflated
    a payload in C, freed when that thread ends (for the tests)."""
    return kx_syslib_live(0), kx_syslib_live(1)


def _fast_path_bound(data, int cid):
    """What _inflate_fast would size ``data`` (a batch payload of codec ``cid``) at, -1 if it leaves it to
    the Python path (for the tests)."""
    cdef Py_buffer b
    PyObject_GetBuffer(data, &b, PyBUF_SIMPLE)
    try:
        if cid == 4:
            return _zstd_frame_bound(<const uint8_t *>b.buf, b.len)
        if cid == 3:
            return _lz4_frame_bound(<const uint8_t *>b.buf, b.len)
        return -1
    finally:
        PyBuffer_Release(&b)


cdef long long _inflate_c(const unsigned char *p, Py_ssize_t n, int cid, unsigned char *dst,
                          Py_ssize_t cap) noexcept nogil:
    """Inflate a payload _fast_bound accepted into dst[0, cap): the bytes written, < 0 if the library
    rejects it (the inflation of _inflate_fast and of the C inflate-ahead workers)."""
    if cid == 4:
        return kx_syszstd_decompress(dst, <size_t>cap, p, <size_t>n)
    return _lz4_frame_inflate(p, n, dst, cap)


cdef Py_ssize_t _fast_bound(const uint8_t *p, Py_ssize_t n, int cid, Py_ssize_t max_size) except -2:
    """What a payload of codec ``cid`` inflates to at most if it is one the system's libraries inflate in C
    (zstd data frames; an lz4 frame of independent blocks without block checksums) within ``max_size`` and
    the thread buffer's limit; -1 otherwise (the Python path takes it, and names any error)."""
    cdef Py_ssize_t bound
    if cid == 4 and _SYS_ZSTD:
        bound = _zstd_frame_bound(p, n)
    elif cid == 3 and _SYS_LZ4:
        bound = _lz4_frame_bound(p, n)
    else:
        return -1
    if bound <= 0 or bound > max_size or <size_t>bound > KX_SCRATCH_MAX:
        return -1
    return bound


cdef Py_ssize_t _inflate_fast(const uint8_t *p, Py_ssize_t n, int cid, Py_ssize_t max_size,
                              const uint8_t **out) except -2:
    """Inflate a v2 payload as producers write it (zstd data frames; an lz4 frame of independent blocks
    without block checksums) with the system's libraries into the thread's buffer: its size, with ``*out``
    pointing at it until kx_scratch_release(); -1 when it is not of that form, is over ``max_size``, a
    library is missing or rejects it, or the buffer is in use: compression.decompress_view then takes it
    (the same bytes, and it names any error)."""
    cdef Py_ssize_t bound, got
    cdef uint8_t *dst
    bound = _fast_bound(p, n, cid, max_size)
    if bound < 0:
        return -1
    dst = kx_scratch_acquire(<size_t>bound)
    if dst == NULL:
        return -1
    with nogil:
        got = <Py_ssize_t>_inflate_c(p, n, cid, dst, bound)
    if got < 0:
        kx_scratch_release()
        return -1
    out[0] = dst
    return got

__all__ = [
    "BACKEND", "crc32c", "Record", "RecordBatch", "BatchIterator", "RecordList", "ReadCommittedFilter",
    "BatchBuilder", "iter_batches", "decode_records", "increment_sequence", "decrement_sequence", "scan_batches",
    "decode_arrow", "arrow_schema", "ARROW_COLUMNS", "encode_arrow",
]

cdef int32_t INT32_MAX_ = 2147483647


# ------------------------------------------------------------------------------------------ errors
cdef int _corrupt(str msg, Py_ssize_t pos, object boff) except -1:
    raise CorruptRecordError(msg, pos, boff)


cdef int _invalid(str msg, Py_ssize_t pos, int64_t boff) except -1:
    raise InvalidRecordError(msg, pos, boff)


cdef int _rec_err(RecErr code, Py_ssize_t pos, int64_t boff, int64_t a, int64_t b) except -1 with gil:
    """Raise the InvalidRecordError for a record-structure error found (possibly) without the GIL."""
    if code == E_PREMATURE_EOF:
        msg = "incorrect declared batch size, premature EOF reached"
    elif code == E_RECORD_SIZE:
        msg = (f"invalid record size: expected {a} bytes in record payload, but the buffer has only {b} "
               "remaining bytes")
    elif code == E_READ_MISMATCH:
        msg = f"invalid record size: expected to read {a} bytes in record payload, but instead read {b}"
    elif code == E_KEY_PAST:
        msg = "found invalid record structure: key runs past the record"
    elif code == E_VALUE_PAST:
        msg = "found invalid record structure: value runs past the record"
    elif code == E_HEADER_COUNT:
        msg = f"found invalid number of record headers {a}"
    elif code == E_HKEY_NEGATIVE:
        msg = "invalid negative header key size"
    elif code == E_HKEY_PAST:
        msg = "header key runs past the record"
    elif code == E_HVALUE_PAST:
        msg = "header value runs past the record"
    else:
        msg = "incorrect declared batch size, records still remaining in file"
    raise InvalidRecordError(msg, pos, boff)


# ------------------------------------------------------------------------------------------ CRC-32C
cdef inline uint32_t _crc(uint32_t crc, const uint8_t *p, Py_ssize_t n) noexcept:
    cdef uint32_t c
    if n >= NOGIL_THRESHOLD:
        with nogil:
            c = kx_crc32c(crc, p, <size_t>n)
        return c
    return kx_crc32c(crc, p, <size_t>n)


def crc32c(data, uint32_t crc=0):
    """CRC-32C (Castagnoli) of a bytes-like object; pass a previous result as ``crc`` to continue it."""
    cdef Py_buffer view
    cdef uint32_t c
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        c = _crc(crc, <const uint8_t *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return c


def populate(data, Py_ssize_t start=0, Py_ssize_t end=-1):
    """Map the pages of ``data[start:end]`` in ahead of use (``end=-1``: to the end), without the GIL.

    For memory-mapped segments: ``MADV_POPULATE_READ`` on Linux, otherwise one byte read per page.  A hint
    only: nothing about ``data`` changes.  Returns True if the kernel populated the range."""
    cdef Py_buffer view
    cdef int got
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if end < 0 or end > view.len:
            end = view.len
        if start < 0:
            start = 0
        if start >= end:
            return True
        with nogil:
            got = kx_populate(<const unsigned char *>view.buf + start, <size_t>(end - start))
    finally:
        PyBuffer_Release(&view)
    return got == 1


def populate_many(items):
    """``populate`` for a list of ``(data, start, end)`` with the GIL released once for all of them (a
    thread populating many small maps would otherwise wait for the GIL between every two).  Items whose
    buffer cannot be had (a closed map) are skipped.  Returns how many non-empty ranges the kernel populated."""
    cdef list todo = list(items)
    cdef Py_ssize_t n = len(todo), k, got = 0, a, b
    cdef Py_buffer *views = <Py_buffer *>malloc((n if n else 1) * sizeof(Py_buffer))
    cdef Py_ssize_t *ranges = <Py_ssize_t *>malloc((n if n else 1) * 2 * sizeof(Py_ssize_t))
    cdef char *held = <char *>calloc(n if n else 1, 1)  # (zeros: the finally releases only what was had)
    if views == NULL or ranges == NULL or held == NULL:
        free(views); free(ranges); free(held)
        raise MemoryError()
    try:
        for k in range(n):
            data, a, b = todo[k]
            try:
                PyObject_GetBuffer(data, &views[k], PyBUF_SIMPLE)
            except (ValueError, BufferError):
                continue
            held[k] = 1
            if b < 0 or b > views[k].len:
                b = views[k].len
            ranges[2 * k] = a if a > 0 else 0
            ranges[2 * k + 1] = b
        with nogil:
            for k in range(n):
                if held[k] and ranges[2 * k] < ranges[2 * k + 1]:
                    got += kx_populate(<const unsigned char *>views[k].buf + ranges[2 * k],
                                       <size_t>(ranges[2 * k + 1] - ranges[2 * k]))
    finally:
        for k in range(n):
            if held[k]:
                PyBuffer_Release(&views[k])
        free(views); free(ranges); free(held)
    return got


# ---------------------------------------------------------------------------------------- sequences
cdef inline int32_t _wrap(uint32_t x) noexcept nogil:
    return <int32_t>x  # Java int arithmetic: modulo 2^32, done unsigned so C has no overflow


cdef inline int64_t _wadd(int64_t a, int64_t b) noexcept nogil:
    """``a + b`` in Java long arithmetic (wrapped; a signed overflow would be undefined in C)."""
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline int64_t _wsub(int64_t a, int64_t b) noexcept nogil:
    """``a - b`` in Java long arithmetic."""
    return <int64_t>(<uint64_t>a - <uint64_t>b)


cdef inline int32_t _inc_seq(int32_t sequence, int32_t increment) noexcept nogil:
    cdef uint32_t imax = <uint32_t>2147483647
    if sequence > _wrap(imax - <uint32_t>increment):
        return _wrap(<uint32_t>increment - (imax - <uint32_t>sequence) - 1u)
    return _wrap(<uint32_t>sequence + <uint32_t>increment)


cpdef int32_t increment_sequence(int32_t sequence, int32_t increment):
    """Kafka's ``DefaultRecordBatch.incrementSequence`` (Java int arithmetic): after 2147483647 comes 0."""
    return _inc_seq(sequence, increment)


cpdef int32_t decrement_sequence(int32_t sequence, int32_t decrement):
    """Kafka's ``DefaultRecordBatch.decrementSequence``: before 0 comes 2147483647."""
    cdef uint32_t imax = <uint32_t>INT32_MAX_
    if sequence < decrement:
        return _wrap(imax - (<uint32_t>decrement - <uint32_t>sequence) + 1u)
    return _wrap(<uint32_t>sequence - <uint32_t>decrement)


# ------------------------------------------------------------------------------------------ buffers
@cython.final
@cython.no_gc_clear
cdef class _Buffer:
    """Holds one buffer export of the caller's object for as long as anything points into it."""
    cdef Py_buffer view
    cdef const uint8_t *ptr
    cdef Py_ssize_t size
    cdef bint acquired

    def __cinit__(self, obj):
        PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
        self.acquired = True
        self.ptr = <const uint8_t *>self.view.buf
        self.size = self.view.len

    def __dealloc__(self):
        if self.acquired:
            PyBuffer_Release(&self.view)
            self.acquired = False


# ------------------------------------------------------------------------------------------ varints
cdef int _bad_varint(Py_ssize_t pos, int64_t boff, bint is_long, bint truncated) except -1 with gil:
    if truncated:
        raise InvalidRecordError("truncated varlong" if is_long else "truncated varint", pos, boff)
    if is_long:
        raise InvalidRecordError("varlong is too long, the most significant bit in the 10th byte is set", pos, boff)
    raise InvalidRecordError("varint is too long, the most significant bit in the 5th byte is set", pos, boff)


cdef int _raise_rec(const kx_rec_error *e, Py_ssize_t base, int64_t boff) except -1 nogil:
    """Raise what record.h reported (positions there are relative to the parsed buffer; ``base`` maps them)."""
    if e.code == E_VARINT_TRUNCATED or e.code == E_VARINT_TOO_LONG:
        return _bad_varint(base + e.pos, boff, False, e.code == E_VARINT_TRUNCATED)
    if e.code == E_VARLONG_TRUNCATED or e.code == E_VARLONG_TOO_LONG:
        return _bad_varint(base + e.pos, boff, True, e.code == E_VARLONG_TRUNCATED)
    return _rec_err(e.code, base + e.pos, boff, e.a, e.b)


cdef inline int rd_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t base,
                          int64_t boff, int32_t *out) except -1 nogil:
    """Zigzag int32 as Java's ByteUtils.readVarint (record.h): at most 5 bytes, excess high bits dropped."""
    cdef kx_rec_error e
    if kx_rd_varint(buf, pos, end, out, &e) == 0:
        return 0
    return _raise_rec(&e, base, boff)


cdef inline int rd_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t base,
                           int64_t boff, int64_t *out) except -1 nogil:
    cdef kx_rec_error e
    if kx_rd_varlong(buf, pos, end, out, &e) == 0:
        return 0
    return _raise_rec(&e, base, boff)


cdef inline Py_ssize_t wr_varlong(uint8_t *p, int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef Py_ssize_t n = 0
    # most of a record's varints (lengths, deltas, attributes) take one or two bytes: written without the loop
    if u < 0x80:
        p[0] = <uint8_t>u
        return 1
    if u < 0x4000:
        p[0] = <uint8_t>((u & 0x7F) | 0x80)
        p[1] = <uint8_t>(u >> 7)
        return 2
    while u >= 0x80:
        p[n] = <uint8_t>((u & 0x7F) | 0x80)
        u >>= 7
        n += 1
    p[n] = <uint8_t>u
    return n + 1


cdef inline Py_ssize_t varlong_size(int64_t v) noexcept nogil:
    cdef uint64_t u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef Py_ssize_t n = 3
    if u < 0x80:
        return 1
    if u < 0x4000:
        return 2
    u >>= 14
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


# --------------------------------------------------------------------------------------- the header
cdef inline void read_header(const uint8_t *p, Header *h) noexcept nogil:
    h.base_offset = kx_load_be_i64(p)
    h.batch_length = kx_load_be_i32(p + LENGTH_OFFSET)
    h.partition_leader_epoch = kx_load_be_i32(p + PARTITION_LEADER_EPOCH_OFFSET)
    h.magic = <int8_t>p[MAGIC_V2_OFFSET]
    h.crc = kx_load_be32(p + CRC_OFFSET)
    h.attributes = <uint16_t>kx_load_be_i16(p + ATTRIBUTES_OFFSET)
    h.last_offset_delta = kx_load_be_i32(p + LAST_OFFSET_DELTA_OFFSET)
    h.base_timestamp = kx_load_be_i64(p + BASE_TIMESTAMP_OFFSET)
    h.max_timestamp = kx_load_be_i64(p + MAX_TIMESTAMP_OFFSET)
    h.producer_id = kx_load_be_i64(p + PRODUCER_ID_OFFSET)
    h.producer_epoch = kx_load_be_i16(p + PRODUCER_EPOCH_OFFSET)
    h.base_sequence = kx_load_be_i32(p + BASE_SEQUENCE_OFFSET)
    h.records_count = kx_load_be_i32(p + RECORDS_COUNT_OFFSET)


cdef int next_entry(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *size_out) except -1:
    """Size of the complete entry at ``pos`` (1 returned when the buffer ends before it: a truncated tail)."""
    cdef Py_ssize_t left = end - pos
    cdef int32_t size
    cdef int8_t magic
    if left < LOG_OVERHEAD:
        return 1
    size = kx_load_be_i32(buf + pos + LENGTH_OFFSET)
    if size < RECORD_OVERHEAD_V0:
        _corrupt(f"record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})", pos, None)
    if left < HEADER_SIZE_UP_TO_MAGIC:
        return 1
    magic = <int8_t>buf[pos + MAGIC_OFFSET]
    if magic < 0 or magic > 2:
        _corrupt(f"invalid magic found in record: {magic}", pos + MAGIC_OFFSET, None)
    if left < <Py_ssize_t>size + LOG_OVERHEAD:
        return 1
    size_out[0] = <Py_ssize_t>size + LOG_OVERHEAD
    return 0


cdef int check_v2_header(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t size, Header *h) except -1:
    if size < RECORD_BATCH_OVERHEAD:
        _corrupt(f"record batch size {size} is smaller than the minimum {RECORD_BATCH_OVERHEAD}", pos, None)
    read_header(buf + pos, h)
    if (h.attributes & COMPRESSION_CODEC_MASK) > 4:
        raise UnsupportedCompressionError(
            f"unknown compression type id {h.attributes & COMPRESSION_CODEC_MASK}", pos + ATTRIBUTES_OFFSET,
            h.base_offset)
    if h.records_count < 0:
        _invalid(f"found invalid record count {h.records_count}", pos + RECORDS_COUNT_OFFSET, h.base_offset)
    return 0


cdef int verify_v2_crc(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t size, Header *h) except -1:
    cdef uint32_t computed = _crc(0, buf + pos + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET)
    if computed != h.crc:
        raise CrcMismatchError(
            f"record is corrupt (stored crc = {h.crc}, computed crc = {computed})", pos, h.base_offset)
    return 0


include "_arrow.pxi"


# ------------------------------------------------------------------------------------------ records
@cython.final
@cython.freelist(512)
@cython.no_gc
cdef class Record:
    """One record: ``offset, timestamp, key, value, headers`` (+ its producer ``sequence``).

    Records hold only bytes, str and tuples of them (the constructor enforces it), so they can never be
    part of a reference cycle and stay out of the cyclic GC: decoding millions of them costs no collections.
    """
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
    cdef readonly int32_t sequence

    def __init__(self, int64_t offset, int64_t timestamp, key, value, headers=(), int32_t sequence=-1):
        self.offset = offset
        self.timestamp = timestamp
        self.key = _as_bytes(key, "key")
        self.value = _as_bytes(value, "value")
        self.headers = _as_headers(headers)
        self.sequence = sequence

    def __eq__(self, other):
        if not hasattr(other, "sequence") or not hasattr(other, "headers"):
            return NotImplemented
        return (self.offset == other.offset and self.timestamp == other.timestamp and self.key == other.key
                and self.value == other.value and self.headers == other.headers
                and self.sequence == other.sequence)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __reduce__(self):
        return (Record, (self.offset, self.timestamp, self.key, self.value, self.headers, self.sequence))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r}, sequence={self.sequence})")


cdef object _surrogateescape = "surrogateescape"


# how many header positions a batch's decoder keeps its records' header keys for (_walk_headers' ``seen``)
cdef enum:
    SEEN_KEYS = 8


cdef tuple _walk_headers(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t rend, Py_ssize_t base, int64_t boff,
                         int32_t hcount, list seen):
    """The ``hcount`` headers at ``pos`` (validated) as a tuple of ``(key, value)`` pairs.  ``seen`` holds
    the ASCII keys the batch's records had at each of the first positions (None where one was not ASCII):
    a key equal to the one seen at its position is that str again (producers send the same header names in
    the same order), which saves decoding it and the memory of another str."""
    cdef int32_t i
    cdef int32_t hklen = 0, hvlen = 0
    cdef Py_ssize_t p, kpos
    cdef object hval, key, known
    cdef tuple out = PyTuple_New(hcount)
    cdef tuple pair
    for i in range(hcount):
        rd_varint(buf, pos, rend, base, boff, &hklen)
        p = pos[0]
        if hklen < 0:
            _invalid("invalid negative header key size", base + p, boff)
        if hklen > rend - p:
            _invalid("header key runs past the record", base + p, boff)
        kpos = p
        pos[0] = p + hklen
        rd_varint(buf, pos, rend, base, boff, &hvlen)
        p = pos[0]
        if hvlen >= 0:
            if hvlen > rend - p:
                _invalid("header value runs past the record", base + p, boff)
            pos[0] = p + hvlen
        key = None
        if i < len(seen):
            known = seen[i]
            if (known is not None and PyUnicode_GET_LENGTH(known) == hklen
                    and memcmp(PyUnicode_DATA(known), buf + kpos, <size_t>hklen) == 0):
                key = known
        if key is None:
            key = PyUnicode_DecodeUTF8(<const char *>buf + kpos, hklen, "surrogateescape")
            if i < SEEN_KEYS:
                known = key if PyUnicode_IS_ASCII(key) else None
                if i < len(seen):
                    seen[i] = known
                else:
                    seen.append(known)
        hval = PyBytes_FromStringAndSize(<const char *>buf + p, hvlen) if hvlen >= 0 else None
        pair = (key, hval)
        Py_INCREF(pair)
        PyTuple_SET_ITEM(out, i, pair)
    return out


cdef int _headers_to_columns(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t rend, Py_ssize_t base, int64_t boff,
                             int32_t hcount, _Columns cols) except -1 nogil:
    """Append the ``hcount`` headers at ``pos`` to the header child columns (validated as _walk_headers)."""
    cdef int32_t i
    cdef int32_t hklen = 0, hvlen = 0
    cdef Py_ssize_t kpos
    for i in range(hcount):
        rd_varint(buf, &pos, rend, base, boff, &hklen)
        if hklen < 0:
            return _rec_err(E_HKEY_NEGATIVE, base + pos, boff, 0, 0)
        if hklen > rend - pos:
            return _rec_err(E_HKEY_PAST, base + pos, boff, 0, 0)
        kpos = pos
        pos += hklen
        rd_varint(buf, &pos, rend, base, boff, &hvlen)
        if hvlen >= 0:
            if hvlen > rend - pos:
                return _rec_err(E_HVALUE_PAST, base + pos, boff, 0, 0)
        cols.add_header(buf + kpos, hklen, buf + pos, hvlen)
        if hvlen > 0:
            pos += hvlen
    return 0


cdef int decode_v2_columns(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base, Header *h,
                           _Columns cols, int64_t fetch_offset, int64_t last_visible,
                           const uint8_t *prefetch_end) except -1 nogil:
    """The Arrow path of decode_v2_records, without the GIL (taken back only for errors and rare growth).

    Every fixed-width column is reserved for the whole batch first, so the record loop writes through
    plain pointers; the columns that are constant over a batch (timestamp type, producer id and epoch,
    is_transactional) are filled once after it.

    ``prefetch_end`` (if not NULL) is the end of the caller's buffer, in which the next batch starts at
    ``end``: as the loop moves through this batch, it prefetches the cache lines as far into the bytes after
    it, so that the next batch's CRC pass finds them in the cache instead of waiting on memory, which is
    idle while records are decoded (decode_arrow of the benchmark log, 1,000-record batches: 25.4 -> 23.8 ms; 100- and
    10,000-record batches gain 0.6 and 1.1 ms)."""
    cdef int64_t boff = h.base_offset
    cdef bint log_append = (h.attributes & TIMESTAMP_TYPE_MASK) != 0
    cdef int want = cols.want
    cdef bint views = cols.views
    cdef bint large = cols.large
    cdef Py_ssize_t row0 = cols.n
    cdef Py_ssize_t j = 0, r
    cdef int32_t i
    cdef int64_t offset, ts
    cdef RecView rv
    cdef kx_rec_error err
    cdef int64_t *p_off = NULL
    cdef int64_t *p_ts = NULL
    cdef int32_t *p_seq = NULL
    cdef int32_t *p_hoff = NULL
    cdef uint8_t *p_k = NULL      # next key offset slot (int32 / int64) or view
    cdef uint8_t *p_v = NULL
    cdef Py_ssize_t klen_total, vlen_total
    cdef int32_t kidx = cols.cur_index
    cdef const uint8_t *kbase = cols.cur_base
    cdef int32_t base_seq = h.base_sequence
    cdef const uint8_t *pf = buf + end  # the next line to prefetch, kept one batch length ahead of pos
    cdef const uint8_t *pf_end = prefetch_end if prefetch_end != NULL else pf
    cdef Py_ssize_t pf_lead = end - pos
    # a record takes at least MIN_RECORD_SIZE bytes, so this bounds the rows a forged count can claim
    cols.reserve(min(<Py_ssize_t>h.records_count, (end - pos) // MIN_RECORD_SIZE), end - pos, end - pos)
    if want & COL_OFFSET:
        p_off = <int64_t *>(cols.offset.data + cols.offset.len)
    if want & COL_TIMESTAMP:
        p_ts = <int64_t *>(cols.timestamp.data + cols.timestamp.len)
    if want & COL_SEQUENCE:
        p_seq = <int32_t *>(cols.sequence.data + cols.sequence.len)
    if want & COL_HEADERS:
        p_hoff = <int32_t *>(cols.h_list_offsets.data + cols.h_list_offsets.len)
    if want & COL_KEY:
        p_k = cols.key.offsets.data + cols.key.offsets.len
    if want & COL_VALUE:
        p_v = cols.value.offsets.data + cols.value.offsets.len
    klen_total = cols.key.data.len
    vlen_total = cols.value.data.len
    for i in range(h.records_count):
        if kx_parse_record(buf, &pos, end, &rv, &err):  # (record.h, inlined here)
            _raise_rec(&err, base, boff)
        while pf < pf_end and pf < buf + pos + pf_lead:
            kx_prefetch(pf)
            pf += 64
        offset = _wadd(boff, rv.off_delta)
        if offset < fetch_offset or offset > last_visible:
            continue
        r = row0 + j
        if p_off != NULL:
            p_off[j] = offset
        if p_ts != NULL:
            ts = h.max_timestamp if log_append else _wadd(h.base_timestamp, rv.ts_delta)
            p_ts[j] = ts
            if ts == -1:  # Kafka's "no timestamp"; others are real instants
                row_null(&cols.ts_valid, &cols.ts_nulls, r)
            elif cols.ts_nulls:
                bit_set(&cols.ts_valid, r, True)
        if p_k != NULL:
            p_k = _bin_put(&cols.key, p_k, r, rv.key, rv.klen, &klen_total, views, large, kidx, kbase)
        if p_v != NULL:
            p_v = _bin_put(&cols.value, p_v, r, rv.value, rv.vlen, &vlen_total, views, large, kidx, kbase)
        if p_seq != NULL:
            p_seq[j] = _inc_seq(base_seq, rv.off_delta) if base_seq >= 0 else -1
        if p_hoff != NULL:
            if rv.hcount:
                _headers_to_columns(buf, rv.hpos, rv.rend, base, boff, rv.hcount, cols)
                if cols.h_n > 2147483647:
                    _binary_overflow()
            p_hoff[j] = <int32_t>cols.h_n
        j += 1
    if pos != end:
        return _rec_err(E_REMAINING, base + pos, boff, 0, 0)
    # commit the rows written through the pointers, and fill the columns constant over the batch
    if want & COL_OFFSET:
        cols.offset.len += 8 * j
    if want & COL_TIMESTAMP:
        cols.timestamp.len += 8 * j
    if want & COL_SEQUENCE:
        cols.sequence.len += 4 * j
    if want & COL_HEADERS:
        cols.h_list_offsets.len += 4 * j
    if want & COL_KEY:
        cols.key.offsets.len = p_k - cols.key.offsets.data
        cols.key.data.len = klen_total
    if want & COL_VALUE:
        cols.value.offsets.len = p_v - cols.value.offsets.data
        cols.value.data.len = vlen_total
    if want & COL_TIMESTAMP_TYPE:
        memset(cols.ts_type.data + cols.ts_type.len, 1 if log_append else 0, j)
        cols.ts_type.len += j
    if want & COL_PRODUCER_ID:
        _fill64(&cols.producer_id, h.producer_id, j)
    if want & COL_PRODUCER_EPOCH:
        _fill16(&cols.producer_epoch, h.producer_epoch, j)
    if want & COL_IS_TRANSACTIONAL:
        bits_fill(&cols.is_txn, row0, j, (h.attributes & TRANSACTIONAL_FLAG_MASK) != 0)
    cols.n = row0 + j
    return 0


cdef inline void _fill64(Grow *g, int64_t v, Py_ssize_t n) noexcept nogil:
    cdef int64_t *p = <int64_t *>(g.data + g.len)
    cdef Py_ssize_t i
    for i in range(n):
        p[i] = v
    g.len += 8 * n


cdef inline void _fill16(Grow *g, int16_t v, Py_ssize_t n) noexcept nogil:
    cdef int16_t *p = <int16_t *>(g.data + g.len)
    cdef Py_ssize_t i
    for i in range(n):
        p[i] = v
    g.len += 2 * n


cdef struct Summary:
    Py_ssize_t count
    int64_t lo, hi   # -1: no timestamp yet
    bint in_sequence


@cython.final
cdef class _Summary:
    """decode_v2_records' third kind of output: a RecordSummary's fields, accumulated."""
    cdef Summary s

    def __cinit__(self):
        self.s.count = 0
        self.s.lo = self.s.hi = -1
        self.s.in_sequence = True


cdef int _summarise(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base, Header *h,
                    Summary *out) except -1 nogil:
    """decode_v2_records into ``out``: every record parsed and checked as for Records, none made."""
    cdef int64_t boff = h.base_offset
    cdef bint log_append = (h.attributes & TIMESTAMP_TYPE_MASK) != 0
    cdef int64_t lo = out.lo, hi = out.hi, ts
    cdef bint in_sequence = out.in_sequence
    cdef int32_t i
    cdef RecView rv
    cdef kx_rec_error err
    for i in range(h.records_count):
        if kx_parse_record(buf, &pos, end, &rv, &err):
            _raise_rec(&err, base, boff)
        if rv.off_delta != i:
            in_sequence = False
        ts = h.max_timestamp if log_append else _wadd(h.base_timestamp, rv.ts_delta)
        if ts != -1:
            if lo == -1 or ts < lo:
                lo = ts
            if hi == -1 or ts > hi:
                hi = ts
    if pos != end:
        _rec_err(E_REMAINING, base + pos, boff, 0, 0)
    out.count += h.records_count
    out.lo, out.hi, out.in_sequence = lo, hi, in_sequence
    return 0


cdef int decode_v2_records(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base, Header *h,
                           object out, _Columns cols, int64_t fetch_offset, int64_t last_visible) except -1:
    """Decode ``h.records_count`` records from buf[pos:end] into ``out`` (Records, or a _Summary of all of
    them, the filter offsets ignored) or ``cols`` (Arrow).

    ``base`` maps local positions to the caller's buffer."""
    cdef int64_t boff = h.base_offset
    cdef int64_t base_ts = h.base_timestamp
    cdef int64_t max_ts = h.max_timestamp
    cdef bint log_append = (h.attributes & TIMESTAMP_TYPE_MASK) != 0
    cdef bint txn = (h.attributes & TRANSACTIONAL_FLAG_MASK) != 0
    cdef int32_t base_seq = h.base_sequence
    cdef int32_t i
    cdef int64_t offset, ts
    cdef int32_t seq
    cdef Py_ssize_t hp
    cdef RecView rv
    cdef kx_rec_error err
    cdef Record r
    cdef list seen = None
    if cols is not None:
        if end - pos >= NOGIL_THRESHOLD:
            with nogil:
                decode_v2_columns(buf, pos, end, base, h, cols, fetch_offset, last_visible, NULL)
        else:
            decode_v2_columns(buf, pos, end, base, h, cols, fetch_offset, last_visible, NULL)
        return 0
    if type(out) is _Summary:
        if end - pos >= NOGIL_THRESHOLD:
            with nogil:
                _summarise(buf, pos, end, base, h, &(<_Summary>out).s)
        else:
            _summarise(buf, pos, end, base, h, &(<_Summary>out).s)
        return 0
    for i in range(h.records_count):
        if kx_parse_record(buf, &pos, end, &rv, &err):  # (record.h, inlined here)
            _raise_rec(&err, base, boff)
        offset = _wadd(boff, rv.off_delta)
        if offset < fetch_offset or offset > last_visible:
            continue
        ts = max_ts if log_append else _wadd(base_ts, rv.ts_delta)
        seq = _inc_seq(base_seq, rv.off_delta) if base_seq >= 0 else -1
        r = Record.__new__(Record)
        r.offset = offset
        r.timestamp = ts
        r.key = PyBytes_FromStringAndSize(<const char *>rv.key, rv.klen) if rv.klen >= 0 else None
        r.value = PyBytes_FromStringAndSize(<const char *>rv.value, rv.vlen) if rv.vlen >= 0 else None
        if rv.hcount:
            if seen is None:
                seen = []
            hp = rv.hpos
            r.headers = _walk_headers(buf, &hp, rv.rend, base, boff, rv.hcount, seen)
        else:
            r.headers = ()
        r.sequence = seq
        PyList_Append(out, r)
    if pos != end:
        _rec_err(E_REMAINING, base + pos, boff, 0, 0)
    return 0


cdef int decode_v2_batch(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t size, Header *h, object out,
                         _Columns cols, int64_t fetch_offset, int64_t last_visible, Py_ssize_t max_size,
                         object ahead=None) except -1:
    """All records of the v2 batch at buf[pos:pos+size], inflating its payload when compressed (or taking
    it from ``ahead``, a compression.InflateAhead over ``buf``, when that has it)."""
    cdef int cid = h.attributes & COMPRESSION_CODEC_MASK
    cdef Py_ssize_t start = pos + RECORD_BATCH_OVERHEAD
    cdef bint keep = cols is not None and cols.views  # views point into the payload: it must stay
    cdef object payload
    cdef Py_buffer pb
    cdef const uint8_t *inflated
    cdef Py_ssize_t n
    if h.records_count == 0:
        return 0  # an empty (cleaned) batch: its payload is never looked at
    if cid == 0:
        if keep:
            cols.use_source(start, size - RECORD_BATCH_OVERHEAD)
        return decode_v2_records(buf, start, pos + size, 0, h, out, cols, fetch_offset, last_visible)
    # records and copying columns are done with the payload before the next inflation on this thread, so
    # it may live in the thread's reusable buffer (compression.decompress_view)
    payload = None
    if type(ahead) is _CAhead:
        with nogil:
            n = <Py_ssize_t>kx_ahead_take((<_CAhead>ahead).a, start, &inflated)
        if n >= 0:
            return _decode_payload(inflated, n, start, h, out, cols, fetch_offset, last_visible)
        ahead = None  # no span starts here, or the library rejected it: inflated here, which names any error
    if ahead is not None:
        try:
            payload = ahead.take(start)
        except (CorruptRecordError, DecompressedSizeError) as exc:
            raise type(exc)(f"{exc.reason} (compressed payload)", start, h.base_offset) from None
        if keep and payload is not None and not PyBytes_CheckExact(payload):
            payload = bytes(payload)
    if payload is None and not keep:
        n = _inflate_fast(buf + start, pos + size - start, cid, max_size, &inflated)
        if n >= 0:
            try:
                return _decode_payload(inflated, n, start, h, out, cols, fetch_offset, last_visible)
            finally:
                kx_scratch_release()
    if payload is None:
        payload = _inflate(buf, start, pos + size, cid, h.base_offset, max_size, keep)
    if keep:
        cols.use_payload(payload)
    PyObject_GetBuffer(payload, &pb, PyBUF_SIMPLE)
    try:
        return _decode_payload(<const uint8_t *>pb.buf, pb.len, start, h, out, cols, fetch_offset, last_visible)
    finally:
        PyBuffer_Release(&pb)


cdef int _decode_payload(const uint8_t *p, Py_ssize_t n, Py_ssize_t start, Header *h, object out, _Columns cols,
                         int64_t fetch_offset, int64_t last_visible) except -1:
    """decode_v2_records over an inflated payload, its errors pointed at the batch's payload."""
    try:
        return decode_v2_records(p, 0, n, 0, h, out, cols, fetch_offset, last_visible)
    except CorruptRecordError as exc:
        raise type(exc)(f"{exc.reason} (at byte {exc.position} of the decompressed payload)", start,
                        exc.base_offset) from None


cdef object _inflate(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, int cid, int64_t boff,
                     Py_ssize_t max_size, bint keep):
    """The inflated payload: ``bytes`` when ``keep``, else possibly a view of the thread's reusable buffer."""
    cdef object view = PyMemoryView_FromMemory(<char *>buf + start, end - start, PyBUF_READ)
    try:
        if keep:
            data = _compression.decompress(cid, view, max_size, 2)
        else:
            data = _compression.decompress_view(cid, view, max_size, 2)
    except (CorruptRecordError, DecompressedSizeError) as exc:
        raise type(exc)(f"{exc.reason} (compressed payload)", start, boff) from None
    finally:
        view.release()
    if keep and not PyBytes_CheckExact(data):
        data = bytes(data)
    return data


cdef int first_control_type(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t size, Header *h,
                            Py_ssize_t max_size) except -2:
    """Type of the first control record (0 ABORT, 1 COMMIT, ...), or -1 if not a non-empty control batch."""
    cdef list out
    cdef bytes key
    cdef int16_t version
    if not (h.attributes & CONTROL_FLAG_MASK) or h.records_count == 0:
        return -1
    out = []
    decode_v2_batch(buf, pos, size, h, out, None, INT64_MIN, INT64_MAX, max_size)  # (every record)
    key = (<Record>out[0]).key
    if key is None or len(key) < 4:
        _invalid("control record key is shorter than 4 bytes", pos, h.base_offset)
    version = kx_load_be_i16(<const unsigned char *>PyBytes_AS_STRING(key))
    if version < 0:
        _invalid(f"invalid version {version} of control record key, may indicate data corruption", pos,
                 h.base_offset)
    return kx_load_be_i16(<const unsigned char *>PyBytes_AS_STRING(key) + 2)


# ------------------------------------------------------------------------------------------ batches
@cython.final
cdef class RecordBatch:
    """One entry of a log: a v2 record batch, or a legacy (magic 0/1) message or compressed wrapper."""
    cdef _Buffer _owner
    cdef Header h
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size_in_bytes
    cdef Py_ssize_t _max
    cdef list _legacy_records
    cdef int64_t _legacy_last_offset

    def __init__(self, data, Py_ssize_t position=0, size=None, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                 verify_crc=True):
        cdef _Buffer owner = _Buffer(data)
        cdef Py_ssize_t n
        if position < 0 or position > owner.size:
            raise ValueError(f"position {position} is outside the buffer of {owner.size} bytes")
        if size is None:
            if next_entry(owner.ptr, position, owner.size, &n):
                raise CorruptRecordError("incomplete entry", position)
        else:
            n = size
            if n < LOG_OVERHEAD + 5 or n > owner.size - position:
                raise ValueError(f"size {n} does not fit the buffer at position {position}")
        _init_batch(self, owner, position, n, max_decompressed_size, verify_crc)

    # -- header fields -----------------------------------------------------------------------------
    @property
    def base_offset(self):
        return self.h.base_offset

    @property
    def last_offset_delta(self):
        if self.h.magic < 2:
            return self._legacy_last_offset - self.h.base_offset
        return self.h.last_offset_delta

    @property
    def last_offset(self):
        return self._legacy_last_offset if self.h.magic < 2 else _wadd(self.h.base_offset, self.h.last_offset_delta)

    @property
    def next_offset(self):
        return self.last_offset + 1

    @property
    def magic(self):
        return self.h.magic

    @property
    def crc(self):
        return self.h.crc

    @property
    def attributes(self):
        return self.h.attributes

    @property
    def compression(self):
        return COMPRESSION_NAMES[self.h.attributes & COMPRESSION_CODEC_MASK]

    @property
    def timestamp_type(self):
        if self.h.magic == 0:
            return "no_timestamp_type"
        return "log_append_time" if self.h.attributes & TIMESTAMP_TYPE_MASK else "create_time"

    @property
    def is_transactional(self):
        return self.h.magic >= 2 and (self.h.attributes & TRANSACTIONAL_FLAG_MASK) != 0

    @property
    def is_control(self):
        return self.h.magic >= 2 and (self.h.attributes & CONTROL_FLAG_MASK) != 0

    @property
    def has_delete_horizon(self):
        return self.h.magic >= 2 and (self.h.attributes & DELETE_HORIZON_FLAG_MASK) != 0

    @property
    def delete_horizon_ms(self):
        return self.h.base_timestamp if self.has_delete_horizon else None

    @property
    def base_timestamp(self):
        return self.h.base_timestamp

    @property
    def max_timestamp(self):
        return self.h.max_timestamp

    @property
    def producer_id(self):
        return self.h.producer_id

    @property
    def producer_epoch(self):
        return self.h.producer_epoch

    @property
    def base_sequence(self):
        return self.h.base_sequence

    @property
    def last_sequence(self):
        if self.h.base_sequence == -1:
            return -1
        return increment_sequence(self.h.base_sequence, self.h.last_offset_delta)

    @property
    def partition_leader_epoch(self):
        return self.h.partition_leader_epoch

    @property
    def records_count(self):
        return self.h.records_count

    # -- CRC ---------------------------------------------------------------------------------------
    def compute_crc(self):
        if self.h.magic >= 2:
            return _crc(0, self._owner.ptr + self.position + ATTRIBUTES_OFFSET, self.size_in_bytes - ATTRIBUTES_OFFSET)
        return _legacy.legacy_crc(self._view(), 0, self.size_in_bytes)

    @property
    def is_valid(self):
        return self.compute_crc() == self.h.crc

    def validate_crc(self):
        computed = self.compute_crc()
        if computed != self.h.crc:
            raise CrcMismatchError(f"record is corrupt (stored crc = {self.h.crc}, computed crc = {computed})",
                                   self.position, self.h.base_offset)

    cdef object _view(self):
        return PyMemoryView_FromMemory(<char *>self._owner.ptr + self.position, self.size_in_bytes, PyBUF_READ)

    def tobytes(self):
        return PyBytes_FromStringAndSize(<const char *>self._owner.ptr + self.position, self.size_in_bytes)

    # -- records -----------------------------------------------------------------------------------
    cdef int _decode_into(self, object out, int64_t fetch_offset, int64_t last_visible) except -1:
        cdef Record r
        if self.h.magic < 2:
            for r in self._legacy_records:
                if fetch_offset <= r.offset <= last_visible:
                    PyList_Append(out, r)
            return 0
        return decode_v2_batch(self._owner.ptr, self.position, self.size_in_bytes, &self.h, out, None,
                               fetch_offset, last_visible, self._max)

    def records(self):
        """All records of the batch (control records too: this is the raw view)."""
        cdef list out = []
        self._decode_into(out, INT64_MIN, INT64_MAX)  # (from the first offset to the last, 2^63-1 included)
        return out

    def record_summary(self):
        """A :class:`RecordSummary` of the records (control records too): how many, the smallest and
        largest timestamp other than -1, whether their offset deltas are 0, 1, 2, ... (no gap).
        Every record is decoded and checked as :meth:`records` does (a damaged one raises the same
        error), but no Record, key or value object is made: what a broker's ``LogValidator`` needs of an
        appended batch, at C speed."""
        cdef _Summary out
        if self.h.magic < 2:
            return summary_of(self._legacy_records, self.h.base_offset)
        out = _Summary()
        decode_v2_batch(self._owner.ptr, self.position, self.size_in_bytes, &self.h, out, None,
                        INT64_MIN, INT64_MAX, self._max)
        return RecordSummary(out.s.count, out.s.lo, out.s.hi, out.s.in_sequence)

    def __iter__(self):
        return iter(self.records())

    def control_record(self):
        """The parsed first control record of a control batch (a marker's type and coordinator epoch),
        or ``None`` for a data batch or an empty (cleaned) control batch."""
        if not self.is_control or self.records_count == 0:
            return None
        return _control.parse_control_record(self.records()[0], self.position, self.base_offset)

    def first_control_type(self):
        """Type of the first control record (0 ABORT, 1 COMMIT, ...), or -1 if not a marker batch."""
        if self.h.magic < 2:
            return -1
        return first_control_type(self._owner.ptr, self.position, self.size_in_bytes, &self.h, self._max)

    def __repr__(self):
        return (f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, magic={self.magic}, records_count={self.records_count}, "
                f"compression={self.compression!r}, producer_id={self.producer_id}, "
                f"producer_epoch={self.producer_epoch}, base_sequence={self.base_sequence}, "
                f"is_transactional={self.is_transactional}, is_control={self.is_control})")


cdef int _init_batch(RecordBatch b, _Buffer owner, Py_ssize_t pos, Py_ssize_t size, Py_ssize_t max_size,
                     bint verify) except -1:
    """Fill ``b`` from the entry at ``pos``; with ``verify`` its CRC is checked here (the legacy parser
    checks a legacy entry's, and those of the messages in a compressed wrapper)."""
    cdef int8_t magic = <int8_t>owner.ptr[pos + MAGIC_OFFSET]
    b._owner = owner
    b.position = pos
    b.size_in_bytes = size
    b._max = max_size
    if magic >= 2:
        check_v2_header(owner.ptr, pos, size, &b.h)
        if verify:
            verify_v2_crc(owner.ptr, pos, size, &b.h)
        return 0
    view = PyMemoryView_FromMemory(<char *>owner.ptr, owner.size, PyBUF_READ)
    try:
        base, last, crc, attributes, ts, records = _legacy.parse_legacy(view, pos, size, max_size, verify, Record)
    finally:
        view.release()
    b.h.magic = magic
    b.h.base_offset = base
    b._legacy_last_offset = last
    b.h.last_offset_delta = 0  # legacy: see the last_offset_delta property
    b.h.crc = crc
    b.h.attributes = attributes
    b.h.base_timestamp = ts
    b.h.max_timestamp = ts
    b.h.producer_id = -1
    b.h.producer_epoch = -1
    b.h.base_sequence = -1
    b.h.partition_leader_epoch = -1
    b.h.records_count = len(records)
    b.h.batch_length = <int32_t>(size - LOG_OVERHEAD)
    b._legacy_records = records
    return 0


cdef RecordBatch _make_batch(_Buffer owner, Py_ssize_t pos, Py_ssize_t size, Py_ssize_t max_size, bint verify):
    cdef RecordBatch b = RecordBatch.__new__(RecordBatch)
    _init_batch(b, owner, pos, size, max_size, verify)
    return b


@cython.final
cdef class BatchIterator:
    """Iterates the entries of a buffer; ``valid_bytes``/``trailing_bytes`` tell where it stopped."""
    cdef _Buffer _buf
    cdef Py_ssize_t _pos
    cdef bint _verify
    cdef bint _done
    cdef Py_ssize_t _max

    def __cinit__(self, data, bint verify_crc=True, Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
        self._buf = _Buffer(data)
        self._pos = 0
        self._verify = verify_crc
        self._max = max_decompressed_size
        self._done = False

    @property
    def valid_bytes(self):
        """Bytes of complete entries returned so far."""
        return self._pos

    @property
    def trailing_bytes(self):
        """Bytes after the last complete entry (a truncated tail, once iteration stopped)."""
        return self._buf.size - self._pos

    @property
    def position(self):
        return self._pos

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t size
        cdef RecordBatch b
        if self._done or next_entry(self._buf.ptr, self._pos, self._buf.size, &size):
            self._done = True
            raise StopIteration
        b = _make_batch(self._buf, self._pos, size, self._max, self._verify)  # (its CRC checked there)
        self._pos += size
        return b


def iter_batches(data, *, bint verify_crc=True, Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE):
    """Iterate the batches in ``data`` (bytes, bytearray, memoryview, mmap) without copying it."""
    return BatchIterator(data, verify_crc, max_decompressed_size)


# --------------------------------------------------------------------------------- read_committed
@cython.final
cdef class ReadCommittedFilter:
    """Kafka's consumer visibility rules, carried across successive chunks of one partition.

    Feed it the record bytes of one partition in order (consecutive Fetch responses, or a segment in
    arbitrary pieces); an incomplete batch at the end of a chunk is kept and completed by the next one.
    A Fetch response's cut-off last batch (and a batch held back at the last stable offset) is sent again
    whole by the next fetch, from ``next_offset``: between Fetch responses, and before a fetch that starts
    over from an older offset, call :meth:`discard_pending`.
    One thread at a time: another thread feeding it or adding aborted transactions while it decodes gets a
    RuntimeError.
    """
    cdef bint _committed
    cdef set _seen
    # the aborted transactions not reached yet, by first offset: (first, pid) in [_pend_i, _pend_n)
    cdef int64_t *_pend_first
    cdef int64_t *_pend_pid
    cdef Py_ssize_t _pend_i, _pend_n
    cdef kx_pidset _aborted_pids  # producers inside an aborted transaction (C, so no GIL is needed)
    cdef bint _busy  # decoding (maybe without the GIL): its state is not to be touched from another thread
    cdef public object last_stable_offset
    cdef int64_t _next          # the next offset to fetch (valid when _has_next)
    cdef bint _has_next
    cdef bint _verify
    cdef Py_ssize_t _max
    cdef bytes _pending
    cdef int _threads

    def __init__(self, aborted_transactions=None, *, isolation="read_committed", last_stable_offset=None,
                 fetch_offset=None, bint verify_crc=True,
                 Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, inflate_threads=None):
        # (int64, as the compiled filter keeps them: the same TypeError/OverflowError on both backends)
        if last_stable_offset is not None:
            last_stable_offset = int64_arg(last_stable_offset, "last_stable_offset")
        if fetch_offset is not None:
            fetch_offset = int64_arg(fetch_offset, "fetch_offset")
        self._committed = isolation_flag(isolation)
        self._seen = set()
        self.last_stable_offset = last_stable_offset
        self.next_offset = fetch_offset
        self._verify = verify_crc
        self._max = max_decompressed_size
        self._threads = _compression.check_inflate_threads(inflate_threads)
        self._pending = b""
        if aborted_transactions:
            self.add_aborted_transactions(aborted_transactions)

    def add_aborted_transactions(self, aborted_transactions):
        """Add ``(producer_id, first_offset)`` pairs, in any order (duplicates are ignored)."""
        cdef list new = []
        if not self._committed:
            return  # under read_uncommitted the list is ignored, as Kafka's consumer does
        self._check_idle()
        self._busy = True  # (iterating the argument runs Python code: a feed on another thread meanwhile raises)
        try:
            for pair in new_aborted_pairs(aborted_transactions, self._seen):
                new.append(pair)
        finally:  # (the pairs before a bad one are added, as they were seen)
            try:
                if new:
                    self._pending_add(new)
            finally:
                self._busy = False

    cdef int _pending_add(self, list new) except -1:
        """Merge ``new`` (first, pid) pairs into the entries not reached yet, kept sorted."""
        cdef Py_ssize_t k, n
        cdef int64_t *f
        cdef int64_t *p
        for k in range(self._pend_i, self._pend_n):
            new.append((self._pend_first[k], self._pend_pid[k]))
        new.sort()
        n = len(new)
        f = <int64_t *>malloc(max(n, 1) * sizeof(int64_t))
        p = <int64_t *>malloc(max(n, 1) * sizeof(int64_t))
        if f == NULL or p == NULL:
            free(f)
            free(p)
            raise MemoryError()
        for k in range(n):
            f[k] = new[k][0]
            p[k] = new[k][1]
        free(self._pend_first)
        free(self._pend_pid)
        self._pend_first, self._pend_pid, self._pend_i, self._pend_n = f, p, 0, n
        return 0

    cdef int _check_idle(self) except -1:
        if self._busy:
            raise RuntimeError("this ReadCommittedFilter is decoding on another thread: a filter reads one "
                               "partition's log in order, from one thread at a time")
        return 0

    def __dealloc__(self):
        free(self._pend_first)
        free(self._pend_pid)
        kx_pidset_free(&self._aborted_pids)

    cdef inline int _reach(self, int64_t last) noexcept nogil:
        """The aborted transactions starting at or below ``last`` are entered; -1 if memory ran out."""
        while self._pend_i < self._pend_n and self._pend_first[self._pend_i] <= last:
            if kx_pidset_add(&self._aborted_pids, self._pend_pid[self._pend_i], self._pend_first[self._pend_i]):
                return -1
            self._pend_i += 1
        return 0

    @property
    def next_offset(self):
        """The next offset to fetch: past the last batch decoded (or skipped), None before any."""
        return self._next if self._has_next else None

    @next_offset.setter
    def next_offset(self, value):
        if value is None:
            self._has_next = False
            self._next = 0
        else:
            self._next = value
            self._has_next = True

    @property
    def pending_bytes(self):
        """Bytes of an incomplete batch held back until the next chunk completes it."""
        return len(self._pending)

    def discard_pending(self):
        """Drop the bytes held back (:attr:`pending_bytes`), as a consumer drops the cut-off end of a Fetch
        response: the next fetch, from ``next_offset``, sends that batch again whole.  Returns how many."""
        self._check_idle()
        n = len(self._pending)
        self._pending = b""
        return n

    def feed(self, data):
        """Decode one chunk; returns the visible records (``next_offset`` tells where to go on).

        An error raised at a damaged batch carries, in its ``records`` attribute, the visible records
        decoded before it (what the call would have returned up to there: ``next_offset`` is past them, as
        Kafka's consumer hands out the records before a corrupt one); the damaged batch and what follows
        are held back (:attr:`pending_bytes`)."""
        cdef _Buffer buf
        cdef Py_ssize_t consumed = 0
        self._check_idle()  # (before the bytes held back are touched: a refused feed changes nothing)
        out = RecordList()
        if self._pending:
            data = self._pending + bytes(data)
        buf = _Buffer(data)
        try:
            self._run(buf, out, None, &consumed)
        except KafkaTxError as exc:
            exc.records = out
            raise
        finally:
            self._pending = PyBytes_FromStringAndSize(<const char *>buf.ptr + consumed, buf.size - consumed) \
                if consumed < buf.size else b""
            out.valid_bytes = consumed
            out.trailing_bytes = buf.size - consumed
            out.next_offset = self.next_offset
        return out

    def feed_arrow(self, data, *, columns=None, bint large_binary=False, bint binary_view=False):
        """Like :meth:`feed`, but the visible records come back as one ``pyarrow.RecordBatch`` built in C.

        The schema metadata carries ``next_offset``, ``valid_bytes`` and ``trailing_bytes``.  If a
        binary column would pass 2 GiB (32-bit Arrow offsets), this raises; decode in smaller pieces
        or pass ``large_binary=True`` to get ``large_binary`` columns instead.  With
        ``binary_view=True`` keys and values are ``binary_view`` arrays pointing into ``data`` itself
        (and into the decompressed payloads of compressed batches): nothing is copied, and the arrays
        keep ``data`` alive.
        """
        return self.feed_arrow_parts((data,), columns=columns, large_binary=large_binary, binary_view=binary_view)

    def feed_arrow_parts(self, parts, *, columns=None, bint large_binary=False, bint binary_view=False):
        """:meth:`feed_arrow` over each of ``parts`` in turn (consecutive pieces of one partition's log,
        such as the segments of a read), with all their visible records in one ``pyarrow.RecordBatch``:
        the columns are sized once for all the parts, and nothing is concatenated afterwards.

        ``valid_bytes`` is the sum over the parts; an error names the failing part in its ``part``
        attribute (its position counts from the start of the bytes decoded with that part: those of an
        incomplete batch carried over from the parts before it, ``carried_bytes`` of them, then the part).
        """
        cdef _Buffer buf
        cdef Py_ssize_t consumed = 0, valid = 0
        cdef Py_ssize_t rows = 0, payload = 0
        cdef _Columns cols
        cdef list bufs
        cdef Py_ssize_t k, carried
        cdef int bits
        _arrow()
        bits = _want_bits(columns)  # (checked first, as the twin's arrow_schema does)
        if large_binary and binary_view:
            raise ValueError("large_binary and binary_view exclude each other")
        self._check_idle()  # (before the bytes held back are touched: a refused feed changes nothing)
        cols = _Columns(bits, large_binary, binary_view)
        bufs = [_Buffer(p) for p in parts]
        for buf in bufs:
            _presize_count(buf.ptr, buf.size, &rows, &payload)
        if rows:
            cols.presize(rows, payload)
        for k in range(len(bufs)):
            buf = bufs[k]
            bufs[k] = None
            carried = len(self._pending)
            if carried:
                buf = _Buffer(self._pending + PyBytes_FromStringAndSize(<const char *>buf.ptr, buf.size))
            cols.src = buf
            cols.src_index = -1
            consumed = 0
            try:
                try:
                    self._run(buf, None, cols, &consumed)
                except _BinaryOverflow:
                    err = DecompressedSizeError("decoded keys or values pass 2 GiB, the limit of 32-bit Arrow "
                                                "offsets: decode smaller pieces or pass large_binary=True")
                    err.part = k
                    err.carried_bytes = carried
                    raise err from None
                except KafkaTxError as exc:
                    exc.part = k
                    exc.carried_bytes = carried
                    raise
            finally:
                self._pending = PyBytes_FromStringAndSize(<const char *>buf.ptr + consumed, buf.size - consumed) \
                    if consumed < buf.size else b""
            valid += consumed
        return _finish(cols, {"next_offset": self.next_offset, "valid_bytes": valid,
                              "trailing_bytes": len(self._pending)})

    cdef inline void _advance_past(self, int64_t last, int64_t limit, bint bounded) noexcept nogil:
        """Move the next offset to fetch past a batch ending at ``last``, up to the last stable offset when
        ``bounded``.  After 2^63-1 (Long.MAX_VALUE) it stays there: Java's long would wrap."""
        if bounded and last >= limit:
            self._advance(limit)
        else:
            self._advance(last + 1 if last < INT64_MAX else INT64_MAX)

    cdef inline void _advance(self, int64_t offset) noexcept nogil:
        if not self._has_next or offset > self._next:
            self._next = offset
            self._has_next = True

    cdef inline int64_t _floor(self) noexcept nogil:
        """Records below the next offset to fetch are skipped (a fetch that starts inside a batch, or a
        batch fed again), as Kafka's consumer does."""
        return self._next if self._has_next else INT64_MIN

    cdef int _run_columns(self, const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, _Columns cols,
                          int64_t limit, bint bounded, Py_ssize_t *consumed) except -1 nogil:
        """The common case of :meth:`_run` for Arrow output, with no GIL: complete, uncompressed v2 batches,
        with read_committed's bookkeeping (aborted transactions reached, markers read, aborted batches
        skipped) done here too.  Stops and returns 2 at the first entry that needs the full path (legacy,
        compressed, a marker that is not one well-formed control record, anything malformed: the full
        path raises the error), 1 at the last stable offset, 0 at the end of the complete batches."""
        cdef Py_ssize_t pos = ppos[0]
        cdef Py_ssize_t left, size
        cdef int32_t length
        cdef int64_t last
        cdef int16_t ctype
        cdef bint skip
        cdef Header h
        while True:
            left = end - pos
            if left < RECORD_BATCH_OVERHEAD:
                return 2  # the end, a truncated tail or something small: the full path decides
            length = kx_load_be_i32(buf + pos + LENGTH_OFFSET)
            if buf[pos + MAGIC_OFFSET] != 2 or length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                return 2
            if left < <Py_ssize_t>length + LOG_OVERHEAD:
                return 0  # a truncated final batch: kept pending
            size = <Py_ssize_t>length + LOG_OVERHEAD
            read_header(buf + pos, &h)
            if (h.attributes & COMPRESSION_CODEC_MASK) or h.records_count < 0:
                return 2
            last = _wadd(h.base_offset, h.last_offset_delta)
            if self._verify and kx_crc32c(0, buf + pos + ATTRIBUTES_OFFSET,
                                          <size_t>(size - ATTRIBUTES_OFFSET)) != h.crc:
                return 2  # the full path raises CrcMismatchError
            if bounded and h.base_offset >= limit:
                return 1
            skip = False
            if self._committed and h.producer_id >= 0:  # (as in _run_batches)
                if self._reach(last):
                    return 2  # (out of memory: the full path raises)
                if h.attributes & CONTROL_FLAG_MASK:
                    ctype = _control_type(buf + pos, size, size, &h, False)
                    if ctype == CONTROL_UNKNOWN:
                        return 2  # (not one well-formed control record: the full path decides)
                    if ctype == 0:  # (an ABORT fed again ends nothing: see _run)
                        kx_pidset_end(&self._aborted_pids, h.producer_id, last)
                else:
                    skip = (h.attributes & TRANSACTIONAL_FLAG_MASK) != 0 \
                        and kx_pidset_has(&self._aborted_pids, h.producer_id)
            if not skip and not (h.attributes & CONTROL_FLAG_MASK) and h.records_count:
                if cols.views:
                    if cols.src_index < 0 or pos + size - cols.src_start > 2147483647:
                        return 2  # a new window of the caller's buffer (taken with the GIL)
                    cols.cur_index = cols.src_index
                    cols.cur_base = cols.src_base
                decode_v2_columns(buf, pos + RECORD_BATCH_OVERHEAD, pos + size, 0, &h, cols, self._floor(),
                                  _last_visible(limit, bounded), buf + end)
            self._advance_past(last, limit, bounded)
            if bounded and last >= limit:
                return 1  # straddles the last stable offset: keep it pending
            pos += size
            ppos[0] = pos
            consumed[0] = pos

    cdef int _run(self, _Buffer b, object out, _Columns cols, Py_ssize_t *consumed) except -1:
        """Decode the complete batches of ``b``; a batch holding the last stable offset stays pending (its
        records below the LSO are returned now, the rest once the LSO moves).  With ``inflate_threads``
        (or INFLATE_AUTO where it pays), the compressed payloads are inflated ahead (_make_ahead)."""
        self._check_idle()
        self._busy = True
        try:
            return self._run_ahead(b, out, cols, consumed)
        finally:
            self._busy = False

    cdef int _run_ahead(self, _Buffer b, object out, _Columns cols, Py_ssize_t *consumed) except -1:
        cdef object ahead = None
        if self._threads != 0:
            ahead = _make_ahead(b.ptr, b.size, self._threads, self._max, cols is not None and cols.views)
        try:
            return self._run_batches(b, out, cols, consumed, ahead)
        finally:
            if ahead is not None:
                ahead.close()

    cdef int _run_batches(self, _Buffer b, object out, _Columns cols, Py_ssize_t *consumed,
                          object ahead) except -1:
        cdef const uint8_t *buf = b.ptr
        cdef Py_ssize_t end = b.size
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t size
        cdef Header h
        cdef int64_t limit = INT64_MAX  # the last stable offset (exclusive), when ``bounded``
        cdef bint bounded = self._committed and self.last_stable_offset is not None
        cdef int64_t last
        cdef RecordBatch legacy
        cdef int ctype
        cdef bint aborted
        cdef int rc
        if bounded:
            limit = self.last_stable_offset
        while True:
            if cols is not None:
                if end - pos >= NOGIL_THRESHOLD:
                    with nogil:
                        rc = self._run_columns(buf, &pos, end, cols, limit, bounded, consumed)
                else:
                    rc = self._run_columns(buf, &pos, end, cols, limit, bounded, consumed)
                if rc != 2:
                    break
            if next_entry(buf, pos, end, &size):
                break
            if <int8_t>buf[pos + MAGIC_OFFSET] < 2:
                legacy = _make_batch(b, pos, size, self._max, self._verify)  # (CRCs checked there)
                if bounded and legacy.h.base_offset >= limit:
                    break
                if cols is None:
                    legacy._decode_into(out, self._floor(), _last_visible(limit, bounded))
                else:
                    _legacy_to_columns(legacy, cols, self._floor(), _last_visible(limit, bounded))
                last = legacy._legacy_last_offset
                self._advance_past(last, limit, bounded)
                if bounded and last >= limit:
                    break  # straddles the last stable offset: keep it pending
                pos += size
                consumed[0] = pos
                continue
            aborted = False
            check_v2_header(buf, pos, size, &h)
            if self._verify:
                verify_v2_crc(buf, pos, size, &h)
            if bounded and h.base_offset >= limit:
                break
            last = _wadd(h.base_offset, h.last_offset_delta)
            if self._committed and h.producer_id >= 0:
                if self._reach(last):
                    raise MemoryError()
                if h.attributes & CONTROL_FLAG_MASK:
                    ctype = first_control_type(buf, pos, size, &h, self._max)
                    # An ABORT ends the producer's aborted transaction only if that began at or before the
                    # marker: always so in log order, as Kafka's consumer sees markers, but an ABORT fed again
                    # (a fetch that starts over below where the filter got to) lies below the producer's
                    # later aborted transaction, already entered, and must not end it.
                    if ctype == 0:
                        kx_pidset_end(&self._aborted_pids, h.producer_id, last)
                elif (h.attributes & TRANSACTIONAL_FLAG_MASK) and kx_pidset_has(&self._aborted_pids, h.producer_id):
                    aborted = True  # an aborted batch: none of its records, but the LSO rule below holds
            if not aborted and not (h.attributes & CONTROL_FLAG_MASK):
                decode_v2_batch(buf, pos, size, &h, out, cols, self._floor(), _last_visible(limit, bounded),
                                self._max, ahead)
            self._advance_past(last, limit, bounded)
            if bounded and last >= limit:
                break  # straddles the last stable offset: keep it pending
            pos += size
            consumed[0] = pos
        return 0


cdef inline int64_t _last_visible(int64_t limit, bint bounded) noexcept nogil:
    """The last offset a read may return: the one below the last stable offset ``limit`` when ``bounded``,
    else 2^63-1 (a record there is returned, as Kafka's consumer does).  (A bound of -2^63 stops a read
    before any batch, so what this returns for it is never used.)"""
    if not bounded:
        return INT64_MAX
    return limit - 1 if limit != INT64_MIN else INT64_MIN


cdef inline Py_ssize_t _complete_entry(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """Size of the entry at ``pos`` if all of it is in ``buf[:end]`` (its length field checked), else 0."""
    cdef int32_t length
    if end - pos < RECORD_BATCH_OVERHEAD:
        return 0
    length = kx_load_be_i32(buf + pos + LENGTH_OFFSET)
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end - pos < <Py_ssize_t>length + LOG_OVERHEAD:
        return 0
    return <Py_ssize_t>length + LOG_OVERHEAD


cdef inline bint _data_with_records(const uint8_t *p) noexcept:
    """The entry at ``p`` is a v2 data (not control) batch that declares records."""
    return p[MAGIC_OFFSET] == 2 and kx_load_be_i32(p + RECORDS_COUNT_OFFSET) > 0 \
        and not (kx_load_be_i16(p + ATTRIBUTES_OFFSET) & CONTROL_FLAG_MASK)


@cython.final
cdef class _CAhead:
    """The compiled decoders' inflate-ahead (``_c/ahead.h``) over the payloads of one decode call: worker
    threads that never take the GIL.  Made by _c_ahead; the decoder takes payloads with kx_ahead_take
    (decode_v2_batch) and closes it before the call returns."""
    cdef kx_ahead *a

    def close(self):
        cdef kx_ahead *a = self.a
        self.a = NULL
        if a != NULL:
            with nogil:
                kx_ahead_close(a)

    def __dealloc__(self):
        if self.a != NULL:
            kx_ahead_close(self.a)


cdef object _c_ahead(const uint8_t *buf, list spans, int threads, Py_ssize_t max_size):
    """A _CAhead over ``spans`` (_compressed_spans') when the system's libraries inflate every one of them
    in C (_fast_bound), else None."""
    cdef Py_ssize_t i, n = len(spans), start, stop, bound
    cdef int cid
    cdef kx_span *arr = <kx_span *>malloc(n * sizeof(kx_span))
    cdef kx_ahead *a
    cdef _CAhead ahead
    if arr == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            start, stop, cid = spans[i]
            bound = _fast_bound(buf + start, stop - start, cid, max_size)
            if bound < 0:
                return None
            arr[i].start = start
            arr[i].end = stop
            arr[i].bound = bound
            arr[i].cid = cid
        a = kx_ahead_open(buf, arr, n, threads, _inflate_c)
        arr = NULL  # (kx_ahead_open owns it now, even when it fails)
    finally:
        free(arr)
    if a == NULL:
        return None
    ahead = _CAhead.__new__(_CAhead)
    ahead.a = a
    if a.nthreads == 0:  # no thread could be started: let InflateAhead try
        ahead.close()
        return None
    return ahead


cdef enum:
    # What inflating a payload costs, roughly, in tenths of a nanosecond (this VM: liblz4 and libzstd 1.5):
    # per byte of a stored block (copied), of an lz4 block (its output is not known from its header), and
    # per byte a zstd block inflates to (a whole block but for the last, which is guessed), ~3 GB/s with
    # raw literals and ~1 GB/s with Huffman-coded ones
    COST_COPY = 1
    COST_LZ4_BLOCK = 5
    COST_ZSTD_OUT = 3
    COST_ZSTD_HUFFMAN_OUT = 10
    # Under inflate_threads=None (compression.INFLATE_AUTO) a call's payloads are inflated on a background C
    # thread only when that costs at least AUTO_MIN_COST in all (starting and joining the thread costs
    # ~60-100 us) and AUTO_MIN_BATCH_COST a payload on average (handing one over costs a few us); measured
    # with Kafka's default 16 KiB batches and with 1,000-record ones, compressible and random, lz4 and zstd
    AUTO_MIN_COST = 4_000_000
    AUTO_MIN_BATCH_COST = 100_000
    AUTO_PROBE_BATCHES = 64  # batches looked at before an uncompressed log is taken for one


cdef Py_ssize_t _inflate_cost(const uint8_t *p, Py_ssize_t n, int cid) noexcept nogil:
    """What inflating the lz4 or zstd payload p[0:n] costs (in tenths of a ns; the COST_ weights of its
    blocks, as far as its frames parse)."""
    cdef Py_ssize_t cost = 0
    if cid == 3:
        _lz4_inflated(p, n, &cost)
    elif cid == 4:
        _zstd_inflated(p, n, &cost)
    return cost


cdef bint _auto_ahead_pays(const uint8_t *buf, Py_ssize_t end) noexcept:
    """Under INFLATE_AUTO: whether inflating the compressed data batches of ``buf`` (the spans
    _compressed_spans lists) costs AUTO_MIN_COST in all and AUTO_MIN_BATCH_COST each on average, all of
    them lz4 or zstd (the codecs the C workers take).  The walk stops as soon as its prefix says so, and
    after AUTO_PROBE_BATCHES batches none of which is compressed (so an uncompressed log's headers are not
    all read an extra time)."""
    cdef Py_ssize_t pos = 0, cost = 0, seen = 0, compressed = 0
    cdef Py_ssize_t size = _complete_entry(buf, 0, end)
    cdef int cid
    while size:
        cid = kx_load_be_i16(buf + pos + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK
        if cid and _data_with_records(buf + pos):
            if cid != 3 and cid != 4:
                return False
            compressed += 1
            cost += _inflate_cost(buf + pos + RECORD_BATCH_OVERHEAD, size - RECORD_BATCH_OVERHEAD, cid)
            if compressed >= 2 and cost >= AUTO_MIN_COST and cost >= AUTO_MIN_BATCH_COST * compressed:
                return True
        seen += 1
        if seen >= AUTO_PROBE_BATCHES and not compressed:
            return False
        pos += size
        size = _complete_entry(buf, pos, end)
    return False


cdef object _make_ahead(const uint8_t *buf, Py_ssize_t end, int threads, Py_ssize_t max_size, bint keep):
    """What inflates the payloads of one decode call ahead of the decoder: a _CAhead when the system's
    libraries inflate all of them in C (and the decoder does not keep them, as binary views do), else a
    compression.InflateAhead; None with fewer than two compressed data batches.  ``threads`` of
    INFLATE_AUTO: one C worker where _auto_ahead_pays, else None (never the Python workers)."""
    cdef object ahead = None
    cdef list spans
    if threads < 0 and (keep or not _auto_ahead_pays(buf, end)):
        return None
    spans = _compressed_spans(buf, end)
    if len(spans) < 2:
        return None
    if threads < 0:
        return _c_ahead(buf, spans, 1, max_size)
    if not keep:
        ahead = _c_ahead(buf, spans, threads, max_size)
    if ahead is None:
        ahead = _compression.InflateAhead(PyMemoryView_FromMemory(<char *>buf, end, PyBUF_READ), spans,
                                          max_size, threads=threads, keep=keep)
    return ahead


def _ahead_kind(data, int threads=1, Py_ssize_t max_size=DEFAULT_MAX_DECOMPRESSED_SIZE, bint keep=False):
    """Which inflate-ahead a decode of ``data`` with ``inflate_threads=threads`` uses: ``"c"``,
    ``"python"`` or None (for the tests)."""
    cdef _Buffer b = _Buffer(data)
    ahead = _make_ahead(b.ptr, b.size, threads, max_size, keep)
    if ahead is None:
        return None
    ahead.close()
    return "c" if type(ahead) is _CAhead else "python"


cdef list _compressed_spans(const uint8_t *buf, Py_ssize_t end):
    """(payload start, end, codec id) of the complete compressed v2 data batches with records in ``buf``,
    in order (what compression.InflateAhead inflates; anything malformed ends the list, and the decoder
    meets it by itself)."""
    cdef list spans = []
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t size = _complete_entry(buf, 0, end)
    cdef int cid
    while size:
        cid = kx_load_be_i16(buf + pos + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK
        if cid and _data_with_records(buf + pos):
            spans.append((pos + RECORD_BATCH_OVERHEAD, pos + size, cid))
        pos += size
        size = _complete_entry(buf, pos, end)
    return spans


cdef enum:
    PRESIZE_RATIO = 4       # a payload whose frames say nothing is guessed at 4x its size
    PRESIZE_MAX_RATIO = 16  # and none is guessed at more than 16x (frames can be forged)
    # The last block of a frame (all of a small batch's frame) may hold anything up to the block size; it is
    # guessed at what lz4 and zstd usually reach instead (Kafka's default 16 KiB batches otherwise size the
    # value column at 4-8x what they hold: past the buffer cache, faulted in and copied on every call)
    PRESIZE_LZ4_LAST_RATIO = 3
    PRESIZE_ZSTD_LAST_RATIO = 4
    ZSTD_BLOCK_OUT_MAX = 128 * 1024  # what one zstd block inflates to at most
    ZSTD_MAX_WINDOW = 1 << 27  # the largest window Kafka's decoder takes (compression.ZSTD_MAX_WINDOW)
    LZ4_EXPANSION = 255     # an lz4 block inflates to at most 255x its size plus a token's slack
    LZ4_TOKEN_SLACK = 64    # (compression._LZ4_EXPANSION / _LZ4_TOKEN_SLACK, the bound it inflates with)


cdef inline uint32_t _le32(const uint8_t *p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef Py_ssize_t _lz4_blocks(const uint8_t *p, Py_ssize_t n, Py_ssize_t *end, Py_ssize_t *last_room,
                            Py_ssize_t *last_size, Py_ssize_t *cost) noexcept nogil:
    """Walk the blocks of the lz4 frame p[0:n], its header read (at least 7 bytes, FLG p[4], a block size
    id of 4-7 in BD p[5]), with compression._lz4_frame_end's checks: what they inflate to at most (a stored
    block its size, a compressed one its room: 255x its size, at most a block), with the position after the
    end mark in ``*end`` and the room (0 if stored) and size of the last block in ``*last_room`` and
    ``*last_size``; -1 where that walk would reject them.  ``cost`` (if not NULL) gets what inflating the
    blocks costs added (see _inflate_cost)."""
    cdef Py_ssize_t pos = 7 + (8 if p[4] & 0x08 else 0) + (4 if p[4] & 0x01 else 0)  # + content size, dict id
    cdef Py_ssize_t block_max = (<Py_ssize_t>1) << (8 + 2 * ((p[5] >> 4) & 7))
    cdef Py_ssize_t checksum = 4 if p[4] & 0x10 else 0
    cdef Py_ssize_t m, room, bound = 0
    cdef uint32_t size
    last_room[0] = 0
    last_size[0] = 0
    while True:
        if n - pos < 4:
            return -1
        size = _le32(p + pos)
        pos += 4
        m = size & 0x7FFFFFFFU
        if m == 0:  # the end mark (Kafka takes one with the stored bit set too)
            end[0] = pos
            return bound
        if m > block_max or m + checksum > n - pos:
            return -1
        room = 0 if size & 0x80000000U else min(block_max, LZ4_EXPANSION * m + LZ4_TOKEN_SLACK)
        if cost != NULL:
            cost[0] += m * (COST_LZ4_BLOCK if room else COST_COPY)
        bound += room or m
        last_room[0] = room
        last_size[0] = m
        pos += m + checksum


cdef Py_ssize_t _lz4_inflated(const uint8_t *p, Py_ssize_t n, Py_ssize_t *cost) noexcept nogil:
    """About what an LZ4 frame inflates to, from its block headers: Kafka's writers fill every block but
    the last, which is guessed at ``PRESIZE_LZ4_LAST_RATIO`` times its size; -1 if the frame does not
    parse that far.  ``cost``: as in _lz4_blocks."""
    cdef Py_ssize_t bound, end, last_room, last_size
    if n < 7 or _le32(p) != 0x184D2204U or not 4 <= ((p[5] >> 4) & 7) <= 7:
        return -1
    bound = _lz4_blocks(p, n, &end, &last_room, &last_size, cost)
    if bound < 0:
        return -1
    return bound - last_room + min(last_room, PRESIZE_LZ4_LAST_RATIO * last_size)


cdef Py_ssize_t _zstd_frame(const uint8_t *p, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *end,
                            Py_ssize_t *last_cut, Py_ssize_t *cost) noexcept nogil:
    """Walk the zstd data frame at p[pos:n], its magic number read, with compression._zstd_frames' checks:
    what it inflates to at most (its content size when it has one, else its blocks' most), with the
    position after it in ``*end`` and, for a frame without a content size, in ``*last_cut`` how much less
    its last compressed block is guessed at (``PRESIZE_ZSTD_LAST_RATIO`` times its size instead of a whole
    block: zstd fills every block but the last); -1 where that walk would reject it.  ``cost`` (if not
    NULL) gets what inflating its blocks costs added (see _inflate_cost)."""
    cdef Py_ssize_t hdr, fcs_len, need, out, bound = 0
    cdef uint64_t fcs = 0, window
    cdef uint32_t bh, bsize, btype
    cdef uint8_t fhd
    cdef int i
    last_cut[0] = 0
    if n - pos < 5:
        return -1
    fhd = p[pos + 4]
    if fhd & 0x08:
        return -1
    hdr = 5 + (0 if fhd & 0x20 else 1) + (fhd & 3) + ((fhd & 3) == 3)  # + window, dictionary id 0/1/2/4
    fcs_len = (1 << (fhd >> 6)) if fhd >> 6 else (1 if fhd & 0x20 else 0)  # content size: 0/1, 2, 4, 8
    if n - pos < hdr + fcs_len:
        return -1
    for i in range(fcs_len):
        fcs |= (<uint64_t>p[pos + hdr + i]) << (8 * i)
    if fcs_len == 2:
        fcs += 256
    # the window a decoder needs, at most what Kafka's (streaming, windowLogMax 27) takes: the content size of a
    # single-segment frame, else the window descriptor's (compression._zstd_window)
    if fhd & 0x20:
        window = fcs
    else:
        window = (<uint64_t>1) << (10 + (p[pos + 5] >> 3))
        window += (window >> 3) * (p[pos + 5] & 7)
    if window > ZSTD_MAX_WINDOW:
        return -1
    pos += hdr + fcs_len
    while True:
        if n - pos < 3:
            return -1
        bh = <uint32_t>p[pos] | (<uint32_t>p[pos + 1] << 8) | (<uint32_t>p[pos + 2] << 16)
        btype = (bh >> 1) & 3
        bsize = bh >> 3
        pos += 3
        if btype == 3:
            return -1
        need = 1 if btype == 1 else <Py_ssize_t>bsize  # RLE: one byte; raw and compressed: their size
        if need > n - pos:
            return -1
        if cost != NULL:  # a compressed block costs by what it inflates to: a whole block, the last one guessed
            if btype != 2:
                cost[0] += bsize * COST_COPY
            elif bsize:  # (its literals are Huffman-coded where its first byte's low bits are 2 or 3)
                out = ZSTD_BLOCK_OUT_MAX
                if bh & 1:
                    out = min(out, PRESIZE_ZSTD_LAST_RATIO * <Py_ssize_t>bsize)
                cost[0] += out * (COST_ZSTD_HUFFMAN_OUT if p[pos] & 3 >= 2 else COST_ZSTD_OUT)
        pos += need
        if btype == 2:
            bound += ZSTD_BLOCK_OUT_MAX
            if bh & 1:
                last_cut[0] = ZSTD_BLOCK_OUT_MAX - min(ZSTD_BLOCK_OUT_MAX, PRESIZE_ZSTD_LAST_RATIO * <Py_ssize_t>bsize)
        else:
            bound += bsize
        if bh & 1:
            break
    if fhd & 0x04:  # the content checksum
        if n - pos < 4:
            return -1
        pos += 4
    end[0] = pos
    if fcs_len:
        if fcs > <uint64_t>bound:  # (frames can be forged)
            return -1
        last_cut[0] = 0
        return <Py_ssize_t>fcs
    return bound


cdef Py_ssize_t _zstd_inflated(const uint8_t *p, Py_ssize_t n, Py_ssize_t *cost) noexcept nogil:
    """About what the zstd frames of a payload inflate to, from their headers (_zstd_frame, the last block
    of a frame without a content size guessed); -1 if they do not parse.  ``cost``: as in _zstd_frame."""
    cdef Py_ssize_t pos = 0, out = 0, bound, end, last_cut
    cdef uint32_t magic, skip
    while pos < n:
        if n - pos < 4:
            return -1
        magic = _le32(p + pos)
        if magic & 0xFFFFFFF0U == 0x184D2A50U:  # skippable
            if n - pos < 8:
                return -1
            skip = _le32(p + pos + 4)
            if <Py_ssize_t>skip > n - pos - 8:
                return -1
            pos += 8 + skip
            continue
        if magic != 0xFD2FB528U:
            return -1
        bound = _zstd_frame(p, n, pos, &end, &last_cut, cost)
        if bound < 0:
            return -1
        out += bound - last_cut
        pos = end
    return out


cdef Py_ssize_t _inflated_guess(const uint8_t *p, Py_ssize_t n, int cid) noexcept nogil:
    """How many record bytes a compressed payload of ``n`` bytes holds, for sizing the columns: from its
    frame and block headers for lz4 and zstd, ``PRESIZE_RATIO`` times its size otherwise, and never more
    than ``PRESIZE_MAX_RATIO`` times its size (only a guess: the columns grow if it is short)."""
    cdef Py_ssize_t out = -1
    if cid == 3:
        out = _lz4_inflated(p, n, NULL)
    elif cid == 4:
        out = _zstd_inflated(p, n, NULL)
    if out < 0:
        out = n * PRESIZE_RATIO
    return min(out, n * PRESIZE_MAX_RATIO)


cdef void _presize_count(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *rows, Py_ssize_t *payload) noexcept:
    """Add up what the columns need for the v2 batches in ``buf``: rows from the batch headers, bounded by
    the bytes (so a forged count reserves little); the bytes also bound the keys and values."""
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t size = _complete_entry(buf, 0, end)
    cdef Py_ssize_t inflated
    cdef int cid
    while size:
        if _data_with_records(buf + pos):
            inflated = size - RECORD_BATCH_OVERHEAD
            cid = kx_load_be_i16(buf + pos + ATTRIBUTES_OFFSET) & COMPRESSION_CODEC_MASK
            if cid:
                inflated = _inflated_guess(buf + pos + RECORD_BATCH_OVERHEAD, inflated, cid)
            rows[0] += min(<Py_ssize_t>kx_load_be_i32(buf + pos + RECORDS_COUNT_OFFSET), inflated // MIN_RECORD_SIZE)
            payload[0] += inflated
        pos += size
        size = _complete_entry(buf, pos, end)


def decode_records(data, *, isolation="read_uncommitted", aborted_transactions=None, last_stable_offset=None,
                   fetch_offset=None, bint verify_crc=True,
                   Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, inflate_threads=None):
    """All visible data records of all batches in ``data``, as Kafka's consumer would return them.

    Control records are never returned.  Under ``read_committed``, records of aborted transactions
    (``aborted_transactions`` as ``(producer_id, first_offset)`` pairs, any order) and records at or
    beyond ``last_stable_offset`` are hidden.  A truncated final batch is left out and counted in
    ``trailing_bytes``.

    ``inflate_threads``: inflate compressed payloads on that many background threads, ahead of the
    decoding; 0 inflates them on the calling thread.  The result is the same; on a machine with a spare
    core, 1 hides most of the inflation time of an lz4 or zstd log.  None (the default) uses one thread
    where the process may run on two CPUs and the call's lz4 or zstd payloads promise enough work to repay
    it (a few 1,000-record batches, a big Fetch response of zstd; see the README), else 0.
    """
    f = ReadCommittedFilter(aborted_transactions, isolation=isolation, last_stable_offset=last_stable_offset,
                            fetch_offset=fetch_offset, verify_crc=verify_crc,
                            max_decompressed_size=max_decompressed_size, inflate_threads=inflate_threads)
    return f.feed(data)


def decode_arrow(data, *, isolation="read_uncommitted", aborted_transactions=None, last_stable_offset=None,
                 fetch_offset=None, bint verify_crc=True, columns=None, bint large_binary=False,
                 bint binary_view=False, Py_ssize_t max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE,
                 inflate_threads=None):
    """The visible records of ``data`` as one ``pyarrow.RecordBatch``, built in C (no per-record objects).

    Same visibility rules and arguments as :func:`decode_records`; ``columns`` picks a subset of
    ``offset, timestamp, timestamp_type, key, value, headers, producer_id, producer_epoch, sequence,
    is_transactional`` (work for the others is skipped).  The schema metadata holds ``next_offset``,
    ``valid_bytes`` and ``trailing_bytes`` (as strings).
    """
    f = ReadCommittedFilter(aborted_transactions, isolation=isolation, last_stable_offset=last_stable_offset,
                            fetch_offset=fetch_offset, verify_crc=verify_crc,
                            max_decompressed_size=max_decompressed_size, inflate_threads=inflate_threads)
    return f.feed_arrow(data, columns=columns, large_binary=large_binary, binary_view=binary_view)


cdef int _legacy_to_columns(RecordBatch b, _Columns cols, int64_t fetch_offset, int64_t last_visible) except -1:
    cdef Record r
    cdef int8_t ts_type = -1 if b.h.magic == 0 else (1 if b.h.attributes & TIMESTAMP_TYPE_MASK else 0)
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    cdef bytes kv
    for r in b._legacy_records:
        if not (fetch_offset <= r.offset <= last_visible):
            continue
        kp = <const uint8_t *>PyBytes_AS_STRING(r.key) if r.key is not None else NULL
        vp = <const uint8_t *>PyBytes_AS_STRING(r.value) if r.value is not None else NULL
        if cols.views:  # one buffer holding key then value, for the views to point into
            kv = (r.key or b"") + (r.value or b"")
            cols.use_payload(kv)
            kp = <const uint8_t *>PyBytes_AS_STRING(kv)
            vp = kp + (len(r.key) if r.key is not None else 0)
        cols.add(r.offset, r.timestamp, ts_type, kp, len(r.key) if r.key is not None else -1, vp,
                 len(r.value) if r.value is not None else -1, -1, -1, -1, False)
        if cols.want & COL_HEADERS:
            cols.end_headers()
    return 0


# -------------------------------------------------------------------------------------------- encode
cdef inline int64_t _now_ms() except? -1:
    """The wall clock in ms since the epoch (_c/clock.h; time.time() where the C library has no clock)."""
    cdef int64_t now = kx_now_ms()
    return now if now >= 0 else <int64_t>(time.time() * 1000)


cdef int _get_view(object obj, const char **ptr, Py_ssize_t *n, Py_buffer *view, str what) except -1:
    """Borrow the bytes of ``obj`` through a buffer view, which the caller releases: a key or a value that is not
    exactly ``bytes`` (append reads those itself, in line)."""
    if isinstance(obj, str):
        raise InvalidAppendError(f"{what} must be bytes-like or None, not str (encode it first)")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (TypeError, BufferError, ValueError):  # (numpy refuses a non-contiguous array with a ValueError)
        raise bytes_error(obj, what) from None  # (not a buffer, or not a C-contiguous one)
    ptr[0] = <const char *>view.buf
    n[0] = view.len
    return 1


cdef inline int64_t _int64_of(object v, str what) except? -1:
    """``v`` as int64_arg takes it; an exact int of one or two digits read from its digits (_c/pyint.h), as
    append does for each record's timestamp."""
    cdef int64_t out
    cdef int overflow = 0
    if type(v) is int:
        if kx_small_long(v, &out):
            return out
        out = PyLong_AsLongLongAndOverflow(v, &overflow)
        if not overflow:
            return out
    return int64_arg(v, what)


cdef inline Py_ssize_t record_body_size(int64_t ts_delta, int64_t delta, Py_ssize_t kn, Py_ssize_t vn,
                                        Py_ssize_t hn) noexcept nogil:
    """Bytes of a record after its length varint (``kn``/``vn`` -1 for null; ``hn`` 0 for no headers)."""
    return (1 + varlong_size(ts_delta) + varlong_size(delta) + varlong_size(kn) + (kn if kn > 0 else 0)
            + varlong_size(vn) + (vn if vn > 0 else 0) + (hn if hn else 1))


cdef inline Py_ssize_t write_record(uint8_t *p, Py_ssize_t body, int64_t ts_delta, int64_t delta,
                                    const uint8_t *kp, Py_ssize_t kn, const uint8_t *vp, Py_ssize_t vn,
                                    const uint8_t *hp, Py_ssize_t hn) noexcept nogil:
    """Write one v2 record (DefaultRecord.writeTo); ``hp``/``hn`` is the encoded headers section or 0."""
    cdef uint8_t *start = p
    p += write_record_kv(p, body, ts_delta, delta, kp, kn, vp, vn)
    if hn:
        memcpy(p, hp, hn)
        p += hn
    else:
        p[0] = 0
        p += 1
    return p - start


cdef inline Py_ssize_t write_record_kv(uint8_t *p, Py_ssize_t body, int64_t ts_delta, int64_t delta,
                                       const uint8_t *kp, Py_ssize_t kn, const uint8_t *vp,
                                       Py_ssize_t vn) noexcept nogil:
    """:func:`write_record` up to its headers section (which the caller writes next)."""
    cdef uint8_t *start = p
    p += wr_varlong(p, body)
    p[0] = 0  # attributes
    p += 1
    p += wr_varlong(p, ts_delta)
    p += wr_varlong(p, delta)
    p += wr_varlong(p, kn)
    if kn > 0:
        memcpy(p, kp, kn)
        p += kn
    p += wr_varlong(p, vn)
    if vn > 0:
        memcpy(p, vp, vn)
        p += vn
    return p - start


# A builder's buffer starts at BUILDER_BUFFER bytes (most producer batches fit without a reallocation).  The
# buffer of the last builder freed is kept for the next one, as it grew up to BUILDER_SPARE_MAX bytes (the
# larger of two): a producer builds one batch after another, mostly of one size, and malloc and free of a
# block this size cost as much as a one-record append, growing it again (a copy) more.  (All under the GIL.)
cdef enum:
    BUILDER_BUFFER = 65536
    BUILDER_SPARE_MAX = 1 << 20
cdef uint8_t *_spare_buffer = NULL
cdef Py_ssize_t _spare_cap = 0


cdef uint8_t *_builder_buffer(Py_ssize_t *cap) except NULL:
    global _spare_buffer
    cdef uint8_t *buf = _spare_buffer
    if buf != NULL:
        _spare_buffer = NULL
        cap[0] = _spare_cap
        return buf
    buf = <uint8_t *>malloc(BUILDER_BUFFER)
    if buf == NULL:
        raise MemoryError()
    cap[0] = BUILDER_BUFFER
    return buf


cdef void _builder_buffer_back(uint8_t *buf, Py_ssize_t cap) noexcept:
    global _spare_buffer, _spare_cap
    if buf == NULL:
        return
    if cap <= BUILDER_SPARE_MAX and (_spare_buffer == NULL or cap > _spare_cap):
        buf, _spare_buffer, _spare_cap = _spare_buffer, buf, cap
    free(buf)


cdef dict _TS_BITS = TIMESTAMP_TYPE_BITS
cdef dict _CODEC_IDS = COMPRESSION_IDS


cdef inline object _name_lookup(dict names, object name):
    """``names[name]`` for a ``str`` name spelt as the dict has it, else None."""
    cdef PyObject *hit
    if type(name) is not str:
        return None
    hit = PyDict_GetItem(names, name)
    return <object>hit if hit != NULL else None


cdef inline bint _int_in(object v, int64_t lo, int64_t hi, int64_t *out) noexcept:
    """``v`` is an ``int`` (the type itself) in ``[lo, hi]``; its value in ``out``."""
    cdef int overflow = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return overflow == 0 and lo <= out[0] <= hi


cdef int _append_refused(int why, int64_t last) except -1:
    """The cold raise of BatchBuilder.append (kept out of the hot function): 0 built, 1 no offset after ``last``."""
    if why == 0:
        raise InvalidAppendError(BUILT)
    raise illegal_offset(i64(last + 1), last)


cdef bint _builder_args_ok(object base_offset, object producer_id, object producer_epoch, object base_sequence,
                           object transactional, object leader_epoch, object delete_horizon_ms) noexcept:
    """True if ``check_builder_args`` would pass these, decided in C for the common case (plain ints in
    range, a plain bool, no delete horizon): a producer builds a batch per send, and the Python check cost
    more than the rest of a one-record batch.  False only means that the Python check decides."""
    cdef int64_t off, pid, epoch, seq, leader
    if delete_horizon_ms is not None or (transactional is not True and transactional is not False):
        return False
    if not (_int_in(base_offset, 0, INT64_MAX, &off) and _int_in(producer_id, INT64_MIN, INT64_MAX, &pid)
            and _int_in(producer_epoch, -32768, 32767, &epoch)
            and _int_in(base_sequence, -2147483648, 2147483647, &seq)
            and _int_in(leader_epoch, -2147483648, 2147483647, &leader)):
        return False
    if pid >= 0:
        return epoch >= 0 and seq >= 0
    return transactional is False


@cython.final
cdef class BatchBuilder:
    """Builds one v2 record batch, byte for byte as Kafka's ``MemoryRecordsBuilder`` does."""
    cdef uint8_t *_buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef readonly int64_t base_offset
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly bint transactional
    cdef readonly int32_t partition_leader_epoch
    cdef readonly object log_append_time
    cdef readonly object delete_horizon_ms
    cdef int _cid
    cdef bint _built  # build() was called: no more appends (declared here, it takes padding, not size)
    cdef object _level
    cdef int _frames
    cdef int _ts_type
    cdef int32_t _count
    cdef int64_t _last_offset
    cdef bint _has_last
    cdef int64_t _first_ts
    cdef bint _has_first_ts
    cdef int64_t _max_ts
    cdef kx_zstream *_zs  # the parts of a joined zstd frame queued while appending (_feed)
    cdef Py_ssize_t _zs_next  # _len past which _feed queues a part; PY_SSIZE_T_MAX: it never does
    cdef int _building  # build() calls compressing the buffer without the GIL: __init__ may not move it

    def __cinit__(self):
        self._buf = NULL
        self._zs = NULL

    def __init__(self, *, base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
                 compression="none", compression_level=None, timestamp_type="create_time", partition_leader_epoch=-1,
                 log_append_time=None, delete_horizon_ms=None, zstd_frames=1):
        if self._building:
            raise RuntimeError(BUILDING_ERROR)
        # the parts queued for the batch before go (first: the arguments below may raise)
        kx_zstream_free(self._zs)
        self._zs = NULL
        self._zs_next = PY_SSIZE_T_MAX
        if not _builder_args_ok(base_offset, producer_id, producer_epoch, base_sequence, transactional,
                                partition_leader_epoch, delete_horizon_ms):
            base_offset, producer_id, producer_epoch, base_sequence, partition_leader_epoch, delete_horizon_ms = \
                check_builder_args(base_offset, producer_id, producer_epoch, base_sequence, transactional,
                                   partition_leader_epoch, delete_horizon_ms)
        # the names as written are looked up here; anything else (case, ids, errors) in the Python helpers
        bits = _name_lookup(_TS_BITS, timestamp_type)
        self._ts_type = bits if bits is not None else timestamp_type_bits(timestamp_type)
        cid = _name_lookup(_CODEC_IDS, compression)
        self._cid = cid if cid is not None else _compression.codec_id(compression)
        self._level = None if compression_level is None else _compression.check_level(self._cid, compression_level)
        self._frames = 1 if type(zstd_frames) is int and zstd_frames == 1 else _compression.check_zstd_frames(zstd_frames)
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = bool(transactional)
        self.partition_leader_epoch = partition_leader_epoch
        if log_append_time is not None:
            log_append_time = int64_arg(log_append_time, "log_append_time")
        elif self._ts_type:
            log_append_time = _now_ms()
        self.log_append_time = log_append_time
        self.delete_horizon_ms = delete_horizon_ms
        self._built = False
        self._count = 0
        self._has_last = False
        self._max_ts = -1
        self._has_first_ts = delete_horizon_ms is not None
        self._first_ts = delete_horizon_ms if delete_horizon_ms is not None else 0
        if self._buf == NULL:  # (a second __init__ keeps the buffer it has)
            self._buf = _builder_buffer(&self._cap)
        self._len = RECORD_BATCH_OVERHEAD  # the header is written by build()
        # A one-frame zstd payload of more than KX_ZSTD_PART bytes is joined from pieces (_compressed_batch):
        # with a second CPU, each part is queued for the worker as soon as the records after it begin, and
        # the worker is told when three quarters of the first part are in (kx_zstd_expect).
        if self._cid == 4 and self._frames == 1 and _compression.usable_cpus() >= 2 and (
                _ZSTD_DEFLATE > 0 or (_ZSTD_DEFLATE < 0 and _zstd_compressor()[0])) and kx_zstd_joins():
            self._zs_next = RECORD_BATCH_OVERHEAD + <Py_ssize_t>(KX_ZSTD_PART // 4 * 3)

    def __dealloc__(self):
        kx_zstream_free(self._zs)
        self._zs = NULL
        _builder_buffer_back(self._buf, self._cap)
        self._buf = NULL

    cdef int _feed(self) except -1:
        """Queue the complete parts of the joined frame (see __init__) for the worker."""
        if self._zs == NULL:
            self._zs = kx_zstream_new(3 if self._level is None else self._level)
            if self._zs != NULL:
                kx_zstd_expect()  # the first part is three quarters in: wake the worker
        if self._zs == NULL or kx_zstream_feed(self._zs, self._buf + RECORD_BATCH_OVERHEAD,
                                               <size_t>(self._len - RECORD_BATCH_OVERHEAD)) < 0:
            # no memory for a copy: build() compresses the parts not queued yet
            self._zs_next = PY_SSIZE_T_MAX
            return 0
        self._zs_next = RECORD_BATCH_OVERHEAD + <Py_ssize_t>self._zs.next
        return 0

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t need = self._len + extra
        cdef Py_ssize_t cap = self._cap
        cdef uint8_t *nb
        if need <= cap:
            return 0
        if need > <Py_ssize_t>INT32_MAX_ + LOG_OVERHEAD:
            raise InvalidAppendError("batch larger than 2^31-1 bytes")
        while cap < need:
            cap *= 2
        nb = <uint8_t *>realloc(self._buf, cap)
        if nb == NULL:
            raise MemoryError()
        self._buf = nb
        self._cap = cap
        return 0

    @property
    def records_count(self):
        return self._count

    @property
    def last_offset(self):
        return self._last_offset if self._has_last else None

    @cython.binding(False)  # (a producer may ask after each append: see append)
    @cython.embedsignature.format("clinic")
    def size_in_bytes(self):
        """Size of the batch if built now, before compression."""
        return self._len if self._count else 0

    # append and build run once per record and once per batch: as plain C methods (binding False) rather than
    # Cython's function objects, a call costs its caller about 100 fewer instructions (callgrind, CPython 3.11:
    # the interpreter calls a C method directly), and their signatures are kept for inspect in the form CPython
    # reads from a C method's docstring (__text_signature__)
    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def append(self, value, key=None, *, timestamp=None, headers=(), offset=None):
        """Append one record; returns its offset."""
        cdef int64_t off, ts, ts_delta, delta
        cdef Py_ssize_t w
        cdef const char *kp = NULL
        cdef const char *vp = NULL
        cdef Py_ssize_t kn = -1, vn = -1, body, hn = 0
        cdef Py_buffer kview, vview
        cdef int kheld = 0, vheld = 0
        cdef bytes hbytes = None
        cdef object plain = None
        if self._buf == NULL:
            raise InvalidAppendError("BatchBuilder was not initialised")
        if self._built:
            _append_refused(0, 0)
        if offset is None:
            if not self._has_last:
                off = self.base_offset
            elif self._last_offset == INT64_MAX:  # Java's lastOffset + 1 wraps, and MemoryRecordsBuilder refuses it
                _append_refused(1, self._last_offset)
            else:
                off = self._last_offset + 1
        else:
            off = _int64_of(offset, "offset")
            if self._has_last and off <= self._last_offset:
                raise illegal_offset(off, self._last_offset)
            if off < self.base_offset:
                raise InvalidAppendError(f"offset {off} is below the batch base offset {self.base_offset}")
        delta = off - self.base_offset
        if delta > INT32_MAX_:
            raise InvalidAppendError(f"offset {off} is more than 2^31-1 past the base offset")
        if timestamp is None:
            ts = _now_ms()
        else:
            ts = _int64_of(timestamp, "timestamp")
            if ts < 0 and ts != -1:
                raise InvalidAppendError(f"invalid negative timestamp {ts}")
        if self._count == INT32_MAX_:
            raise InvalidAppendError("a batch holds at most 2^31-1 records")
        if headers is not () and headers:  # (the default, the empty tuple, is one object)
            # the usual headers are written straight into the batch; any others encoded first.  A list is
            # copied where taking the key's or the value's buffer may run Python code, which could change it
            if type(headers) is tuple:
                plain = headers
            elif type(headers) is list:
                plain = headers if ((key is None or PyBytes_CheckExact(key))
                                    and (value is None or PyBytes_CheckExact(value))) else tuple(headers)
            hn = _plain_headers_size(plain) if plain is not None else -1
            if hn < 0:
                plain = None
                hbytes = _encode_headers(headers)
                hn = PyBytes_GET_SIZE(hbytes)
        try:
            if PyBytes_CheckExact(key):  # (what producers pass, read here; anything else through _get_view)
                kp = PyBytes_AS_STRING(key)
                kn = PyBytes_GET_SIZE(key)
            elif key is not None:
                kheld = _get_view(key, &kp, &kn, &kview, "key")
            if PyBytes_CheckExact(value):
                vp = PyBytes_AS_STRING(value)
                vn = PyBytes_GET_SIZE(value)
            elif value is not None:
                vheld = _get_view(value, &vp, &vn, &vview, "value")
            ts_delta = _wsub(ts, self._first_ts) if self._has_first_ts else 0  # (Java long arithmetic)
            body = record_body_size(ts_delta, delta, kn, vn, hn)
            if body > INT32_MAX_:
                raise InvalidAppendError("record larger than 2^31-1 bytes")
            if self._len + body + 5 > self._cap:
                self._reserve(body + 5)
            if plain is not None:
                w = write_record_kv(self._buf + self._len, body, ts_delta, delta, <const uint8_t *>kp, kn,
                                    <const uint8_t *>vp, vn)
                self._len += w + _write_plain_headers(self._buf + self._len + w, plain)
            else:
                self._len += write_record(self._buf + self._len, body, ts_delta, delta, <const uint8_t *>kp, kn,
                                          <const uint8_t *>vp, vn,
                                          <const uint8_t *>PyBytes_AS_STRING(hbytes) if hn else NULL, hn)
        finally:
            if kheld:
                PyBuffer_Release(&kview)
            if vheld:
                PyBuffer_Release(&vview)
        if not self._has_first_ts:
            self._first_ts = ts
            self._has_first_ts = True
        self._count += 1
        self._last_offset = off
        self._has_last = True
        if ts > self._max_ts:
            self._max_ts = ts
        if self._len > self._zs_next:
            self._feed()
        return off

    @cython.binding(False)
    @cython.embedsignature.format("clinic")
    def build(self):
        """The finished batch (empty bytes if nothing was appended, as Kafka returns an empty set).

        Like MemoryRecordsBuilder.close(), it ends the appends: append() afterwards raises
        InvalidAppendError.  Building again returns the same bytes."""
        cdef bytes out
        cdef uint8_t *o
        cdef Py_ssize_t plen
        cdef int attributes
        cdef kx_zstream *zs
        self._built = True
        if self._count == 0:
            return b""
        attributes = (self._cid | self._ts_type | (TRANSACTIONAL_FLAG_MASK if self.transactional else 0)
                      | (DELETE_HORIZON_FLAG_MASK if self.delete_horizon_ms is not None else 0))
        if self._cid == 0:
            plen = self._len - RECORD_BATCH_OVERHEAD
            out = PyBytes_FromStringAndSize(NULL, self._len)
            o = <uint8_t *>PyBytes_AS_STRING(out)
            kx_prefault_write(o, <size_t>self._len)  # (fresh memory, written whole just below)
            memcpy(o + RECORD_BATCH_OVERHEAD, self._buf + RECORD_BATCH_OVERHEAD, plen)
        else:
            # the parts queued while appending are this call's alone (building again, or on another thread at
            # once, compresses them anew: the same bytes), freed when it is done with them
            zs = self._zs
            self._zs = NULL
            self._building += 1
            try:
                out = _compressed_batch(self._cid, self._buf + RECORD_BATCH_OVERHEAD,
                                        self._len - RECORD_BATCH_OVERHEAD, self._level, self._frames, zs)
            finally:
                self._building -= 1
                kx_zstream_free(zs)
            plen = len(out) - RECORD_BATCH_OVERHEAD
            if plen + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD > INT32_MAX_:
                raise InvalidAppendError("compressed batch larger than 2^31-1 bytes")
            o = <uint8_t *>PyBytes_AS_STRING(out)
        _write_header(o, self.base_offset, <int32_t>(plen + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD),
                      self.partition_leader_epoch, attributes, <int32_t>(self._last_offset - self.base_offset),
                      self._first_ts, self.log_append_time if self._ts_type else self._max_ts, self.producer_id,
                      self.producer_epoch, self.base_sequence, self._count)
        kx_store_be32(o + CRC_OFFSET, _crc(0, o + ATTRIBUTES_OFFSET, plen + RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET))
        return out


cdef void _write_header(uint8_t *o, int64_t base_offset, int32_t length, int32_t leader_epoch, int attributes,
                        int32_t last_offset_delta, int64_t base_ts, int64_t max_ts, int64_t producer_id,
                        int16_t producer_epoch, int32_t base_sequence, int32_t count) noexcept nogil:
    kx_store_be64(o, <uint64_t>base_offset)
    kx_store_be32(o + LENGTH_OFFSET, <uint32_t>length)
    kx_store_be32(o + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>leader_epoch)
    o[MAGIC_V2_OFFSET] = 2
    kx_store_be32(o + CRC_OFFSET, 0)
    kx_store_be16(o + ATTRIBUTES_OFFSET, <uint16_t>attributes)
    kx_store_be32(o + LAST_OFFSET_DELTA_OFFSET, <uint32_t>last_offset_delta)
    kx_store_be64(o + BASE_TIMESTAMP_OFFSET, <uint64_t>base_ts)
    kx_store_be64(o + MAX_TIMESTAMP_OFFSET, <uint64_t>max_ts)
    kx_store_be64(o + PRODUCER_ID_OFFSET, <uint64_t>producer_id)
    kx_store_be16(o + PRODUCER_EPOCH_OFFSET, <uint16_t>producer_epoch)
    kx_store_be32(o + BASE_SEQUENCE_OFFSET, <uint32_t>base_sequence)
    kx_store_be32(o + RECORDS_COUNT_OFFSET, <uint32_t>count)


cdef Py_ssize_t _plain_headers_size(object hs) except -2:
    """The size of the headers section of the list or tuple ``hs`` (:func:`_write_plain_headers`) when
    each header is a ``(key, value)`` tuple with a ``str`` key that has a UTF-8 form (most do: not a lone
    surrogate) or a ``bytes`` key, and a ``bytes`` or None value, as producers pass them; else -1, for
    _encode_headers, which takes any pair of buffers and names what is wrong.  The caller runs no Python
    code between this and the write (a list could change): the tuples, str and bytes are immutable."""
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(hs), total = varlong_size(count), n, i
    cdef PyObject **items = PySequence_Fast_ITEMS(hs)
    for i in range(count):
        h = <object>items[i]
        if type(h) is not tuple or len(<tuple>h) != 2:
            return -1
        k = (<tuple>h)[0]
        v = (<tuple>h)[1]
        if type(k) is str:
            if _utf8_of(k, &n) == NULL:
                PyErr_Clear()
                return -1
        elif type(k) is bytes:
            n = PyBytes_GET_SIZE(k)
        else:
            return -1
        total += varlong_size(n) + n
        if v is None:
            total += 1
        elif type(v) is bytes:
            n = PyBytes_GET_SIZE(v)
            total += varlong_size(n) + n
        else:
            return -1
    return total


cdef Py_ssize_t _write_plain_headers(uint8_t *p, object hs) except -1:
    """Write the headers section of ``hs``, checked by _plain_headers_size (the size it gave)."""
    cdef uint8_t *start = p
    cdef const char *kp
    cdef Py_ssize_t count = PySequence_Fast_GET_SIZE(hs), n, i
    cdef PyObject **items = PySequence_Fast_ITEMS(hs)
    p += wr_varlong(p, count)
    for i in range(count):
        h = <object>items[i]
        k = (<tuple>h)[0]
        v = (<tuple>h)[1]
        if type(k) is str:
            kp = _utf8_of(k, &n)  # (kept by the str since _plain_headers_size asked)
        else:
            kp = PyBytes_AS_STRING(k)
            n = PyBytes_GET_SIZE(k)
        p += wr_varlong(p, n)
        kx_copy(p, <const unsigned char *>kp, <size_t>n)
        p += n
        if v is None:
            p += wr_varlong(p, -1)
        else:
            n = PyBytes_GET_SIZE(v)
            p += wr_varlong(p, n)
            kx_copy(p, <const unsigned char *>PyBytes_AS_STRING(v), <size_t>n)
            p += n
    return p - start


cdef bytes _encode_headers(object headers):
    """The headers section of a record: count, then each key (UTF-8) and value."""
    cdef bytearray out = bytearray()
    cdef uint8_t tmp[10]
    cdef Py_ssize_t n
    hs = list(headers)
    n = wr_varlong(tmp, len(hs))
    out += (<char *>tmp)[:n]
    for h in hs:
        try:
            hk, hv = h
        except (TypeError, ValueError):
            raise InvalidAppendError(f"a header must be a (key, value) pair, got {h!r}") from None
        if hk is None:
            raise InvalidAppendError("invalid null header key found in headers")
        if isinstance(hk, str):
            hk = header_key_bytes(hk)
        for part, what in ((hk, "header key"), (hv, "header value")):
            if part is None:
                out.append(1)
                continue
            try:
                mv = memoryview(part)
            except TypeError:
                raise bytes_error(part, what) from None
            if not mv.c_contiguous:
                raise bytes_error(part, what)
            n = wr_varlong(tmp, mv.nbytes)
            out += (<char *>tmp)[:n]
            out += mv.cast("B") if mv.ndim != 1 or mv.itemsize != 1 else mv
    return bytes(out)


# ------------------------------------------------------------------------------------------- scans
cdef struct ScanCols:
    Py_ssize_t n
    Py_ssize_t cap
    int64_t *position
    int64_t *base_offset
    int64_t *last_offset
    int64_t *producer_id
    int64_t *max_timestamp
    int32_t *base_sequence
    int32_t *records_count
    int32_t *size_in_bytes
    int16_t *producer_epoch
    int16_t *attributes
    int16_t *control_type
    int8_t *magic


cdef void _scan_free(ScanCols *c) noexcept nogil:
    free(c.position); free(c.base_offset); free(c.last_offset); free(c.producer_id); free(c.max_timestamp)
    free(c.base_sequence); free(c.records_count); free(c.size_in_bytes); free(c.producer_epoch)
    free(c.attributes); free(c.control_type); free(c.magic)


cdef int _scan_alloc(ScanCols *c, Py_ssize_t cap) noexcept nogil:
    c.position = <int64_t *>realloc(c.position, cap * 8)
    c.base_offset = <int64_t *>realloc(c.base_offset, cap * 8)
    c.last_offset = <int64_t *>realloc(c.last_offset, cap * 8)
    c.producer_id = <int64_t *>realloc(c.producer_id, cap * 8)
    c.max_timestamp = <int64_t *>realloc(c.max_timestamp, cap * 8)
    c.base_sequence = <int32_t *>realloc(c.base_sequence, cap * 4)
    c.records_count = <int32_t *>realloc(c.records_count, cap * 4)
    c.size_in_bytes = <int32_t *>realloc(c.size_in_bytes, cap * 4)
    c.producer_epoch = <int16_t *>realloc(c.producer_epoch, cap * 2)
    c.attributes = <int16_t *>realloc(c.attributes, cap * 2)
    c.control_type = <int16_t *>realloc(c.control_type, cap * 2)
    c.magic = <int8_t *>realloc(c.magic, cap)
    if (c.position == NULL or c.base_offset == NULL or c.last_offset == NULL or c.producer_id == NULL
            or c.max_timestamp == NULL or c.base_sequence == NULL or c.records_count == NULL
            or c.size_in_bytes == NULL or c.producer_epoch == NULL or c.attributes == NULL
            or c.control_type == NULL or c.magic == NULL):
        return -1
    c.cap = cap
    return 0


cdef enum ScanError:
    SCAN_OK = 0
    SCAN_NOMEM = 1
    SCAN_SMALL_SIZE = 2
    SCAN_BAD_MAGIC = 3
    SCAN_SMALL_BATCH = 4
    SCAN_CRC = 5


cdef enum:
    SCAN_INCOMPLETE = -1  # (from _scan_entry: the entry is not all there; the scan stops before it)
    SCAN_IO = 6


# control_type column: the first control record's type (0 ABORT, 1 COMMIT, ...) of a v2 control batch,
# or one of these
cdef enum:
    CONTROL_NONE = -1  # not a control batch, or one without records (cleaned)
    CONTROL_CRC = -2  # a control batch whose CRC does not match (only looked at with verify_control)
    CONTROL_UNKNOWN = -3  # not found here: compressed, its bytes not at hand, or its first record not a
                          # well-formed control key (RecordBatch.first_control_type decides, or raises)


cdef int16_t _control_type(const uint8_t *p, Py_ssize_t total, Py_ssize_t avail, Header *h,
                           bint verify) noexcept nogil:
    """control_type of the v2 batch at ``p`` (``total`` bytes, ``avail`` of them at ``p``)."""
    cdef Py_ssize_t pos = RECORD_BATCH_OVERHEAD
    cdef RecView rv
    cdef kx_rec_error e
    cdef int16_t ctype
    if not (h.attributes & CONTROL_FLAG_MASK) or h.records_count == 0:
        return CONTROL_NONE
    if avail < total or (h.attributes & COMPRESSION_CODEC_MASK) or h.records_count != 1:
        return CONTROL_UNKNOWN  # (Kafka writes one record per marker batch, uncompressed)
    if verify and kx_crc32c(0, p + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET)) != h.crc:
        return CONTROL_CRC
    if kx_parse_record(p, &pos, total, &rv, &e) or pos != total or rv.klen < 4 or kx_load_be_i16(rv.key) < 0:
        return CONTROL_UNKNOWN
    ctype = kx_load_be_i16(rv.key + 2)
    return ctype if ctype >= 0 else CONTROL_UNKNOWN


cdef int _scan_entry(const uint8_t *p, Py_ssize_t left, Py_ssize_t avail, bint verify, bint verify_control,
                     ScanCols *c, Py_ssize_t pos, Py_ssize_t *total_out) noexcept nogil:
    """One entry of a header scan at ``pos``: ``left`` bytes remain from it to the end of the input, of
    which ``p`` holds ``avail``, at least ``min(left, RECORD_BATCH_OVERHEAD)`` (all of them if ``verify``)."""
    cdef Py_ssize_t total, i
    cdef int32_t size
    cdef int8_t magic
    cdef Header h
    if left < LOG_OVERHEAD:
        return SCAN_INCOMPLETE
    size = kx_load_be_i32(p + LENGTH_OFFSET)
    if size < RECORD_OVERHEAD_V0:
        return SCAN_SMALL_SIZE
    if left < HEADER_SIZE_UP_TO_MAGIC:
        return SCAN_INCOMPLETE
    magic = <int8_t>p[MAGIC_OFFSET]
    if magic < 0 or magic > 2:
        return SCAN_BAD_MAGIC
    total = <Py_ssize_t>size + LOG_OVERHEAD
    if left < total:
        return SCAN_INCOMPLETE
    if magic >= 2 and total < RECORD_BATCH_OVERHEAD:
        return SCAN_SMALL_BATCH
    if c.n == c.cap and _scan_alloc(c, c.cap * 2 if c.cap else 1024):
        return SCAN_NOMEM
    i = c.n
    c.position[i] = pos
    c.size_in_bytes[i] = <int32_t>total
    c.magic[i] = magic
    if magic >= 2:
        read_header(p, &h)
        if verify and kx_crc32c(0, p + ATTRIBUTES_OFFSET, <size_t>(total - ATTRIBUTES_OFFSET)) != h.crc:
            return SCAN_CRC
        c.base_offset[i] = h.base_offset
        c.last_offset[i] = _wadd(h.base_offset, h.last_offset_delta)
        c.producer_id[i] = h.producer_id
        c.max_timestamp[i] = h.max_timestamp
        c.base_sequence[i] = h.base_sequence
        c.records_count[i] = h.records_count
        c.producer_epoch[i] = h.producer_epoch
        c.attributes[i] = <int16_t>h.attributes
        c.control_type[i] = _control_type(p, total, avail, &h, verify_control and not verify)
    else:
        # legacy entry: its offset is the (last) message offset; inner offsets need inflating
        c.base_offset[i] = kx_load_be_i64(p)
        c.last_offset[i] = c.base_offset[i]
        c.producer_id[i] = -1
        c.max_timestamp[i] = kx_load_be_i64(p + 18) if magic == 1 and total >= 26 else -1
        c.base_sequence[i] = -1
        c.records_count[i] = -1
        c.producer_epoch[i] = -1
        c.attributes[i] = p[17]
        c.control_type[i] = CONTROL_NONE
    c.n += 1
    total_out[0] = total
    return SCAN_OK


cdef int _scan(const uint8_t *buf, Py_ssize_t end, bint verify, bint verify_control, ScanCols *c,
               Py_ssize_t *stop, Py_ssize_t *errpos) noexcept nogil:
    """Header scan of every complete entry: the fast path behind ``scan_batches``."""
    cdef Py_ssize_t pos = 0, total = 0
    cdef int err
    while True:
        err = _scan_entry(buf + pos, end - pos, end - pos, verify, verify_control, c, pos, &total)
        if err != SCAN_OK:
            break
        pos += total
    stop[0] = pos
    if err == SCAN_INCOMPLETE:
        return SCAN_OK
    errpos[0] = pos + MAGIC_OFFSET if err == SCAN_BAD_MAGIC else pos
    return err


cdef enum:
    SCAN_WINDOW = 65536  # bytes per read while batches are small (and the largest control batch read whole)
    SCAN_PEEK = 256  # bytes per read once they are large: a header, or a whole marker batch (~80 bytes)
    SCAN_SMALL_BATCH_MAX = 16384  # a batch smaller than this: the next read takes a window of several


cdef inline long long _window_read(int fd, uint8_t *win, Py_ssize_t want, Py_ssize_t at,
                                   int *errno_out) noexcept nogil:
    """``pread`` of ``want`` bytes at file position ``at`` into ``win``: the bytes read, or -1 (errno in
    ``errno_out``)."""
    cdef long long got = kx_pread(fd, win, <size_t>want, at)
    if got < 0:
        errno_out[0] = <int>-got
        return -1
    return got


cdef int _scan_fd(int fd, Py_ssize_t start, Py_ssize_t end, bint verify_control, ScanCols *c,
                  Py_ssize_t *stop, Py_ssize_t *errpos, uint8_t *win, Py_ssize_t *errat,
                  int *errno_out) noexcept nogil:
    """``_scan`` of the file bytes [start, end) of ``fd`` with ``pread`` into ``win`` (SCAN_WINDOW bytes):
    a window of several entries at a time while they are small, a peek at each header once they are large;
    a control batch is read whole (up to SCAN_WINDOW bytes) for its control_type.  No CRC check but
    ``verify_control``'s.  Positions relative to ``start``; ``errat``: where the failing entry is in ``win``."""
    cdef Py_ssize_t pos = 0, total = 0, left, want, avail, wstart = 0, wlen = 0, i
    cdef long long got
    cdef int err
    cdef bint small = False  # (a peek first: a segment of large batches reads no window)
    cdef Header h
    while True:
        left = end - start - pos
        if left <= 0:
            err = SCAN_INCOMPLETE
            break
        avail = wstart + wlen - pos if wstart <= pos < wstart + wlen else 0
        if avail < left and avail < RECORD_BATCH_OVERHEAD:
            want = min(left, <Py_ssize_t>(SCAN_WINDOW if small else SCAN_PEEK))
            got = _window_read(fd, win, want, start + pos, errno_out)
            if got < 0:
                err = SCAN_IO
                break
            wstart, wlen, avail = pos, <Py_ssize_t>got, <Py_ssize_t>got
            if got < want:
                end = start + pos + got  # the file is shorter than it was: it ends here
                left = got
        err = _scan_entry(win + (pos - wstart), left, avail, False, verify_control, c, pos, &total)
        errat[0] = pos - wstart
        if err != SCAN_OK:
            break
        i = c.n - 1
        if c.control_type[i] == CONTROL_UNKNOWN and avail < total <= SCAN_WINDOW:
            # a marker batch larger than what was read: read it whole
            got = _window_read(fd, win, total, start + pos, errno_out)
            if got < 0:
                err = SCAN_IO
                break
            wstart, wlen = pos, <Py_ssize_t>got
            if got == total:
                read_header(win, &h)
                c.control_type[i] = _control_type(win, total, total, &h, verify_control)
        small = total < SCAN_SMALL_BATCH_MAX
        pos += total
    stop[0] = pos
    if err == SCAN_INCOMPLETE:
        return SCAN_OK
    errpos[0] = pos + MAGIC_OFFSET if err == SCAN_BAD_MAGIC else pos
    return err


def scan_batches(data, *, bint verify_crc=False, bint verify_control=False):
    """Header fields of every complete batch in ``data`` as columns, without decoding any record.

    Returns a dict of ``array.array`` columns (``position, base_offset, last_offset, producer_id,
    max_timestamp`` int64; ``base_sequence, records_count, size_in_bytes`` int32; ``producer_epoch,
    attributes, control_type`` int16; ``magic`` int8) plus ``valid_bytes`` and ``trailing_bytes``.  The
    scan runs without the GIL; legacy entries report their entry offset and ``records_count`` -1.

    ``control_type``: for a v2 control batch the type of its first control record (0 ABORT, 1 COMMIT),
    read without decoding the batch; -1 for other entries and control batches without records; -2 for a
    control batch whose CRC does not match (checked for control batches only with ``verify_control``;
    ``verify_crc`` checks every batch and raises); -3 where it cannot be read that way (compressed, not
    one record, or not a well-formed control record: :meth:`RecordBatch.first_control_type` decides or
    raises).
    """
    cdef _Buffer b = _Buffer(data)
    cdef ScanCols c
    cdef Py_ssize_t stop = 0, errpos = 0
    cdef int err
    cdef Header h
    memset_scan(&c)
    try:
        if _scan_alloc(&c, 64):
            raise MemoryError()
        with nogil:
            err = _scan(b.ptr, b.size, verify_crc, verify_control, &c, &stop, &errpos)
        if err == SCAN_CRC:
            n = kx_load_be_i32(b.ptr + errpos + LENGTH_OFFSET) + LOG_OVERHEAD
            check_v2_header(b.ptr, errpos, n, &h)
            verify_v2_crc(b.ptr, errpos, n, &h)
        _scan_raise(err, b.ptr + stop, errpos)
        return _scan_columns(&c, stop, b.size)
    finally:
        _scan_free(&c)


def scan_batches_fd(int fd, Py_ssize_t start, Py_ssize_t end, *, bint verify_control=False):
    """``scan_batches(file bytes [start, end))`` of the open file ``fd`` (positions relative to
    ``start``) without mapping the file: ``pread`` of windows of several entries while they are small,
    of each header once they are large, and of each control batch whole, without the GIL.  No CRC check
    but ``verify_control``'s (that needs every byte).  Same columns, same errors; OSError if a read fails."""
    cdef ScanCols c
    cdef Py_ssize_t stop = 0, errpos = 0, errat = 0
    cdef int err, errno_ = 0
    cdef uint8_t *win
    if start < 0 or end < start:
        raise ValueError(f"bad file range [{start}, {end})")
    cdef Py_ssize_t size = end - start  # (trailing_bytes are counted to the end asked for)
    end = max(start, min(end, os.fstat(fd).st_size))  # a file cut since its size was taken ends sooner
    memset_scan(&c)
    win = <uint8_t *>malloc(SCAN_WINDOW)
    try:
        if win == NULL or _scan_alloc(&c, 64):
            raise MemoryError()
        with nogil:
            err = _scan_fd(fd, start, end, verify_control, &c, &stop, &errpos, win, &errat, &errno_)
        if err == SCAN_IO:
            raise OSError(errno_, f"reading the batch header at file position {start + stop}: "
                                  f"{os.strerror(errno_)}")
        _scan_raise(err, win + errat, errpos)
        return _scan_columns(&c, stop, size)
    finally:
        free(win)
        _scan_free(&c)


def replay_transactions(const int64_t[:] position, const int64_t[:] base_offset, const int64_t[:] producer_id,
                        const int16_t[:] attributes, const int8_t[:] magic, const int32_t[:] size_in_bytes,
                        const int16_t[:] control_type, dict open_txns, dict opened_at, list aborted, segment,
                        int64_t high_watermark, from_offset=None, resolve=None, entry=None):
    """Replay one segment's batch headers (``scan_batches`` columns) as Kafka's producer state does for
    transactions: a transactional data batch opens its producer's transaction if none is open
    (``open_txns[producer_id] = base_offset``, ``opened_at[producer_id] = (segment, position, size)``); a
    COMMIT or ABORT marker closes it; a marker without an open transaction, or an empty control batch,
    changes nothing.  For each ABORT that closes a transaction, appends ``entry(producer_id, first_offset,
    marker_offset, last_stable_offset)`` (a tuple of them if ``entry`` is None) to ``aborted`` (the LSO at the marker: the smallest first offset
    still open, else the marker's offset + 1, as the broker writes it to ``.txnindex``).

    Rows below ``from_offset`` are skipped.  A marker whose ``control_type`` is not known (-2, -3) is
    resolved by ``resolve(row)``, which returns its type or raises.  Returns the smallest first offset of
    a transaction closed by a marker at or above ``high_watermark``, or None.
    """
    cdef Py_ssize_t i, n = base_offset.shape[0]
    cdef int64_t b, lso, skip_below = INT64_MIN if from_offset is None else <int64_t>from_offset
    cdef int16_t a
    cdef int ctype
    cdef object key, first, unreplicated = None
    if (position.shape[0] < n or producer_id.shape[0] < n or attributes.shape[0] < n or magic.shape[0] < n
            or size_in_bytes.shape[0] < n or control_type.shape[0] < n):
        raise ValueError("the header columns differ in length")
    for i in range(n):
        a = attributes[i]
        if not (a & TRANSACTIONAL_FLAG_MASK) or magic[i] < 2 or producer_id[i] < 0:
            continue
        b = base_offset[i]
        if b < skip_below:
            continue  # before the snapshot: its state is in open_txns
        key = producer_id[i]
        if not (a & CONTROL_FLAG_MASK):
            if key not in open_txns:
                open_txns[key] = b
                opened_at[key] = (segment, position[i], size_in_bytes[i])
            continue
        first = open_txns.get(key)
        if first is None:
            continue  # a marker without data on this partition
        ctype = control_type[i]
        if ctype < CONTROL_NONE:
            if resolve is None:
                raise ValueError(f"the control batch of row {i} needs resolve()")
            ctype = resolve(i)
        if ctype != 0 and ctype != 1:
            continue  # empty control batch (cleaned) or not a transaction marker
        del open_txns[key]
        if b >= high_watermark and (unreplicated is None or first < unreplicated):
            unreplicated = first
        if ctype == 0:
            lso = min(open_txns.values()) if open_txns else b + 1
            aborted.append((key, first, b, lso) if entry is None else entry(key, first, b, lso))
    return unreplicated


cdef int _scan_raise(int err, const uint8_t *entry, Py_ssize_t errpos) except -1:
    """Raise for a scan's error ``err`` (``entry``: the header of the entry it stopped at)."""
    if err == SCAN_NOMEM:
        raise MemoryError()
    if err == SCAN_SMALL_SIZE:
        raise CorruptRecordError(f"record size {kx_load_be_i32(entry + LENGTH_OFFSET)} is less than the "
                                 f"minimum record overhead ({RECORD_OVERHEAD_V0})", errpos)
    if err == SCAN_BAD_MAGIC:
        raise CorruptRecordError(f"invalid magic found in record: {<int8_t>entry[MAGIC_OFFSET]}", errpos)
    if err == SCAN_SMALL_BATCH:
        raise CorruptRecordError(f"record batch is smaller than the minimum {RECORD_BATCH_OVERHEAD} bytes", errpos)
    return 0


cdef dict _scan_columns(ScanCols *c, Py_ssize_t stop, Py_ssize_t size):
    cdef Py_ssize_t n = c.n
    return {
        "position": _column("q", <char *>c.position, n * 8),
        "base_offset": _column("q", <char *>c.base_offset, n * 8),
        "last_offset": _column("q", <char *>c.last_offset, n * 8),
        "producer_id": _column("q", <char *>c.producer_id, n * 8),
        "max_timestamp": _column("q", <char *>c.max_timestamp, n * 8),
        "base_sequence": _column("i", <char *>c.base_sequence, n * 4),
        "records_count": _column("i", <char *>c.records_count, n * 4),
        "size_in_bytes": _column("i", <char *>c.size_in_bytes, n * 4),
        "producer_epoch": _column("h", <char *>c.producer_epoch, n * 2),
        "attributes": _column("h", <char *>c.attributes, n * 2),
        "control_type": _column("h", <char *>c.control_type, n * 2),
        "magic": _column("b", <char *>c.magic, n),
        "valid_bytes": stop,
        "trailing_bytes": size - stop,
    }


cdef void memset_scan(ScanCols *c) noexcept:
    c.n = 0
    c.cap = 0
    c.position = NULL; c.base_offset = NULL; c.last_offset = NULL; c.producer_id = NULL; c.max_timestamp = NULL
    c.base_sequence = NULL; c.records_count = NULL; c.size_in_bytes = NULL; c.producer_epoch = NULL
    c.attributes = NULL; c.control_type = NULL; c.magic = NULL


cdef object _column(str typecode, char *data, Py_ssize_t nbytes):
    col = array.array(typecode)
    col.frombytes(PyBytes_FromStringAndSize(data, nbytes))
    return col


# -------------------------------------------------------------------------------------- encode_arrow
cdef struct BinView:
    const uint8_t *valid   # NULL: no nulls
    const int32_t *offsets32  # binary / string columns (one of the two offset pointers is set)
    const int64_t *offsets64  # large_binary / large_string columns
    const uint8_t *data
    Py_ssize_t shift        # the array's slice offset


cdef inline bint _is_valid(const uint8_t *bitmap, Py_ssize_t i) noexcept nogil:
    return bitmap == NULL or (bitmap[i >> 3] >> (i & 7)) & 1


cdef object _binary_column(object pa, object table, str name, BinView *v, list keep):
    """The column as one binary or large_binary array, read in place (strings as their UTF-8 bytes); only
    view and fixed-size layouts are cast (copied) to large_binary."""
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = one_array(col)
    return _binary_array(pa, col, name, v, keep)


cdef object _binary_array(object pa, object col, str name, BinView *v, list keep):
    """``_binary_column`` of one array."""
    t = col.type
    if pa.types.is_string(t):
        col = col.view(pa.binary())
    elif pa.types.is_large_string(t):
        col = col.view(pa.large_binary())
    elif pa.types.is_binary_view(t) or pa.types.is_string_view(t) or pa.types.is_fixed_size_binary(t):
        col = col.cast(pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        raise InvalidAppendError(f"column {name!r} must be binary or string, got {t}")
    keep.append(col)
    bufs = col.buffers()
    v.valid = <const uint8_t *><Py_ssize_t>bufs[0].address if bufs[0] is not None and col.null_count else NULL
    v.offsets32 = NULL
    v.offsets64 = NULL
    if pa.types.is_binary(col.type):
        v.offsets32 = <const int32_t *><Py_ssize_t>bufs[1].address
    else:
        v.offsets64 = <const int64_t *><Py_ssize_t>bufs[1].address
    v.data = <const uint8_t *><Py_ssize_t>bufs[2].address if bufs[2] is not None else NULL
    v.shift = col.offset
    return col


def encode_arrow(table, *, records_per_batch=1000, base_offset=0, producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False, compression="none", compression_level=None,
                 timestamp_type="create_time", partition_leader_epoch=-1, timestamp=None, zstd_frames=1):
    """Encode the rows of a ``pyarrow.Table``/``RecordBatch`` as consecutive v2 record batches, in C.

    Columns: ``value`` (required), ``key``, ``timestamp`` (timestamp or int64 milliseconds; null means
    -1) and ``headers`` (``list<struct<key: string, value: binary>>``), as :func:`decode_arrow` produces
    them; binary, large_binary and string columns are accepted.  Rows are cut into batches of
    ``records_per_batch``; offsets run on from ``base_offset`` and, for an idempotent or transactional
    producer, sequences from ``base_sequence``.  Rows without a timestamp column get ``timestamp`` (now by
    default).  The other columns of :func:`decode_arrow` (``offset``, ``producer_id``, ``sequence``, ...)
    are accepted and not written: the arguments decide them, so a table decoded from a compacted log is
    numbered again from ``base_offset``.  Returns the concatenated batches.
    """
    pa = _arrow()
    cdef BinView kv, vv
    cdef bint has_key, has_ts, has_headers
    cdef const int64_t *ts_ptr = NULL
    cdef const uint8_t *ts_valid = NULL
    cdef Py_ssize_t ts_shift = 0
    cdef Py_ssize_t n, start, stop, total
    cdef int64_t default_ts
    cdef uint8_t *bstart
    cdef int cid, attributes
    cdef list keep = []
    cdef Py_ssize_t hj = 0, hm = 0
    kv.valid = NULL
    kv.offsets32 = NULL
    kv.offsets64 = NULL
    kv.data = NULL
    kv.shift = 0
    # the arguments first (as BatchBuilder checks them), then the table
    base_offset, producer_id, producer_epoch, base_sequence, partition_leader_epoch, _ = check_builder_args(
        base_offset, producer_id, producer_epoch, base_sequence, transactional, partition_leader_epoch, None)
    cid = _compression.codec_id(compression)
    compression_level = _compression.check_level(cid, compression_level)
    cdef int frames = _compression.check_zstd_frames(zstd_frames)
    attributes = cid | timestamp_type_bits(timestamp_type) | (TRANSACTIONAL_FLAG_MASK if transactional else 0)
    default_ts = _now_ms() if timestamp is None else int64_arg(timestamp, "timestamp")
    cdef Py_ssize_t per_batch = check_records_per_batch(records_per_batch)
    table, tcol, hcol = encode_table(table, header_rows=False)
    names = set(table.column_names)
    n = table.num_rows
    check_offsets_fit(base_offset, n)
    _binary_column(pa, table, "value", &vv, keep)
    has_key = "key" in names
    if has_key:
        _binary_column(pa, table, "key", &kv, keep)
    has_ts = tcol is not None
    if has_ts:
        keep.append(tcol)
        tb = tcol.buffers()
        ts_valid = <const uint8_t *><Py_ssize_t>tb[0].address if tb[0] is not None and tcol.null_count else NULL
        ts_ptr = <const int64_t *><Py_ssize_t>tb[1].address
        ts_shift = tcol.offset
    has_headers = hcol is not None
    cdef _EncodeCols c
    c.has_headers = has_headers
    c.hcount = NULL
    if has_headers:
        # headers in place: per row a count, and the keys and values of all rows in one run
        import pyarrow.compute as pc
        counts = pc.list_value_length(hcol).fill_null(0).cast(pa.int64())
        flat = pc.list_flatten(hcol)
        keep += [counts, flat]
        if len(counts):
            hm = counts.offset
            c.hcount = (<const int64_t *><Py_ssize_t>counts.buffers()[1].address) + hm
        # (fields by index: pyarrow 14 looks them up by position; struct_field keeps null structs null)
        _binary_array(pa, pc.struct_field(flat, [flat.type.get_field_index("key")]), "headers", &c.hk, keep)
        _binary_array(pa, pc.struct_field(flat, [flat.type.get_field_index("value")]), "headers", &c.hv, keep)
    log_append_time = _now_ms() if attributes & TIMESTAMP_TYPE_MASK else None
    c.has_key = has_key
    c.has_ts = has_ts
    c.kv = kv
    c.vv = vv
    c.ts_ptr = ts_ptr
    c.ts_valid = ts_valid
    c.ts_shift = ts_shift
    c.default_ts = default_ts
    cdef Py_ssize_t nbatches = (n + per_batch - 1) // per_batch
    cdef Py_ssize_t *sizes = <Py_ssize_t *>malloc((nbatches + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t b, bad = -1, plen, max_size = 0
    cdef uint8_t *o = NULL
    cdef bytes out
    cdef int64_t max_ts
    cdef _BatchParams bp
    bp.base_offset = base_offset
    bp.leader_epoch = partition_leader_epoch
    bp.attributes = attributes
    bp.producer_id = producer_id
    bp.producer_epoch = producer_epoch
    bp.base_sequence = base_sequence
    bp.log_append_time = log_append_time if log_append_time is not None else -1
    bp.has_log_append_time = log_append_time is not None
    if sizes == NULL:
        raise MemoryError()
    hj = 0
    try:
        # pass 1: every record's size, so each batch (and the whole output) is allocated once
        with nogil:
            total = _encode_sizes(&c, n, per_batch, sizes, &bad)
        if total < 0:
            _raise_encode_error(&c, total, bad)
        # pass 2: write the records of each batch behind a space for its header, then the header and CRC
        if cid == 0:
            out = PyBytes_FromStringAndSize(NULL, total)
            o = <uint8_t *>PyBytes_AS_STRING(out)
            kx_advise_huge(o, total)
            with nogil:
                for b in range(nbatches):
                    _encode_batch(&c, o, b * per_batch, min(n, (b + 1) * per_batch), sizes[b], &bp,
                                  &hj)
                    o += RECORD_BATCH_OVERHEAD + sizes[b]
            return out
        for b in range(nbatches):
            max_size = max(max_size, sizes[b])
        o = <uint8_t *>malloc(RECORD_BATCH_OVERHEAD + max_size) if nbatches else NULL
        if nbatches and o == NULL:
            raise MemoryError()
        parts = []
        try:
            for b in range(nbatches):
                start = b * per_batch
                stop = min(n, start + per_batch)
                with nogil:
                    max_ts = _encode_records(&c, o + RECORD_BATCH_OVERHEAD, start, stop, &hj)
                batch = _compressed_batch(cid, o + RECORD_BATCH_OVERHEAD, sizes[b], compression_level, frames)
                plen = len(batch) - RECORD_BATCH_OVERHEAD
                bstart = <uint8_t *>PyBytes_AS_STRING(batch)
                with nogil:
                    _seal_batch(bstart, plen, &bp, stop - start, _row_ts(&c, start), max_ts)
                parts.append(batch)
        finally:
            free(o)
        return b"".join(parts)
    finally:
        free(sizes)


cdef struct _BatchParams:
    int64_t base_offset     # of the next batch
    int32_t leader_epoch
    int attributes
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence   # of the next batch (-1: none)
    int64_t log_append_time
    bint has_log_append_time


cdef Py_ssize_t _encode_sizes(_EncodeCols *c, Py_ssize_t n, Py_ssize_t rpb, Py_ssize_t *sizes,
                              Py_ssize_t *bad) noexcept nogil:
    """Pass 1 of ``encode_arrow``: the bytes of the records of each batch of ``rpb`` rows into ``sizes``.
    Returns the output's size, or an error code with the row (batch for -4) in ``bad``: -1 a negative
    timestamp, -2 a null header or header key, -3 a record over 2^31-1 bytes, -4 a batch over it."""
    cdef Py_ssize_t b, i, start, stop, body, total = 0, hj = 0, hm, hn, kn, vn, size
    cdef int64_t ts, first_ts
    for b in range((n + rpb - 1) // rpb):
        start = b * rpb
        stop = min(n, start + rpb)
        body = 0
        first_ts = _row_ts(c, start)
        for i in range(start, stop):
            ts = _row_ts(c, i)
            if ts < -1:
                bad[0] = i
                return -1
            hn = 0
            if c.has_headers:
                hm = c.hcount[i]
                hn = _headers_size(c, hj, hm)
                if hn < 0:
                    bad[0] = i
                    return -2
                hj += hm
            kn = _row_len(&c.kv, i) if c.has_key else -1
            vn = _row_len(&c.vv, i)
            size = record_body_size(_wsub(ts, first_ts), i - start, kn, vn, hn)
            if size > INT32_MAX_:
                bad[0] = i
                return -3
            body += varlong_size(size) + size
        if body + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD > INT32_MAX_:
            bad[0] = b
            return -4
        sizes[b] = body
        total += RECORD_BATCH_OVERHEAD + body
    return total


cdef int _raise_encode_error(_EncodeCols *c, Py_ssize_t code, Py_ssize_t bad) except -1:
    if code == -1:
        raise InvalidAppendError(f"invalid negative timestamp {_row_ts(c, bad)} in row {bad}")
    if code == -2:
        raise InvalidAppendError(f"row {bad} has a null header (or header key)")
    if code == -3:
        raise InvalidAppendError(f"row {bad} is larger than 2^31-1 bytes")
    raise InvalidAppendError(f"batch {bad} would be larger than 2^31-1 bytes: lower records_per_batch")


cdef int64_t _encode_records(_EncodeCols *c, uint8_t *p, Py_ssize_t start, Py_ssize_t stop,
                             Py_ssize_t *header_at) noexcept nogil:
    """Write the records of rows ``[start, stop)`` (one batch) at ``p``; returns their max timestamp.
    ``header_at``: where the batch's first header is in the flattened headers column (moved past its last)."""
    cdef Py_ssize_t i, hj = header_at[0], hm, hn, kn, vn, body
    cdef int64_t ts, max_ts = -1, first_ts = _row_ts(c, start)
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    for i in range(start, stop):
        ts = _row_ts(c, i)
        if ts > max_ts:
            max_ts = ts
        hm = c.hcount[i] if c.has_headers else 0
        hn = _headers_size(c, hj, hm) if hm else 0
        kn = _row_len(&c.kv, i) if c.has_key else -1
        vn = _row_len(&c.vv, i)
        kp = _row_ptr(&c.kv, i) if kn >= 0 else NULL
        vp = _row_ptr(&c.vv, i) if vn >= 0 else NULL
        body = record_body_size(_wsub(ts, first_ts), i - start, kn, vn, hn)
        p += write_record_kv(p, body, _wsub(ts, first_ts), i - start, kp, kn, vp, vn)
        if hm:
            p = _write_headers(p, c, hj, hm)
            hj += hm
        else:
            p[0] = 0
            p += 1
    header_at[0] = hj
    return max_ts


cdef void _seal_batch(uint8_t *bstart, Py_ssize_t plen, _BatchParams *bp, Py_ssize_t count, int64_t first_ts,
                      int64_t max_ts) noexcept nogil:
    """Write the header of a batch of ``count`` records whose (possibly compressed) records take ``plen``
    bytes after it, and its CRC; moves ``bp`` on to the next batch."""
    _write_header(bstart, bp.base_offset, <int32_t>(plen + RECORD_BATCH_OVERHEAD - LOG_OVERHEAD),
                  bp.leader_epoch, bp.attributes, <int32_t>(count - 1), first_ts,
                  bp.log_append_time if bp.has_log_append_time else max_ts, bp.producer_id, bp.producer_epoch,
                  bp.base_sequence, <int32_t>count)
    kx_store_be32(bstart + CRC_OFFSET,
                  kx_crc32c(0, bstart + ATTRIBUTES_OFFSET, <size_t>(plen + RECORD_BATCH_OVERHEAD - ATTRIBUTES_OFFSET)))
    bp.base_offset += count
    if bp.base_sequence >= 0:
        bp.base_sequence = _inc_seq(bp.base_sequence, <int32_t>count)


cdef void _encode_batch(_EncodeCols *c, uint8_t *bstart, Py_ssize_t start, Py_ssize_t stop, Py_ssize_t plen,
                        _BatchParams *bp, Py_ssize_t *header_at) noexcept nogil:
    """One uncompressed batch of rows ``[start, stop)`` at ``bstart``, its records taking ``plen`` bytes."""
    cdef int64_t max_ts = _encode_records(c, bstart + RECORD_BATCH_OVERHEAD, start, stop, header_at)
    _seal_batch(bstart, plen, bp, stop - start, _row_ts(c, start), max_ts)


cdef struct _EncodeCols:
    bint has_key
    bint has_ts
    bint has_headers
    BinView kv
    BinView vv
    BinView hk  # header keys and values of all rows, in row order (the headers column flattened)
    BinView hv
    const int64_t *hcount  # headers of each row (0 for an empty or null list)
    const int64_t *ts_ptr
    const uint8_t *ts_valid
    Py_ssize_t ts_shift
    int64_t default_ts


cdef Py_ssize_t _headers_size(_EncodeCols *c, Py_ssize_t j, Py_ssize_t m) noexcept nogil:
    """Bytes of the headers section of a row whose ``m`` headers start at ``j`` in the flattened column
    (0 if it has none); -1 if one of them is null or has a null key."""
    cdef Py_ssize_t size, k, kl, vl
    if m == 0:
        return 0
    size = varlong_size(m)
    for k in range(j, j + m):
        kl = _row_len(&c.hk, k)
        if kl < 0:
            return -1
        vl = _row_len(&c.hv, k)
        size += varlong_size(kl) + kl + varlong_size(vl) + (vl if vl > 0 else 0)
    return size


cdef uint8_t *_write_headers(uint8_t *p, _EncodeCols *c, Py_ssize_t j, Py_ssize_t m) noexcept nogil:
    """Write the headers section checked by ``_headers_size`` (count, then each key and value)."""
    cdef Py_ssize_t k, kl, vl
    p += wr_varlong(p, m)
    for k in range(j, j + m):
        kl = _row_len(&c.hk, k)
        p += wr_varlong(p, kl)
        memcpy(p, _row_ptr(&c.hk, k), kl)
        p += kl
        vl = _row_len(&c.hv, k)
        p += wr_varlong(p, vl)
        if vl > 0:
            memcpy(p, _row_ptr(&c.hv, k), vl)
            p += vl
    return p


cdef inline int64_t _row_ts(_EncodeCols *c, Py_ssize_t i) noexcept nogil:
    if not c.has_ts:
        return c.default_ts
    if _is_valid(c.ts_valid, i + c.ts_shift):
        return c.ts_ptr[i + c.ts_shift]
    return -1


cdef inline Py_ssize_t _row_start(BinView *v, Py_ssize_t row) noexcept nogil:
    return v.offsets32[row] if v.offsets32 != NULL else v.offsets64[row]


cdef inline Py_ssize_t _row_len(BinView *v, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t row = i + v.shift
    if not _is_valid(v.valid, row):
        return -1
    return _row_start(v, row + 1) - _row_start(v, row)


cdef inline const uint8_t *_row_ptr(BinView *v, Py_ssize_t i) noexcept nogil:
    return v.data + _row_start(v, i + v.shift)
