# Declarations of the compiled codec: the C helpers it links, the byte layout of a v2 batch header, and
# the constants of Kafka's formats (named, chained offsets as in DefaultRecordBatch.java).

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "crc32c.h" nogil:
    uint32_t kx_crc32c(uint32_t crc, const void *buf, size_t len)
    const char *kx_crc32c_impl_name()

cdef extern from "copy.h" nogil:
    void kx_copy(unsigned char *dst, const unsigned char *src, size_t n)
    void kx_prefetch(const void *p)
    int kx_is_ascii(const unsigned char *p, size_t n)

cdef extern from "pyint.h":
    bint kx_small_long(object o, int64_t *out)

cdef extern from "clock.h" nogil:
    int64_t kx_now_ms()

cdef extern from "populate.h" nogil:
    int kx_populate(const unsigned char *p, size_t n)
    long long kx_pread(int fd, unsigned char *buf, size_t n, long long offset)
    void kx_advise_huge(void *p, size_t n)
    void kx_prefault_write(void *p, size_t n)

cdef extern from "syslib.h" nogil:
    void kx_syslib_disable()
    unsigned kx_syszstd_version()
    long long kx_syszstd_decompress(void *dst, size_t cap, const void *src, size_t n)
    unsigned kx_syslz4_version()
    long long kx_syslz4_block(void *dst, size_t cap, const void *src, size_t n)
    unsigned char *kx_scratch_acquire(size_t n)
    void kx_scratch_release()
    long kx_syslib_live(int which)
    const size_t KX_SCRATCH_MAX

cdef extern from "deflate.h" nogil:
    void kx_zstd_compressor_at(const char *path)
    unsigned kx_zstd_compressor_version(int *bundled)
    int kx_zstd_joins()
    int kx_zstd_cuts(size_t n, int frames)
    size_t kx_zstd_deflate_bound(size_t n, int frames, int level)
    long long kx_zstd_deflate(unsigned char *dst, size_t cap, const unsigned char *src, size_t n, int level,
                              int threads, int frames)
    long kx_zstd_worker_jobs()
    void kx_zstd_expect()
    const size_t KX_ZSTD_SPLIT_MIN
    const size_t KX_ZSTD_PART
    size_t kx_zstd_big(int level)
    ctypedef struct kx_zstream:
        size_t posted
        size_t next
    kx_zstream *kx_zstream_new(int level)
    int kx_zstream_feed(kx_zstream *s, const unsigned char *records, size_t n)
    void kx_zstream_free(kx_zstream *s)
    long long kx_zstd_deflate_joined(unsigned char *dst, size_t cap, const unsigned char *src, size_t n, int level,
                                     int threads, kx_zstream *s)

cdef extern from "ahead.h" nogil:
    ctypedef long long (*kx_inflate_fn)(const unsigned char *src, Py_ssize_t n, int cid, unsigned char *dst,
                                        Py_ssize_t cap) noexcept nogil
    ctypedef struct kx_span:
        Py_ssize_t start
        Py_ssize_t end
        Py_ssize_t bound
        int cid
    ctypedef struct kx_ahead:
        int nthreads
    kx_ahead *kx_ahead_open(const unsigned char *src, kx_span *spans, Py_ssize_t nspans, int threads,
                            kx_inflate_fn inflate)
    long long kx_ahead_take(kx_ahead *a, Py_ssize_t start, const unsigned char **out)
    void kx_ahead_close(kx_ahead *a)

cdef extern from "record.h" nogil:
    ctypedef enum RecErr:
        E_PREMATURE_EOF
        E_RECORD_SIZE
        E_READ_MISMATCH
        E_KEY_PAST
        E_VALUE_PAST
        E_HEADER_COUNT
        E_HKEY_NEGATIVE
        E_HKEY_PAST
        E_HVALUE_PAST
        E_REMAINING
        E_VARINT_TRUNCATED
        E_VARINT_TOO_LONG
        E_VARLONG_TRUNCATED
        E_VARLONG_TOO_LONG
    ctypedef struct kx_rec_error:
        RecErr code
        Py_ssize_t pos
        int64_t a
        int64_t b
    ctypedef struct RecView:
        int32_t off_delta
        int64_t ts_delta
        const uint8_t *key
        int32_t klen
        const uint8_t *value
        int32_t vlen
        Py_ssize_t hpos
        int32_t hcount
        Py_ssize_t rend
    int kx_rd_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int32_t *out, kx_rec_error *e)
    int kx_rd_varlong(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out, kx_rec_error *e)
    int kx_parse_record(const uint8_t *buf, Py_ssize_t *ppos, Py_ssize_t end, RecView *rv, kx_rec_error *e)

cdef extern from "pidset.h" nogil:
    ctypedef struct kx_pidset:
        size_t n
    void kx_pidset_free(kx_pidset *s)
    int kx_pidset_has(const kx_pidset *s, int64_t pid)
    int kx_pidset_add(kx_pidset *s, int64_t pid, int64_t first)
    void kx_pidset_end(kx_pidset *s, int64_t pid, int64_t offset)

cdef extern from "hton.h" nogil:
    int16_t kx_load_be_i16(const unsigned char *p)
    int32_t kx_load_be_i32(const unsigned char *p)
    int64_t kx_load_be_i64(const unsigned char *p)
    uint32_t kx_load_be32(const unsigned char *p)
    void kx_store_be16(unsigned char *p, uint16_t v)
    void kx_store_be32(unsigned char *p, uint32_t v)
    void kx_store_be64(unsigned char *p, uint64_t v)


cdef enum:
    # log framing (Records.java)
    LOG_OVERHEAD = 12
    MAGIC_OFFSET = 16
    HEADER_SIZE_UP_TO_MAGIC = 17
    RECORD_OVERHEAD_V0 = 14
    # v2 header (DefaultRecordBatch.java), chained
    LENGTH_OFFSET = 8
    PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + 4
    MAGIC_V2_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + 4
    CRC_OFFSET = MAGIC_V2_OFFSET + 1
    ATTRIBUTES_OFFSET = CRC_OFFSET + 4
    LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2
    BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + 4
    MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + 8
    PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8
    PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + 8
    BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + 2
    RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + 4
    RECORD_BATCH_OVERHEAD = RECORDS_COUNT_OFFSET + 4
    # attributes
    COMPRESSION_CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_FLAG_MASK = 0x10
    CONTROL_FLAG_MASK = 0x20
    DELETE_HORIZON_FLAG_MASK = 0x40
    # the smallest v2 record: length, attributes, timestamp and offset deltas, key and value lengths and
    # header count, one byte each
    MIN_RECORD_SIZE = 7
    # CRC and scans release the GIL above this many bytes
    NOGIL_THRESHOLD = 16384


cdef struct Header:
    int64_t base_offset
    int32_t batch_length
    int32_t partition_leader_epoch
    int8_t magic
    uint32_t crc
    uint16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t records_count
