"""Helpers for test_transactions.py and test_read_committed_model.py (and a clock for the coordinator tests).

Batches are built either with the backend's own ``BatchBuilder`` (data batches; checked byte for byte
against Kafka elsewhere), with ``kafkatx.transactions.encode_marker`` (COMMIT/ABORT markers; checked
byte for byte against Kafka's goldens in test_transactions.py), or entirely by hand with ``_spec``
(control batches with odd keys/values, empty batches, batches whose lastOffsetDelta passes their last
record) whose CRC comes from the independent ``crc32c`` package.

``decode_checked`` runs ``decode_records`` and ``decode_arrow`` with the same arguments and checks that
they agree (offsets, keys, values, sequences and next_offset), so every test exercises both.
"""

from __future__ import annotations

import struct

import _spec
from kafkatx.transactions import encode_marker

TS = 1_700_000_000_000
CONTROL = 0x20
TRANSACTIONAL = 0x10


class Clock:
    """A clock in milliseconds that moves only when a test sets ``now`` (the coordinator's and writers'
    ``clock=``)."""

    def __init__(self, now=TS):
        self.now = now

    def __call__(self):
        return self.now


def key_of(offset: int) -> bytes:
    return b"k%d" % offset


def value_of(offset: int) -> bytes:
    return b"value-%d" % offset


def data(codec, base, n=1, *, pid=-1, epoch=-1, seq=-1, txn=False, compression="none", offsets=None):
    """A data batch of ``n`` records at ``base``.. (or at explicit ``offsets``), key/value from the offset."""
    b = codec.BatchBuilder(base_offset=base, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=txn, compression=compression)  # fmt: skip
    for off in offsets if offsets is not None else range(base, base + n):
        b.append(value_of(off), key=key_of(off), timestamp=TS + off, offset=off)
    return b.build()


def marker(kind, pid, epoch, offset, coordinator_epoch=0):
    return encode_marker(kind, producer_id=pid, producer_epoch=epoch, base_offset=offset,
                         coordinator_epoch=coordinator_epoch, timestamp=TS + offset)  # fmt: skip


def control_key(type_id: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, type_id)


def marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return struct.pack(">hi", version, coordinator_epoch)


def control_batch(base, key, value, *, pid=-1, epoch=-1, txn=False, extra_records=()):
    """A one-record (or more) control batch by hand: attributes bit 5 (+ bit 4 when ``txn``)."""
    recs = _spec.raw_record(key=key, value=value)
    for i, (k, v) in enumerate(extra_records, start=1):
        recs += _spec.raw_record(off_delta=i, key=k, value=v)
    count = 1 + len(extra_records)
    return _spec.v2_batch(recs, count=count, base_offset=base, attributes=CONTROL | (TRANSACTIONAL if txn else 0),
                          producer_id=pid, producer_epoch=epoch, base_timestamp=TS + base)  # fmt: skip


def empty_batch(base, last_offset_delta=0, *, pid=-1, epoch=-1, attributes=0):
    """A count-0 batch (61 bytes, batchLength 49), as the log cleaner leaves behind."""
    out = _spec.v2_batch(b"", count=0, base_offset=base, attributes=attributes, last_offset_delta=last_offset_delta,
                         producer_id=pid, producer_epoch=epoch)  # fmt: skip
    assert len(out) == 61 and struct.unpack_from(">i", out, 8)[0] == 49
    return out


def with_base_offset(batch: bytes, base: int) -> bytes:
    """The same v2 batch at another base offset (the CRC does not cover the base offset)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, base)
    return bytes(out)


def rec_tuple(r):
    return (r.offset, r.key, r.value, r.sequence)


def arrow_tuples(rb):
    cols = [rb.column(name).to_pylist() for name in ("offset", "key", "value", "sequence")]
    return list(zip(*cols))


def decode_checked(codec, data_, **kwargs):
    """``codec.decode_records(data_, **kwargs)``, after checking ``decode_arrow`` gives the same rows."""
    res = codec.decode_records(data_, **kwargs)
    rb = codec.decode_arrow(data_, **kwargs)
    assert arrow_tuples(rb) == [rec_tuple(r) for r in res]
    meta = rb.schema.metadata
    assert meta[b"next_offset"] == str(res.next_offset).encode()
    assert meta[b"valid_bytes"] == str(res.valid_bytes).encode()
    return res


def offsets(records) -> list:
    return [r.offset for r in records]


def expected_records(offs, seqs=None):
    """(offset, key, value, sequence) tuples of records built by ``data`` (sequence -1 unless given)."""
    seqs = seqs or {}
    return [(o, key_of(o), value_of(o), seqs.get(o, -1)) for o in offs]
