"""The cases kafkatx writes for the Kafka oracle, as specs in the oracle's own JSON spec format.

One spec drives both writers: :func:`build_case` feeds it to a kafkatx ``BatchBuilder`` (either backend),
and ``tests/oracle/run.sh build`` feeds the very same JSON to Kafka's ``MemoryRecordsBuilder``.  Payloads use
the oracle's payload forms (``null``, a UTF-8 string, ``{"hex"|"b64"|"utf8": ...}``,
``{"pattern": "lcg"|"repeat"|"zeros", ...}``) and :func:`payload` (from ``tests/_spec.py``) expands them exactly
as ``KafkaOracle.Payload``.

Used by ``make_verdicts.py`` (stores Kafka's verdicts) and ``tests/test_oracle.py`` (checks them); keep both
in step by regenerating the verdicts after any change here (the verdicts record a hash of each spec).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

# payloads and builder replay live beside the rest of the suite's spec helpers
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from _spec import build_spec_batch, payload  # noqa: E402,F401 - payload is part of this module's interface

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000  # ms

TEXT = (
    "kafkatx writes record batches that Kafka reads; the quick brown fox jumps over the lazy dog. "
    "Ленивая собака, schnelle Füchse, 速い狐. "
)


def _rec(ts, key, value, headers=(), offset=None):
    r = {"timestamp": ts, "key": key, "value": value, "headers": [{"key": k, "value": v} for k, v in headers]}
    if offset is not None:
        r["offset"] = offset
    return r


def _batch(records, *, compression="none", level=None, base_offset=0, producer_id=-1, producer_epoch=-1,
           base_sequence=-1, transactional=False, timestamp_type="CREATE_TIME", log_append_time=None,
           partition_leader_epoch=-1):  # fmt: skip
    b = {
        "magic": 2,
        "compression": compression,
        "timestamp_type": timestamp_type,
        "base_offset": base_offset,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
        "base_sequence": base_sequence,
        "transactional": transactional,
        "partition_leader_epoch": partition_leader_epoch,
        "records": list(records),
    }
    if level is not None:
        b["compression_level"] = level
    if log_append_time is not None:
        b["log_append_time"] = log_append_time
    return b


# --------------------------------------------------------------------------------------------- cases
def _plain(c):
    return [
        _batch(
            [
                _rec(T0, "key-0", "hello kafka"),
                _rec(T0 + 1, None, "a record without a key"),
                _rec(T0 + 2, "tombstone", None),
                _rec(T0 + 3, None, None),
                _rec(T0 + 4, "", ""),
                _rec(T0 - 1000, "late", {"pattern": "lcg", "len": 300, "seed": 5}),  # negative timestamp delta
                _rec(T0 + 5, {"hex": "00ff10807f"}, {"b64": "AAECAwQFBgc="}),
            ],
            compression=c,
        )
    ]


def _idempotent(c):
    return [
        _batch(
            [_rec(T0 + i, f"id-{i}", f"idempotent value {i}") for i in range(5)],
            compression=c, base_offset=100, producer_id=123456789012, producer_epoch=7, base_sequence=1000,
        )  # fmt: skip
    ]


def _transactional(c):
    return [
        _batch(
            [_rec(T0 + 10 * i, f"tx-{i}", TEXT[: 20 + 7 * i]) for i in range(8)],
            compression=c, base_offset=1000, producer_id=4242, producer_epoch=3, base_sequence=0,
            transactional=True, partition_leader_epoch=12,
        )  # fmt: skip
    ]


def _many(c):
    # 300 records: offset deltas >= 64 and value lengths >= 64 need 2-byte varints, timestamp deltas up to
    # 299 * 1009 ms need 3 bytes; baseSequence near 2^31-1 makes the record sequences wrap to 0.
    recs = [
        _rec(T0 + 1009 * i, f"many-{i:04d}", {"pattern": "repeat", "len": 40 + (i * 7) % 90, "text": f"{i}:" + TEXT})
        for i in range(300)
    ]
    return [
        _batch(recs, compression=c, base_offset=5000, producer_id=99, producer_epoch=0, base_sequence=2147483600)
    ]


def _large(c):
    # > 64 KiB of payload: several lz4 blocks (64 KiB), snappy chunks (32 KiB) and zstd blocks (128 KiB)
    return [
        _batch(
            [
                _rec(T0, "text-200k", {"pattern": "repeat", "len": 200_000, "text": TEXT}),
                _rec(T0 + 1, "random-70k", {"pattern": "lcg", "len": 70_000, "seed": 42}),
                _rec(T0 + 2, None, "big header", [("zeros", {"pattern": "zeros", "len": 66_000})]),
            ],
            compression=c,
        )
    ]


def _headers(c):
    return [
        _batch(
            [
                _rec(T0, "h1", "{}", [("content-type", "application/json"), ("trace", None)]),
                _rec(
                    T0 + 1,
                    "h2",
                    "unicode and duplicates",
                    [("ключ-ü-速い-🙂", {"hex": "0001feff"}), ("dup", "1"), ("dup", "2"), ("", "empty key"),
                     ("null", None)],
                ),  # fmt: skip
                _rec(T0 + 2, "h3", None, [(f"h{i}", f"v{i}" * i) for i in range(20)]),
                _rec(T0 + 3, "h4", "no headers"),
            ],
            compression=c, producer_id=55, producer_epoch=2, base_sequence=10,
        )  # fmt: skip
    ]


def _compacted(c):
    # what the log cleaner leaves: the batch keeps base offset 50, its records are at 52, 53, 54 and 60
    return [
        _batch(
            [
                _rec(T0, "a", "1", offset=52),
                _rec(T0 + 1, "b", "2", offset=53),
                _rec(T0 + 2, "c", None, offset=54),
                _rec(T0 + 3, "d", "4", offset=60),
            ],
            compression=c, base_offset=50,
        )  # fmt: skip
    ]


def _log_append_time(c):
    return [
        _batch(
            [_rec(T0 + i, f"lat-{i}", f"create time {T0 + i}") for i in range(4)],
            compression=c, timestamp_type="LOG_APPEND_TIME", log_append_time=T0 + 999_000, base_offset=7,
            partition_leader_epoch=3,
        )  # fmt: skip
    ]


def _levels(c, level):
    recs = [
        _rec(T0 + i, f"lvl-{i}", {"pattern": "repeat", "len": 150, "text": f"row {i * 7919 % 1000} " + TEXT})
        for i in range(150)
    ]
    return [_batch(recs, compression=c, level=level, producer_id=7, producer_epoch=1, base_sequence=0)]


def _segment():
    # a log segment: consecutive batches of every codec, producers, transactions, gaps and a log-append batch
    return [
        _batch([_rec(T0, "s0", "plain"), _rec(T0 + 1, "s1", "plain")], base_offset=0, partition_leader_epoch=5),
        _batch(
            [_rec(T0 + 2 + i, f"s{2 + i}", f"idem {i}") for i in range(3)],
            compression="gzip", base_offset=2, producer_id=2000, producer_epoch=0, base_sequence=0,
            partition_leader_epoch=5,
        ),
        _batch(
            [_rec(T0 + 5 + i, f"s{5 + i}", f"txn a {i}", [("tx", "a")]) for i in range(3)],
            compression="snappy", base_offset=5, producer_id=1001, producer_epoch=1, base_sequence=0,
            transactional=True, partition_leader_epoch=5,
        ),
        _batch(
            [_rec(T0 + 8 + i, f"s{8 + i}", f"txn b {i}") for i in range(2)],
            compression="lz4", base_offset=8, producer_id=1002, producer_epoch=0, base_sequence=0,
            transactional=True, partition_leader_epoch=6,
        ),
        _batch(
            [_rec(T0 + 20, "s20", "after a gap", offset=20), _rec(T0 + 23, "s23", None, offset=23)],
            compression="zstd", base_offset=19, partition_leader_epoch=6,
        ),
        _batch(
            [_rec(T0 + 24, "s24", "appended"), _rec(T0 + 25, "s25", "appended")],
            base_offset=24, timestamp_type="LOG_APPEND_TIME", log_append_time=T0 + 30, partition_leader_epoch=6,
        ),
        _batch(
            [_rec(T0 + 26 + i, f"s{26 + i}", {"pattern": "repeat", "len": 500, "text": TEXT}) for i in range(4)],
            compression="lz4", level=17, base_offset=26, producer_id=2000, producer_epoch=0, base_sequence=3,
            partition_leader_epoch=6,
        ),
        _batch(
            [_rec(T0 + 30, "s30", "last")],
            compression="zstd", level=19, base_offset=30, producer_id=1001, producer_epoch=1, base_sequence=3,
            transactional=True, partition_leader_epoch=7,
        ),
    ]  # fmt: skip


def cases() -> dict:
    """``{name: {"description": str, "batches": [...]}}`` in a fixed order."""
    out = {}
    per_codec = [
        ("plain", _plain, "null/empty keys and values, binary payloads, an out-of-order timestamp"),
        ("idempotent", _idempotent, "idempotent producer: pid 123456789012, epoch 7, baseSequence 1000"),
        ("transactional", _transactional, "transactional batch: pid 4242, epoch 3, leader epoch 12"),
        ("many", _many, "300 records, multi-byte varints, record sequences wrapping past 2^31-1"),
        ("large", _large, "200 kB text, 70 kB random and a 66 kB header value (multi-block codecs)"),
        ("headers", _headers, "headers: null values, unicode/duplicate/empty keys, 20 headers"),
        ("compacted", _compacted, "compacted offset gaps: base 50, records at 52, 53, 54, 60"),
        ("log_append_time", _log_append_time, "LOG_APPEND_TIME batch, logAppendTime T0+999000"),
    ]
    for kind, make, desc in per_codec:
        for c in CODECS:
            out[f"{kind}_{c}"] = {"description": f"{desc} ({c})", "batches": make(c)}
    for c, level in (("gzip", 1), ("gzip", 9), ("lz4", 1), ("lz4", 17), ("zstd", 1), ("zstd", 19)):
        out[f"level_{c}_{level}"] = {
            "description": f"KIP-390 compression level {c} {level}, 150 compressible records",
            "batches": _levels(c, level),
        }
    two = _large("zstd")
    two[0]["zstd_frames"] = 2
    out["large_zstd_two_frames"] = {
        "description": "the large case's zstd batch written with zstd_frames=2: two frames, the records' halves",
        "batches": two,
    }
    joined = []
    for i, level in enumerate((1, 19, -5)):
        b = _large("zstd")[0]
        b["compression_level"] = level
        b["base_offset"] = 3 * i
        joined.append(b)
    out["large_zstd_levels"] = {
        "description": "the large case's zstd batch at levels 1, 19 and -5: over 64 KiB of records, which the "
        "compiled builders join into one frame from pieces compressed on two cores (the twin in one pass)",
        "batches": joined,
    }
    out["large_zstd_window"] = {
        "description": "1.4 MB of records at zstd level 1, past one pass's 512 KiB window: the compiled builders' "
        "joined frame declares a window of 1 MiB (a piece and its history each as long as one pass's window)",
        "batches": [
            _batch(
                [_rec(T0 + i, f"w{i}", {"pattern": "repeat", "len": 100_000, "text": f"{i % 5}:" + TEXT})
                 for i in range(14)],
                compression="zstd", level=1,
            )
        ],
    }
    out["segment_mixed"] = {
        "description": "8 concatenated batches (every codec, idempotent and transactional producers, an offset "
        "gap, a log-append-time batch, levels) like a log segment",
        "batches": _segment(),
    }
    return out


def spec_sha256(spec) -> str:
    """Hash of a case spec (its batches), so stored verdicts can tell when the spec changed."""
    return hashlib.sha256(json.dumps(spec["batches"], sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def is_uncompressed(spec) -> bool:
    return all(b.get("compression", "none") == "none" for b in spec["batches"])


# --------------------------------------------------------------------------------------------- build
def build_case(codec, spec) -> bytes:
    return b"".join(build_spec_batch(codec, b) for b in spec["batches"])


# ------------------------------------------------------------------------------------------ compare
def digest(data) -> str | None:
    """How verdicts record a payload: ``"LEN:SHA256[:24]"`` or ``None``."""
    if data is None:
        return None
    return f"{len(data)}:{hashlib.sha256(data).hexdigest()[:24]}"


def oracle_payload_digest(p) -> str | None:
    """The same digest from a payload as the oracle's dump prints it (``{len, sha256, ...}`` or null)."""
    if p is None:
        return None
    return f"{p['len']}:{p['sha256'][:24]}"


