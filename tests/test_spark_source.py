"""The ``kafkatx`` Python Data Source (kafkatx.spark) in a real local Spark session (PySpark from PyPI, Java 17).

Batch reads of a generated exactly-once log directory are checked against the generator's manifest (record
counts and the sha256 of offsets, keys and values per partition, for both isolation levels), which was
computed when the records were written, not by a reader.  Column conventions (Spark's Kafka source: null
headers for a record without any, ``timestampType`` ids) are checked against the records as written.
Streaming queries run against a directory a :class:`kafkatx.log.PartitionWriter` keeps appending to,
with transactions left open across triggers, and must deliver each committed record once.

Spark finds the source by itself through the ``pyspark_kafkatx`` module (no ``spark.dataSource.register``).
The workers import kafkatx from this interpreter (``PYSPARK_PYTHON``), so they use the backend the suite
runs on.  PySpark 4 needs Python >= 3.11; Spark needs ``java`` on the PATH.
"""

from __future__ import annotations

import json
import sys

import pytest

import kafkatx

if sys.version_info < (3, 11):
    pytest.skip("PySpark 4 needs Python >= 3.11", allow_module_level=True)

from conftest import local_spark  # noqa: E402
from pyspark.errors import PySparkException  # noqa: E402  (after the version check)

from kafkatx.log import PartitionWriter, generate  # noqa: E402
from kafkatx.log.generate import record_checksum  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark():
    session = local_spark("kafkatx-source-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """Two topics of three partitions: transactions committed, aborted and one left open, zombies, retries,
    plain and idempotent producers, mixed compression, 64 KiB segments (several a partition)."""
    root = tmp_path_factory.mktemp("eos")
    manifest = generate(root, topics=("orders", "payments"), partitions=3, records=12_000, seed=7, workers=0,
                        segment_bytes=64 << 10, batch_records=(10, 80), open_transactions=1)  # fmt: skip
    return root, manifest


def rows_by_partition(df) -> dict:
    out: dict = {}
    for r in df.select("topic", "partition", "offset", "key", "value").collect():
        out.setdefault((r.topic, r.partition), []).append(r)
    return {k: sorted(v, key=lambda r: r.offset) for k, v in out.items()}


def manifest_entries(manifest, isolation: str) -> dict:
    return {(p["topic"], p["partition"]): p[isolation] for p in manifest.partitions.values()}


# ----------------------------------------------------------------------------------------------- batch
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_batch_read_gives_the_manifests_records(spark, logdir, isolation):
    root, manifest = logdir
    df = spark.read.format("kafkatx").option("kafka.isolation.level", isolation).load(str(root))
    got = rows_by_partition(df)
    want = manifest_entries(manifest, isolation)
    assert set(got) == set(want)  # the __transaction_state partitions are internal: left out unless named
    for key, rows in got.items():
        n, digest = record_checksum(rows)
        assert (n, digest) == (want[key]["records"], want[key]["sha256"]), key


def test_read_committed_is_the_default_and_the_columns_follow_sparks_kafka_source(spark, tmp_path):
    d = tmp_path / "t-0"
    with PartitionWriter(d) as w:
        b = kafkatx.BatchBuilder(timestamp_type="log_append_time")
        b.append(b"plain", b"k1", timestamp=T0, headers=[("h", b"x"), ("n", None)])
        b.append(None, None, timestamp=T0 + 1)
        w.append(b.build(), origin="replication")  # (a leader of a CreateTime topic would restamp it)
        for epoch, (seq, kind) in enumerate([(0, "abort"), (0, "commit")]):
            t = kafkatx.BatchBuilder(producer_id=9, producer_epoch=epoch, base_sequence=seq, transactional=True)
            t.append(kind.encode(), timestamp=T0 + 2)
            w.append(t.build())
            w.append_marker(kind, producer_id=9, producer_epoch=epoch, coordinator_epoch=0)
    df = spark.read.format("kafkatx").option("includeHeaders", "true").option("includeProducerFields", "true") \
        .load(str(d))
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
                          "producerId", "producerEpoch", "sequence", "isTransactional"]  # fmt: skip
    rows = df.orderBy("offset").collect()
    assert [(r.offset, r.key, r.value) for r in rows] == [(0, b"k1", b"plain"), (1, None, None), (4, None, b"commit")]
    assert {(r.topic, r.partition) for r in rows} == {("t", 0)}
    assert [r.timestampType for r in rows] == [1, 1, 0]  # LogAppendTime, CreateTime (Kafka's TimestampType ids)
    assert [(h.key, h.value) for h in rows[0].headers] == [("h", b"x"), ("n", None)]
    assert rows[1].headers is None and rows[2].headers is None  # Spark's Kafka source: null, not []
    assert [(r.producerId, r.producerEpoch, r.sequence, r.isTransactional) for r in rows] == [
        (-1, -1, -1, False), (-1, -1, -1, False), (9, 1, 0, True)]  # fmt: skip
    assert rows[2].timestamp.timestamp() * 1000 == T0 + 2
    plain = spark.read.format("kafkatx").load(str(d))
    assert plain.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    everything = spark.read.format("kafkatx").option("kafka.isolation.level", "read_uncommitted").load(str(d))
    assert sorted(r.offset for r in everything.collect()) == [0, 1, 2, 4]  # the aborted record, no markers


def test_topics_are_chosen_like_sparks_kafka_source(spark, logdir):
    root, manifest = logdir

    def partitions_read(**options):
        reader = spark.read.format("kafkatx")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted({(r.topic, r.partition) for r in reader.load(str(root)).select("topic", "partition").collect()})

    assert partitions_read(subscribe="payments") == [("payments", 0), ("payments", 1), ("payments", 2)]
    assert partitions_read(subscribePattern="ord.*") == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert partitions_read(subscribePattern="ord") == []  # the whole name must match
    assert partitions_read(assign=json.dumps({"orders": [2], "payments": [0]})) == [("orders", 2), ("payments", 0)]
    state = partitions_read(subscribe="__transaction_state")  # an internal topic, read when named
    assert state and all(t == "__transaction_state" for t, _ in state)


def test_starting_and_ending_offsets(spark, logdir):
    root, manifest = logdir
    with kafkatx.log.open_partition(root / "orders-1") as p:
        table = p.read_table(isolation="read_committed")
        offsets = table.column("offset").to_pylist()
        lso = p.last_stable_offset
    lo, hi = offsets[100], offsets[500]
    spec = {"orders": {"1": lo}}
    df = (spark.read.format("kafkatx").option("assign", json.dumps({"orders": [1]}))
          .option("startingOffsets", json.dumps(spec)).option("endingOffsets", json.dumps({"orders": {"1": hi}}))
          .load(str(root)))  # fmt: skip
    assert [r.offset for r in df.orderBy("offset").collect()] == offsets[100:500]
    df = (spark.read.format("kafkatx").option("subscribe", "orders")
          .option("startingOffsets", json.dumps({"orders": {"0": -2, "1": lo, "2": -2}}))
          .option("endingOffsets", json.dumps({"orders": {"0": -1, "1": -1, "2": 0}})).load(str(root)))  # fmt: skip
    got = rows_by_partition(df)
    want = manifest_entries(manifest, "read_committed")
    assert record_checksum(got[("orders", 0)]) == (want[("orders", 0)]["records"], want[("orders", 0)]["sha256"])
    assert [r.offset for r in got[("orders", 1)]] == offsets[100:]
    assert ("orders", 2) not in got  # an empty range
    assert max(offsets) < lso


def test_min_partitions_cuts_at_segment_boundaries_and_keeps_every_record(spark, logdir):
    root, manifest = logdir
    df = spark.read.format("kafkatx").option("minPartitions", "20").load(str(root))
    assert df.rdd.getNumPartitions() >= 20
    got = rows_by_partition(df)
    want = manifest_entries(manifest, "read_committed")
    for key, rows in got.items():
        assert record_checksum(rows) == (want[key]["records"], want[key]["sha256"]), key


def test_offsets_below_the_log_start(spark, tmp_path):
    d = tmp_path / "t-0"
    with PartitionWriter(d, segment_bytes=200) as w:
        for i in range(6):
            b = kafkatx.BatchBuilder()
            b.append(b"v%d" % i, timestamp=T0 + i)
            w.append(b.build())
    first = sorted(d.glob("*.log"))[0]
    first.unlink()  # retention removed the first segment (its index files may stay: they are ignored)
    with kafkatx.log.open_partition(d) as p:
        log_start = p.log_start_offset
    assert log_start > 0
    spec = json.dumps({"t": {"0": 0}})
    with pytest.raises(PySparkException, match="below the partition's log start offset"):
        spark.read.format("kafkatx").option("startingOffsets", spec).load(str(d)).collect()
    rows = spark.read.format("kafkatx").option("startingOffsets", spec).option("failOnDataLoss", "false") \
        .load(str(d)).collect()
    assert sorted(r.offset for r in rows) == list(range(log_start, 6))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"kafka.isolation.level": "read_dirty"}, "read_committed or read_uncommitted"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "exclude each other"),
        ({"startingOffsets": "latest"}, "startingOffsets must be earliest"),
        ({"startingOffsets": '{"orders": {"0": -1}}'}, "-1 (latest) is not allowed"),
        ({"endingOffsets": '{"orders": {"0": -2}}'}, "-2 (earliest) is not allowed"),
        ({"startingOffsets": "{not json"}, "must be earliest or JSON"),
        ({"minPartitions": "0"}, "positive integer"),
        ({"includeHeaders": "yes"}, "true or false"),
        ({"abortedSource": "guess"}, "abortedSource must be one of"),
        ({"subscribePattern": "("}, "not a regular expression"),
    ],
)
def test_bad_options_fail_at_load(spark, logdir, options, message):
    root, _ = logdir
    reader = spark.read.format("kafkatx")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(PySparkException, match=message.replace("(", r"\(").replace(")", r"\)")):
        reader.load(str(root))


def test_a_path_that_is_no_directory_fails_at_load(spark, tmp_path):
    with pytest.raises(PySparkException, match="no directory at"):
        spark.read.format("kafkatx").load(str(tmp_path / "missing"))
    with pytest.raises(PySparkException, match="needs a path"):
        spark.read.format("kafkatx").load()


def test_offsets_json_must_name_every_partition_read(spark, logdir):
    root, _ = logdir
    df = spark.read.format("kafkatx").option("subscribe", "orders") \
        .option("startingOffsets", json.dumps({"orders": {"0": 0}})).load(str(root))
    with pytest.raises(PySparkException, match="not for orders-1"):
        df.collect()


def test_a_corrupt_batch_fails_the_task_naming_its_file_and_position(spark, tmp_path):
    d = tmp_path / "t-0"
    with PartitionWriter(d) as w:
        for i in range(3):
            b = kafkatx.BatchBuilder()
            b.append(b"value-%d" % i, timestamp=T0)
            w.append(b.build())
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    second = len(data) // 3
    data[second + 70] ^= 0xFF  # a record byte of the second batch: its CRC no longer matches
    seg.write_bytes(bytes(data))
    with pytest.raises(PySparkException, match=rf"CrcMismatchError: record is corrupt .* in \S*t-0/00000000000000000000"
                                               rf"\.log \(at byte {second}, in batch with base offset 1\)"):
        spark.read.format("kafkatx").load(str(d)).collect()


# ------------------------------------------------------------------------------------------- streaming
def _txn_batch(pid, epoch, seq, values, ts):
    b = kafkatx.BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    for v in values:
        b.append(v, timestamp=ts)
    return b.build()


def test_streaming_delivers_each_committed_record_once(spark, tmp_path):
    """Micro-batches end at the last stable offset: a transaction open at a trigger is read once it commits;
    an aborted one never; maxOffsetsPerTrigger splits what is there; a restart from the checkpoint goes on
    where the last batch ended; a partition that appears is read from its start."""
    root = tmp_path / "logs"
    w0 = PartitionWriter(root / "t-0", segment_bytes=4096)
    try:
        w0.append(_txn_batch(5, 0, 0, [b"a0", b"a1"], T0))
        w0.append_marker("commit", producer_id=5, producer_epoch=0, coordinator_epoch=0)
        w0.append(_txn_batch(5, 0, 2, [b"open-0", b"open-1"], T0))  # open across the first trigger
        w0.flush()

        def run(**options):
            reader = spark.readStream.format("kafkatx").option("startingOffsets", "earliest")
            for k, v in options.items():
                reader = reader.option(k, v)
            q = (reader.load(str(root)).selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS v")
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())  # fmt: skip
            q.awaitTermination(120)
            assert q.exception() is None
            progress = [p.numInputRows for p in q.recentProgress]
            # everything the file sink committed, over both runs (it writes each micro-batch once)
            out = spark.read.parquet(str(tmp_path / "out")).collect()
            return sorted((r.topic, r.partition, r.offset, r.v) for r in out), progress

        got, _ = run()
        assert got == [("t", 0, 0, "a0"), ("t", 0, 1, "a1")]  # the open transaction holds the LSO at 2
        w0.append_marker("commit", producer_id=5, producer_epoch=0, coordinator_epoch=0)
        w0.append(_txn_batch(5, 0, 4, [b"aborted"], T0))
        w0.append_marker("abort", producer_id=5, producer_epoch=0, coordinator_epoch=0)
        for i in range(6):
            b = kafkatx.BatchBuilder()
            b.append(b"p%d" % i, timestamp=T0)
            w0.append(b.build())
        w0.flush()
        with PartitionWriter(root / "t-1") as w1:  # a partition that appears
            b = kafkatx.BatchBuilder()
            b.append(b"new", timestamp=T0)
            w1.append(b.build())
        got, progress = run(maxOffsetsPerTrigger="3")
        assert got == [("t", 0, 0, "a0"), ("t", 0, 1, "a1"), ("t", 0, 3, "open-0"),
                                          ("t", 0, 4, "open-1")] + [("t", 0, 8 + i, "p%d" % i) for i in range(6)] + [
            ("t", 1, 0, "new")]  # fmt: skip
        assert len([n for n in progress if n]) >= 3 and max(progress) <= 3  # at most 3 offsets a trigger
    finally:
        w0.close()


def test_a_schema_given_by_the_user_must_be_the_sources(spark, logdir):
    root, _ = logdir
    df = spark.read.format("kafkatx").schema("offset BIGINT").load(str(root))
    with pytest.raises(PySparkException, match="the kafkatx source's rows have the schema"):
        df.collect()
    same = spark.read.format("kafkatx").schema(
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT"
    ).option("subscribe", "orders").load(str(root))
    assert same.count() == sum(n["records"] for (t, _), n in manifest_entries(logdir[1], "read_committed").items()
                               if t == "orders")  # fmt: skip


def test_the_readme_data_source_example(spark, logdir):
    """The README's data source example as written, its paths pointed at the generated directory: the batch
    query reads orders as the manifest says, the streaming one is a streaming DataFrame of the same schema."""
    from test_readme import SOURCE_MARK, python_blocks

    [block] = [b for b in python_blocks() if SOURCE_MARK in b]
    root, manifest = logdir
    ns = {"spark": spark}
    exec(compile(block.replace('"/var/lib/kafka/data"', repr(str(root))), "README.md data source example", "exec"), ns)
    got = rows_by_partition(ns["df"])
    want = manifest_entries(manifest, "read_committed")
    assert set(got) == {k for k in want if k[0] == "orders"}
    for key, rows in got.items():
        assert record_checksum(rows) == (want[key]["records"], want[key]["sha256"]), key
    assert ns["stream"].isStreaming and ns["stream"].schema == ns["df"].schema


def test_starting_and_ending_timestamps(spark, logdir):
    """startingTimestamp / endingOffsetsByTimestamp: the offsets ListOffsets gives for the timestamps
    (Partition.offset_for_timestamp, checked against the files in test_log_reader), the rows between them."""
    root, _ = logdir
    parts = {}
    for n in range(3):
        with kafkatx.log.open_partition(root / f"orders-{n}") as p:
            table = p.read_table(isolation="read_committed")
            stamps = table.column("timestamp").cast("int64").to_pylist()
            parts[n] = (table.column("offset").to_pylist(), stamps)
    start_ts = max(sorted(s)[len(s) // 3] for _, s in parts.values())
    end_ts = {n: sorted(s)[2 * len(s) // 3] + 1 for n, (_, s) in parts.items()}
    df = (spark.read.format("kafkatx").option("subscribe", "orders").option("startingTimestamp", str(start_ts))
          .option("endingOffsetsByTimestamp", json.dumps({"orders": {str(n): t for n, t in end_ts.items()}}))
          .load(str(root)))  # fmt: skip
    got = {k[1]: [r.offset for r in rows] for k, rows in rows_by_partition(df).items()}
    for n, (offsets, _) in parts.items():
        with kafkatx.log.open_partition(root / f"orders-{n}") as p:
            lo = p.offset_for_timestamp(start_ts, isolation="read_committed")
            hi = p.offset_for_timestamp(end_ts[n], isolation="read_committed")
        assert lo is not None and hi is not None and lo < hi
        assert got.get(n, []) == [o for o in offsets if lo <= o < hi], n
    late = str(max(max(s) for _, s in parts.values()) + 1)  # after every record: no offset for it
    reader = spark.read.format("kafkatx").option("subscribe", "orders").option("startingTimestamp", late)
    with pytest.raises(PySparkException, match="startingOffsetsByTimestampStrategy=latest"):
        reader.load(str(root)).collect()
    assert reader.option("startingOffsetsByTimestampStrategy", "latest").load(str(root)).count() == 0


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("producer", [False, True])
def test_the_arrow_schema_is_the_one_pyspark_checks_batches_against(headers, producer):
    """kafkatx builds the batches' Arrow schema itself (PySpark 4.0/4.1's to_arrow_schema has no timezone); it
    must equal what PySpark 4.3 derives from the source's schema and compares the first batch with."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from kafkatx.spark import _arrow_schema, _Options

    opts = _Options.parse({"path": "/", "includeHeaders": str(headers).lower(),
                           "includeProducerFields": str(producer).lower()})  # fmt: skip
    assert _arrow_schema(opts).equals(to_arrow_schema(opts.schema(), timezone="UTC"))


