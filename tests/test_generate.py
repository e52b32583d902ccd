"""kafkatx.log.generate: the generated log directory reads back exactly as its manifest says, under both
isolation levels, with and without .txnindex files; generation is deterministic."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
from collections import defaultdict

import pytest

from kafkatx import iter_batches
from kafkatx.log import open_partition
from kafkatx.log.generate import (
    CHECKSUM_DEFINITION,
    Manifest,
    default_segment_bytes,
    generate,
    kafka_partition_for_key,
    main_generate,
    murmur2,
    record_checksum,
)
from kafkatx.log.writer import PartitionWriter, RecordTooLargeError
from kafkatx.producer_state import ProducerSnapshotEntry, read_snapshot, write_snapshot
from kafkatx.txncoord import TransactionCoordinator
from kafkatx.txnlog import TransactionState


def tree_digest(root) -> str:
    h = hashlib.sha256()
    for dirpath, _dirs, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = pathlib.Path(dirpath, f)
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def check_against_manifest(root, manifest, aborted_source="auto"):
    """Read every partition with the reader; compare counts, checksums, offsets and per-key sums."""
    for name, exp in manifest.partitions.items():
        with open_partition(os.path.join(root, name)) as p:
            assert p.log_end_offset == exp["log_end_offset"], name
            assert p.last_stable_offset == exp["last_stable_offset"], name
            assert len(p.segments) == exp["segments"]
            committed = list(p.read(isolation="read_committed", aborted_source=aborted_source))
            uncommitted = list(p.read(isolation="read_uncommitted"))
        rc, ru = exp["read_committed"], exp["read_uncommitted"]
        assert record_checksum(committed) == (rc["records"], rc["sha256"]), name
        assert record_checksum(uncommitted) == (ru["records"], ru["sha256"]), name
        sums = defaultdict(int)
        for r in committed:
            order = json.loads(r.value)
            assert order["customer"] == r.key.decode() and order["ts"] == r.timestamp
            sums[r.key.decode()] += order["amount_cents"]
        assert dict(sums) == rc["amount_cents_by_key"], name


CASES = [  # (seed, records, extra arguments)
    (0, 6_000, dict(zombie_ratio=0.3, retry_ratio=0.2, segment_bytes=1 << 20, batch_records=(5, 60))),
    (
        1,
        20_000,
        dict(
            topics=("orders", "payments"),
            partitions=2,
            producers=3,
            abort_ratio=0.3,
            zombie_ratio=0.2,
            open_transactions=2,
            retry_ratio=0.05,
            segment_bytes=1 << 20,
            validate=True,
        ),
    ),
    (
        7,
        3_000,
        dict(
            partitions=1,
            compression="zstd",
            transaction_version=0,
            idempotent_producers=2,
            plain_producers=0,
            zombie_ratio=0.5,
            retry_ratio=0.2,
            batch_records=(1, 40),
        ),
    ),
]


@pytest.fixture(scope="module", params=CASES, ids=[f"seed{c[0]}-{c[1]}" for c in CASES])
def generated(request, tmp_path_factory):
    seed, records, kw = request.param
    root = tmp_path_factory.mktemp(f"gen{seed}")
    manifest = generate(root, records=records, seed=seed, workers=0, **kw)
    return root, manifest, kw


def test_manifest_describes_the_workload(generated):
    root, m, kw = generated
    assert Manifest.load(root) == m and Manifest.load(root / "manifest.json").to_dict() == m.to_dict()
    assert m.checksum == CHECKSUM_DEFINITION
    assert m.records == sum(p["read_uncommitted"]["records"] for p in m.partitions.values()) == m.params["records"]
    assert m.duplicates_rejected > 0 and m.zombie_writes_rejected > 0
    assert m.zombie_writes_rejected == m.transactions["fenced"]
    assert m.transactions["committed"] > 0 and m.transactions["aborted"] + m.transactions["fenced"] > 0
    assert m.transactions["open"] == kw.get("open_transactions", 1)
    lsos = [(p["last_stable_offset"], p["log_end_offset"]) for p in m.partitions.values()]
    assert any(lso < leo for lso, leo in lsos)  # the open transactions hold the LSO back
    committed = sum(p["read_committed"]["records"] for p in m.partitions.values())
    assert 0 < committed < m.records
    for name in m.partitions:
        assert (root / name).is_dir()
    for name in m.transaction_state_partitions:
        assert (root / name).is_dir()


def test_reads_match_the_manifest(generated):
    root, m, _ = generated
    check_against_manifest(root, m)


@pytest.mark.parametrize("seed", [3, 11])
def test_lso_from_producer_snapshots(tmp_path, seed):
    """With small segments the writer leaves a producer snapshot at every roll; the LSO is then restored
    from the newest one plus the segments after it (as a broker does) and must equal both the manifest and
    a full replay; a damaged newest snapshot falls back without changing the answer, and a doctored one
    shows the snapshot really is what decides."""
    root = tmp_path / "g"
    m = generate(root, records=6_000, seed=seed, workers=0, segment_bytes=64 << 10, open_transactions=2,
                 abort_ratio=0.3, batch_records=(5, 60), partitions=2)  # fmt: skip
    used = used_for_aborted = 0
    for name, exp in m.partitions.items():
        path = os.path.join(root, name)
        with open_partition(path) as p:
            lso = p.last_stable_offset
            used += bool(p._snapshot_replays)
            assert lso == exp["last_stable_offset"], name
            hw, first_base = p.high_watermark, p.segments[0].base_offset
        with open_partition(path) as p:
            p._replayed()  # the full replay, then the LSO from it
            assert p.last_stable_offset == lso, name
        snaps = sorted(f for f in os.listdir(path) if f.endswith(".snapshot") and int(f[:20]) <= hw)
        if not snaps:
            continue
        newest = pathlib.Path(path, snaps[-1])
        good = newest.read_bytes()
        newest.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # CRC no longer matches
        with open_partition(path) as p:
            assert p.last_stable_offset == lso, name
        offset = int(snaps[-1][:20])
        fake = ProducerSnapshotEntry(987654321, 0, 0, offset - 1, 0, 0, 0, max(offset - 1, first_base))
        write_snapshot(newest, read_snapshot(good) + [fake], fsync=False)
        with open_partition(path) as p:
            assert p.last_stable_offset == min(lso, max(offset - 1, first_base)), name
            assert p._snapshot_replays
        newest.write_bytes(good)
        # without .txnindex files, "auto" rebuilds the aborted transactions of a read from the snapshot at
        # or below its first segment: the same entries as a replay of the whole log
        for f in os.listdir(path):
            if f.endswith(".txnindex"):
                os.remove(os.path.join(path, f))
        with open_partition(path) as p:
            bases = [seg.base_offset for seg in p.segments]
        for start in sorted({0, *bases[len(bases) // 2 :], lso - 1, lso}):
            with open_partition(path) as p:
                got = p.aborted_transactions(start, lso)
                partial = bool(p._snapshot_replays)
            with open_partition(path) as p:
                want = p.aborted_transactions(start, lso, source="scan")
            assert got == want, (name, start)
            used_for_aborted += partial
    assert used, "no partition had a usable snapshot"
    assert used_for_aborted, "no read rebuilt its aborted transactions from a snapshot"


@pytest.mark.parametrize("seed", [5])
def test_offsets_of_one_large_segment_come_from_its_index(tmp_path, seed):
    """Kafka's default segments are 1 GiB: the log end offset is found from the batch of the last
    ``.index`` entry on, and the LSO from the shutdown snapshot (taken at the log end, inside the segment)
    replays from the indexed batch at or before it; neither reads the segment's headers from its start.
    Same answers as a full replay; a last index entry that does not point at a batch (a stale or damaged
    index) falls back to scanning the whole segment, with the same answers."""
    root = tmp_path / "g"
    m = generate(root, records=8_000, seed=seed, workers=0, segment_bytes=1 << 30, open_transactions=2,
                 abort_ratio=0.3, batch_records=(5, 60), partitions=2)  # fmt: skip
    checked = 0
    for name, exp in m.partitions.items():
        path = os.path.join(root, name)
        with open_partition(path) as p:
            if len(p.segments) != 1 or not any(f.endswith(".snapshot") for f in os.listdir(path)):
                continue
            seg = p.segments[0]
            assert seg.offset_index.entry_count > 10, name
            leo, lso = p.log_end_offset, p.last_stable_offset
            assert (leo, lso) == (exp["log_end_offset"], exp["last_stable_offset"]), name
            assert p._snapshot_replays, name
            assert seg._headers is None and seg._scan is None, f"{name}: the whole segment was scanned"
        with open_partition(path) as p:
            p._replayed()  # the full replay decides the LSO instead
            assert (p.log_end_offset, p.last_stable_offset) == (leo, lso), name
        # point the last index entry 1 byte past its batch start: no batch there, so the whole segment is read
        idx = pathlib.Path(path, "00000000000000000000.index")
        good = idx.read_bytes()
        n = len(good) // 8
        rel, pos = struct.unpack_from(">ii", good, (n - 1) * 8)
        idx.write_bytes(good[: (n - 1) * 8] + struct.pack(">ii", rel, pos + 1))
        with open_partition(path) as p:
            assert (p.log_end_offset, p.last_stable_offset) == (leo, lso), name
            assert p.segments[0]._headers is not None, name
        idx.write_bytes(good)
        checked += 1
    assert checked, "no partition had one segment and a snapshot"


def test_reads_match_without_txnindex_files(generated, tmp_path):
    root, m, _ = generated
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    removed = 0
    for dirpath, _dirs, files in os.walk(copy):
        for f in files:
            if f.endswith(".txnindex"):
                os.remove(os.path.join(dirpath, f))
                removed += 1
    assert removed > 0
    check_against_manifest(copy, m, aborted_source="scan")


def test_the_logs_are_well_formed(generated):
    """Every batch valid; the writers' .txnindex files agree with a scan; the directory reopens without
    repairs; the coordinator reloads its transactions (the open ones still Ongoing)."""
    root, m, kw = generated
    codecs = set()
    for name in m.partitions:
        with open_partition(root / name) as p:
            assert p.truncated_tails == []
            assert p.aborted_transactions_by_segment("txnindex") == p.aborted_transactions_by_segment("scan")
            for seg in p.segments:
                for b in iter_batches(seg.mmap):
                    assert b.is_valid
                    codecs.add(b.compression)
    want = (
        {"none", "gzip", "snappy", "lz4", "zstd"}
        if kw.get("compression", "mixed") == "mixed"
        else {kw["compression"], "none"}
    )  # fmt: skip  (markers are never compressed)
    assert codecs == want
    with PartitionWriter(root / next(iter(m.partitions))) as w:
        assert w.recovery.truncated_bytes == 0 and w.recovery.repaired_txn_indexes == ()
    with TransactionCoordinator(root) as coord:
        states = {tid: coord.describe(tid).state for tid in coord.transactional_ids()}
    assert sorted(states) == m.transactional_ids
    assert sum(s is TransactionState.Ongoing for s in states.values()) == m.transactions["open"]


@pytest.mark.java
def test_java_oracle_reads_generated_logs(generated, tmp_path, oracle_dump):
    """Kafka's record classes accept every batch of every generated partition (one JVM call)."""
    root, m, _ = generated
    chunks = []
    for name in list(m.partitions) + m.transaction_state_partitions + [m.consumer_offsets["partition"]]:
        d = root / name
        chunks += [(d / f).read_bytes() for f in sorted(os.listdir(d)) if f.endswith(".log")]
    everything = tmp_path / "all.log"
    everything.write_bytes(b"".join(chunks))
    summary = oracle_dump(everything)[-1]
    assert summary["records"] == sum(1 for _ in iter_records(everything.read_bytes()))