def kafkatx_records(records) -> list:
    """kafkatx ``Record`` objects in the verdict's record form."""
    return [
        [r.offset, r.timestamp, r.sequence, digest(r.key), digest(r.value), [[k, digest(v)] for k, v in r.headers]]
        for r in records
    ]


def oracle_record(r) -> list:
    """One record line of ``run.sh dump`` in the verdict's record form."""
    return [
        r["offset"],
        r["timestamp"],
        r["sequence"],
        oracle_payload_digest(r["key"]),
        oracle_payload_digest(r["value"]),
        [[h["key"], oracle_payload_digest(h["value"])] for h in r["headers"]],
    ]


BATCH_FIELDS = (
    "position", "size_in_bytes", "base_offset", "last_offset", "count", "records_parsed", "crc", "crc_computed",
    "crc_valid", "ensure_valid", "compression", "timestamp_type", "base_timestamp", "max_timestamp", "producer_id",
    "producer_epoch", "base_sequence", "last_sequence", "is_transactional", "is_control", "partition_leader_epoch",
)  # fmt: skip


KAFKATX_BATCH_FIELDS = (
    "position", "size_in_bytes", "base_offset", "last_offset", "count", "crc", "compression", "timestamp_type",
    "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "last_sequence",
    "is_transactional", "is_control", "partition_leader_epoch",
)  # fmt: skip


