"""The ``kafkatx`` command line: ``dump``, ``summary``, ``generate``, ``verify``, ``hanging``, ``offsets``,
``demo`` and ``version``.

``kafkatx dump`` prints a segment the way Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``) does, field
for field, so its output can be diffed against Kafka's own tool.  ``kafkatx summary`` decodes a whole log
(CRC checked) and tells in a few lines what is in it, including how many records a ``read_committed``
reader sees.  Exit codes: 0 success, 1 corrupt or unreadable input, 2 usage error or unsupported file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import struct
import sys
import zlib
from pathlib import Path

import kafkatx

from . import compression as _compression
from .errors import InvalidRecordError, KafkaTxError

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

# ControlRecordType.java
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
ABORT, COMMIT = 0, 1

# TimestampType.toString()
TIMESTAMP_LABELS = {
    "create_time": "CreateTime",
    "log_append_time": "LogAppendTime",
    "no_timestamp_type": "NoTimestampType",
}

TXNINDEX_ENTRY_SIZE = 34

# ``summary`` feeds the segments to one read_committed filter in chunks of this many bytes, so memory stays
# bounded by one chunk's records instead of a whole segment's.
SUMMARY_CHUNK_BYTES = 16 * 1024 * 1024

SAMPLE_LOG = ("data", "sample", "00000000000000000000.log")
_JSON_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class CliError(Exception):
    """A problem with the command line or the file system, reported without a traceback."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------------ helpers
def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _err(message: str) -> None:
    sys.stderr.write(f"kafkatx: {message}\n")


def _text(data) -> str:
    """Bytes as Kafka's StringDecoder shows them: UTF-8, invalid sequences replaced."""
    return bytes(data).decode("utf-8", "replace")


def _header_key(key) -> str:
    # Record headers hold str keys decoded with surrogateescape; Java decodes with replacement.
    if isinstance(key, str):
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _text(key)


def _jackson(obj) -> str:
    """``obj`` (dicts, lists, str, int, None) as Jackson's ``JsonNode.toString()`` writes it: compact,
    non-ASCII characters as they are, control characters as ``\\u00XX`` with upper-case hex digits."""
    if isinstance(obj, str):
        return '"' + _JSON_ESCAPE.sub(lambda m: _JSON_SHORT_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04X}"), obj) + '"'
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_jackson(k)}:{_jackson(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ",".join(_jackson(v) for v in obj) + "]"
    if obj is None:
        return "null"
    return str(int(obj))


def _java_bool(flag) -> str:
    return "true" if flag else "false"


def _optional_long(value) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _offset_from_name(name: str):
    """Kafka's offsetFromFileName: the digits before the first dot, or None if there are none."""
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() and head.isascii() else None


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory") from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def _parse_control(record, batch):
    """(type id, coordinator epoch or None) of a control record, as Kafka's parsers read it."""
    key = record.key
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key is shorter than 4 bytes", batch.position, batch.base_offset)
    version, type_id = struct.unpack_from(">hh", key)
    if version < 0:
        raise InvalidRecordError(
            f"invalid version {version} of control record key, may indicate data corruption",
            batch.position,
            batch.base_offset,
        )
    if type_id not in (ABORT, COMMIT):
        return type_id, None
    value = record.value
    if value is None or len(value) < 6:
        raise InvalidRecordError(
            "end transaction marker value is shorter than 6 bytes", batch.position, batch.base_offset
        )
    marker_version, coordinator_epoch = struct.unpack_from(">hi", value)
    if marker_version < 0:
        raise InvalidRecordError(
            f"invalid version {marker_version} of end transaction marker", batch.position, batch.base_offset
        )
    return type_id, coordinator_epoch


def _control_name(type_id: int) -> str:
    return CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")


def _legacy_checksums(data, batch):
    """[(crc, is_valid)] of each message inside a legacy entry, in record order.

    An uncompressed entry is one message (the entry's own CRC); a compressed wrapper's inner messages
    each carry a CRC-32 of their own, which Kafka's tool prints per record.
    """
    if batch.compression == "none":
        return [(batch.crc, batch.is_valid)]
    try:
        return _inner_checksums(data, batch)
    except (struct.error, IndexError, KafkaTxError):
        return []  # the caller falls back to the wrapper's CRC


def _inner_checksums(data, batch):
    pos = batch.position + 12
    end = batch.position + batch.size_in_bytes
    magic = data[pos + 4]
    p = pos + 6 + (8 if magic == 1 else 0)
    (klen,) = struct.unpack_from(">i", data, p)
    p += 4 + max(klen, 0)
    (vlen,) = struct.unpack_from(">i", data, p)
    p += 4
    value = bytes(data[p : min(p + max(vlen, 0), end)])
    inner = _compression.decompress(_compression.codec_id(batch.compression), value, magic=magic)
    out = []
    q = 0
    while q + 12 <= len(inner):
        (size,) = struct.unpack_from(">i", inner, q + 8)
        start = q + 12
        stop = start + size
        (crc,) = struct.unpack_from(">I", inner, start)
        out.append((crc, zlib.crc32(inner[start + 4 : stop]) & 0xFFFFFFFF == crc))
        q = stop
    return out


# --------------------------------------------------------------------------------------------- dump
def _batch_line(batch, valid: bool) -> str:
    if batch.magic >= 2:
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_java_bool(batch.is_transactional)} isControl: {_java_bool(batch.is_control)} "
            f"deleteHorizonMs: {_optional_long(batch.delete_horizon_ms)}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {TIMESTAMP_LABELS[batch.timestamp_type]}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression} "
        f"crc: {batch.crc} isvalid: {_java_bool(valid)}"
    )


def _batch_json(batch, valid: bool) -> dict:
    return {
        "type": "batch",
        "position": batch.position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "count": batch.records_count,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "is_transactional": bool(batch.is_transactional),
        "is_control": bool(batch.is_control),
        "delete_horizon_ms": batch.delete_horizon_ms,
        "timestamp_type": batch.timestamp_type,
        "max_timestamp": batch.max_timestamp,
        "size": batch.size_in_bytes,
        "magic": batch.magic,
        "compression": batch.compression,
        "crc": batch.crc,
        "is_valid": bool(valid),
    }


def _coordinator_record_data(record, undecoded, topic: str, parse):
    """(key, payload, skipped) of a coordinator's record (``__transaction_state``, ``__consumer_offsets``) as
    DumpLogSegments' CoordinatorRecordMessageParser shows them: Kafka's JSON of key and value (the payload
    ``"<DELETE>"`` for a tombstone), or a "skipping" message in place of both for a key of a record type not
    decoded, and for bytes that do not decode (also noted in ``undecoded``; Kafka's tool stops at a record
    without a key).  ``parse(record)`` gives ``(key JSON, value JSON or None)``, or the skipping message."""
    try:
        if record.key is None:
            raise InvalidRecordError(f"the record has no key (a {topic} record always has one)")
        parsed = parse(record)
    except KafkaTxError as exc:
        undecoded.append((record.offset, str(exc)))
        return None, None, f"Error at offset {record.offset}, skipping. {exc}"
    if isinstance(parsed, str):
        return None, None, parsed
    key, value = parsed
    return key, "<DELETE>" if value is None else value, None


