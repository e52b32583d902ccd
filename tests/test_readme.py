"""The README's Python examples run as written, on both backends, against real files made to match them.

Every ```python block of README.md is executed in order in one namespace, in a fresh process per backend
(``KAFKATX_NO_EXTENSIONS=1`` for the pure-Python twin), after this module has made what the examples
name: a segment ``00000000000000000000.log`` with transactions in it and its ``.txnindex``, a producer
``.snapshot``, a generated log directory standing in for ``/var/lib/kafka/data`` (the example paths are
rewritten to temporary ones), and the few variables an example takes from its reader's own code
(``data``, ``chunks``, ``aborted``, ...).  After the blocks, the results they left are checked against
kafkatx's own answers for the same bytes, so an example that runs but shows something wrong fails too.
The Spark examples need a Spark session: the mapInArrow one runs in ``test_spark.py``, the data source one
in ``test_spark_source.py``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
SPARK_MARK = "mapInArrow"  # the block that needs a Spark DataFrame
SOURCE_MARK = 'format("kafkatx")'  # the block that needs a Spark session


def needs_spark(block: str) -> bool:
    return SPARK_MARK in block or SOURCE_MARK in block


def python_blocks(text: str | None = None) -> list:
    """The README's ```python blocks, in order."""
    text = README.read_text(encoding="utf-8") if text is None else text
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def rewrite_paths(block: str, root: pathlib.Path) -> str:
    """The block with its example paths pointed into ``root`` (a broker's data directory, /tmp ones)."""
    for old, new in (
        ("/var/lib/kafka/data/orders-0", root / "data" / "orders-0"),
        ("/var/lib/kafka/data", root / "data"),
        ("/tmp/t-0", root / "t-0"),
        ("/tmp/logs", root / "logs"),
    ):
        block = block.replace(f'"{old}"', repr(str(new)))
    return block


def prepare(root: pathlib.Path) -> dict:
    """Make the files the examples open (in ``root``, the working directory) and the namespace they expect."""
    import kafkatx
    from kafkatx import log, transactions, txnindex

    log.generate(root / "data", topics=("orders",), partitions=1, records=20_000, seed=11, workers=0)
    part = root / "data" / "orders-0"
    # the first segment with a .txnindex: a segment of a partition with aborted and committed transactions
    base = sorted(f.name[:-9] for f in part.iterdir() if f.name.endswith(".txnindex"))[0]
    shutil.copy(part / f"{base}.log", root / "00000000000000000000.log")
    shutil.copy(part / f"{base}.txnindex", root / "00000000000000000000.txnindex")
    snapshot = sorted(f for f in part.iterdir() if f.name.endswith(".snapshot"))[0]
    shutil.copy(snapshot, root / "00000000000000000018.snapshot")
    data = (root / "00000000000000000000.log").read_bytes()
    aborted = transactions.aborted_transactions(data)
    assert aborted, "the segment the examples read should hold an aborted transaction"
    b = kafkatx.BatchBuilder()
    b.append(b"hello", b"k")
    batches = kafkatx.iter_batches(data)
    first = next(iter(batches)).base_offset
    return {
        "data": data,
        "chunks": [data[: len(data) // 3], data[len(data) // 3 :]],  # the first cut falls inside a batch
        "aborted_transactions": aborted,
        "aborted": aborted,
        "lso": transactions.last_stable_offset(data),
        "entries": txnindex.read_txnindex(root / "00000000000000000000.txnindex"),
        "fetch_offset": first,
        "upper_bound": kafkatx.decode_records(data).next_offset,
        "batch_bytes": b.build(),
    }


def check(assigned, root: pathlib.Path) -> None:
    """What the examples left behind (``assigned(name)``: as the block assigning it left it, or as
    prepared) agrees with kafkatx's answers for the same bytes."""
    import kafkatx
    from kafkatx import log

    data = assigned("data")
    every = kafkatx.decode_records(data, verify_crc=True)
    assert assigned("records").next_offset == every.next_offset > assigned("fetch_offset")
    assert assigned("records").trailing_bytes == 0
    committed = kafkatx.decode_records(
        data, isolation="read_committed", aborted_transactions=assigned("aborted"), last_stable_offset=assigned("lso")
    )
    assert 0 < len(committed) < len(every)  # the segment has aborted records for the examples to hide
    # the chunked filter saw the same committed records as the one-shot call
    assert assigned("f").next_offset == committed.next_offset
    # decode_arrow's example passes no last stable offset: everything not aborted
    visible = kafkatx.decode_records(data, isolation="read_committed", aborted_transactions=assigned("aborted"))
    assert len(committed) <= len(visible) < len(every)
    assert assigned("table").column("offset").to_pylist() == [r.offset for r in visible]
    again = kafkatx.decode_arrow(assigned("payload"))
    assert again.column("value").to_pylist() == [r.value for r in visible]
    [rec] = kafkatx.decode_records(assigned("batch"))
    assert (rec.key, rec.value, rec.timestamp, rec.headers) == (b"key", b"value", 1700000000000, (("trace", b"abc"),))
    assert next(iter(kafkatx.iter_batches(assigned("marker")))).control_record().type == "commit"
    assert assigned("table").schema.names == list(kafkatx.ARROW_COLUMNS)
    # the coordinator example committed its one record to t-0
    with log.open_partition(root / "logs" / "t-0") as p:
        [rec] = list(p.read(isolation="read_committed"))
        assert (rec.key, rec.value) == (b"customer-7", b"order-1")
        assert p.last_stable_offset == p.log_end_offset == 2  # the record and its COMMIT marker


def main(root: str) -> None:
    root = pathlib.Path(root)
    os.chdir(root)
    ns = prepare(root)
    given = dict(ns)
    blocks = python_blocks()
    after = {}  # block index -> the namespace as that block left it (later blocks reuse names like `table`)
    ran = 0
    for i, block in enumerate(blocks):
        if needs_spark(block):
            continue
        try:
            exec(compile(rewrite_paths(block, root), f"README.md python block {i}", "exec"), ns)
        except Exception as exc:
            raise AssertionError(f"README.md python block {i} failed:\n{block}") from exc
        after[i] = dict(ns)
        ran += 1

    def assigned(name):
        """``name`` as left by the first block that assigns it (``name = ...``), or as prepared."""
        if name in given:
            return given[name]
        i = next(i for i in sorted(after) if re.search(rf"^{name} = ", blocks[i], re.M))
        return after[i][name]

    check(assigned, root)
    import kafkatx

    print(f"ran {ran} README blocks on backend {kafkatx.BACKEND}")


def test_the_readme_has_the_examples_this_test_runs():
    blocks = python_blocks()
    assert len(blocks) >= 6
    assert sum(SPARK_MARK in b for b in blocks) == 1
    assert sum(SOURCE_MARK in b for b in blocks) == 1
    for name in ("records", "f", "table", "payload", "batch", "marker"):
        assert any(re.search(rf"^{name} = ", b, re.M) for b in blocks), name


@pytest.mark.parametrize("backend", ["cython", "python"])
def test_readme_examples_run(backend, tmp_path):
    env = dict(os.environ)
    env.pop("KAFKATX_NO_EXTENSIONS", None)
    env.pop("KAFKATX_REQUIRE_EXTENSIONS", None)
    if backend == "python":
        env["KAFKATX_NO_EXTENSIONS"] = "1"
    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    n = sum(not needs_spark(b) for b in python_blocks())
    assert f"ran {n} README blocks on backend {backend}" in proc.stdout


if __name__ == "__main__":
    main(sys.argv[1])
