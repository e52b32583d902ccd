# Columnar decode: Kafka records straight into Arrow buffers (included by _codec.pyx).
#
# The decode loop is the one of ReadCommittedFilter (same visibility rules); instead of Record objects it
# appends to growable buffers allocated from pyarrow's memory pool (the result needs no copy); large ones
# are recycled between calls through a small cache of their own (see "Recycled column memory" below).
# The buffers are sized once for the whole input from its batch headers (presize), each batch reserves its
# rows before its record loop (decode_v2_columns writes through plain pointers), and growth takes the GIL
# only O(log n) times; nothing per record touches a Python object.

from cpython.ref cimport PyObject, Py_XDECREF
from libc.string cimport memset

cdef enum:
    COL_OFFSET = 1
    COL_TIMESTAMP = 2
    COL_TIMESTAMP_TYPE = 4
    COL_KEY = 8
    COL_VALUE = 16
    COL_HEADERS = 32
    COL_PRODUCER_ID = 64
    COL_PRODUCER_EPOCH = 128
    COL_SEQUENCE = 256
    COL_IS_TRANSACTIONAL = 512
    COL_ALL = 1023

_COLUMN_BITS = {name: 1 << i for i, name in enumerate(ARROW_COLUMNS)}


cdef struct Grow:
    uint8_t *data
    Py_ssize_t len
    Py_ssize_t cap
    PyObject *buf  # an owned reference to a pyarrow.ResizableBuffer (NULL until first use)


cdef int g_reserve(Grow *g, Py_ssize_t extra) except -1 nogil:
    cdef Py_ssize_t need = g.len + extra
    if need <= g.cap:
        return 0
    with gil:
        return _g_grow(g, max(need, 2 * g.cap, 4096))


cdef int _g_grow(Grow *g, Py_ssize_t cap) except -1:
    cdef object b
    if g.buf != NULL and g.cap < RECYCLE_MIN and cap >= RECYCLE_MIN:
        # A buffer that starts small (an offsets column holds its leading 0 before the input is sized)
        # and now grows to a cacheable size: move it into an idle buffer rather than resize it into fresh
        # memory, or every decode would fault in new pages for it and leave one more idle buffer behind.
        b = _recycled(cap)
        if b is not None:
            if g.len:
                memcpy(<void *><Py_ssize_t>b.address, g.data, g.len)
            Py_XDECREF(g.buf)  # (the small buffer goes back to the pool)
            Py_INCREF(b)
            g.buf = <PyObject *>b
            g.data = <uint8_t *><Py_ssize_t>b.address
            g.cap = b.size
            return 0
    if g.buf == NULL:
        b = _recycled(cap)
        if b is None:
            b = _pa.allocate_buffer(cap, resizable=True)
        Py_INCREF(b)
        g.buf = <PyObject *>b
    else:
        b = <object>g.buf
        b.resize(cap)
    g.data = <uint8_t *><Py_ssize_t>b.address
    g.cap = b.size  # (a recycled buffer may be larger than asked)
    kx_advise_huge(g.data, <size_t>g.cap)  # (large columns: one page fault per 2 MiB where memory is new)
    return 0


cdef void g_release(Grow *g) noexcept:
    Py_XDECREF(g.buf)
    g.buf = NULL
    g.data = NULL
    g.len = 0
    g.cap = 0


cdef inline int g_put(Grow *g, const void *src, Py_ssize_t n) except -1 nogil:
    if n <= 0:
        return 0  # (and never memcpy from or to NULL)
    if g.len + n > g.cap:
        g_reserve(g, n)
    memcpy(g.data + g.len, src, n)
    g.len += n
    return 0


cdef inline int g_i64(Grow *g, int64_t v) except -1 nogil:
    return g_put(g, &v, 8)


cdef inline int g_i32(Grow *g, int32_t v) except -1 nogil:
    return g_put(g, &v, 4)


cdef inline int g_i16(Grow *g, int16_t v) except -1 nogil:
    return g_put(g, &v, 2)


