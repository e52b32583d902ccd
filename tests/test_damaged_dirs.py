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

from _damage import DAMAGES, STEPS, damage_file, run_step
from kafkatx.errors import KafkaTxError
from kafkatx.log import generate, wait_for_release


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
    st.sampled_from(DAMAGES),
    st.floats(0, 1, exclude_max=True),  # where in the file
    st.integers(1, 255),  # the byte flipped in, or how many bytes appended / zeroed
)


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
            damage_file(os.path.join(work, pool[i % len(pool)]), how, where, k)
        for step in STEPS:
            try:
                run_step(work, step, codec)
            except KafkaTxError:
                pass
        wait_for_release()
