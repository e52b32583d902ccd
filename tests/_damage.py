"""Damaged partition directories: how a file is damaged, and the reads and reopening every such directory
must survive (shared by tests/test_damaged_dirs.py and scripts/fuzz.py's ``logdir`` mode)."""

from __future__ import annotations

import os

DAMAGES = ("flip", "cut", "append", "zero", "empty")
STEPS = ("read_committed", "records", "read_uncommitted", "timestamps", "writer")


def damaged(data: bytes, how: str, at: int, k: int) -> bytes:
    """``data`` with byte ``at`` xor-ed with ``k`` (flip), cut at ``at``, ``k`` bytes from ``at`` zeroed,
    emptied, or ``k % 40 + 1`` bytes appended (``1 <= k <= 255``)."""
    if how == "flip" and data:
        return data[:at] + bytes([data[at] ^ k]) + data[at + 1 :]
    if how == "cut":
        return data[:at]
    if how == "zero":
        return data[:at] + bytes(len(data[at : at + k])) + data[at + k :]
    if how == "empty":
        return b""
    return data + bytes((i * 37 + k) & 0xFF for i in range(k % 40 + 1))


def damage_file(path, how: str, where: float, k: int) -> int:
    """Damage the file at ``path`` in place (``where`` in [0, 1): how far into it); returns the position."""
    with open(path, "rb") as fh:
        data = fh.read()
    at = int(where * len(data))
    with open(path, "wb") as fh:
        fh.write(damaged(data, how, at, k))
    return at


def run_step(work, step: str, codec=None) -> None:
    """One of ``STEPS`` on the partition directory ``work``, its result checked (AssertionError if wrong):
    a read_committed or read_uncommitted read into Arrow, a read of records, ListOffsets answers for timestamps
    (``offset_for_timestamp``: none past the bound), or a writer opened twice, whose
    second open must find sound what the first recovered (the last segment's indexes are rebuilt on every
    open, for appending).  A KafkaTxError is the directory's own and is left to the caller."""
    from kafkatx.log import PartitionWriter, open_partition

    if step == "writer":
        PartitionWriter(work, codec=codec).close()
        w = PartitionWriter(work, codec=codec)
        w.close()
        rec = w.recovery
        last = "%020d" % w.segments[-1]
        again = [p for p in rec.rebuilt_indexes if not os.path.basename(p).startswith(last)]
        assert not again and (rec.truncated_bytes, rec.cut_segments, rec.repaired_txn_indexes) == (0, (), ()), \
            f"the recovered directory was repaired again: {rec}"
        return
    with open_partition(work, codec=codec) as p:
        if step == "records":
            assert sum(1 for _ in p.read(format="records")) >= 0
        elif step == "timestamps":
            for isolation in ("read_committed", "read_uncommitted"):
                bound = p.last_stable_offset if isolation == "read_committed" else p.high_watermark
                for ts in (0, 1_700_000_000_000, 1_700_000_000_500, 1 << 62):
                    got = p.offset_for_timestamp(ts, isolation=isolation)
                    assert got is None or p.log_start_offset <= got < bound, (ts, isolation, got)
        else:
            assert p.read_table(isolation=step).num_rows >= 0
            assert p.last_stable_offset <= p.high_watermark <= p.log_end_offset
