"""The benchmark workload: one deterministic log, built once per process and cached in memory.

Workload (the one in ``docs/peers.md``): ``n`` records (1,000,000 by default), 10-byte keys, 100-byte values,
1,000 records per transactional batch (producer id, epoch, base sequence and the transactional bit set),
codecs none / lz4 / zstd.

Keys and values are *semi-realistic text*, not random bytes, so lz4 and zstd have something to compress
(on the default workload lz4 keeps about 53 % and zstd about 33 % of the record bytes; both ratios are
printed by ``compare.py``):

* key   ``b"u%09d"``: one of 200,000 user ids;
* value a 100-byte JSON-like event: ``{"u":…,"ev":"page_view","sku":"SKU-…","q":…,"p":….…,"r":"<16 hex>"}``
  padded with a short word list; the ``r`` token is 64 random bits, so values never repeat.

Everything comes from ``random.Random(SEED).getrandbits``, whose output is fixed across Python versions.
Timestamps are ``T0 + i`` ms (explicit, so logs are byte-reproducible). Batches rotate over 8 transactional
producers (ids 4000..4007, epoch 3), each with its own running sequence, so batch ``b`` has producer
``4000 + b % 8`` and base sequence ``(b // 8) * 1000``.

The same log is also built with aiokafka's and kafka-python's ``DefaultRecordBatchBuilder``
(:func:`build_log_aiokafka`, :func:`build_log_kafka_python`; their base offset is patched in afterwards,
as a broker does) and :func:`check_equivalence` proves the three decode to the same records (and, for
``none``, are byte-identical).

:func:`build_txn_log` adds a COMMIT/ABORT marker after every batch (10 % of transactions aborted) for the
read_committed rows.
"""

from __future__ import annotations

import functools
import pathlib
import random
import struct
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

N_RECORDS = 1_000_000
QUICK_RECORDS = 100_000
BATCH_RECORDS = 1000
BATCH_HEADER_BYTES = 61  # a v2 batch's header; its records (compressed or not) follow
KEY_SIZE = 10
VALUE_SIZE = 100
SEED = 20_240_601
T0 = 1_700_000_000_000
N_PRODUCERS = 8
PRODUCER_ID0 = 4000
PRODUCER_EPOCH = 3
CODECS = ("none", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_EVENTS = ("page_view", "add_to_cart", "checkout", "search", "click", "login", "logout", "purchase")
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
          "kilo", "lima", "mike", "november", "oscar", "papa")  # fmt: skip


def import_kafkatx():
    """``kafkatx`` from the environment, or from this checkout's ``src/`` if it is not installed."""
    import importlib.util

    if importlib.util.find_spec("kafkatx") is None:
        sys.path.insert(0, str(SRC))
    import kafkatx

    return kafkatx


# ------------------------------------------------------------------------------------------ records
@functools.lru_cache(maxsize=None)
def records(n: int = N_RECORDS):
    """``(keys, values, timestamps)``: three lists of length ``n``."""
    if n % BATCH_RECORDS:
        raise ValueError(f"n must be a multiple of {BATCH_RECORDS}")
    bits = random.Random(SEED).getrandbits
    keys, values = [], []
    for i in range(n):
        r = bits(64)
        keys.append(b"u%09d" % (r % 200_000))
        v = b'{"u":%d,"ev":"%s","sku":"SKU-%05d","q":%d,"p":%d.%02d,"r":"%016x","t":"' % (
            (r >> 18) % 200_000,
            _EVENTS[(r >> 36) % 8].encode(),
            (r >> 40) % 50_000,
            1 + (r >> 56) % 9,
            (r >> 20) % 2000,
            (r >> 30) % 100,
            bits(64),
        )
        w = 0
        while len(v) < VALUE_SIZE - 2:
            v += _WORDS[(r >> (4 * (w % 16))) & 15].encode() + b" "
            w += 1
        values.append(v[: VALUE_SIZE - 2] + b'"}')
    timestamps = list(range(T0, T0 + n))
    return keys, values, timestamps