def test_min_partitions_is_a_floor_where_segments_allow(logdir):
    """Each partition gets its share of minPartitions by bytes, rounded up: never fewer tasks than asked when
    every partition has enough segments, the ranges adjoining and covering each partition's whole range."""
    from kafkatx.spark import _BatchReader, _Options

    root, _ = logdir
    assert len(list(root.glob("[op]*-[0-9]/*.log"))) >= 30  # six partitions of 5 or more segments each
    for want in (1, 4, 7, 13, 30):
        tasks = _BatchReader(_Options.parse({"path": str(root), "minPartitions": str(want)}), None).partitions()
        assert len(tasks) >= max(want, 6)
        by_key: dict = {}
        for t in tasks:
            by_key.setdefault((t.topic, t.partition), []).append((t.start, t.end))
        for key, ranges in by_key.items():
            with kafkatx.log.open_partition(root / f"{key[0]}-{key[1]}") as p:
                assert ranges[0][0] == p.log_start_offset and ranges[-1][1] == p.last_stable_offset
            assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:])), ranges


def test_the_demo_reads_its_workload_with_spark(spark, capfd):
    """`kafkatx demo --spark` (the quickstart's job) reads its generated workload through the source in the
    active session and finds Spark's counts and sums equal to the manifest's."""
    from kafkatx import cli

    code = cli.main(["demo", "--spark", "--records", "1", "--workload-records", "6000"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "Spark's read_committed rows match the manifest" in out
    # each partition has a row in kafkatx.log's check (name, log end, LSO, read_committed, read_uncommitted, ok)
    # and then one in Spark's (name, read_committed, amount_cents, read_uncommitted, amount_cents, ok)
    by_name: dict = {}
    for line in out.splitlines():
        if line.startswith(("  orders-", "  payments-")):
            by_name.setdefault(line.split()[0], []).append(line.split())
    assert sorted(by_name) == ["orders-0", "orders-1", "payments-0", "payments-1"]
    for name, (mine, sparks) in by_name.items():
        assert mine[-1] == sparks[-1] == "ok"
        assert mine[3] == sparks[1] and mine[4] == sparks[3], (mine, sparks)  # the same counts, both isolations
        assert int(sparks[2]) <= int(sparks[4])
    assert sum(int(r[1][2]) for r in by_name.values()) < sum(int(r[1][4]) for r in by_name.values())


def test_the_demo_spark_check_fails_on_a_manifest_spark_disagrees_with(spark, logdir, capfd):
    """The demo's Spark step compares with the manifest, so a manifest that says otherwise fails it."""
    import copy

    from kafkatx import cli

    root, manifest = logdir
    assert cli._demo_spark(spark, str(root), manifest) == 0
    assert "match the manifest" in capfd.readouterr().out
    wrong = copy.deepcopy(manifest)
    exp = wrong.partitions["orders-1"]["read_committed"]
    key = sorted(exp["amount_cents_by_key"])[0]
    exp["amount_cents_by_key"][key] += 1
    wrong.partitions["payments-2"]["read_uncommitted"]["records"] += 1
    assert cli._demo_spark(spark, str(root), wrong) == 1
    out, err = capfd.readouterr()
    assert "MISMATCH" in out
    assert "orders-1: read_committed: amount_cents sums to" in err
    assert "payments-2: read_uncommitted: Spark read" in err
    assert f"amount_cents of 1 customers differ from the manifest (first: {key!r}" in err