def _txn_log_parse(record):
    """A ``__transaction_state`` record for :func:`_coordinator_record_data` (TransactionLogMessageParser)."""
    from . import txnlog

    tid = txnlog.decode_txn_key(record.key)
    if isinstance(tid, txnlog.UnknownKey):
        return f"Unknown record type {tid.version} at offset {record.offset}, skipping."
    value = txnlog.decode_txn_value(record.value)
    if value is None:
        return txnlog.key_json(tid), None
    return txnlog.key_json(tid), txnlog.value_json(value, struct.unpack_from(">h", record.value)[0])


def _group_log_parse(record):
    """A ``__consumer_offsets`` record for :func:`_coordinator_record_data` (OffsetsMessageParser); a record of
    a type kafkatx does not decode (3 and up: consumer, share and streams group records) is skipped with a line
    that says so, and is not an error."""
    from . import grouplog

    key = grouplog.decode_key(record.key)
    if isinstance(key, grouplog.OtherKey):
        return (f"Record type {key.record_type} at offset {record.offset} is not one kafkatx decodes "
                "(it reads types 0-2: offset commits and classic groups), skipping.")  # fmt: skip
    value = grouplog.decode_value(key, record.value)
    return grouplog.key_json(key), None if value is None else grouplog.value_json(key, value)