def iter_records(data):
    for b in iter_batches(data):
        yield from b.records()


def test_deterministic_and_independent_of_workers(tmp_path):
    kw = dict(records=4_000, seed=11, zombie_ratio=0.2, retry_ratio=0.1, batch_records=(10, 80))
    a = generate(tmp_path / "a", workers=0, **kw)
    b = generate(tmp_path / "b", workers=2, **kw)
    assert a == b
    assert tree_digest(tmp_path / "a") == tree_digest(tmp_path / "b")
    c = generate(tmp_path / "c", workers=0, **{**kw, "seed": 12})
    assert c.partitions != a.partitions
    with pytest.raises(FileExistsError):
        generate(tmp_path / "a", **kw)
    again = generate(tmp_path / "a", workers=0, overwrite=True, **kw)
    assert again == a
    # how the writers write (held and written 2 MiB or 4 KiB at a time, or once an append) changes no byte
    for n, held in enumerate((0, 4096)):
        assert generate(tmp_path / f"w{n}", workers=0, write_buffer_bytes=held, **kw) == a
        assert tree_digest(tmp_path / f"w{n}") == tree_digest(tmp_path / "a")


def test_target_bytes(tmp_path):
    m = generate(tmp_path / "g", target_bytes=1_500_000, seed=3, workers=0)
    assert 1_000_000 < m.bytes < 2_000_000
    assert m.params["records"] == m.records
    check_against_manifest(tmp_path / "g", m)


