"""A partition directory with any of its files damaged: reading it and reopening a writer on it give their
results or a KafkaTxError, never another exception (both codec backends); a directory the writer has
recovered needs no repair on the next open."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkatx.errors import KafkaTxError
from kafkatx.log import PartitionWriter, generate, open_partition, wait_for_release


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One partition of a generated EOS workload in small segments: .log, .index, .timeindex, .txnindex
    and .snapshot files, aborted and committed transactions, a transaction left open."""
    root = tmp_path_factory.mktemp("gen")
    generate(root, records=1500, partitions=1, segment_bytes=32 << 10, batch_records=(5, 60), seed=11,
             workers=0, txn_state_partitions=1)  # fmt: skip
    path = root / "orders-0"
    names = sorted(os.listdir(path))
    assert {n.rsplit(".", 1)[-1] for n in names} >= {"log", "index", "timeindex", "txnindex", "snapshot"}
    return path, names


damage = st.tuples(
    st.sampled_from(["flip", "cut", "append", "zero", "empty"]),
    st.floats(0, 1, exclude_max=True),  # where in the file
    st.integers(1, 255),  # the byte flipped in, or how many bytes appended / zeroed
)


def _damaged(data: bytes, how: str, where: float, k: int) -> bytes:
    at = int(where * len(data))
    if how == "flip" and data:
        return data[:at] + bytes([data[at] ^ k]) + data[at + 1 :]
    if how == "cut":
        return data[:at]
    if how == "zero":
        return data[:at] + bytes(len(data[at : at + k])) + data[at + k :]
    if how == "empty":
        return b""
    return data + bytes((i * 37 + k) & 0xFF for i in range(k % 40 + 1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])  # fmt: skip
@given(picks=st.lists(st.tuples(st.integers(0, 10_000), st.booleans(), damage), min_size=1, max_size=2))
def test_damaged_files_give_results_or_kafkatx_errors(source, codec, picks):
    path, names = source
    small = [n for n in names if not n.endswith(".log")]
    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, "orders-0")
        shutil.copytree(path, work)
        for i, metadata, (how, where, k) in picks:
            pool = small if metadata else names  # the index, snapshot and txnindex files get their share
            target = os.path.join(work, pool[i % len(pool)])
            with open(target, "rb") as fh:
                data = fh.read()
            with open(target, "wb") as fh:
                fh.write(_damaged(data, how, where, k))
        for step in ("read_committed", "records", "read_uncommitted", "writer"):
            try:
                if step == "writer":
                    PartitionWriter(work, codec=codec).close()
                    # what the first open repaired, the second finds sound (the last segment's indexes are
                    # rebuilt on every open, for appending)
                    w = PartitionWriter(work, codec=codec)
                    w.close()
                    rec = w.recovery
                    last = "%020d" % w.segments[-1]
                    assert not [p for p in rec.rebuilt_indexes if not os.path.basename(p).startswith(last)]
                    assert (rec.truncated_bytes, rec.cut_segments, rec.repaired_txn_indexes) == (0, (), ())
                    continue
                with open_partition(work, codec=codec) as p:
                    if step == "records":
                        n = sum(1 for _ in p.read(format="records"))
                        assert n >= 0
                    else:
                        table = p.read_table(isolation=step)
                        assert table.num_rows >= 0
                        assert p.last_stable_offset <= p.high_watermark <= p.log_end_offset
            except KafkaTxError:
                pass
        wait_for_release()