def _record_output(batch, record, args, legacy_crc, as_json, undecoded):
    """One ``| offset: ...`` line (or JSON object) for a record, as DumpLogSegments prints it."""
    key, value = record.key, record.value
    key_size = -1 if key is None else len(key)
    value_size = -1 if value is None else len(value)
    control = None
    if batch.is_control:
        type_id, coordinator_epoch = _parse_control(record, batch)
        control = (type_id, coordinator_epoch)
    show_data = args.print_data_log and not batch.is_control
    skipped = None
    if show_data and args.transaction_log_decoder:
        key, value, skipped = _coordinator_record_data(record, undecoded, "__transaction_state", _txn_log_parse)
    elif show_data and args.offsets_decoder:
        key, value, skipped = _coordinator_record_data(record, undecoded, "__consumer_offsets", _group_log_parse)
    elif show_data:
        key = None if key is None else _text(key)
        value = None if value is None else _text(value)
    if as_json:
        obj = {
            "type": "record",
            "offset": record.offset,
            "timestamp": record.timestamp,
            "timestamp_type": batch.timestamp_type,
            "key_size": key_size,
            "value_size": value_size,
        }
        if batch.magic >= 2:
            obj["sequence"] = record.sequence
            obj["header_keys"] = [_header_key(h[0]) for h in record.headers]
        if legacy_crc is not None:
            obj["is_valid"], obj["crc"] = bool(legacy_crc[1]), legacy_crc[0]
        if control is not None:
            obj["control_type"] = _control_name(control[0])
            obj["control_type_id"] = control[0]
            if control[1] is not None:
                obj["coordinator_epoch"] = control[1]
        if skipped is not None:
            obj["skipped"] = skipped
        elif show_data:
            obj["key"] = key
            obj["payload"] = value
        return obj
    parts = []
    prefix = "| "
    if not args.skip_record_metadata:
        line = (
            f"| offset: {record.offset} {TIMESTAMP_LABELS[batch.timestamp_type]}: {record.timestamp} "
            f"keySize: {key_size} valueSize: {value_size}"
        )
        parts.append(line)
        prefix = " "
        if batch.magic >= 2:
            keys = ",".join(_header_key(h[0]) for h in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        if legacy_crc is not None:
            parts.append(f" isValid: {_java_bool(legacy_crc[1])} crc: {legacy_crc[0]}")
        if control is not None:
            type_id, coordinator_epoch = control
            if coordinator_epoch is not None:
                parts.append(f" endTxnMarker: {_control_name(type_id)} coordinatorEpoch: {coordinator_epoch}")
            else:
                parts.append(f" controlType: {_control_name(type_id)}({type_id})")
    if skipped is not None:
        parts.append(f"{prefix}key: {skipped}")
    elif show_data:
        if key is not None:
            parts.append(f"{prefix}key: {key if isinstance(key, str) else _jackson(key)}")
            prefix = " "
        if value is not None:  # (DumpLogSegments writes " payload: " with no prefix)
            parts.append(f" payload: {value if isinstance(value, str) else _jackson(value)}")
    return "".join(parts)


def _dump_log(path: Path, display: str, args) -> int:
    data = _read_file(path)
    as_json = args.json
    start = _offset_from_name(path.name)
    if as_json:
        _out(json.dumps({"type": "file", "path": display, "kind": "log", "log_start_offset": start}))
    else:
        _out(f"Dumping {display}")
        if start is not None:
            _out(f"Log starting offset: {start}")
    view = memoryview(data)
    if args.max_bytes is not None:
        view = view[: args.max_bytes]
    deep = args.deep_iteration or args.print_data_log
    undecoded = []  # (offset, reason) of each record a decoder (--transaction-log-decoder, ...) could not decode
    status = EXIT_OK
    invalid_positions = []
    gaps = []
    last_offset = None
    it = kafkatx.iter_batches(view, verify_crc=False)
    for batch in it:
        valid = batch.is_valid
        if not valid:
            invalid_positions.append(batch.position)
        _out(json.dumps(_batch_json(batch, valid)) if as_json else _batch_line(batch, valid))
        if not deep:
            continue
        records = batch.records()
        checksums = _legacy_checksums(view, batch) if batch.magic < 2 else None
        for i, record in enumerate(records):
            if last_offset is not None and record.offset != last_offset + 1:
                gaps.append((last_offset, record.offset))
            last_offset = record.offset
            legacy_crc = None
            if checksums is not None:
                legacy_crc = checksums[i] if i < len(checksums) else (batch.crc, valid)
            line = _record_output(batch, record, args, legacy_crc, as_json, undecoded)
            _out(json.dumps(line) if as_json else line)
    trailing = it.trailing_bytes
    if trailing > 0 and args.max_bytes is None:
        if as_json:
            _out(json.dumps({"type": "trailing_bytes", "bytes": trailing, "file": path.name}))
        else:
            _out(f"Found {trailing} invalid bytes at the end of {path.name}")
    if gaps:
        sys.stderr.write(f"Non-consecutive offsets in {display}\n")
        for a, b in gaps:
            sys.stderr.write(f"  {a} is followed by {b}\n")
    if undecoded:
        sys.stdout.flush()
        topic = "__consumer_offsets" if args.offsets_decoder else "__transaction_state"
        _err(f"{display}: {len(undecoded)} record(s) are not {topic} records, the first at offset "
             f"{undecoded[0][0]}: {undecoded[0][1]}")  # fmt: skip
        status = EXIT_ERROR
    if invalid_positions and args.verify_crc:
        sys.stdout.flush()
        _err(
            f"{display}: {len(invalid_positions)} batch(es) failed the CRC check, the first at byte "
            f"{invalid_positions[0]} (use --no-verify-crc to report them as isvalid: false only)"
        )
        status = EXIT_ERROR
    return status


def _read_txnindex_entries(data, display: str):
    """The entries of a ``.txnindex``, read like DumpLogSegments does (no base-offset sanity check)."""
    from .txnindex import read_txnindex

    try:
        return read_txnindex(data)  # a buffer, not the path: the path would add the sanity check
    except KafkaTxError as exc:
        reason = str(getattr(exc, "reason", exc)).replace("<buffer>", display)
        raise type(exc)(reason, getattr(exc, "position", None)) from None


def _dump_txnindex(path: Path, display: str, args) -> int:
    data = _read_file(path)
    if args.json:
        _out(json.dumps({"type": "file", "path": display, "kind": "txnindex"}))
    else:
        _out(f"Dumping {display}")
    for e in _read_txnindex_entries(data, display):
        if args.json:
            _out(json.dumps({"type": "aborted_txn", "version": e.version, "producer_id": e.producer_id,
                             "first_offset": e.first_offset, "last_offset": e.last_offset,
                             "last_stable_offset": e.last_stable_offset}))  # fmt: skip
        else:
            _out(f"version: {e.version} producerId: {e.producer_id} firstOffset: {e.first_offset} "
                 f"lastOffset: {e.last_offset} lastStableOffset: {e.last_stable_offset}")  # fmt: skip
    rest = len(data) % TXNINDEX_ENTRY_SIZE
    if rest:
        _err(f"{display}: ignored {rest} trailing bytes (a partial entry), as Kafka does")
    return EXIT_OK


def _dump_snapshot(path: Path, display: str, args) -> int:
    from .producer_state import read_snapshot

    data = _read_file(path)
    if args.json:
        _out(json.dumps({"type": "file", "path": display, "kind": "snapshot"}))
    else:
        _out(f"Dumping {display}")
    for entry in read_snapshot(data):
        if args.json:
            _out(json.dumps({"type": "producer", **entry._asdict()}))
        else:
            _out(_snapshot_line(entry))
    return EXIT_OK


def _index_slots(path: Path, data: bytes, fmt: str):
    """The raw entries of an index file as Kafka's dump reads them: every whole slot, up to the first one
    that points back at the base offset (the zero-filled, preallocated tail of a live or crashed index)."""
    base = _offset_from_name(path.name)
    if base is None:
        raise CliError(f"{path}: not a segment file name (<20-digit base offset>{path.suffix})", EXIT_USAGE)
    size = struct.calcsize(fmt)
    out = []
    for i, slot in enumerate(struct.iter_unpack(fmt, data[: len(data) - len(data) % size])):
        offset = base + slot[-1 if fmt == ">qi" else 0]
        if offset == base and i > 0:
            break
        out.append((offset, slot))
    return base, out


def _first_batch_at(log: bytes, position: int, min_last_offset: int | None = None):
    """The first complete batch at ``position`` of the segment ``log`` (with ``min_last_offset``: the first
    from there whose last offset reaches it), or None."""
    for batch in kafkatx.iter_batches(memoryview(log)[position:], verify_crc=False):
        if min_last_offset is None or batch.last_offset >= min_last_offset:
            return batch
    return None


def _dump_index(path: Path, display: str, args) -> int:
    """A ``.index`` as DumpLogSegments prints it (``offset: O position: P``), each entry checked against the
    batch at its position in the ``.log`` beside it (whose last offset it must be)."""
    from .log.index import OffsetIndex

    data = _read_file(path)
    base, slots = _index_slots(path, data, ">ii")
    _out(json.dumps({"type": "file", "path": display, "kind": "index"}) if args.json else f"Dumping {display}")
    if not slots:
        if not args.json:
            _out(f"{display} is empty.")
        return EXIT_OK
    if args.index_sanity_check:
        OffsetIndex(path, base).sanity_check()  # what decides on a broker's start whether it is rebuilt
        if not args.json:
            _out(f"{display} passed sanity check.")
        return EXIT_OK
    log = _sibling_log(path, display)
    mismatches = []
    for offset, (_, position) in slots:
        if log is not None:
            batch = _first_batch_at(log, position)
            found = -1 if batch is None else batch.last_offset
            if found != offset:
                mismatches.append((offset, found))
        if not args.verify_index_only:
            _out(json.dumps({"type": "index_entry", "offset": offset, "position": position}) if args.json
                 else f"offset: {offset} position: {position}")  # fmt: skip
    if mismatches:
        sys.stdout.flush()
        _err(f"Mismatches in :{path.resolve()}")
        for offset, found in mismatches:
            _err(f"  Index offset: {offset}, log offset: {found}")
        return EXIT_ERROR
    return EXIT_OK


def _dump_time_index(path: Path, display: str, args) -> int:
    """A ``.timeindex`` as DumpLogSegments prints it (``timestamp: T offset: O``), each entry checked
    against the ``.log`` beside it (found through its ``.index``): a batch must end at the entry's offset
    with the entry's timestamp as its largest, and the timestamps must increase."""
    from .log.index import OffsetIndex, TimeIndex

    data = _read_file(path)
    base, slots = _index_slots(path, data, ">qi")
    _out(json.dumps({"type": "file", "path": display, "kind": "timeindex"}) if args.json else f"Dumping {display}")
    if args.index_sanity_check:
        TimeIndex(path, base).sanity_check()
        if not args.json:
            _out(f"{display} passed sanity check.")
        return EXIT_OK
    log = _sibling_log(path, display)
    index = OffsetIndex(path.with_suffix(".index"), base) if log is not None else None
    wrong_ts, out_of_order, not_found = [], [], []
    prev = -1
    for offset, (ts, _) in slots:
        if log is not None:
            batch = _first_batch_at(log, index.lookup(offset).position, offset)
            if batch is None or batch.last_offset != offset:
                not_found.append((offset, -1 if batch is None else batch.last_offset))
            else:
                biggest = max(batch.record_summary().max_timestamp, -1)  # (LogValidator's max timestamp)
                if biggest != ts:
                    wrong_ts.append((ts, biggest))
                if prev >= ts:
                    out_of_order.append((ts, prev))
        if not args.verify_index_only:
            _out(json.dumps({"type": "time_index_entry", "timestamp": ts, "offset": offset}) if args.json
                 else f"timestamp: {ts} offset: {offset}")  # fmt: skip
        prev = ts
    if not (wrong_ts or out_of_order or not_found):
        return EXIT_OK
    sys.stdout.flush()
    where = path.resolve()
    if wrong_ts:
        _err(f"Found timestamp mismatch in :{where}")
        for a, b in wrong_ts:
            _err(f"  Index timestamp: {a}, log timestamp: {b}")
    if out_of_order:
        _err(f"Found out of order timestamp in :{where}")
        for a, b in out_of_order:
            _err(f"  Index timestamp: {a}, Previously indexed timestamp: {b}")
    if not_found:
        _err("The following indexed offsets are not found in the log.")
        for a, b in not_found:
            _err(f"Indexed offset: {a}, found log offset: {b}")
    return EXIT_ERROR


def _sibling_log(path: Path, display: str):
    """The bytes of the ``.log`` an index file belongs to, or None (said on stderr) if there is none."""
    log = path.with_suffix(".log")
    if not log.is_file():
        _err(f"{display}: no {log.name} beside it, the entries are not checked against the log")
        return None
    return _read_file(log)


def _snapshot_line(e) -> str:
    """ProducerStateManager.readSnapshot + DumpLogSegments: batch metadata only when lastOffset >= 0."""
    first_offset = e.current_txn_first_offset
    line = (
        f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
        f"currentTxnFirstOffset: {_optional_long(first_offset if first_offset >= 0 else None)} "
        f"lastTimestamp: {e.timestamp}"
    )
    if e.last_offset >= 0:
        first_seq = kafkatx.decrement_sequence(e.last_sequence, e.offset_delta)
        line += (
            f" firstSequence: {first_seq} lastSequence: {e.last_sequence} lastOffset: {e.last_offset} "
            f"offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
        )
    else:
        line += " "  # (DumpLogSegments prints "lastTimestamp: N " and then the batch metadata, if any)
    return line


def cmd_dump(args) -> int:
    status = EXIT_OK
    if args.transaction_log_decoder and args.offsets_decoder:
        _err("error: --transaction-log-decoder and --offsets-decoder exclude each other")
        return EXIT_USAGE
    # as Kafka's tool: a decoder prints the data
    args.print_data_log = args.print_data_log or args.transaction_log_decoder or args.offsets_decoder
    for name in args.files:
        path = Path(name)
        try:
            if path.is_dir():
                raise CliError(f"{name}: is a directory (dump takes segment files; try: kafkatx summary {name})")
            suffix = path.suffix
            if suffix == ".txnindex":
                code = _dump_txnindex(path, name, args)
            elif suffix == ".snapshot":
                code = _dump_snapshot(path, name, args)
            elif suffix == ".index":
                code = _dump_index(path, name, args)
            elif suffix == ".timeindex":
                code = _dump_time_index(path, name, args)
            else:
                code = _dump_log(path, name, args)
        except KafkaTxError as exc:
            sys.stdout.flush()
            _err(f"error: {name}: {exc}")
            code = EXIT_ERROR
        except CliError as exc:
            sys.stdout.flush()
            _err(f"error: {exc}")
            code = exc.code
        status = max(status, code)
    return status


# ------------------------------------------------------------------------------------------ summary
class _Producer:
    __slots__ = (
        "aborted",
        "batches",
        "committed",
        "empty_aborts",
        "epochs",
        "first_seq",
        "last_seq",
        "pid",
        "records",
        "transactional",
    )

    def __init__(self, pid):
        self.pid = pid
        self.epochs = set()
        self.batches = 0
        self.records = 0
        self.transactional = False
        self.committed = 0
        self.aborted = 0
        self.empty_aborts = 0
        self.first_seq = None
        self.last_seq = None


class LogSummary:
    """What ``kafkatx summary`` found in one log (a segment file or a partition directory)."""

    def __init__(self, display: str):
        self.display = display
        self.segments = []
        self.ignored = []  # .log files of the directory whose name is not a segment's (not read)
        self.log_start_offset = None
        self.bytes = 0
        self.valid_bytes = 0
        self.trailing_bytes = 0
        self.batches = 0
        self.control_batches = 0
        self.data_records = 0
        self.control_records = 0
        self.codecs = {}
        self.magics = {}
        self.producers = {}
        self.plain_batches = 0
        self.first_offset = None
        self.last_offset = None
        self.min_timestamp = None
        self.max_timestamp = None
        self.markers = {}
        self.aborted = []  # (producer id, first offset) of each transaction that ended in ABORT
        self.open_txns = {}  # producer id -> first offset of its transaction still open
        self.read_uncommitted = 0
        self.read_committed = 0
        self.next_offset = None
        self.first_committed = []

    @property
    def last_stable_offset(self):
        # a transaction opened before the log start (known from its producer snapshot) holds the LSO at the
        # log start, as Kafka's max(first unstable offset, log start offset)
        if not self.open_txns:
            return None
        return max(min(self.open_txns.values()), self.log_start_offset or 0)


def _segments_of(path: Path):
    """The segment files to read, and the ``.log`` files of a directory that are not segments (their name does
    not start with an offset, as ``-stray.log``): those are left out."""
    if path.is_dir():
        segs, ignored = [], []
        for p in sorted(p for p in path.iterdir() if p.suffix == ".log" and p.is_file()):
            (ignored if _offset_from_name(p.name) is None else segs).append(p)
        if not segs:
            names = ", ".join(p.name for p in ignored)
            raise CliError(f"{path}: no .log segments in this directory" +
                           (f" ({names}: not a segment file name)" if ignored else ""))  # fmt: skip
        return segs, ignored
    if not path.exists():
        raise CliError(f"{path}: no such file or directory")
    return [path], []


def _scan_segment(s: LogSummary, data) -> int:
    """Decode every batch and record of one segment (CRC verified) and track transactions; returns the
    segment's valid bytes (its complete batches)."""
    it = kafkatx.iter_batches(data, verify_crc=True)
    for batch in it:
        s.batches += 1
        s.codecs[batch.compression] = s.codecs.get(batch.compression, 0) + 1
        s.magics[batch.magic] = s.magics.get(batch.magic, 0) + 1
        summary = batch.record_summary()  # (every record decoded and checked)
        if summary.max_timestamp != -1:  # (-1: no record with a timestamp)
            if s.min_timestamp is None or summary.min_timestamp < s.min_timestamp:
                s.min_timestamp = summary.min_timestamp
            if s.max_timestamp is None or summary.max_timestamp > s.max_timestamp:
                s.max_timestamp = summary.max_timestamp
        if s.first_offset is None:
            s.first_offset = batch.base_offset
        s.last_offset = batch.last_offset if s.last_offset is None else max(s.last_offset, batch.last_offset)
        pid = batch.producer_id
        if batch.is_control:
            s.control_batches += 1
            s.control_records += summary.records
            ctype = batch.first_control_type()
            name = _control_name(ctype) if ctype >= 0 else "EMPTY"
            s.markers[name] = s.markers.get(name, 0) + 1
            if ctype in (ABORT, COMMIT) and pid >= 0:
                p = s.producers.setdefault(pid, _Producer(pid))
                p.transactional = True
                p.epochs.add(batch.producer_epoch)
                first = s.open_txns.pop(pid, None)
                if ctype == COMMIT:
                    if first is not None:
                        p.committed += 1
                elif first is None:
                    p.empty_aborts += 1  # an ABORT with no data before it: nothing to hide
                else:
                    p.aborted += 1
                    s.aborted.append((pid, first))
            continue
        s.data_records += summary.records
        if pid < 0:
            s.plain_batches += 1
            continue
        p = s.producers.setdefault(pid, _Producer(pid))
        p.batches += 1
        p.records += summary.records
        p.epochs.add(batch.producer_epoch)
        if batch.base_sequence >= 0:
            if p.first_seq is None:
                p.first_seq = batch.base_sequence
            p.last_seq = batch.last_sequence
        if batch.is_transactional:
            p.transactional = True
            s.open_txns.setdefault(pid, batch.base_offset)
    s.valid_bytes += it.valid_bytes
    s.trailing_bytes += it.trailing_bytes
    return it.valid_bytes


def _count_read_committed(s: LogSummary, segments, keep_first: int) -> None:
    """Records a read_committed reader sees: one filter over the segments' complete batches in order, so a
    transaction's state carries from one segment into the next as in a consumer's fetches."""
    f = kafkatx.ReadCommittedFilter(
        list(s.aborted),
        isolation="read_committed",
        last_stable_offset=s.last_stable_offset,
        verify_crc=False,  # the scan has just verified every batch
    )
    for seg, valid in segments:
        view = memoryview(_read_file(seg))[:valid]
        for i in range(0, valid, SUMMARY_CHUNK_BYTES):
            visible = f.feed(view[i : i + SUMMARY_CHUNK_BYTES])
            s.read_committed += len(visible)
            if len(s.first_committed) < keep_first:
                s.first_committed.extend(visible[: keep_first - len(s.first_committed)])
    if f.next_offset is not None:
        s.next_offset = f.next_offset


def summarize(path, keep_first: int = 0) -> LogSummary:
    """Decode a segment file or a directory of ``.log`` segments; raises KafkaTxError on corrupt data."""
    path = Path(path)
    s = LogSummary(os.fspath(path))
    segments, s.ignored = _segments_of(path)
    s.segments = [p.name for p in segments]
    s.log_start_offset = _offset_from_name(segments[0].name)
    in_dir = path.is_dir()
    if in_dir:
        s.open_txns.update(_open_before_log_start(path / f"{s.log_start_offset:020d}.snapshot"))
    valid = []
    for seg in segments:
        data = _read_file(seg)
        s.bytes += len(data)
        try:
            valid.append(_scan_segment(s, data))
        except KafkaTxError as exc:
            if not in_dir:
                raise
            raise _located(exc, seg) from exc
    s.read_uncommitted = s.data_records
    _count_read_committed(s, zip(segments, valid), keep_first)
    return s


def _open_before_log_start(snapshot: Path) -> dict:
    """The transactions open at the first segment's base offset, from the producer snapshot the broker
    wrote there (after retention deleted older segments, their first batches are gone); none if there is
    no readable snapshot: a fresh log, or a copy without snapshots."""
    from .producer_state import read_snapshot

    try:
        entries = read_snapshot(snapshot)
    except (KafkaTxError, OSError):
        return {}
    return {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0}


class _SegmentError(KafkaTxError):
    """A decoding error, with the segment file it happened in."""


def _located(exc: KafkaTxError, seg: Path) -> KafkaTxError:
    err = _SegmentError(f"segment {seg.name}: {exc}")
    err.position = getattr(exc, "position", None)
    err.base_offset = getattr(exc, "base_offset", None)
    return err


def _fmt_ts(ms) -> str:
    if ms is None:
        return "-"
    try:
        dt = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return f"{ms} ({dt.strftime('%Y-%m-%dT%H:%M:%S.')}{ms % 1000:03d}Z)"


def _print_summary(s: LogSummary) -> None:
    w = 18
    _out(s.display)
    seg_note = s.segments[0] if len(s.segments) == 1 else f"{s.segments[0]} .. {s.segments[-1]}"
    start = f", log start offset {s.log_start_offset}" if s.log_start_offset is not None else ""
    _out(f"  {'segments':<{w}}{len(s.segments)} ({seg_note}){start}")
    _out(f"  {'bytes':<{w}}{s.bytes} (valid {s.valid_bytes}, trailing {s.trailing_bytes}); every CRC verified")
    _out(f"  {'batches':<{w}}{s.batches} ({s.batches - s.control_batches} data, {s.control_batches} control)")
    _out(f"  {'records':<{w}}{s.data_records} data, {s.control_records} control")
    if s.first_offset is not None:
        _out(f"  {'offsets':<{w}}{s.first_offset} .. {s.last_offset}")
        _out(f"  {'timestamps':<{w}}{_fmt_ts(s.min_timestamp)} .. {_fmt_ts(s.max_timestamp)}")
    codecs = ", ".join(f"{name} {n}" for name, n in sorted(s.codecs.items(), key=lambda kv: _codec_rank(kv[0])))
    _out(f"  {'codecs':<{w}}{codecs or '-'} (batches)")
    if set(s.magics) - {2}:
        _out(f"  {'magic':<{w}}" + ", ".join(f"v{m} {n}" for m, n in sorted(s.magics.items())) + " (batches)")
    txn = sorted(p.pid for p in s.producers.values() if p.transactional)
    idem = sorted(p.pid for p in s.producers.values() if not p.transactional)
    _out(
        f"  {'producers':<{w}}{len(s.producers)} with a producer id ({len(idem)} idempotent, "
        f"{len(txn)} transactional); {s.plain_batches} batches without one"
    )
    for pid in idem + txn:
        p = s.producers[pid]
        kind = "transactional" if p.transactional else "idempotent"
        seq = f", sequences {p.first_seq}..{p.last_seq}" if p.first_seq is not None else ""
        line = f"    pid {pid} {kind}, {_epochs(p.epochs)}: {_n(p.batches, 'batch')}, {_n(p.records, 'record')}{seq}"
        if p.transactional:
            line += f"; transactions {p.committed} committed, {p.aborted} aborted"
            if p.empty_aborts:
                line += f" (+{p.empty_aborts} empty aborts)"
            if pid in s.open_txns:
                line += f", one open since offset {s.open_txns[pid]}"
        _out(line)
    markers = ", ".join(f"{n} {name}" for name, n in sorted(s.markers.items()))
    _out(f"  {'control markers':<{w}}{sum(s.markers.values())}" + (f" ({markers})" if markers else ""))
    committed = sum(p.committed for p in s.producers.values())
    aborted = sum(p.aborted for p in s.producers.values())
    lso = s.last_stable_offset
    open_note = f"; {len(s.open_txns)} open, last stable offset {lso}" if s.open_txns else "; none open"
    _out(f"  {'transactions':<{w}}{committed} committed, {aborted} aborted{open_note}")
    _out(f"  {'read_uncommitted':<{w}}{s.read_uncommitted} records")
    hidden = s.read_uncommitted - s.read_committed
    nxt = f", next fetch offset {s.next_offset}" if s.next_offset is not None else ""
    _out(f"  {'read_committed':<{w}}{s.read_committed} records ({hidden} hidden){nxt}")


def _epochs(epochs) -> str:
    """A producer's epochs as runs (``epoch 3``, ``epochs 0-4,7,9-12``); past eight runs (an epoch bumped at
    every transaction's end, as transactions version 2 does, or fenced over and over), their number and span
    instead."""
    es = sorted(epochs)
    if len(es) == 1:
        return f"epoch {es[0]}"
    runs: list = []
    for e in es:
        if runs and e == runs[-1][1] + 1:
            runs[-1][1] = e
        else:
            runs.append([e, e])
    if len(runs) <= 8:
        return "epochs " + ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)
    return f"{len(es)} epochs from {es[0]} to {es[-1]} ({len(runs) - 1} gaps)"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}es" if noun.endswith("ch") else f"{count} {noun}s"