cdef inline int g_i8(Grow *g, int8_t v) except -1 nogil:
    return g_put(g, &v, 1)


cdef inline int bit_set(Grow *g, Py_ssize_t i, bint v) except -1 nogil:
    """Set bit ``i`` of a validity bitmap, growing it with zeroed bytes."""
    cdef Py_ssize_t byte = i >> 3
    cdef Py_ssize_t old
    if byte >= g.len:
        old = g.len
        g_reserve(g, byte + 1 - g.len)
        memset(g.data + old, 0, byte + 1 - old)
        g.len = byte + 1
    if v:
        g.data[byte] |= <uint8_t>(1 << (i & 7))
    return 0


cdef int bits_fill(Grow *g, Py_ssize_t start, Py_ssize_t count, bint v) except -1 nogil:
    """Set bits [start, start + count) of a bitmap to ``v`` (bits before ``start`` are already written)."""
    cdef Py_ssize_t end = start + count
    cdef Py_ssize_t i, first_full, last_full
    if count <= 0:
        return 0
    bit_set(g, end - 1, False)  # the bitmap now covers every bit to set, new bytes zeroed
    if not v:
        return 0
    first_full = (start + 7) >> 3
    last_full = end >> 3
    if first_full >= last_full:
        for i in range(start, end):
            g.data[i >> 3] |= <uint8_t>(1 << (i & 7))
        return 0
    for i in range(start, first_full << 3):
        g.data[i >> 3] |= <uint8_t>(1 << (i & 7))
    memset(g.data + first_full, 0xFF, last_full - first_full)
    for i in range(last_full << 3, end):
        g.data[i >> 3] |= <uint8_t>(1 << (i & 7))
    return 0


# Validity bitmaps are written lazily: while a column has no null, its bitmap stays empty (Arrow's "no
# validity buffer"); the first null at row i writes i one-bits, and from then on every row sets its bit.
cdef inline int row_valid(Grow *g, Py_ssize_t nulls, Py_ssize_t i) except -1 nogil:
    if nulls:
        bit_set(g, i, True)
    return 0


cdef int row_null(Grow *g, Py_ssize_t *nulls, Py_ssize_t i) except -1 nogil:
    if nulls[0] == 0:
        bits_fill(g, 0, i, True)
    bit_set(g, i, False)
    nulls[0] += 1
    return 0


cdef struct BinCol:
    Grow offsets   # int32 (or int64 when large) offsets, n + 1 of them
    Grow data
    Grow valid
    Py_ssize_t nulls