def test_default_segment_size_follows_the_partitions_log(tmp_path):
    mib = 1 << 20
    # about 16 segments a partition, in whole MiB, from Kafka's smallest log.segment.bytes to its default
    assert default_segment_bytes(100_000, 120.0, 3) == mib
    assert default_segment_bytes(16 * 3 * mib, 1.0, 3) == mib
    assert default_segment_bytes(16 * 3 * mib + 3, 1.0, 3) == 2 * mib
    assert default_segment_bytes(10_000_000, 105.0, 3) == 21 * mib  # ~1 GB over three partitions
    assert default_segment_bytes(10**12, 100.0, 1) == 1 << 30
    assert default_segment_bytes(0, 100.0, 3) == mib
    m = generate(tmp_path / "g", records=5000, partitions=2, seed=1, workers=0)
    assert m.params["segment_bytes"] == mib  # the size used, in the manifest
    m = generate(tmp_path / "h", records=5000, partitions=2, seed=1, workers=0, segment_bytes=256 << 10)
    assert m.params["segment_bytes"] == 256 << 10


@pytest.mark.parametrize("kwargs", [
    dict(topics=("bad topic",)), dict(topics=("a", "a")), dict(partitions=0), dict(open_transactions=9),
    dict(abort_ratio=1.5), dict(records=-1), dict(compression="brotli"), dict(batch_records=(5, 1)),
    dict(producers=0, idempotent_producers=0, plain_producers=0), dict(records=None),
    dict(write_buffer_bytes=-1), dict(write_buffer_bytes=1.5),
])  # fmt: skip
def test_bad_arguments(tmp_path, kwargs):
    with pytest.raises(ValueError):
        generate(tmp_path / "x", workers=0, **kwargs)