def batches(n: int = N_RECORDS, per_batch: int = BATCH_RECORDS):
    """``(base_offset, producer_id, producer_epoch, base_sequence, start, stop)`` per batch (record slice)."""
    out = []
    for b in range(n // per_batch):
        start = b * per_batch
        seq = (b // N_PRODUCERS) * per_batch
        out.append((start, PRODUCER_ID0 + b % N_PRODUCERS, PRODUCER_EPOCH, seq, start, start + per_batch))
    return out


# ------------------------------------------------------------------------------------------ builders
def encode_kafkatx(kx, codec: str, n: int, per_batch: int = BATCH_RECORDS, zstd_frames: int = 1,
                   clock: bool = False, headers: list | None = None) -> list:
    """Batches built by ``kx.BatchBuilder`` (``kx`` = the kafkatx package or one of its backend modules);
    ``clock``: the records appended without a timestamp (each takes the time of its append); ``headers``:
    each record's headers (a list per record)."""
    keys, values, ts = records(n)
    out = []
    Builder = kx.BatchBuilder
    for base, pid, epoch, seq, start, stop in batches(n, per_batch):
        bb = Builder(base_offset=base, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=True, compression=codec, zstd_frames=zstd_frames)  # fmt: skip
        append = bb.append
        if clock:
            for i in range(start, stop):
                append(values[i], keys[i])
        elif headers is not None:
            for i in range(start, stop):
                append(values[i], keys[i], timestamp=ts[i], headers=headers[i])
        else:
            for i in range(start, stop):
                append(values[i], keys[i], timestamp=ts[i])
        out.append(bb.build())
    return out


def _encode_peer(builder_cls, codec: str, n: int, per_batch: int = BATCH_RECORDS, clock: bool = False,
                 headers: list | None = None) -> list:
    """Batches built by a peer's ``DefaultRecordBatchBuilder`` (aiokafka and kafka-python share its
    signature; base offset 0, as a producer sends them); ``clock`` and ``headers`` as in encode_kafkatx."""
    keys, values, ts = records(n)
    cid = CODEC_IDS[codec]
    out = []
    for _base, pid, epoch, seq, start, stop in batches(n, per_batch):
        bb = builder_cls(2, cid, 1, pid, epoch, seq, 1 << 30)
        append = bb.append
        if clock:
            for i in range(start, stop):
                append(i - start, None, keys[i], values[i], [])
        elif headers is not None:
            for i in range(start, stop):
                append(i - start, ts[i], keys[i], values[i], headers[i])
        else:
            for i in range(start, stop):
                append(i - start, ts[i], keys[i], values[i], [])
        out.append(bb.build())
    return out


def encode_aiokafka(codec: str, n: int, per_batch: int = BATCH_RECORDS, clock: bool = False,
                    headers: list | None = None) -> list:
    """Batches built by aiokafka's ``DefaultRecordBatchBuilder``."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    return _encode_peer(DefaultRecordBatchBuilder, codec, n, per_batch, clock, headers)


def encode_kafka_python(codec: str, n: int, per_batch: int = BATCH_RECORDS, clock: bool = False,
                        headers: list | None = None) -> list:
    """Batches built by kafka-python's ``DefaultRecordBatchBuilder``."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    return _encode_peer(DefaultRecordBatchBuilder, codec, n, per_batch, clock, headers)


def with_base_offsets(parts: list, n: int, per_batch: int = BATCH_RECORDS) -> bytes:
    """Concatenate producer-built batches, writing each base offset (not covered by the CRC) as a broker does."""
    out = bytearray()
    for part, (base, *_rest) in zip(parts, batches(n, per_batch)):
        start = len(out)
        out += part
        struct.pack_into(">q", out, start, base)
    return bytes(out)


@functools.lru_cache(maxsize=None)
def build_log(codec: str = "none", n: int = N_RECORDS, backend: str | None = None) -> bytes:
    """The log written by kafkatx (``backend`` None = the default ``kafkatx`` import), cached."""
    if backend is None:
        kx = import_kafkatx()
    else:
        import importlib

        import_kafkatx()
        kx = importlib.import_module({"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}[backend])
    return b"".join(encode_kafkatx(kx, codec, n))


@functools.lru_cache(maxsize=None)
def build_log_aiokafka(codec: str = "none", n: int = N_RECORDS) -> bytes:
    return with_base_offsets(encode_aiokafka(codec, n), n)


@functools.lru_cache(maxsize=None)
def build_log_kafka_python(codec: str = "none", n: int = N_RECORDS) -> bytes:
    return with_base_offsets(encode_kafka_python(codec, n), n)


# ------------------------------------------------------------------------------------------ markers
def _varint(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def control_batch(crc32c, base_offset, producer_id, producer_epoch, commit: bool, timestamp, coordinator_epoch=0):
    """An end-transaction marker batch, as a broker writes it (``crc32c`` = a CRC-32C function)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0)
    rec = _varint(len(body)) + body
    out = bytearray(61 + len(rec))
    struct.pack_into(">qiibIhiqqqhii", out, 0, base_offset, len(out) - 12, -1, 2, 0, 0x30, 0, timestamp,
                     timestamp, producer_id, producer_epoch, -1, 1)  # fmt: skip
    out[61:] = rec
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


@functools.lru_cache(maxsize=None)
def build_txn_log(codec: str = "none", n: int = N_RECORDS, abort_every: int = 10):
    """Every data batch followed by its COMMIT/ABORT marker; every ``abort_every``-th transaction aborted.

    Returns ``(log, aborted_transactions, committed_records)`` where ``aborted_transactions`` is the
    ``[(producer_id, first_offset)]`` list a Fetch response would carry.
    """
    kx = import_kafkatx()
    keys, values, ts = records(n)
    parts, aborted = [], []
    committed = 0
    offset = 0
    for b, (_base, pid, epoch, seq, start, stop) in enumerate(batches(n)):
        bb = kx.BatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             transactional=True, compression=codec)  # fmt: skip
        for i in range(start, stop):
            bb.append(values[i], keys[i], timestamp=ts[i])
        parts.append(bb.build())
        commit = b % abort_every != abort_every - 1
        if commit:
            committed += stop - start
        else:
            aborted.append((pid, offset))
        offset += stop - start
        parts.append(control_batch(kx.crc32c, offset, pid, epoch, commit, ts[stop - 1]))
        offset += 1
    return b"".join(parts), aborted, committed


# ------------------------------------------------------------------------------------------ helpers
def key_value_slices(log: bytes) -> list:
    """``slice`` objects for every key and value of an uncompressed v2 log (walked here, independently)."""

    def varint(buf, pos):
        shift = value = 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return (value >> 1) ^ -(value & 1), pos
            shift += 7

    out = []
    pos = 0
    end = len(log)
    while pos < end:
        length, attrs, count = struct.unpack_from(">i", log, pos + 8)[0], log[pos + 22], log[pos + 57 : pos + 61]
        if attrs & 0x07:
            raise ValueError("key_value_slices needs an uncompressed log")
        stop = pos + 12 + length
        p = pos + 61
        for _ in range(struct.unpack(">i", count)[0]):
            _len, p = varint(log, p)
            p += 1  # attributes
            _, p = varint(log, p)  # timestamp delta
            _, p = varint(log, p)  # offset delta
            klen, p = varint(log, p)
            if klen >= 0:
                out.append(slice(p, p + klen))
                p += klen
            vlen, p = varint(log, p)
            if vlen >= 0:
                out.append(slice(p, p + vlen))
                p += vlen
            nh, p = varint(log, p)
            for _h in range(nh):
                hk, p = varint(log, p)
                p += hk
                hv, p = varint(log, p)
                p += max(hv, 0)
        if p != stop:
            raise ValueError(f"walk ended at {p}, batch ends at {stop}")
        pos = stop
    return out


def record_bytes(n: int = N_RECORDS) -> int:
    """Bytes of the uncompressed record section (what lz4/zstd compress) of the ``none`` log."""
    return len(build_log("none", n)) - BATCH_HEADER_BYTES * (n // BATCH_RECORDS)


def check_equivalence(codec: str, n: int) -> str:
    """kafkatx's, aiokafka's and kafka-python's logs decode to the same records; raises if not."""
    kx = import_kafkatx()
    ours = build_log(codec, n)
    theirs = {"aiokafka": build_log_aiokafka(codec, n), "kafka-python": build_log_kafka_python(codec, n)}
    mine = [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in kx.decode_records(ours)]
    keys, values, ts = records(n)
    if len(mine) != n or mine[0][2:4] != (keys[0], values[0]) or mine[-1][:4] != (n - 1, ts[-1], keys[-1], values[-1]):
        raise AssertionError("kafkatx's log does not hold the workload")
    notes = []
    for who, log in theirs.items():
        if [b.compression for b in kx.iter_batches(log)] != [codec] * (n // BATCH_RECORDS):
            raise AssertionError(f"{who} did not compress every batch with {codec}")
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in kx.decode_records(log)]
        if got != mine:
            raise AssertionError(f"{who}'s {codec} log decodes to different records than kafkatx's")
        if codec == "none":
            if log == ours:
                notes.append(f"{who}: byte-identical")
                continue
            # kafka-python writes partitionLeaderEpoch 0 where Kafka's producer writes -1 (a broker overwrites
            # it; it is outside the CRC): compare with that field set to -1
            fixed = bytearray(log)
            epochs = set()
            for b in kx.iter_batches(log):
                epochs.add(b.partition_leader_epoch)
                struct.pack_into(">i", fixed, b.position + 12, -1)
            if fixed != ours:
                raise AssertionError(f"{who}'s uncompressed log is not byte-identical to kafkatx's")
            notes.append(f"{who}: byte-identical but for partitionLeaderEpoch {sorted(epochs)} (kafkatx: -1)")
        else:
            notes.append(f"{who}: same records ({len(log) / len(ours):.3f}x kafkatx's size)")
    return "; ".join(notes)


if __name__ == "__main__":  # python benchmarks/_data.py [n]: build and cross-check every codec
    import time

    n = int(sys.argv[1]) if len(sys.argv) > 1 else QUICK_RECORDS
    for c in CODECS:
        t = time.perf_counter()
        log = build_log(c, n)
        print(f"{c:5s} {len(log):>12,d} bytes ({len(log) / len(build_log('none', n)):.3f} of none) "
              f"built in {time.perf_counter() - t:.2f}s; {check_equivalence(c, n)}")  # fmt: skip
