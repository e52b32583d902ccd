"""kafkatx.arrow's Spark helpers in a real local Spark session (PySpark from PyPI on Java 17).

A Spark user holds Kafka data as a binary column whose rows are whole raw record batches (Kafka's own
Spark source gives records, not batches, so these come from files, backups or tiered-storage objects
loaded with ``binaryFile`` or from a table).  ``map_in_arrow_decoder`` is the function for
``DataFrame.mapInArrow`` that turns such rows into Kafka's records; ``spark_schema`` is its output
schema.  These tests run the decoder inside Spark's Python workers: Spark hands it its own Arrow
batches (``maxRecordsPerBatch`` is set to 3 rows so a partition arrives in several, and read_committed
state must carry across them), checks the yielded batches against the declared schema (PySpark 4.3
rejects any type difference) and converts them back.  The results must equal ``decode_arrow`` on the
same bytes in this process.

The workers import kafkatx from this interpreter (``PYSPARK_PYTHON``), so they use the backend the
suite runs on (``KAFKATX_NO_EXTENSIONS`` is inherited).  PySpark 4 needs Python >= 3.11; Spark needs
``java`` on the PATH.
"""

from __future__ import annotations

import sys

import pyarrow as pa
import pytest

import _spec
import kafkatx
import kafkatx.arrow as kafkatx_arrow
from conftest import load_golden, local_spark
from kafkatx._common import ARROW_COLUMNS

if sys.version_info < (3, 11):
    pytest.skip("PySpark 4 needs Python >= 3.11", allow_module_level=True)


pytestmark = [
    pytest.mark.slow,
    # PySpark 4.3 warns that it does not fully support pandas 3 when it converts to or from pandas
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ABORTED = [(1001, 3), (1003, 13)]  # segment_mixed's aborted transactions (producer id, first offset)


@pytest.fixture(scope="module")
def spark():
    session = local_spark("kafkatx-tests", **{"spark.sql.execution.arrow.maxRecordsPerBatch": "3"})
    yield session
    session.stop()


def raw_batches(data: bytes) -> list:
    return [data[p : p + n] for p, n in _spec.split_batches(data)]


def batches_frame(spark, logs: list):
    """One Spark partition per log, holding its raw batches in order (``id``, ``value``)."""
    frames = [
        spark.sparkContext.parallelize([(k, i, b) for i, b in enumerate(raw_batches(data))], 1).toDF(
            "log INT, id INT, value BINARY"
        )
        for k, data in enumerate(logs)
    ]
    df = frames[0]
    for f in frames[1:]:
        df = df.union(f)
    assert df.rdd.getNumPartitions() == len(logs)
    return df


def assert_same_records(got: pa.Table, want, columns=ARROW_COLUMNS):
    assert got.num_rows == want.num_rows
    for name in columns:
        g, w = got.column(name), want.column(name)
        if name == "timestamp":  # Spark's TIMESTAMP is microseconds, kafkatx's column milliseconds
            g = g.cast(pa.timestamp("ms", tz="UTC"))
        assert g.to_pylist() == w.to_pylist(), name


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_map_in_arrow_in_spark(spark, isolation):
    data, _ = load_golden("segment_mixed")
    df = batches_frame(spark, [data])
    func = kafkatx_arrow.map_in_arrow_decoder(isolation=isolation, aborted_transactions=ABORTED)
    got = df.mapInArrow(func, kafkatx_arrow.spark_schema()).toArrow()
    want = kafkatx.decode_arrow(data, isolation=isolation, aborted_transactions=ABORTED)
    assert want.num_rows > 0
    assert_same_records(got, want)
    if isolation == "read_committed":  # the aborted transactions' records are really gone
        plain = kafkatx.decode_arrow(data)
        assert got.num_rows < plain.num_rows


def test_the_readme_spark_example(spark):
    """The README's Spark example as written, on ``batches_df`` (one Kafka partition's raw batches)."""
    from test_readme import SPARK_MARK, python_blocks

    [block] = [b for b in python_blocks() if SPARK_MARK in b]
    data, _ = load_golden("segment_mixed")
    ns = {"batches_df": batches_frame(spark, [data]), "aborted": ABORTED}
    exec(compile(block, "README.md Spark example", "exec"), ns)
    got = ns["records"].toArrow()
    want = kafkatx.decode_arrow(data, isolation="read_committed", aborted_transactions=ABORTED)
    assert 0 < want.num_rows < kafkatx.decode_arrow(data).num_rows
    assert_same_records(got, want)


def test_map_in_arrow_one_kafka_partition_per_spark_partition(spark):
    logs = [load_golden(name)[0] for name in ("segment_mixed", "many_zstd", "plain_lz4")]
    df = batches_frame(spark, logs)
    columns = ["offset", "key", "value", "headers", "producer_id"]
    func = kafkatx_arrow.map_in_arrow_decoder(columns=columns)
    got = df.mapInArrow(func, kafkatx_arrow.spark_schema(columns)).toArrow()
    # partitions come back in order: partition k holds log k
    want = pa.Table.from_batches([kafkatx.decode_arrow(data, columns=columns) for data in logs])
    assert got.schema.names == columns
    assert_same_records(got, want, columns)


def test_decoding_in_map_in_pandas(spark):
    """The pandas route: each raw batch decoded with kafkatx.to_pandas inside mapInPandas."""
    data, _ = load_golden("many_zstd")
    df = batches_frame(spark, [data])
    columns = ["offset", "key", "value"]

    def decode(frames):
        import pandas as pd

        for pdf in frames:
            parts = [kafkatx.to_pandas(bytes(raw), columns=columns) for raw in pdf["value"]]
            if parts:
                yield pd.concat(parts, ignore_index=True)

    got = df.mapInPandas(decode, "offset BIGINT, key BINARY, value BINARY").toArrow()
    want = kafkatx.decode_arrow(data, columns=columns)
    assert_same_records(got, want, columns)


def test_a_corrupt_batch_fails_the_spark_job_naming_its_row(spark):
    data, _ = load_golden("segment_mixed")
    rows = raw_batches(data)
    bad = bytearray(rows[2])
    bad[70] ^= 0x01  # a CRC-covered byte of the third batch
    rows[2] = bytes(bad)
    df = spark.sparkContext.parallelize([(i, b) for i, b in enumerate(rows)], 1).toDF("id INT, value BINARY")
    func = kafkatx_arrow.map_in_arrow_decoder()
    with pytest.raises(Exception, match="CrcMismatchError") as info:
        df.mapInArrow(func, kafkatx_arrow.spark_schema()).collect()
    assert "crc" in str(info.value).lower()
    assert "(in row 2 of the column) (at byte 0," in str(info.value)  # the row Spark gave, the batch's start