def test_batches_larger_than_a_segment_write_nothing(tmp_path):
    out = tmp_path / "small"
    with pytest.raises(ValueError, match=r"batches of up to 400 records do not fit in segment_bytes=65536"):
        generate(out, records=3000, segment_bytes=64 << 10, compression="none", workers=0)
    assert not out.exists()  # the directory the call made is gone with what it wrote
    out.mkdir()
    with pytest.raises(ValueError, match=r"do not fit"):
        generate(out, records=3000, segment_bytes=64 << 10, compression="none", workers=0)
    assert out.is_dir() and not any(out.iterdir())  # one given empty stays, empty
    generate(out, records=3000, segment_bytes=64 << 10, batch_records=(5, 60), compression="none", workers=0)
    # batches over Kafka's message.max.bytes (1 MiB): the same, with that limit named
    big = tmp_path / "big"
    with pytest.raises(RecordTooLargeError, match=r"do not fit in the writers' max.message.bytes; lower batch_records"):
        generate(big, records=12_000, batch_records=(6000, 6000), compression="none", workers=0)
    assert not big.exists()


def test_cli(tmp_path, capfd):
    out = tmp_path / "cli"
    assert main_generate([str(out), "--records", "2k", "--seed", "5", "--partitions", "2", "--workers", "0"]) == 0
    m = Manifest.load(out)
    assert m.records == 2000 and m.seed == 5 and len(m.partitions) == 2
    assert "wrote 2000 records" in capfd.readouterr().out
    assert main_generate([str(out), "--records", "10"]) == 1  # not empty
    assert main_generate([str(out), "--abort-ratio", "2"]) == 2
    held = tmp_path / "cli-held"  # how the writers write: the same files
    args = ["--records", "2k", "--seed", "5", "--partitions", "2", "--workers", "0", "--quiet"]
    assert main_generate([str(held), "--write-buffer-bytes", "4KiB", *args]) == 0
    assert tree_digest(held) == tree_digest(out)
    assert main_generate([str(tmp_path / "t"), "--bytes", "300KB", "--quiet", "--workers", "0"]) == 0
    assert 150_000 < Manifest.load(tmp_path / "t").bytes < 450_000


