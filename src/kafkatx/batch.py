"""Record batches: decode (``iter_batches``, ``decode_records``) and encode (``BatchBuilder``)."""

from __future__ import annotations

from ._backend import codec as _codec

Record = _codec.Record
RecordBatch = _codec.RecordBatch
BatchIterator = _codec.BatchIterator
RecordList = _codec.RecordList
BatchBuilder = _codec.BatchBuilder
ReadCommittedFilter = _codec.ReadCommittedFilter
iter_batches = _codec.iter_batches
decode_records = _codec.decode_records
scan_batches = _codec.scan_batches
crc32c = _codec.crc32c
increment_sequence = _codec.increment_sequence
decrement_sequence = _codec.decrement_sequence

__all__ = [
    "Record",
    "RecordBatch",
    "BatchIterator",
    "RecordList",
    "BatchBuilder",
    "ReadCommittedFilter",
    "iter_batches",
    "decode_records",
    "scan_batches",
    "crc32c",
    "increment_sequence",
    "decrement_sequence",
]