def _codec_rank(name: str) -> int:
    order = ("none", "gzip", "snappy", "lz4", "zstd")
    return order.index(name) if name in order else len(order)


def _summary_paths(paths, keep_first: int = 0):
    status = EXIT_OK
    results = []
    for i, name in enumerate(paths):
        if i:
            _out()
        try:
            s = summarize(name, keep_first)
        except KafkaTxError as exc:
            sys.stdout.flush()
            _err(f"error: {name}: corrupt input: {exc}")
            status = EXIT_ERROR
            continue
        except CliError as exc:
            sys.stdout.flush()
            _err(f"error: {exc}")
            status = max(status, exc.code)
            continue
        sys.stdout.flush()
        for p in s.ignored:
            _err(f"warning: {p}: not a segment file name (<20-digit base offset>.log), ignored")
        _print_summary(s)
        results.append(s)
    return status, results


def cmd_summary(args) -> int:
    status, _ = _summary_paths(args.paths)
    return status


# --------------------------------------------------------------------------------------------- demo
def sample_log_path() -> Path:
    """The sample segment bundled with the package (written by scripts/make_sample_log.py)."""
    here = Path(__file__).resolve().parent
    path = here.joinpath(*SAMPLE_LOG)
    if not path.is_file():
        raise CliError(f"the bundled sample log is missing ({path}); the package data was not installed")
    return path


