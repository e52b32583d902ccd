"""Record batches: decode (``iter_batches``, ``decode_records``) and encode (``BatchBuilder``)."""

from __future__ import annotations

from ._backend import codec as _codec

Record = _codec.Record
RecordBatch = _codec.RecordBatch
BatchIterator = _codec.BatchIterator
RecordList = _codec.RecordList
RecordSummary = _codec.RecordSummary
BatchBuilder = _codec.BatchBuilder
ReadCommittedFilter = _codec.ReadCommittedFilter
iter_batches = _codec.iter_batches
decode_records = _codec.decode_records
scan_batches = _codec.scan_batches
decode_arrow = _codec.decode_arrow
encode_arrow = _codec.encode_arrow
arrow_schema = _codec.arrow_schema
ARROW_COLUMNS = _codec.ARROW_COLUMNS
crc32c = _codec.crc32c
increment_sequence = _codec.increment_sequence
decrement_sequence = _codec.decrement_sequence

__all__ = [
    "Record",
    "RecordBatch",
    "BatchIterator",
    "RecordList",
    "RecordSummary",
    "BatchBuilder",
    "ReadCommittedFilter",
    "iter_batches",
    "decode_records",
    "scan_batches",
    "decode_arrow",
    "encode_arrow",
    "arrow_schema",
    "ARROW_COLUMNS",
    "crc32c",
    "increment_sequence",
    "decrement_sequence",
]