def kafkatx_batch(batch) -> dict:
    """The verdict batch fields (``KAFKATX_BATCH_FIELDS``) as kafkatx reports them for one batch."""
    return {
        "position": batch.position,
        "size_in_bytes": batch.size_in_bytes,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "count": batch.records_count,
        "crc": batch.crc,
        "compression": batch.compression,
        "timestamp_type": batch.timestamp_type.upper(),
        "base_timestamp": batch.base_timestamp,
        "max_timestamp": batch.max_timestamp,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "partition_leader_epoch": batch.partition_leader_epoch,
    }


def parse_dump(text: str, ranges=None):
    """Parse ``run.sh dump`` JSON lines into ``(batches, errors, summary)``.

    Each batch gets its ``records`` (verdict form).  With ``ranges`` (a list of ``(name, start, end)`` byte
    ranges of a concatenated file) the result is ``{name: (batches, errors)}`` with positions made relative
    to each range, plus the summary.
    """
    batches, errors, summary = [], [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        kind = obj.pop("type")
        if kind == "batch":
            obj["records"] = []
            batches.append(obj)
        elif kind == "record":
            batches[obj["batch_index"]]["records"].append(oracle_record(obj))
        elif kind == "error":
            errors.append(obj)
        elif kind == "summary":
            summary = obj
    if ranges is None:
        return batches, errors, summary
    split = {}
    for name, start, end in ranges:
        mine = [b for b in batches if start <= b["position"] < end]
        idx = {b["index"] for b in mine}
        errs = [e for e in errors if e["batch_index"] in idx]
        rel = []
        for b in mine:
            b = dict(b)
            b["position"] -= start
            rel.append(b)
        split[name] = (rel, errs)
    # errors that belong to no batch of any range (e.g. iteration stopped): attach to every case after them
    orphan = [e for e in errors if e["batch_index"] >= len(batches)]
    return split, orphan, summary