def cmd_demo(args) -> int:
    try:
        path = sample_log_path()
    except CliError as exc:
        _err(f"error: {exc}")
        return exc.code
    _out(f"kafkatx {kafkatx.__version__} ({kafkatx.BACKEND} codec): summary of the bundled sample log")
    _out()
    status, results = _summary_paths([os.fspath(path)], keep_first=args.records)
    if status or not results:
        return status or EXIT_ERROR
    s = results[0]
    _out()
    _out(f"First {len(s.first_committed)} records a read_committed consumer receives:")
    for r in s.first_committed:
        key = "null" if r.key is None else _text(r.key)
        value = "null" if r.value is None else _text(r.value)
        headers = ", ".join(f"{_header_key(k)}={'null' if v is None else _text(v)}" for k, v in r.headers)
        _out(f"  offset {r.offset} timestamp {r.timestamp} key {key}")
        _out(f"    value {value}")
        if headers:
            _out(f"    headers {headers}")
    _out()
    status = _demo_workload(args.workload_records, spark=args.spark) if args.workload_records else EXIT_OK
    _out()
    _out(f"Next: kafkatx dump --deep-iteration --print-data-log {path}")
    _out("      kafkatx generate /tmp/eos --records 1000000 && kafkatx verify /tmp/eos")
    if not args.spark and args.workload_records:
        _out("      kafkatx demo --spark   # the workload read by Spark too (pip install 'kafkatx[spark]', Java 17)")
    return status