def test_murmur2_matches_kafka():
    # Kafka's UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829, b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}  # fmt: skip
    for data, expected in cases.items():
        assert murmur2(data) == expected
    assert kafka_partition_for_key(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


def test_transactions_commit_their_input_offsets(generated):
    """Every transactional producer commits, with each transaction, the input offset its records account for
    (one input record per record): the offsets the group coordinator loads are, for each producer, the records
    of its committed transactions a read_committed reader sees, counted here from the data partitions."""
    from kafkatx.grouplog import group_partition_for, load_offsets

    root, m, _ = generated
    o = m.consumer_offsets
    assert o["group"] == "etl" and o["partition"] == f"__consumer_offsets-{group_partition_for('etl')}"
    with TransactionCoordinator(root) as coord:
        pids = {coord.describe(tid).producer_id: int(tid.rsplit("-", 1)[1]) for tid in m.transactional_ids}
    counted: dict = {}
    for name in m.partitions:
        with open_partition(root / name) as p:
            t = p.read_table(isolation="read_committed")
        for pid, transactional in zip(t.column("producer_id").to_pylist(), t.column("is_transactional").to_pylist()):
            if transactional and pid in pids:
                counted[f"input-{pids[pid]}"] = counted.get(f"input-{pids[pid]}", 0) + 1
    assert counted and o["offsets"] == counted
    state = load_offsets(root)
    assert {f"{t}-{p}": c.offset for (g, t, p), c in state.offsets.items() if g == "etl"} == counted
    assert state.pending == {}


def test_verify_checks_the_committed_offsets(tmp_path):
    from kafkatx.log.verify import verify_directory

    m = generate(tmp_path / "a", records=2_000, seed=5, workers=0, batch_records=(5, 40))
    assert verify_directory(tmp_path / "a").ok
    wrong = json.loads(json.dumps(m.to_dict()))
    key = sorted(wrong["consumer_offsets"]["offsets"])[0]
    wrong["consumer_offsets"]["offsets"][key] += 1
    (tmp_path / "a" / "manifest.json").write_text(json.dumps(wrong))
    report = verify_directory(tmp_path / "a")
    assert not report.ok and report.offsets.problems
    assert report.problems == [f"{m.consumer_offsets['partition']} (group etl): committed offsets differ from the "
                               f"manifest for 1 partitions (first {key}: {m.consumer_offsets['offsets'][key]}, "
                               f"manifest {m.consumer_offsets['offsets'][key] + 1})"]  # fmt: skip
    none = generate(tmp_path / "b", records=2_000, seed=5, workers=0, batch_records=(5, 40), consumer_group=None)
    assert none.consumer_offsets == {} and not list((tmp_path / "b").glob("__consumer_offsets-*"))
    assert none.partitions == m.partitions  # the offsets change no byte of the data partitions
    assert verify_directory(tmp_path / "b").offsets is None
