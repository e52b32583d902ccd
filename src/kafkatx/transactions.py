"""Transactions: control records, transaction markers, aborted transactions and the last stable offset.

The read_committed filter itself lives in the codec (``kafkatx.decode_records(...,
isolation="read_committed")`` and :class:`kafkatx.ReadCommittedFilter`); this module has what is built
around it.
"""

from __future__ import annotations

import struct
import time
from typing import Iterable, NamedTuple

from ._backend import codec as _codec
from ._control import (
    ABORT,
    COMMIT,
    CONTROL_TYPE_IDS,
    CONTROL_TYPE_NAMES,
    ControlRecord,
    parse_control_record,
)
from ._common import as_int, int64_arg
from .errors import InvalidAppendError

__all__ = [
    "ABORT",
    "COMMIT",
    "CONTROL_TYPE_NAMES",
    "ControlRecord",
    "parse_control_record",
    "encode_marker",
    "TxnSummary",
    "scan_transactions",
    "aborted_transactions",
    "last_stable_offset",
    "control_records",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MARKER_RECORD = struct.Struct(">bbbbbhhbhib")  # len, attrs, tsΔ, offΔ, keylen, key(v,type), vlen, value(v,epoch), hdrs


def encode_marker(
    kind: str,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int,
    coordinator_epoch: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT or ABORT marker batch, byte for byte as the broker writes it.

    (``MemoryRecords.withEndTransactionMarker``: a 78-byte transactional control batch of one record,
    base sequence -1, CreateTime, key ``(version 0, type)``, value ``(version 0, coordinator_epoch)``.)
    """
    type_id = CONTROL_TYPE_IDS.get(str(kind).lower())
    if type_id not in (ABORT, COMMIT):
        raise InvalidAppendError(f"a transaction marker is 'commit' or 'abort', got {kind!r}")
    # the integer rules of BatchBuilder (_common.as_int / int64_arg)
    pid = as_int(producer_id)
    if pid is None or not 0 <= pid < (1 << 63):
        raise InvalidAppendError(f"a marker needs a valid producer id, got {producer_id!r}")
    for name, v, bits in (("producer_epoch", producer_epoch, 16), ("coordinator_epoch", coordinator_epoch, 32),
                          ("partition_leader_epoch", partition_leader_epoch, 32)):  # fmt: skip
        iv = as_int(v)
        if iv is None or not -(1 << (bits - 1)) <= iv < (1 << (bits - 1)):
            raise InvalidAppendError(f"{name} must be an int{bits}, got {v!r}")
    offset = as_int(base_offset)
    if offset is None or not 0 <= offset < (1 << 63):
        raise InvalidAppendError(f"base_offset must be a non-negative int64, got {base_offset!r}")
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    timestamp = int64_arg(timestamp, "timestamp")
    if timestamp < -1:  # MemoryRecordsBuilder.appendWithOffset: "Invalid negative timestamp"
        raise InvalidAppendError(f"invalid negative timestamp {timestamp}")
    producer_id, base_offset = pid, offset
    producer_epoch, coordinator_epoch, partition_leader_epoch = (
        as_int(v) for v in (producer_epoch, coordinator_epoch, partition_leader_epoch))
    record = _MARKER_RECORD.pack(32, 0, 0, 0, 8, 0, type_id, 12, 0, coordinator_epoch, 0)
    size = _HEADER.size + len(record)
    out = bytearray(size)
    _HEADER.pack_into(
        out, 0, base_offset, size - 12, partition_leader_epoch, 2, 0, 0x30, 0, timestamp, timestamp, producer_id,
        producer_epoch, -1, 1,
    )  # fmt: skip
    out[_HEADER.size :] = record
    struct.pack_into(">I", out, 17, _codec.crc32c(memoryview(out)[21:]))
    return bytes(out)


class TxnSummary(NamedTuple):
    """What a scan of a log's batch headers tells about its transactions."""

    aborted: list  # (producer_id, first_offset, last_offset) per aborted transaction, in marker order
    committed: list  # (producer_id, first_offset, last_offset) per committed transaction
    open: dict  # producer_id -> first offset of its still-open transaction
    last_stable_offset: int  # first offset of the earliest open transaction, else the log end offset
    log_end_offset: int  # next offset after the last batch (or the start offset for an empty log)


def scan_transactions(data, *, start_offset: int = 0, verify_crc: bool = True) -> TxnSummary:
    """Walk the batches of ``data`` (or an iterable of batches) and follow each transactional producer.

    A transaction opens at a producer's first transactional data batch and ends at its next marker;
    a marker for a producer with no open transaction (an empty transaction) ends nothing.
    """
    batches = _codec.iter_batches(data, verify_crc=verify_crc) if _is_buffer(data) else data
    open_txns: dict[int, int] = {}
    aborted, committed = [], []
    end = start_offset
    for batch in batches:
        end = max(end, batch.next_offset)
        if batch.producer_id < 0 or not batch.is_transactional:
            continue
        pid = batch.producer_id
        if batch.is_control:
            ctype = batch.first_control_type()
            first = open_txns.pop(pid, None)
            if first is not None and ctype in (ABORT, COMMIT):
                (aborted if ctype == ABORT else committed).append((pid, first, batch.base_offset))
            elif first is not None:
                open_txns[pid] = first  # an empty or KRaft control batch does not end the transaction
        elif pid not in open_txns:
            open_txns[pid] = batch.base_offset
    lso = min(open_txns.values()) if open_txns else end
    return TxnSummary(aborted, committed, open_txns, lso, end)


def aborted_transactions(data, **kwargs) -> list:
    """``(producer_id, first_offset)`` for each aborted transaction in ``data``, as a Fetch response lists them."""
    return [(pid, first) for pid, first, _last in scan_transactions(data, **kwargs).aborted]


def last_stable_offset(data, *, high_watermark: int | None = None, **kwargs) -> int:
    """The log's last stable offset: the first offset of the earliest open transaction, else the end
    (capped at ``high_watermark`` when given, as the broker does)."""
    lso = scan_transactions(data, **kwargs).last_stable_offset
    return lso if high_watermark is None else min(lso, high_watermark)


def _is_buffer(obj) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


def control_records(batches: Iterable) -> list[ControlRecord]:
    """The parsed first control record of every non-empty control batch among ``batches``."""
    return [c for c in (b.control_record() for b in batches if b.is_control) if c is not None]