# ------------------------------------------------------------------------------- generate / verify
def _print_verify(report) -> None:
    _out(f"  {'partition':<28} {'log end':>9} {'LSO':>9} {'read_committed':>15} {'read_uncommitted':>17}  check")
    for p in report.partitions:
        status = "ok" if not p.problems else "MISMATCH"
        _out(f"  {p.name:<28} {p.log_end_offset:>9} {p.last_stable_offset:>9} {p.read_committed:>15} "
             f"{p.read_uncommitted:>17}  {status}")  # fmt: skip
    o = report.offsets
    if o is not None:
        _out(f"  {o.partition:<28} group {o.group}: {len(o.offsets)} committed input offsets, as the group "
             f"coordinator loads them  {'MISMATCH' if o.problems else 'ok'}")  # fmt: skip
    for problem in report.problems:
        _err(f"  mismatch: {problem}")


def cmd_verify(args) -> int:
    from .log.verify import verify_directory

    try:
        report = verify_directory(args.path, aborted_source=args.aborted_source)
    except (kafkatx.KafkaTxError, OSError) as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    _print_verify(report)
    return EXIT_OK if report.ok else EXIT_ERROR


# ------------------------------------------------------------------------------- hanging transactions
_HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                    "LastTimestamp", "Duration(min)", "TransactionalId", "Reason")  # fmt: skip


def cmd_hanging(args) -> int:
    from .log.audit import find_hanging_transactions

    try:
        found = find_hanging_transactions(args.path, max_transaction_timeout_ms=args.max_transaction_timeout * 60_000,
                                          now_ms=args.now)  # fmt: skip
    except (kafkatx.KafkaTxError, OSError) as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    except ValueError as exc:  # not a log directory
        _err(f"error: {exc}")
        return EXIT_USAGE
    rows = [_HANGING_HEADERS] + [
        (h.topic, str(h.partition), str(h.producer_id), str(h.producer_epoch), str(h.coordinator_epoch),
         str(h.start_offset), str(h.last_timestamp), str(h.duration_ms // 60_000), h.transactional_id or "-",
         h.reason)
        for h in found
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HANGING_HEADERS))]
    for r in rows:
        _out("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return EXIT_OK


# ------------------------------------------------------------------------------- committed offsets
_OFFSETS_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAST-STABLE-OFFSET", "LAG",
                    "LEADER-EPOCH", "COMMITTED-AT")  # fmt: skip


def _committed_json(c) -> dict:
    return {"offset": c.offset, "leader_epoch": c.leader_epoch, "metadata": c.metadata,
            "commit_timestamp": c.commit_timestamp, "expire_timestamp": c.expire_timestamp,
            "record_offset": c.record_offset}  # fmt: skip


