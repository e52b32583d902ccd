"""Test helpers that do not depend on kafkatx's own code paths.

* ``payload(p)`` turns a payload written in the Java oracle's spec notation (``null``, a bare string,
  ``{"utf8"|"b64"|"hex": ...}``, ``{"pattern": "lcg"|"repeat"|"zeros", ...}``) into bytes.
* ``build_spec_batch(codec, spec_batch)`` replays one spec batch through a backend's ``BatchBuilder``.
* ``spec_records(spec_batch)`` gives the records a spec batch should decode to.
* ``v2_header`` / ``rebatch`` / ``fix_crc`` craft and patch v2 batches by hand, with the CRC computed by the
  independent ``crc32c`` package, so tests can build inputs that kafkatx's writer would never produce.
"""

from __future__ import annotations

import base64
import struct

import crc32c as _crc32c_pkg

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 batch header (Kafka's DefaultRecordBatch)
HEADER_SIZE = 61

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


# ------------------------------------------------------------------------------------------ payloads
def lcg_bytes(n: int, seed: int) -> bytes:
    """The oracle's ``lcg`` pattern: x=(x*1103515245+12345) mod 2^31, byte=(x>>16)&0xff."""
    x = seed
    out = bytearray(n)
    for i in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out[i] = (x >> 16) & 0xFF
    return bytes(out)


def payload(p):
    """Bytes (or None) for a payload in the oracle's spec notation."""
    if p is None:
        return None
    if isinstance(p, str):
        return p.encode("utf-8")
    if "utf8" in p:
        return p["utf8"].encode("utf-8")
    if "b64" in p:
        return base64.b64decode(p["b64"])
    if "hex" in p:
        return bytes.fromhex(p["hex"])
    pattern = p["pattern"]
    n = p["len"]
    if pattern == "lcg":
        return lcg_bytes(n, p["seed"])
    if pattern == "repeat":
        text = p["text"].encode("utf-8")
        return (text * (n // len(text) + 1))[:n]
    if pattern == "zeros":
        return bytes(n)
    raise ValueError(f"unknown payload pattern {pattern!r}")


def header_key(k) -> str:
    return k if isinstance(k, str) else payload(k).decode("utf-8")


# ------------------------------------------------------------------------------------ spec batches
def is_plain_v2(spec_batch) -> bool:
    """A magic-2 data batch that BatchBuilder can replay (no end-txn marker, not control)."""
    return (
        spec_batch.get("magic", 2) == 2
        and "end_txn_marker" not in spec_batch
        and not spec_batch.get("control", False)
        and not spec_batch.get("canonical_marker_api", False)
    )


def builder_kwargs(spec_batch) -> dict:
    kw = dict(
        base_offset=spec_batch.get("base_offset", 0),
        producer_id=spec_batch.get("producer_id", -1),
        producer_epoch=spec_batch.get("producer_epoch", -1),
        base_sequence=spec_batch.get("base_sequence", -1),
        transactional=spec_batch.get("transactional", False),
        compression=spec_batch.get("compression", "none"),
        compression_level=spec_batch.get("compression_level"),
        timestamp_type=spec_batch.get("timestamp_type", "CREATE_TIME").lower(),
        partition_leader_epoch=spec_batch.get("partition_leader_epoch", -1),
    )
    if "log_append_time" in spec_batch:
        kw["log_append_time"] = spec_batch["log_append_time"]
    if "delete_horizon_ms" in spec_batch:
        kw["delete_horizon_ms"] = spec_batch["delete_horizon_ms"]
    if "zstd_frames" in spec_batch:
        kw["zstd_frames"] = spec_batch["zstd_frames"]
    return kw


def spec_headers(rec) -> tuple:
    return tuple((header_key(h["key"]), payload(h["value"])) for h in rec.get("headers", []))


def build_spec_batch(codec, spec_batch) -> bytes:
    """Replay one spec batch through ``codec.BatchBuilder`` (the backend under test)."""
    b = codec.BatchBuilder(**builder_kwargs(spec_batch))
    for rec in spec_batch["records"]:
        kw = dict(key=payload(rec.get("key")), timestamp=rec["timestamp"], headers=spec_headers(rec))
        if "offset" in rec:
            kw["offset"] = rec["offset"]
        b.append(payload(rec.get("value")), **kw)
    return b.build()


def inc_seq(seq: int, inc: int) -> int:
    """Kafka's incrementSequence, written out independently of kafkatx."""
    return (seq + inc) % (1 << 31)


def spec_records(spec_batch) -> list:
    """(offset, timestamp, key, value, headers, sequence) tuples a spec batch must decode to."""
    base = spec_batch.get("base_offset", 0)
    seq0 = spec_batch.get("base_sequence", -1)
    lat = spec_batch.get("timestamp_type", "CREATE_TIME").upper() == "LOG_APPEND_TIME"
    out = []
    offset = None
    for rec in spec_batch["records"]:
        offset = rec["offset"] if "offset" in rec else (base if offset is None else offset + 1)
        ts = spec_batch["log_append_time"] if lat else rec["timestamp"]
        seq = inc_seq(seq0, offset - base) if seq0 >= 0 else -1
        out.append((offset, ts, payload(rec.get("key")), payload(rec.get("value")), spec_headers(rec), seq))
    return out


def rec_tuple(r) -> tuple:
    return (r.offset, r.timestamp, r.key, r.value, tuple(r.headers), r.sequence)


# ------------------------------------------------------------------------------- hand-made batches
def crc32c(data) -> int:
    return _crc32c_pkg.crc32c(bytes(data))


def fix_crc(batch) -> bytes:
    """Recompute the CRC-32C of a v2 batch at the start of ``batch`` (bytes 21..end)."""
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def v2_batch(
    records_bytes,
    *,
    count: int,
    base_offset: int = 0,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    base_timestamp: int = 1_700_000_000_000,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    crc: int | None = None,
) -> bytes:
    """A magic-2 batch around an arbitrary records section (raw or compressed), CRC fixed unless given."""
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    if max_timestamp is None:
        max_timestamp = base_timestamp
    length = HEADER_SIZE - 12 + len(records_bytes)
    hdr = HEADER.pack(
        base_offset, length, leader_epoch, 2, 0, attributes, last_offset_delta, base_timestamp,
        max_timestamp, producer_id, producer_epoch, base_sequence, count,
    )  # fmt: skip
    out = hdr + bytes(records_bytes)
    if crc is None:
        return fix_crc(out)
    out = bytearray(out)
    struct.pack_into(">I", out, 17, crc)
    return bytes(out)


def rebatch(batch: bytes, new_records_section, codec_id: int) -> bytes:
    """Same header as ``batch`` but a different records section and compression id; length and CRC fixed."""
    out = bytearray(batch[:HEADER_SIZE]) + bytes(new_records_section)
    struct.pack_into(">i", out, 8, len(out) - 12)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~0x07) | codec_id)
    return fix_crc(out)


def zigzag(v: int) -> bytes:
    """Minimal zigzag varint/varlong encoding."""
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def raw_record(
    *, ts_delta=0, off_delta=0, key=None, value=b"v", headers=(), length=None, attrs=b"\x00"
) -> bytes:
    """One v2 record, by hand. ``headers`` items are (key_bytes, value_bytes|None); length overridable."""
    body = bytearray(attrs)
    body += zigzag(ts_delta) + zigzag(off_delta)
    for part in (key, value):
        body += zigzag(-1) if part is None else zigzag(len(part)) + part
    body += zigzag(len(headers))
    for hk, hv in headers:
        body += zigzag(len(hk)) + hk
        body += zigzag(-1) if hv is None else zigzag(len(hv)) + hv
    n = len(body) if length is None else length
    return zigzag(n) + bytes(body)


def split_batches(data: bytes) -> list:
    """(position, size) of each complete entry, by the 12-byte log framing alone."""
    out = []
    pos = 0
    while len(data) - pos >= 12:
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if size > len(data) - pos:
            break
        out.append((pos, size))
        pos += size
    return out