@cython.final
cdef class _Columns:
    """Growable Arrow columns for decoded records."""
    cdef int want
    cdef bint large
    cdef Py_ssize_t n
    cdef Grow offset
    cdef Grow timestamp
    cdef Grow ts_valid
    cdef Py_ssize_t ts_nulls
    cdef Grow ts_type
    cdef BinCol key
    cdef BinCol value
    cdef Grow h_list_offsets   # int32, one per row + 1
    cdef BinCol h_key          # string child
    cdef BinCol h_value        # binary child
    cdef Py_ssize_t h_n
    cdef Grow producer_id
    cdef Grow producer_epoch
    cdef Grow sequence
    cdef Grow is_txn
    # binary_view mode: keys and values are 16-byte views into variadic data buffers (no copy of the bytes)
    cdef bint views
    cdef list view_bufs         # pyarrow buffers the views point into
    cdef int32_t cur_index      # the buffer views are made against now
    cdef const uint8_t *cur_base
    cdef _Buffer src            # the caller's buffer (uncompressed batches point into it)
    cdef int32_t src_index      # its current window in view_bufs (-1: none yet)
    cdef Py_ssize_t src_start
    cdef const uint8_t *src_base  # src.ptr + src_start

    def __cinit__(self, int want, bint large, bint views=False):
        self.want = want
        self.large = large
        self.views = views
        self.view_bufs = []
        self.src_index = -1
        self.n = 0
        self.h_n = 0
        _bin_init(&self.key, large, views)
        _bin_init(&self.value, large, views)
        _bin_init(&self.h_key, False)
        _bin_init(&self.h_value, False)
        g_i32(&self.h_list_offsets, 0)

    def __dealloc__(self):
        g_release(&self.offset)
        g_release(&self.timestamp)
        g_release(&self.ts_valid)
        g_release(&self.ts_type)
        g_release(&self.h_list_offsets)
        g_release(&self.producer_id)
        g_release(&self.producer_epoch)
        g_release(&self.sequence)
        g_release(&self.is_txn)
        _bin_free(&self.key)
        _bin_free(&self.value)
        _bin_free(&self.h_key)
        _bin_free(&self.h_value)

    cdef int reserve(self, Py_ssize_t rows, Py_ssize_t payload, Py_ssize_t key_payload) except -1 nogil:
        """Room for ``rows`` more records whose values (keys) take up to ``payload`` (``key_payload``) bytes
        (the buffers grow by doubling, so the GIL is taken only O(log n) times)."""
        cdef int want = self.want
        if want & COL_OFFSET:
            g_reserve(&self.offset, rows * 8)
        if want & COL_TIMESTAMP:
            g_reserve(&self.timestamp, rows * 8)
        if want & COL_TIMESTAMP_TYPE:
            g_reserve(&self.ts_type, rows)
        # values before keys: the larger column takes the larger idle buffer (best fit, largest first)
        if want & COL_VALUE:
            _bin_reserve(&self.value, rows, 0 if self.views else payload, self.large or self.views)
        if want & COL_KEY:
            _bin_reserve(&self.key, rows, 0 if self.views else key_payload, self.large or self.views)
        if want & COL_HEADERS:
            g_reserve(&self.h_list_offsets, rows * 4)
        if want & COL_PRODUCER_ID:
            g_reserve(&self.producer_id, rows * 8)
        if want & COL_PRODUCER_EPOCH:
            g_reserve(&self.producer_epoch, rows * 2)
        if want & COL_SEQUENCE:
            g_reserve(&self.sequence, rows * 4)
        if want & COL_IS_TRANSACTIONAL:
            g_reserve(&self.is_txn, (self.n + rows) // 8 + 2 - self.is_txn.len)
        return 0

    cdef int presize(self, Py_ssize_t rows, Py_ssize_t payload) except -1:
        """Size every buffer once for a whole input of about ``rows`` records and ``payload`` record bytes
        (one allocation per column instead of a chain of doublings, each copying and faulting in memory).
        Values get ``payload`` bytes; keys a quarter of it and grow if they need more."""
        return self.reserve(rows, payload, payload // 4)

    cdef int add(self, int64_t offset, int64_t ts, int8_t ts_type, const uint8_t *k, int32_t klen,
                 const uint8_t *v, int32_t vlen, int64_t pid, int16_t epoch, int32_t seq, bint txn) except -1 nogil:
        """Append one row (the legacy path; v2 batches go through decode_v2_columns)."""
        cdef int want = self.want
        cdef Py_ssize_t i = self.n
        if want & COL_OFFSET:
            g_i64(&self.offset, offset)
        if want & COL_TIMESTAMP:
            g_i64(&self.timestamp, ts)
            if ts == -1:  # Kafka's "no timestamp"; others are real instants
                row_null(&self.ts_valid, &self.ts_nulls, i)
            else:
                row_valid(&self.ts_valid, self.ts_nulls, i)
        if want & COL_TIMESTAMP_TYPE:
            g_i8(&self.ts_type, ts_type)
        if self.views:
            if want & COL_KEY:
                _view_add(&self.key, i, k, klen, self.cur_index, self.cur_base)
            if want & COL_VALUE:
                _view_add(&self.value, i, v, vlen, self.cur_index, self.cur_base)
        else:
            if want & COL_KEY:
                _bin_add(&self.key, i, k, klen, self.large)
            if want & COL_VALUE:
                _bin_add(&self.value, i, v, vlen, self.large)
        if want & COL_PRODUCER_ID:
            g_i64(&self.producer_id, pid)
        if want & COL_PRODUCER_EPOCH:
            g_i16(&self.producer_epoch, epoch)
        if want & COL_SEQUENCE:
            g_i32(&self.sequence, seq)
        if want & COL_IS_TRANSACTIONAL:
            bit_set(&self.is_txn, i, txn)
        self.n = i + 1
        return 0

    cdef int use_source(self, Py_ssize_t pos, Py_ssize_t size) except -1:
        """Views of the next records point into the caller's buffer at [pos, pos + size)."""
        if self.src_index < 0 or pos + size - self.src_start > 2147483647:
            # a new window: 32-bit view offsets reach 2 GiB past its start
            self.view_bufs.append(_pa.foreign_buffer(<Py_ssize_t>(self.src.ptr + pos), self.src.size - pos,
                                                     base=self.src))
            self.src_index = len(self.view_bufs) - 1
            self.src_start = pos
        self.cur_index = self.src_index
        self.cur_base = self.src.ptr + self.src_start
        self.src_base = self.cur_base
        return 0

    cdef int use_payload(self, bytes payload) except -1:
        """Views of the next records point into ``payload`` (a decompressed batch, kept by the array)."""
        self.view_bufs.append(_pa.py_buffer(payload))
        self.cur_index = len(self.view_bufs) - 1
        self.cur_base = <const uint8_t *>PyBytes_AS_STRING(payload)
        return 0

    cdef int end_headers(self) except -1 nogil:
        """Close the current row's header list (call once per row when headers are wanted)."""
        if self.h_n > 2147483647:
            _binary_overflow()
        return g_i32(&self.h_list_offsets, <int32_t>self.h_n)

    cdef int add_header(self, const uint8_t *k, int32_t klen, const uint8_t *v, int32_t vlen) except -1 nogil:
        if kx_is_ascii(k, klen):
            _bin_add(&self.h_key, self.h_n, k, klen, False)
        else:
            with gil:
                self._add_header_key_repaired(k, klen)
        _bin_add(&self.h_value, self.h_n, v, vlen, False)
        self.h_n += 1
        return 0

    cdef int _add_header_key_repaired(self, const uint8_t *k, int32_t klen) except -1:
        # Arrow strings must be valid UTF-8; Kafka does not check header keys, so invalid sequences are
        # replaced with U+FFFD here (the record decoders keep them via surrogateescape)
        cdef bytes fixed = PyUnicode_DecodeUTF8(<const char *>k, klen, "replace").encode("utf-8")
        return _bin_add(&self.h_key, self.h_n, <const uint8_t *>PyBytes_AS_STRING(fixed),
                        <int32_t>PyBytes_GET_SIZE(fixed), False)


cdef void _bin_free(BinCol *c) noexcept:
    g_release(&c.offsets)
    g_release(&c.data)
    g_release(&c.valid)


cdef int _bin_reserve(BinCol *c, Py_ssize_t rows, Py_ssize_t payload, bint wide) except -1 nogil:
    g_reserve(&c.offsets, rows * (16 if wide else 4))  # int32 offsets, or room for int64 offsets / views
    return g_reserve(&c.data, payload)


cdef int _bin_init(BinCol *c, bint large, bint views=False) except -1:
    c.nulls = 0
    if views:
        return 0  # views: no leading offset
    if large:
        g_put(&c.offsets, "\0\0\0\0\0\0\0\0", 8)
    else:
        g_put(&c.offsets, "\0\0\0\0", 4)


cdef inline void _view_make(uint8_t *v, const uint8_t *p, int32_t n, int32_t index, const uint8_t *base) noexcept nogil:
    """Write one 16-byte Arrow binary view of p[0:n] (n >= 0): length + inline bytes (<= 12), or length +
    4-byte prefix + buffer index + offset from ``base``."""
    cdef int32_t off
    memset(v, 0, 16)
    memcpy(v, &n, 4)
    if n <= 12:
        kx_copy(v + 4, p, n)
    else:
        memcpy(v + 4, p, 4)
        off = <int32_t>(p - base)
        memcpy(v + 8, &index, 4)
        memcpy(v + 12, &off, 4)


cdef inline uint8_t *_bin_put(BinCol *c, uint8_t *slot, Py_ssize_t r, const uint8_t *p, int32_t n,
                              Py_ssize_t *total, bint views, bint large, int32_t index,
                              const uint8_t *base) except NULL nogil:
    """Row ``r`` of a binary column (``n`` < 0: null), into room reserved beforehand: its validity bit, its
    bytes at ``total`` (the column's data length so far, advanced) and its end offset, or its 16-byte view,
    at ``slot``.  Returns the next slot; the caller commits ``slot`` and ``total`` to the column."""
    if n >= 0:
        row_valid(&c.valid, c.nulls, r)
    else:
        row_null(&c.valid, &c.nulls, r)
    if views:
        if n >= 0:
            _view_make(slot, p, n, index, base)
        else:
            memset(slot, 0, 16)
        return slot + 16
    if n > 0:
        kx_copy(c.data.data + total[0], p, n)
        total[0] += n
    if large:
        memcpy(slot, total, 8)
        return slot + 8
    if total[0] > 2147483647:
        _binary_overflow()
        return NULL
    (<int32_t *>slot)[0] = <int32_t>total[0]
    return slot + 4


cdef int _binary_overflow() except -1 with gil:
    raise _BinaryOverflow()


cdef inline int _bin_append(BinCol *c, Py_ssize_t r, const uint8_t *p, int32_t n, bint views, bint large,
                            int32_t index, const uint8_t *base) except -1 nogil:
    """_bin_put for one row at a time (legacy records, header children): reserves, then commits."""
    cdef Py_ssize_t total = c.data.len
    if n > 0 and not views:
        g_reserve(&c.data, n)
    g_reserve(&c.offsets, 16)
    c.offsets.len = _bin_put(c, c.offsets.data + c.offsets.len, r, p, n, &total, views, large, index, base) \
        - c.offsets.data
    c.data.len = total
    return 0


cdef inline int _bin_add(BinCol *c, Py_ssize_t i, const uint8_t *p, int32_t n, bint large) except -1 nogil:
    return _bin_append(c, i, p, n, False, large, 0, NULL)


cdef inline int _view_add(BinCol *c, Py_ssize_t i, const uint8_t *p, int32_t n, int32_t index,
                          const uint8_t *base) except -1 nogil:
    """Append one Arrow binary view (a null is an all-zero view with its validity bit cleared)."""
    return _bin_append(c, i, p, n, True, False, index, base)


class _BinaryOverflow(Exception):
    """More than 2^31-1 bytes in one binary column: the caller splits or switches to large_binary."""


cdef object _take(Grow *g):
    """The filled part of a growable buffer, as a pyarrow buffer (no copy unless most of it is unused)."""
    cdef object b, small
    cdef _Lease lease
    cdef Py_ssize_t n = g.len
    if g.buf == NULL:
        return _pa.py_buffer(b"")
    b = <object>g.buf
    if g.cap - n > 65536 and g.cap > 4 * n:  # do not pin several times the memory the column needs
        if g.cap < RECYCLE_MIN:
            b.resize(n, shrink_to_fit=True)
            g_release(g)
            return b.slice(0, n)
        small = _recycled(n, 4 * n) if n >= RECYCLE_MIN else None  # (idle memory first, as for any column)
        if small is None:
            small = _pa.allocate_buffer(n, resizable=n >= RECYCLE_MIN)  # (the cache holds resizable ones)
        if n:
            memcpy(<void *><Py_ssize_t>small.address, g.data, n)
        g_release(g)
        _recycle(b)
        if small.size < RECYCLE_MIN:
            return small
        lease = _Lease.__new__(_Lease)
        lease.buf = small
        return _pa.foreign_buffer(<Py_ssize_t>small.address, n, base=lease)
    g_release(g)
    if b.size < RECYCLE_MIN:
        return b.slice(0, n)
    lease = _Lease.__new__(_Lease)
    lease.buf = b  # back to the cache when the last array using the memory is gone
    return _pa.foreign_buffer(<Py_ssize_t>b.address, n, base=lease)


# ------------------------------------------------------------------------------ recycled column memory
# A column buffer of RECYCLE_MIN bytes or more is handed out on lease: when the last Arrow array using it is
# gone, it goes into a small process-wide cache, and the next decode writes its columns there.  Handed back
# to the pool instead, its pages are returned to the kernel a few milliseconds later (mimalloc's purge), and
# the next decode faults them in again, which costs as much as half of the decoding: a consumer decoding
# one fetch after another, with other work in between, would pay that on every call.  The cache holds at
# most _recycle_limit bytes (buffer_cache_limit()), the oldest buffers dropped first; memory that any array
# still uses is never in it.
cdef Py_ssize_t RECYCLE_MIN = 1 << 20
cdef list _recycle_free = []  # idle pyarrow ResizableBuffers, oldest first
cdef Py_ssize_t _recycle_bytes = 0
cdef Py_ssize_t _recycle_limit = 256 << 20


@cython.final
cdef class _Lease:
    """The base object of a leased buffer: returns the buffer to the cache when Arrow lets go of it."""
    cdef object buf

    def __dealloc__(self):
        if self.buf is not None and _recycle_free is not None:  # (None during interpreter shutdown)
            _recycle(self.buf)
        self.buf = None


cdef object _recycled(Py_ssize_t cap, Py_ssize_t most=-1):
    """The smallest idle buffer of at least ``cap`` bytes (and at most ``most`` unless -1), taken out of the
    cache; None if there is none."""
    global _recycle_bytes
    cdef Py_ssize_t i, size, best = -1, best_size = 0
    if cap < RECYCLE_MIN:
        return None
    for i in range(len(_recycle_free)):
        size = _recycle_free[i].size
        if size >= cap and (most < 0 or size <= most) and (best < 0 or size < best_size):
            best = i
            best_size = size
    if best < 0:
        return None
    _recycle_bytes -= best_size
    return _recycle_free.pop(best)


cdef void _recycle(object b) noexcept:
    global _recycle_bytes
    cdef Py_ssize_t size = b.size
    if size > _recycle_limit:
        return
    _recycle_free.append(b)
    _recycle_bytes += size
    _recycle_trim()


cdef void _recycle_trim() noexcept:
    global _recycle_bytes
    while _recycle_bytes > _recycle_limit:
        _recycle_bytes -= _recycle_free.pop(0).size


def buffer_cache_limit(limit=None):
    """How many bytes of idle column memory are kept for the next decode (256 MiB unless set); with
    ``limit``, set it (0 empties the cache and turns it off) and return the previous limit."""
    global _recycle_limit
    cdef Py_ssize_t old = _recycle_limit
    if limit is not None:
        if limit < 0:
            raise ValueError(f"the buffer cache limit must be >= 0, got {limit}")
        _recycle_limit = limit
        _recycle_trim()
    return old


def buffer_cache_bytes():
    """Bytes of idle column memory in the cache now."""
    return _recycle_bytes


cdef object _bitmap(Grow *g, Py_ssize_t n, Py_ssize_t nulls):
    if nulls == 0:
        return None
    bit_set(g, n, False)  # make sure the bitmap covers every row
    return _take(g)


cdef object _bin_array(BinCol *c, Py_ssize_t n, object typ):
    valid = _bitmap(&c.valid, n, c.nulls)
    return _pa.Array.from_buffers(typ, n, [valid, _take(&c.offsets), _take(&c.data)], null_count=c.nulls)


cdef object _view_array(BinCol *c, Py_ssize_t n, list bufs):
    valid = _bitmap(&c.valid, n, c.nulls)
    return _pa.Array.from_buffers(_pa.binary_view(), n, [valid, _take(&c.offsets)] + bufs, null_count=c.nulls)


_pa = None


cdef object _arrow():
    global _pa
    if _pa is None:
        try:
            import pyarrow
        except ImportError as exc:
            raise ImportError("decode_arrow needs pyarrow: pip install 'kafkatx[arrow]'") from exc
        _pa = pyarrow
    return _pa


cdef object _headers_list_type = None


cdef object _headers_type():
    """The type of the headers column (the schema's), looked up once."""
    global _headers_list_type
    if _headers_list_type is None:
        _headers_list_type = arrow_schema(("headers",)).field("headers").type
    return _headers_list_type


cdef object _finish(_Columns cols, dict meta):
    pa = _arrow()
    cdef Py_ssize_t n = cols.n
    cdef int want = cols.want
    binary = pa.large_binary() if cols.large else pa.binary()
    arrays = []
    names = []
    if want & COL_OFFSET:
        names.append("offset")
        arrays.append(pa.Array.from_buffers(pa.int64(), n, [None, _take(&cols.offset)]))
    if want & COL_TIMESTAMP:
        names.append("timestamp")
        valid = _bitmap(&cols.ts_valid, n, cols.ts_nulls)
        arrays.append(pa.Array.from_buffers(pa.timestamp("ms", tz="UTC"), n, [valid, _take(&cols.timestamp)],
                                            null_count=cols.ts_nulls))
    if want & COL_TIMESTAMP_TYPE:
        names.append("timestamp_type")
        arrays.append(pa.Array.from_buffers(pa.int8(), n, [None, _take(&cols.ts_type)]))
    if want & COL_KEY:
        names.append("key")
        arrays.append(_view_array(&cols.key, n, cols.view_bufs) if cols.views else _bin_array(&cols.key, n, binary))
    if want & COL_VALUE:
        names.append("value")
        arrays.append(_view_array(&cols.value, n, cols.view_bufs) if cols.views
                      else _bin_array(&cols.value, n, binary))
    if want & COL_HEADERS:
        names.append("headers")
        hkeys = _bin_array(&cols.h_key, cols.h_n, pa.string())
        hvals = _bin_array(&cols.h_value, cols.h_n, pa.binary())
        list_type = _headers_type()
        items = pa.StructArray.from_arrays([hkeys, hvals], fields=list(list_type.value_type))
        arrays.append(pa.Array.from_buffers(list_type, n, [None, _take(&cols.h_list_offsets)], children=[items]))
    if want & COL_PRODUCER_ID:
        names.append("producer_id")
        arrays.append(pa.Array.from_buffers(pa.int64(), n, [None, _take(&cols.producer_id)]))
    if want & COL_PRODUCER_EPOCH:
        names.append("producer_epoch")
        arrays.append(pa.Array.from_buffers(pa.int16(), n, [None, _take(&cols.producer_epoch)]))
    if want & COL_SEQUENCE:
        names.append("sequence")
        arrays.append(pa.Array.from_buffers(pa.int32(), n, [None, _take(&cols.sequence)]))
    if want & COL_IS_TRANSACTIONAL:
        names.append("is_transactional")
        bit_set(&cols.is_txn, n, False)
        arrays.append(pa.Array.from_buffers(pa.bool_(), n, [None, _take(&cols.is_txn)]))
    schema = arrow_schema(names, cols.large, cols.views).with_metadata({k: str(v) for k, v in meta.items()})
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


cdef int _want_bits(object columns) except -1:
    cdef int bits = 0
    if columns is None:
        return COL_ALL
    for c in column_names(columns):  # (the same checks and errors as the twin's)
        bits |= _COLUMN_BITS[c]
    return bits