def cmd_offsets(args) -> int:
    from .grouplog import load_offsets
    from .log.reader import open_log_dir

    try:
        state = load_offsets(args.path, verify_crc=args.verify_crc)
        ends = {}  # log end and LSO of the partitions with committed offsets that are in the directory too
        with open_log_dir(args.path) as d:
            for _group, topic, partition in state.offsets:
                part = d.get((topic, partition))
                if part is not None and (topic, partition) not in ends:
                    ends[(topic, partition)] = (part.high_watermark, part.last_stable_offset)
    except (KafkaTxError, OSError) as exc:
        _err(f"error: {exc}")
        return EXIT_ERROR
    except ValueError as exc:  # not a log directory
        _err(f"error: {exc}")
        return EXIT_USAGE

    def keep(where) -> bool:
        return not args.group or where[0] in args.group

    pending = [(pid, where, c) for pid, offsets in sorted(state.pending.items())
               for where, c in sorted(offsets.items()) if keep(where)]  # fmt: skip
    if args.json:
        for (group, topic, partition), c in sorted(state.offsets.items()):
            if keep((group,)):
                hw, lso = ends.get((topic, partition), (None, None))
                _out(json.dumps({"type": "offset", "group": group, "topic": topic, "partition": partition,
                                 **_committed_json(c), "log_end_offset": hw, "last_stable_offset": lso,
                                 "lag": None if hw is None else hw - c.offset}))  # fmt: skip
        for pid, (group, topic, partition), c in pending:
            _out(json.dumps({"type": "pending", "producer_id": pid, "group": group, "topic": topic,
                             "partition": partition, **_committed_json(c)}))  # fmt: skip
        if state.other_records:
            _out(json.dumps({"type": "not_decoded", "records": state.other_records}))
        return EXIT_OK
    rows = [_OFFSETS_HEADERS]
    for (group, topic, partition), c in sorted(state.offsets.items()):
        if not keep((group,)):
            continue
        hw, lso = ends.get((topic, partition), (None, None))
        rows.append((group, topic, str(partition), str(c.offset), "-" if hw is None else str(hw),
                     "-" if lso is None else str(lso), "-" if hw is None else str(hw - c.offset),
                     "-" if c.leader_epoch < 0 else str(c.leader_epoch), str(c.record_offset)))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(_OFFSETS_HEADERS))]
    for r in rows:
        _out("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if pending:
        _out()
        _out("Offsets committed by open transactions (they take effect when the transaction commits):")
        for pid, (group, topic, partition), c in pending:
            _out(f"  producerId {pid}: {group} {topic}-{partition} offset {c.offset} (record {c.record_offset})")
    if state.other_records:
        _out()
        _out(f"{state.other_records} records of the consumer, share or streams group types (3 and up) are not "
             "decoded by kafkatx; the offsets above are those of every group, whatever protocol it uses.")  # fmt: skip
    return EXIT_OK


def _demo_workload(records: int, *, spark: bool = False) -> int:
    """Generate a small exactly-once workload, read it back read_committed, check it against its manifest;
    with ``spark``, read it with the Spark source too and check Spark's aggregates against the manifest."""
    import tempfile

    from .log.generate import generate
    from .log.verify import verify_directory

    if spark:
        session = _demo_spark_session()  # before writing anything: a missing PySpark or Java fails first
        if isinstance(session, int):
            return session
    with tempfile.TemporaryDirectory(prefix="kafkatx-demo-") as root:
        m = generate(root, topics=("orders", "payments"), partitions=2, records=records, producers=4,
                     abort_ratio=0.15, zombie_ratio=0.05, open_transactions=1, seed=2026, workers=0)  # fmt: skip
        t = m.transactions
        _out(f"Generated an exactly-once workload: {m.records} records in {len(m.partitions)} partitions, "
             f"{t.get('committed', 0)} committed / {t.get('aborted', 0)} aborted / {t.get('fenced', 0)} fenced / "
             f"{t.get('open', 0)} open transactions; the writer rejected {m.duplicates_rejected} duplicate "
             f"retries and {m.zombie_writes_rejected} zombie writes.")  # fmt: skip
        _out("Read back with kafkatx.log (read_committed from .txnindex, read_uncommitted) against the manifest:")
        report = verify_directory(root)
        _print_verify(report)
        _out("every reader saw exactly what the manifest says" if report.ok else "MISMATCH: see above")
        status = EXIT_OK if report.ok else EXIT_ERROR
        if spark:
            _out()
            status = max(status, _demo_spark(session, root, m))
        return status


def _demo_spark_session():
    """The active Spark session, else a new ``local[2]`` one (stopped at exit); an exit code if PySpark or
    Java is missing."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        _err("error: demo --spark needs PySpark 4 (pip install 'kafkatx[spark]'; Python 3.11 or later)")
        return EXIT_USAGE
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.isfile(os.path.join(java_home, "bin", "java"))):
        _err("error: demo --spark needs Java 17 or later (java on PATH, or JAVA_HOME) for Spark's JVM")
        return EXIT_USAGE
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    import atexit

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's Python workers: this interpreter
    session = (SparkSession.builder.master("local[2]").appName("kafkatx demo").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())  # fmt: skip
    session.sparkContext.setLogLevel("ERROR")
    atexit.register(session.stop)
    return session


def _demo_spark(session, root: str, manifest) -> int:
    """Read the generated directory with ``spark.read.format("kafkatx")`` (read_committed, then
    read_uncommitted), sum ``amount_cents`` per customer and per partition with Spark SQL, and compare the
    counts, offsets and sums with the manifest."""
    import importlib.util

    import pyspark
    from pyspark.sql import functions as F

    from . import spark as kspark

    if importlib.util.find_spec("pyspark_kafkatx") is None:  # PySpark finds the source itself through it
        kspark.register(session)
    _out(f"Read with Spark (PySpark {pyspark.__version__}, {session.sparkContext.master}): "
         'spark.read.format("kafkatx"), amount_cents summed from the JSON values')  # fmt: skip
    amount = F.get_json_object(F.col("value").cast("string"), "$.amount_cents").cast("long")
    seen = {}
    for isolation in ("read_committed", "read_uncommitted"):
        df = session.read.format("kafkatx").option("kafka.isolation.level", isolation).load(root)
        df = df.select(F.col("key").cast("string").alias("customer"), amount.alias("amount_cents"), "topic",
                       "partition", "offset")  # fmt: skip
        if isolation == "read_committed":
            df = df.cache()  # read once for both aggregations
            customers = {r.customer: r.cents for r in df.groupBy("customer").agg(F.sum("amount_cents").alias("cents"))
                         .collect()}  # fmt: skip
        parts = df.groupBy("topic", "partition").agg(
            F.count("*").alias("records"), F.countDistinct("offset").alias("offsets"),
            F.sum("amount_cents").alias("cents"), F.count("amount_cents").alias("priced"),
        ).collect()  # fmt: skip
        seen[isolation] = {f"{r.topic}-{r.partition}": r for r in parts}
        df.unpersist()
    committed, uncommitted = seen["read_committed"], seen["read_uncommitted"]
    want_cents = {}
    for exp in manifest.partitions.values():
        for key, cents in exp["read_committed"]["amount_cents_by_key"].items():
            want_cents[key] = want_cents.get(key, 0) + cents
    problems = []
    _out(f"  {'partition':<28} {'read_committed':>15} {'amount_cents':>14} {'read_uncommitted':>17} "
         f"{'amount_cents':>14}  check")  # fmt: skip
    for name, exp in sorted(manifest.partitions.items()):
        c, u = committed.get(name), uncommitted.get(name)
        mine = []
        for label, row, want in (("read_committed", c, exp["read_committed"]["records"]),
                                 ("read_uncommitted", u, exp["read_uncommitted"]["records"])):  # fmt: skip
            got = row.records if row else 0
            if got != want:
                mine.append(f"{label}: Spark read {got} records, the manifest says {want}")
            if row and row.offsets != row.records:
                mine.append(f"{label}: {row.records - row.offsets} offsets read more than once")
            if row and row.priced != row.records:
                mine.append(f"{label}: {row.records - row.priced} values without an amount_cents")
        want_sum = sum(exp["read_committed"]["amount_cents_by_key"].values())
        if c and c.cents != want_sum:
            mine.append(f"read_committed: amount_cents sums to {c.cents}, the manifest says {want_sum}")
        problems += [f"{name}: {p}" for p in mine]
        _out(f"  {name:<28} {c.records if c else 0:>15} {c.cents if c else 0:>14} {u.records if u else 0:>17} "
             f"{u.cents if u else 0:>14}  {'MISMATCH' if mine else 'ok'}")  # fmt: skip
    for name in sorted(set(committed) | set(uncommitted)):
        if name not in manifest.partitions:
            problems.append(f"{name}: Spark read a partition the manifest does not have")
    wrong = sorted(k for k in set(customers) | set(want_cents) if customers.get(k) != want_cents.get(k))
    if wrong:
        problems.append(f"amount_cents of {len(wrong)} customers differ from the manifest (first: {wrong[0]!r}: "
                        f"Spark {customers.get(wrong[0])}, manifest {want_cents.get(wrong[0])})")  # fmt: skip
    for problem in problems:
        _err(f"  mismatch: {problem}")
    total_c = sum(r.cents or 0 for r in committed.values())
    total_u = sum(r.cents or 0 for r in uncommitted.values())
    extra = sum(r.records for r in uncommitted.values()) - sum(r.records for r in committed.values())
    if problems:
        _out("MISMATCH: see above")
        return EXIT_ERROR
    _out(f"Spark's read_committed rows match the manifest: {len(customers)} customers' amount_cents (total "
         f"{total_c}), no offset twice.")  # fmt: skip
    _out(f"read_uncommitted (the default of Spark's own Kafka source) would have counted {extra} records of "
         f"aborted, fenced and open transactions, {total_u - total_c} cents more.")  # fmt: skip
    return EXIT_OK


# ------------------------------------------------------------------------------------------ version
def cmd_version(args) -> int:
    parts = [f"backend: {kafkatx.BACKEND}"]
    if kafkatx.BACKEND == "cython":
        from . import _codec

        def system(name: str, v: int, whose: str = "system") -> str:
            return f"{whose} {name} {v // 10000}.{v // 100 % 100}.{v % 100}"

        parts.append(f"CRC-32C: {_codec.CRC32C_IMPL}")
        v = _codec.ZSTD_SYSTEM_VERSION
        parts.append("zstd reads: " + (system("libzstd", v) if v else "python-zstandard"))
        v, bundled = _codec._zstd_compressor()  # (large payloads, in pieces on two cores)
        lib = system("libzstd", v, "python-zstandard's" if bundled else "system")
        pieces = "one frame from parts or zstd_frames=2" if _codec._zstd_joins() else "zstd_frames=2"
        parts.append("zstd writes: python-zstandard" + (f" (on two cores, {pieces}: {lib} in C)" if v else ""))
        v = _codec.LZ4_SYSTEM_VERSION
        parts.append("lz4: " + (system("liblz4", v) + " and cramjam" if v else "cramjam"))
    parts.append(f"Python {sys.version.split()[0]}")
    _out(f"kafkatx {kafkatx.__version__} ({'; '.join(parts)})")
    return EXIT_OK


# ------------------------------------------------------------------------------------------ parsing
def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkatx",
        description="Read Apache Kafka's exactly-once data: log segments, transaction markers, .txnindex.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "dump",
        help="print segment files like Kafka's kafka-dump-log.sh",
        description="Print .log segments (and .index, .timeindex, .txnindex, .snapshot files) exactly as Kafka's "
        "kafka-dump-log.sh does; index entries are checked against the .log beside them. "
        "A batch whose CRC does not match is printed with isvalid: false and makes the exit code 1, "
        "unless --no-verify-crc is given.",
    )
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".log (or any segment-like file), .index, .timeindex, .txnindex, .snapshot")  # fmt: skip
    p.add_argument("--verify-index-only", action="store_true",
                   help=".index/.timeindex: only check the entries against the .log (mismatches: exit code 1)")
    p.add_argument("--index-sanity-check", action="store_true",
                   help=".index/.timeindex: only run the check a broker runs on start (rebuild or not)")
    p.add_argument("--print-data-log", action="store_true", help="print keys and values (implies --deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="show keys and values as __transaction_state records, in Kafka's JSON (implies "
                   "--print-data-log); a record that does not decode makes the exit code 1")  # fmt: skip
    p.add_argument("--offsets-decoder", action="store_true",
                   help="show keys and values as __consumer_offsets records (offset commits and classic groups), in "
                   "Kafka's JSON (implies --print-data-log); a record that does not decode makes the exit code 1")
    p.add_argument("--skip-record-metadata", action="store_true", help="with --print-data-log: only key and payload")
    p.add_argument("--no-verify-crc", dest="verify_crc", action="store_false",
                   help="CRC mismatches only show as isvalid: false (exit code 0)")  # fmt: skip
    p.add_argument("--max-bytes", type=_non_negative, default=None, metavar="N",
                   help="read only the first N bytes of each file")  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per line (file, batch, record)")
    p.set_defaults(func=cmd_dump)

    p = sub.add_parser(
        "summary",
        help="decode whole logs and summarise them",
        description="Decode every batch and record (CRC verified) of each segment file or directory of .log "
        "segments, and summarise batches, codecs, producers, transactions and what read_committed sees.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a .log segment or a partition directory")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("demo", help="summarise the bundled sample log, then write and verify an exactly-once workload")
    p.add_argument("--records", type=_non_negative, default=5, metavar="N", help="records to show (default 5)")
    p.add_argument("--workload-records", type=_non_negative, default=50_000, metavar="N",
                   help="records of the generated workload that is written and verified (0: skip; default 50000)")
    p.add_argument("--spark", action="store_true",
                   help="read the workload with the Spark source too (a local Spark session; needs PySpark and Java)")
    p.set_defaults(func=cmd_demo)

    # listed here for the help text; main() hands "kafkatx generate ..." to kafkatx.log.generate's own parser
    sub.add_parser("generate", help="write a realistic exactly-once log directory (and its manifest)")

    p = sub.add_parser("verify", help="read a generated log directory and check it against its manifest")
    p.add_argument("path", metavar="DIR", help="a directory written by 'kafkatx generate'")
    p.add_argument("--aborted-source", choices=("auto", "txnindex", "scan", "cross-check"), default="auto",
                   help="where aborted transactions come from (default: .txnindex files, else a scan)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "offsets",
        help="committed offsets of consumer groups, from __consumer_offsets (kafka-consumer-groups.sh --describe)",
        description="Replay the __consumer_offsets partitions of a broker log directory (or one such partition "
        "directory) as the group coordinator loads them: offsets committed in transactions count once their "
        "transaction commits, aborted ones never. For each group, topic and partition: the offset its consumers "
        "resume from, and where the partition is in the same directory, its log end, last stable offset and lag.",
    )
    p.add_argument("path", metavar="DIR", help="a broker log directory, or a __consumer_offsets-N directory")
    p.add_argument("--group", action="append", metavar="GROUP", help="only this group (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON object per line (offset, pending, not_decoded)")
    p.add_argument("--no-verify-crc", dest="verify_crc", action="store_false", help="read batches whose CRC fails")
    p.set_defaults(func=cmd_offsets)

    p = sub.add_parser(
        "hanging",
        help="find hanging transactions in a broker log directory (kafka-transactions.sh find-hanging)",
        description="List the transactions that partitions of a log directory hold open and that their "
        "coordinator (the __transaction_state partitions in the same directory) will never end: they hold "
        "the last stable offset back. Judged as of the newest time recorded in the directory unless --now.",
    )
    p.add_argument("path", metavar="DIR", help="a broker log directory (<topic>-<partition> directories)")
    p.add_argument("--max-transaction-timeout", type=_non_negative, default=15, metavar="MINUTES",
                   help="only transactions idle for longer than this (default 15, as the broker's maximum)")
    p.add_argument("--now", type=int, default=None, metavar="MS",
                   help="the time to judge by, in ms since the epoch (default: the directory's newest write)")
    p.set_defaults(func=cmd_hanging)

    p = sub.add_parser("version", help="print the version and the codec backend")
    p.set_defaults(func=cmd_version)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``kafkatx`` console script; returns the exit code."""
    for stream in (sys.stdout, sys.stderr):
        # keys and values are printed raw; never die on a character the terminal cannot encode
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding != "utf8" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["generate"]:
        # its own parser (kafkatx.log.generate.build_parser: options anywhere, --help), built only when used:
        # importing kafkatx.log for every command would slow the others down
        from .log.generate import main_generate

        return main_generate(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader of our output went away (kafkatx dump ... | head): stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
