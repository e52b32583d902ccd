"""The ``kafkatx`` command line, run in-process through ``cli.main(argv)`` (plus one subprocess smoke test).

The expected ``dump`` output is built here from the golden sidecars that Kafka's own Java classes wrote
(``tests/vectors/java-golden/*.json``), field by field, in the line format of kafka-dump-log.sh
(kafka-format.md section 12) -- never from kafkatx's own output.
"""

from __future__ import annotations

import base64
import importlib.util
import itertools
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys

import pytest
from conftest import GOLDEN, STORAGE

import kafkatx
from kafkatx import cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = pathlib.Path(kafkatx.__file__).resolve().parent / "data" / "sample" / "00000000000000000000.log"
MAKE_SAMPLE = ROOT / "scripts" / "make_sample_log.py"

TS_LABEL = {"CREATE_TIME": "CreateTime", "LOG_APPEND_TIME": "LogAppendTime", "NO_TIMESTAMP_TYPE": "NoTimestampType"}


# ------------------------------------------------------------------------------- expected output
def sidecar(name: str) -> dict:
    return json.loads((GOLDEN / f"{name}.json").read_text())


def jbool(flag: bool) -> str:
    return "true" if flag else "false"


def blob_text(blob) -> str:
    """A sidecar key/value ({len, b64, ...}) as Kafka's StringDecoder prints it."""
    raw = base64.b64decode(blob["b64"])
    assert len(raw) == blob["len"], "sidecar holds a shortened value; pick another case"
    return raw.decode("utf-8", "replace")


def expected_batch_line(b: dict) -> str:
    horizon = "OptionalLong.empty" if b["delete_horizon_ms"] is None else f"OptionalLong[{b['delete_horizon_ms']}]"
    if b["magic"] >= 2:
        head = (
            f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
            f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} producerId: {b['producer_id']} "
            f"producerEpoch: {b['producer_epoch']} partitionLeaderEpoch: {b['partition_leader_epoch']} "
            f"isTransactional: {jbool(b['is_transactional'])} isControl: {jbool(b['is_control'])} "
            f"deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {b['last_offset']}"
    return (
        f"{head} position: {b['position']} {TS_LABEL[b['timestamp_type']]}: {b['max_timestamp']} "
        f"size: {b['size_in_bytes']} magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} "
        f"isvalid: {jbool(b['crc_valid'])}"
    )


def expected_record_line(b: dict, r: dict, print_data: bool) -> str:
    key, value = r["key"], r["value"]
    line = (
        f"| offset: {r['offset']} {TS_LABEL[b['timestamp_type']]}: {r['timestamp']} "
        f"keySize: {key['len'] if key is not None else -1} valueSize: {value['len'] if value is not None else -1}"
    )
    line += f" sequence: {r['sequence']} headerKeys: [{','.join(h['key'] for h in r['headers'])}]"
    if "control" in r:
        line += f" endTxnMarker: {r['control']['type']} coordinatorEpoch: {r['control']['coordinator_epoch']}"
    elif print_data:
        if key is not None:
            line += f" key: {blob_text(key)}"
        if value is not None:
            line += f" payload: {blob_text(value)}"
    return line


def expected_dump(display: str, side: dict, *, deep: bool, print_data: bool, start_offset=None) -> list[str]:
    lines = [f"Dumping {display}"]
    if start_offset is not None:
        lines.append(f"Log starting offset: {start_offset}")
    valid = 0
    for b in side["batches"]:
        lines.append(expected_batch_line(b))
        if deep:
            lines.extend(expected_record_line(b, r, print_data) for r in b["records"])
        valid += b["size_in_bytes"]
    trailing = side["size"] - valid
    if trailing:
        lines.append(f"Found {trailing} invalid bytes at the end of {side['file']}")
    return lines


def run(capfd, *argv):
    code = cli.main(list(argv))
    out, err = capfd.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------- dump
@pytest.mark.parametrize(
    "flags, deep, print_data",
    [
        pytest.param([], False, False, id="batches"),
        pytest.param(["--deep-iteration"], True, False, id="deep"),
        pytest.param(["--print-data-log"], True, True, id="print-data-log"),
    ],
)
def test_dump_segment_mixed_matches_kafka_sidecar(capfd, flags, deep, print_data):
    path = str(GOLDEN / "segment_mixed.bin")
    code, out, err = run(capfd, "dump", *flags, path)
    assert code == 0, err
    assert err == ""
    assert out.splitlines() == expected_dump(path, sidecar("segment_mixed"), deep=deep, print_data=print_data)


def test_dump_marker_lines(capfd):
    # The two spellings of a marker line, spelled out once by hand from section 12 and the sidecar.
    code, out, _ = run(capfd, "dump", "--deep-iteration", str(GOLDEN / "segment_mixed.bin"))
    assert code == 0
    assert (
        "| offset: 12 CreateTime: 1700000000022 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5"
    ) in out.splitlines()
    assert (
        "| offset: 15 CreateTime: 1700000000025 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 6"
    ) in out.splitlines()


def test_dump_log_starting_offset_from_file_name(capfd, tmp_path):
    seg = tmp_path / "00000000000000000042.log"
    shutil.copyfile(GOLDEN / "segment_mixed.bin", seg)
    code, out, _ = run(capfd, "dump", str(seg))
    assert code == 0
    assert out.splitlines() == expected_dump(str(seg), sidecar("segment_mixed"), deep=False, print_data=False,
                                             start_offset=42)  # fmt: skip


def test_dump_trailing_bytes(capfd):
    path = str(GOLDEN / "truncated_tail_segment.bin")
    side = sidecar("truncated_tail_segment")
    code, out, _ = run(capfd, "dump", path)
    assert code == 0
    lines = out.splitlines()
    assert lines == expected_dump(path, side, deep=False, print_data=False)
    assert lines[-1] == f"Found {side['size'] - sum(b['size_in_bytes'] for b in side['batches'])} invalid bytes " \
                        "at the end of truncated_tail_segment.bin"  # fmt: skip


def test_dump_max_bytes_hides_the_trailing_bytes_line(capfd):
    side = sidecar("segment_mixed")
    cut = side["batches"][2]["position"] + 10  # inside the third batch
    code, out, _ = run(capfd, "dump", "--max-bytes", str(cut), str(GOLDEN / "segment_mixed.bin"))
    assert code == 0
    lines = out.splitlines()
    assert lines[1:] == [expected_batch_line(b) for b in side["batches"][:2]]
    assert not any(line.startswith("Found ") for line in lines)


@pytest.mark.parametrize("name", ["plain_none", "plain_zstd", "delete_horizon_gzip", "idempotent_seq_wrap_none",
                                  "log_append_time_lz4", "compacted_gaps_zstd"])  # fmt: skip
def test_dump_other_golden_cases(capfd, name):
    side = sidecar(name)
    path = str(GOLDEN / side["file"])
    code, out, err = run(capfd, "dump", "--print-data-log", path)
    assert code == 0
    # payloads may hold line breaks of their own, printed raw as Kafka does: compare the whole text
    assert out == "\n".join(expected_dump(path, side, deep=True, print_data=True)) + "\n"
    if name.startswith("compacted_gaps"):
        offsets = [r["offset"] for b in side["batches"] for r in b["records"]]
        gaps = [f"  {a} is followed by {b}" for a, b in itertools.pairwise(offsets) if b != a + 1]
        assert err.splitlines() == [f"Non-consecutive offsets in {path}", *gaps]


def test_dump_legacy_batch_lines(capfd):
    side = sidecar("legacy_v1_gzip")
    path = str(GOLDEN / side["file"])
    code, out, _ = run(capfd, "dump", path)
    assert code == 0
    assert out.splitlines() == expected_dump(path, side, deep=False, print_data=False)
    assert out.splitlines()[1].startswith(f"offset: {side['batches'][0]['last_offset']} position: 0 CreateTime: ")


def test_dump_json(capfd):
    side = sidecar("segment_mixed")
    code, out, _ = run(capfd, "dump", "--json", "--print-data-log", str(GOLDEN / "segment_mixed.bin"))
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    assert objs[0]["type"] == "file"
    batches = [o for o in objs if o["type"] == "batch"]
    records = [o for o in objs if o["type"] == "record"]
    assert len(batches) == len(side["batches"])
    for got, b in zip(batches, side["batches"], strict=True):
        for field in ("position", "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence",
                      "last_sequence", "crc", "magic", "compression", "max_timestamp"):  # fmt: skip
            assert got[field] == b[field], field
        assert got["count"] == b["count"]
        assert got["size"] == b["size_in_bytes"]
        assert got["is_valid"] is b["crc_valid"]
    want = [r for b in side["batches"] for r in b["records"]]
    assert [r["offset"] for r in records] == [r["offset"] for r in want]
    for got, r in zip(records, want, strict=True):
        if "control" in r:
            assert got["control_type"] == r["control"]["type"]
            assert got["coordinator_epoch"] == r["control"]["coordinator_epoch"]
            assert "payload" not in got
        else:
            assert got["payload"] == blob_text(r["value"])
            assert got["key"] == (None if r["key"] is None else blob_text(r["key"]))


def test_dump_corrupt_crc(capfd):
    side = sidecar("corrupt_crc_none")
    path = str(GOLDEN / "corrupt_crc_none.bin")
    code, out, err = run(capfd, "dump", path)
    assert code == 1
    assert out.splitlines()[1] == expected_batch_line(side["batches"][0])
    assert out.splitlines()[1].endswith("isvalid: false")
    assert "CRC" in err and "at byte 0" in err
    code, out, err = run(capfd, "dump", "--no-verify-crc", path)
    assert code == 0
    assert err == ""
    assert out.splitlines()[1].endswith("isvalid: false")


def test_dump_structural_corruption_names_the_position(capfd):
    code, _, err = run(capfd, "dump", str(GOLDEN / "corrupt_magic_none.bin"))
    assert code == 1
    assert "invalid magic" in err and "at byte 16" in err


def test_dump_txnindex(capfd):
    path = STORAGE / "00000000000000000000.txn_basic.txnindex"
    side = json.loads((STORAGE / "00000000000000000000.txn_basic.txnindex.json").read_text())
    code, out, err = run(capfd, "dump", str(path))
    assert code == 0, err
    want = [f"Dumping {path}"] + [
        f"version: {e['version']} producerId: {e['producer_id']} firstOffset: {e['first_offset']} "
        f"lastOffset: {e['last_offset']} lastStableOffset: {e['last_stable_offset']}"
        for e in side["entries"]
    ]
    assert out.splitlines() == want


def test_dump_txnindex_bad_version(capfd):
    path = STORAGE / "00000000000000000000.txn_bad_version.txnindex"
    code, _, err = run(capfd, "dump", str(path))
    assert code == 1
    assert "Unexpected aborted transaction version 1" in err
    assert "at byte 34" in err


def test_dump_snapshot(capfd):
    path = STORAGE / "00000000000000000018.snapshot_basic.snapshot"
    code, out, err = run(capfd, "dump", str(path))
    side = json.loads((STORAGE / "00000000000000000018.snapshot_basic.snapshot.json").read_text())
    assert code == 0, err
    want = [f"Dumping {path}"]
    for e in side["entries"]:
        first = e["current_txn_first_offset"]
        line = (
            f"producerId: {e['producer_id']} producerEpoch: {e['producer_epoch']} "
            f"coordinatorEpoch: {e['coordinator_epoch']} "
            f"currentTxnFirstOffset: {'OptionalLong.empty' if first < 0 else f'OptionalLong[{first}]'} "
            f"lastTimestamp: {e['timestamp']} "
        )
        if e["last_offset"] >= 0:
            line += (
                f"firstSequence: {e['first_sequence']} lastSequence: {e['last_sequence']} "
                f"lastOffset: {e['last_offset']} offsetDelta: {e['offset_delta']} timestamp: {e['timestamp']}"
            )
        want.append(line)
    assert out.splitlines() == want


def test_dump_corrupt_snapshot(capfd):
    code, _, err = run(capfd, "dump", str(STORAGE / "00000000000000000018.snapshot_bad_crc.snapshot"))
    assert code == 1
    assert "CRC" in err and "at byte" in err




def test_dump_usage_errors(capfd, tmp_path):
    assert run(capfd, "dump")[0] == 2
    assert run(capfd, "dump", "--max-bytes", "-1", str(GOLDEN / "segment_mixed.bin"))[0] == 2
    code, _, err = run(capfd, "dump", str(tmp_path / "missing.log"))
    assert code == 1 and "missing.log" in err
    code, _, err = run(capfd, "dump", str(tmp_path))
    assert code == 1 and "directory" in err


# ---------------------------------------------------------------------------------------- summary
def summary_lines(out: str) -> dict:
    """``label -> rest of line`` for the indented summary lines."""
    got = {}
    for line in out.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            label, _, rest = line.strip().partition("  ")
            got[label] = rest.strip()
    return got


def visible_counts(side: dict):
    """(read_uncommitted, read_committed) record counts, computed from the sidecar alone.

    A transaction of a producer is aborted when the first marker that follows its data is ABORT.
    """
    batches = side["batches"]
    data = [b for b in batches if not b["is_control"]]
    uncommitted = sum(len(b["records"]) for b in data)
    committed = 0
    for i, b in enumerate(batches):
        if b["is_control"]:
            continue
        if not b["is_transactional"]:
            committed += len(b["records"])
            continue
        marker = next(m for m in batches[i + 1 :] if m["is_control"] and m["producer_id"] == b["producer_id"])
        if marker["records"][0]["control"]["type"] == "COMMIT":
            committed += len(b["records"])
    return uncommitted, committed


def test_summary_segment_mixed(capfd):
    side = sidecar("segment_mixed")
    code, out, err = run(capfd, "summary", str(GOLDEN / "segment_mixed.bin"))
    assert code == 0, err
    got = summary_lines(out)
    uncommitted, committed = visible_counts(side)
    n_control = sum(b["is_control"] for b in side["batches"])
    assert got["batches"] == f"{len(side['batches'])} ({len(side['batches']) - n_control} data, {n_control} control)"
    assert got["read_uncommitted"] == f"{uncommitted} records"
    last = side["batches"][-1]["last_offset"]
    hidden = uncommitted - committed
    assert got["read_committed"] == f"{committed} records ({hidden} hidden), next fetch offset {last + 1}"
    assert got["offsets"] == f"{side['batches'][0]['base_offset']} .. {last}"
    assert got["bytes"].startswith(f"{side['size']} (valid {side['size']}, trailing 0)")
    aborts = sum(1 for b in side["batches"] if b["is_control"] and b["records"][0]["control"]["type"] == "ABORT")
    commits = n_control - aborts
    assert got["control markers"] == f"{n_control} ({aborts} ABORT, {commits} COMMIT)"
    assert got["transactions"] == f"{commits} committed, {aborts} aborted; none open"
    codecs = {}
    for b in side["batches"]:
        codecs[b["compression"]] = codecs.get(b["compression"], 0) + 1
    for name, n in codecs.items():
        assert f"{name} {n}" in got["codecs"]
    assert "(1 idempotent, 3 transactional)" in got["producers"]


def test_summary_lists_a_producers_epochs_as_runs(capfd, tmp_path):
    """A producer bumped a few times shows its epochs as runs; one fenced over and over (hundreds of
    epochs) is summed up in one short line instead of listing them all."""
    epochs = {7: [0], 8: [0, 1, 2, 5], 9: list(range(0, 600, 3)) + [601]}
    parts, offset = [], 0
    for pid, es in epochs.items():
        for e in es:
            b = kafkatx.BatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=e, base_sequence=0)
            b.append(b"v", timestamp=1_700_000_000_000)
            parts.append(b.build())
            offset += 1
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(parts))
    code, out, err = run(capfd, "summary", str(path))
    assert code == 0, err
    lines = {int(line.split()[1]): line for line in out.splitlines() if line.startswith("    pid ")}
    assert "idempotent, epoch 0: 1 batch," in lines[7]
    assert "idempotent, epochs 0-2,5: 4 batches," in lines[8]
    assert "idempotent, 201 epochs from 0 to 601 (200 gaps): 201 batches," in lines[9]
    assert max(len(line) for line in lines.values()) < 120


def test_summary_directory_equals_the_whole_segment(capfd, tmp_path):
    side = sidecar("segment_mixed")
    data = (GOLDEN / "segment_mixed.bin").read_bytes()
    cut = side["batches"][5]  # the second segment starts with pid 1002's batch after pid 1001's ABORT
    (tmp_path / "00000000000000000000.log").write_bytes(data[: cut["position"]])
    (tmp_path / f"{cut['base_offset']:020d}.log").write_bytes(data[cut["position"] :])
    (tmp_path / "00000000000000000000.index").write_bytes(b"")  # not a segment: ignored
    code, out, err = run(capfd, "summary", str(tmp_path))
    assert code == 0, err
    got = summary_lines(out)
    uncommitted, committed = visible_counts(side)
    assert got["segments"].startswith("2 (")
    assert got["read_uncommitted"] == f"{uncommitted} records"
    assert got["read_committed"].startswith(f"{committed} records")


def test_summary_of_a_generated_partition_equals_its_manifest(capfd, tmp_path):
    """Several segments, transactions aborted in one segment and the same producers writing on in the next:
    the counts are those of one read_committed reader over the whole partition (a filter per segment
    would apply an abort that already ended to the producer's later committed data)."""
    from kafkatx.log import generate

    manifest = generate(tmp_path / "logs", records=6000, segment_bytes=64 << 10, batch_records=(5, 60), seed=3,
                        workers=0, topics=("orders",), partitions=2, compression="none")  # fmt: skip
    for name in ("orders-0", "orders-1"):
        want = manifest.partitions[name]
        part = tmp_path / "logs" / name
        assert len(list(part.glob("*.log"))) >= 3  # the case is about several segments
        code, out, err = run(capfd, "summary", str(part))
        assert code == 0, err
        got = summary_lines(out)
        assert got["read_uncommitted"] == f"{want['read_uncommitted']['records']} records"
        assert got["read_committed"].startswith(f"{want['read_committed']['records']} records ")


def test_summary_open_transaction_stops_read_committed_at_the_lso(capfd, tmp_path):
    parts = []
    b = kafkatx.BatchBuilder(base_offset=0)
    for i in range(3):
        b.append(b"plain-%d" % i, timestamp=1000 + i)
    parts.append(b.build())
    b = kafkatx.BatchBuilder(base_offset=3, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    for i in range(2):
        b.append(b"open-%d" % i, timestamp=2000 + i)
    parts.append(b.build())
    b = kafkatx.BatchBuilder(base_offset=5)
    b.append(b"after", timestamp=3000)
    parts.append(b.build())
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b"".join(parts))
    code, out, err = run(capfd, "summary", str(seg))
    assert code == 0, err
    got = summary_lines(out)
    assert got["transactions"] == "0 committed, 0 aborted; 1 open, last stable offset 3"
    assert got["read_uncommitted"] == "6 records"
    assert got["read_committed"].startswith("3 records (3 hidden)")


def test_summary_of_a_directory_after_retention_uses_the_snapshot_at_its_start(capfd, tmp_path):
    """Retention deleted the segment where producer 5's open transaction began: the summary of the
    directory takes it from the producer snapshot at the log start, as the broker and kafkatx.log do (LSO
    max(0, log start) = 2, not the first offset of the data left, 4), and hides records 2.. from read_committed."""
    from kafkatx.log import PartitionWriter, open_partition

    def batch(base, n, pid=-1, seq=-1):
        b = kafkatx.BatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                 base_sequence=seq, transactional=pid >= 0)  # fmt: skip
        for i in range(n):
            b.append(b"v", timestamp=1000 + base + i)
        return b.build()

    part = tmp_path / "t-0"
    with PartitionWriter(part, checkpoint_recovery_point=False) as w:
        w.append(batch(0, 2, 5, 0), origin="replication")
        w.roll()
        w.append(batch(2, 2), origin="replication")
        w.append(batch(4, 1, 5, 2), origin="replication")
        w.append(batch(5, 2), origin="replication")
    for f in part.iterdir():
        if f.name.startswith("0" * 20):
            f.unlink()
    code, out, err = run(capfd, "summary", str(part))
    assert code == 0, err
    got = summary_lines(out)
    assert got["transactions"] == "0 committed, 0 aborted; 1 open, last stable offset 2"
    assert got["read_committed"].startswith("0 records (5 hidden)")
    with open_partition(part, checkpoints=False) as p:
        assert p.last_stable_offset == 2


def test_summary_corrupt_input_names_the_position(capfd, tmp_path):
    side = sidecar("segment_mixed")
    data = bytearray((GOLDEN / "segment_mixed.bin").read_bytes())
    bad = side["batches"][3]
    data[bad["position"] + 70] ^= 0x01  # a bit inside the fourth batch's CRC-covered bytes
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(data))
    code, _, err = run(capfd, "summary", str(seg))
    assert code == 1
    assert "corrupt input" in err
    assert f"at byte {bad['position']}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("name", ["corrupt_crc_zstd", "corrupt_count_none", "corrupt_magic_none"])
def test_summary_corrupt_golden_cases(capfd, name):
    code, _, err = run(capfd, "summary", str(GOLDEN / f"{name}.bin"))
    assert code == 1
    assert "at byte " in err


def test_summary_missing_and_empty(capfd, tmp_path):
    code, _, err = run(capfd, "summary", str(tmp_path / "nope.log"))
    assert code == 1 and "nope.log" in err
    code, _, err = run(capfd, "summary", str(tmp_path))
    assert code == 1 and "no .log segments" in err


def test_summary_of_a_directory_ignores_a_log_file_not_named_by_offset(capfd, tmp_path):
    """A stray ``-stray.log`` (sorting before the segments) is not a segment: it is reported and left out,
    and the log start offset is the first segment's."""
    side = sidecar("segment_mixed")
    data = (GOLDEN / "segment_mixed.bin").read_bytes()
    (tmp_path / "00000000000000000000.log").write_bytes(data)
    (tmp_path / "-stray.log").write_bytes(data)  # (a copy: read as a segment, it would double the counts)
    code, out, err = run(capfd, "summary", str(tmp_path))
    assert code == 0, err
    stray = tmp_path / "-stray.log"
    assert err == f"kafkatx: warning: {stray}: not a segment file name (<20-digit base offset>.log), ignored\n"
    got = summary_lines(out)
    uncommitted, committed = visible_counts(side)
    assert got["segments"] == "1 (00000000000000000000.log), log start offset 0"
    assert got["read_uncommitted"] == f"{uncommitted} records"
    assert got["read_committed"].startswith(f"{committed} records")
    (tmp_path / "00000000000000000000.log").unlink()
    code, out, err = run(capfd, "summary", str(tmp_path))
    assert code == 1 and out == ""
    assert err == f"kafkatx: error: {tmp_path}: no .log segments in this directory (-stray.log: not a segment file " \
                  "name)\n"


def test_summary_chunked_feed_equals_one_call(capfd, monkeypatch):
    code, whole, _ = run(capfd, "summary", str(SAMPLE))
    assert code == 0
    monkeypatch.setattr(cli, "SUMMARY_CHUNK_BYTES", 4096)
    code, chunked, _ = run(capfd, "summary", str(SAMPLE))
    assert code == 0
    assert chunked == whole


# ------------------------------------------------------------------------------ sample log + demo
def sample_batches():
    return list(kafkatx.iter_batches(SAMPLE.read_bytes()))


def test_sample_log_is_a_realistic_mix():
    assert SAMPLE.is_file(), "run scripts/make_sample_log.py"
    assert SAMPLE.stat().st_size < 400_000
    batches = sample_batches()
    assert {b.compression for b in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
    idempotent = {b.producer_id for b in batches if b.producer_id >= 0 and not b.is_transactional}
    transactional = {b.producer_id for b in batches if b.is_transactional}
    assert len(idempotent) >= 1 and len(transactional) >= 2
    markers = [b for b in batches if b.is_control]
    assert all(m.size_in_bytes == 78 and m.is_transactional for m in markers)
    for pid in transactional:
        kinds = {m.first_control_type() for m in markers if m.producer_id == pid}
        assert kinds == {0, 1}, (pid, kinds)  # both ABORT and COMMIT
    records = [r for b in batches if not b.is_control for r in b.records()]
    assert any(r.headers for r in records)
    assert any(b'"order_id"' in (r.value or b"") and b'"amount"' in (r.value or b"") for r in records)
    offsets = [r.offset for b in batches for r in b.records()]
    assert offsets == list(range(len(offsets)))


def test_sample_log_matches_its_generator():
    if not MAKE_SAMPLE.is_file():
        pytest.skip("scripts/make_sample_log.py is not part of this tree")
    spec = importlib.util.spec_from_file_location("make_sample_log", MAKE_SAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = list(kafkatx.iter_batches(mod.generate()))
    committed = sample_batches()

    def shape(b):
        return (b.base_offset, b.last_offset, b.records_count, b.producer_id, b.producer_epoch, b.base_sequence,
                b.is_transactional, b.is_control, b.compression, b.partition_leader_epoch, b.max_timestamp)  # fmt: skip

    assert [shape(b) for b in fresh] == [shape(b) for b in committed]
    for a, b in zip(fresh, committed, strict=True):
        assert a.records() == b.records()


def test_demo(capfd):
    code, out, err = run(capfd, "demo")
    assert code == 0, err
    assert kafkatx.__version__ in out and kafkatx.BACKEND in out
    assert str(SAMPLE) in out or SAMPLE.name in out
    got = summary_lines(out)
    assert int(got["read_committed"].split()[0]) < int(got["read_uncommitted"].split()[0])
    assert out.count("  offset ") == 5


def test_demo_spark_says_what_it_needs(capfd, monkeypatch, tmp_path):
    """Without Java (or PySpark) the Spark step is a usage error saying what is missing, before any work."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no java here
    monkeypatch.delenv("JAVA_HOME", raising=False)
    code, out, err = run(capfd, "demo", "--spark", "--records", "0")
    assert code == 2
    assert "error: demo --spark needs " in err and ("Java 17" in err or "PySpark 4" in err)
    assert "Generated an exactly-once workload" not in out


def test_version(capfd):
    code, out, _ = run(capfd, "version")
    assert code == 0
    assert out.startswith(f"kafkatx {kafkatx.__version__} ")
    assert f"backend: {kafkatx.BACKEND}" in out
    if kafkatx.BACKEND == "cython":
        from kafkatx import _codec

        assert f"CRC-32C: {_codec.CRC32C_IMPL}" in out
        v = _codec.ZSTD_SYSTEM_VERSION
        assert ("zstd reads: system libzstd 1." if v else "zstd reads: python-zstandard") in out
        v, bundled = _codec._zstd_compressor()
        pieces = "one frame from parts or zstd_frames=2" if _codec._zstd_joins() else "zstd_frames=2"
        assert ("zstd writes: python-zstandard;" if not v else
                f"zstd writes: python-zstandard (on two cores, {pieces}: python-zstandard's libzstd 1." if bundled
                else f"zstd writes: python-zstandard (on two cores, {pieces}: system libzstd 1.") in out
        v = _codec.LZ4_SYSTEM_VERSION
        assert ("lz4: system liblz4 1." if v else "lz4: cramjam") in out


def test_help_and_missing_command(capfd):
    assert run(capfd, "--help")[0] == 0
    assert run(capfd)[0] == 2


def test_generate_through_the_cli(capfd, tmp_path):
    code, out, _ = run(capfd, "generate", "--help")
    assert code == 0 and out.startswith("usage: kafkatx generate") and "--segment-bytes" in out
    # options before the path, as argparse allows anywhere else
    code, _, err = run(capfd, "generate", "--records", "300", "--workers", "0", "--quiet", str(tmp_path / "g"))
    assert code == 0, err
    assert (tmp_path / "g" / "manifest.json").is_file()
    code, _, err = run(capfd, "generate")
    assert code == 2 and "path" in err
    # small segments need small batches: the advice of the error can be followed from the command line, and a
    # directory the failed run created is not left behind
    small = tmp_path / "small"
    code, _, err = run(capfd, "generate", "--records", "500", "--workers", "0", "--quiet", "--segment-bytes", "8192",
                       str(small))  # fmt: skip
    assert code == 1 and "--batch-records" in err and not small.exists()
    code, _, err = run(capfd, "generate", "--records", "500", "--workers", "0", "--quiet", "--segment-bytes", "8192",
                       "--batch-records", "5", "20", str(small))  # fmt: skip
    assert code == 0, err
    assert len(list((small / "orders-0").glob("*.log"))) > 2
    code, out, err = run(capfd, "verify", str(small))
    assert code == 0, err
    # hanging wants the broker's log directory: a partition directory or an empty one is a usage error, not
    # an empty report
    code, out, err = run(capfd, "hanging", str(small / "orders-0"))
    assert code == 2 and "looks like a partition directory, give its parent" in err and out == ""
    (tmp_path / "empty").mkdir()
    code, out, err = run(capfd, "hanging", str(tmp_path / "empty"))
    assert code == 2 and "no <topic>-<partition> directories" in err


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"{not json", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (b"\xff\xfe", "not UTF-8 text: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
        (b"[]", "not a kafkatx-generate/1 manifest (a JSON list, not an object)"),
        (b'{"format": "kafkatx-generate/2"}', "not a kafkatx-generate/1 manifest (format 'kafkatx-generate/2')"),
        (b'{"format": "kafkatx-generate/1"}', "'seed' is missing"),
        (b'{"format": "kafkatx-generate/1", "seed": "1"}', "'seed' is str '1', not int"),
        ("partitions", "partition 'orders-0': 'log_end_offset' is missing"),
        ("read_committed", "partition 'orders-0': read_committed: 'amount_cents_by_key' is list [], not dict"),
        ("name:../orders-0", "partition '../orders-0' is not a <topic>-<partition> directory name"),
        ("name:/tmp/orders-0", "partition '/tmp/orders-0' is not a <topic>-<partition> directory name"),
        ("name:..-0", "partition '..-0' is not a <topic>-<partition> directory name"),
        ("name:orders", "partition 'orders' is not a <topic>-<partition> directory name"),
        ("offsets:../__consumer_offsets-1", "consumer_offsets: partition '../__consumer_offsets-1' is not a "
                                            "__consumer_offsets-<partition> directory name"),
        ("offsets:orders-0", "consumer_offsets: partition 'orders-0' is not a __consumer_offsets-<partition> "
                             "directory name"),
    ],
)
def test_verify_reports_a_damaged_manifest(capfd, tmp_path, content, reason):
    """A manifest.json that is not a generator's: one ManifestError naming the file and what is wrong, which
    the CLI prints on one line (exit 1)."""
    from kafkatx.log.generate import Manifest, ManifestError, generate

    manifest = tmp_path / "manifest.json"
    if isinstance(content, str):  # a generated manifest with one part of it damaged
        d = generate(tmp_path, topics=("orders",), partitions=1, records=20, seed=1, workers=0).to_dict()
        if content == "partitions":
            d["partitions"]["orders-0"] = {}
        elif content.startswith("name:"):  # a partition's name that is not one directory of the root
            d["partitions"][content[5:]] = d["partitions"].pop("orders-0")
        elif content.startswith("offsets:"):  # the consumer group's partition, likewise
            d["consumer_offsets"]["partition"] = content[8:]
        else:
            d["partitions"]["orders-0"]["read_committed"]["amount_cents_by_key"] = []
        content = json.dumps(d).encode()
    manifest.write_bytes(content)
    with pytest.raises(ManifestError) as info:
        Manifest.load(tmp_path)
    assert isinstance(info.value, kafkatx.KafkaTxError)
    assert (info.value.reason, info.value.file) == (reason, str(manifest))
    code, out, err = run(capfd, "verify", str(tmp_path))
    assert code == 1 and out == ""
    assert err == f"kafkatx: error: {reason} (in {manifest})\n"


@pytest.mark.parametrize(
    "key, value, reason",
    [
        (None, b'{"amount_cents": 1}', "null key"),
        (b"customer-0001", None, "null value"),
        (b"\xff", b'{"amount_cents": 1}', "key is not UTF-8 ('utf-8' codec can't decode byte 0xff in position 0: "
                                          "invalid start byte)"),
        (b"customer-0001", b"hello", "value is not JSON (Expecting value: line 1 column 1 (char 0))"),
        (b"customer-0001", b"{}", "value has no integer amount_cents (b'{}')"),
        (b"k", b'{"amount_cents": "1"}', """value has no integer amount_cents (b'{"amount_cents": "1"}')"""),
    ],
)
def test_verify_reports_a_record_the_generator_did_not_write(capfd, tmp_path, key, value, reason):
    """Committed records that are not the generator's are a problem of their partition (the first described,
    the others counted); the check goes on and the other partitions are still compared."""
    from kafkatx.log import PartitionWriter, generate

    m = generate(tmp_path, topics=("orders",), partitions=2, records=100, open_transactions=0, seed=1, workers=0)
    leo = m.partitions["orders-0"]["log_end_offset"]
    with PartitionWriter(tmp_path / "orders-0") as w:
        for _ in range(3):
            b = kafkatx.BatchBuilder()
            b.append(value, key, timestamp=1_700_000_000_000)
            w.append(b.build())
    code, out, err = run(capfd, "verify", str(tmp_path))
    assert code == 1
    rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:]}
    offsets = m.consumer_offsets["partition"]  # the generator's consumer group, checked too
    assert rows == {"orders-0": "MISMATCH", "orders-1": "ok", offsets: "ok"}
    problems = [line for line in err.splitlines() if "orders-0: record at" in line]
    assert problems == [f"kafkatx:   mismatch: orders-0: record at offset {leo} is not a generated record: {reason} "
                        "(and 2 more)"]  # fmt: skip
    assert "Traceback" not in err and "orders-1" not in err


def test_python_dash_m_kafkatx_version():
    env = dict(os.environ)
    src = str(ROOT / "src")
    if (ROOT / "src" / "kafkatx").is_dir() and pathlib.Path(kafkatx.__file__).resolve().is_relative_to(ROOT / "src"):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "kafkatx", "version"], capture_output=True, text=True, env=env,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"kafkatx {kafkatx.__version__} ")
    assert f"backend: {kafkatx.BACKEND}" in proc.stdout


# ------------------------------------------------------------------------------------------ dump .index / .timeindex
def _indexed_partition(tmp_path):
    """A segment written by PartitionWriter with an index entry every batch or two."""
    from kafkatx.log import PartitionWriter

    part = tmp_path / "t-0"
    with PartitionWriter(part, index_interval_bytes=100, checkpoint_recovery_point=False) as w:
        for i in range(12):
            b = kafkatx.BatchBuilder()
            for j in range(3):
                b.append(b"v" * 40, timestamp=1_000 + 10 * i + (j * 7) % 3)
            w.append(b.build())
    return part / f"{0:020d}.index", part / f"{0:020d}.timeindex", part / f"{0:020d}.log"


def test_dump_index_and_timeindex_like_kafka(capfd, tmp_path):
    """The lines of kafka-dump-log.sh, with entries read from the raw slots and each one checked here
    against the .log independently: an .index entry points at the batch that ends at its offset, a
    .timeindex entry names a batch's last offset and its largest timestamp."""
    index, timeindex, log = _indexed_partition(tmp_path)
    batches = {b.position: b for b in kafkatx.iter_batches(log.read_bytes())}
    by_last = {b.last_offset: b for b in batches.values()}
    raw = index.read_bytes()
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    entries = [e for k, e in enumerate(entries) if k == 0 or e != (0, 0)]
    assert len(entries) >= 5 and all(batches[pos].last_offset == rel for rel, pos in entries)
    code, out, err = run(capfd, "dump", str(index))
    assert code == 0, err
    assert out.splitlines() == [f"Dumping {index}"] + [f"offset: {rel} position: {pos}" for rel, pos in entries]
    raw = timeindex.read_bytes()
    tentries = [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw) - len(raw) % 12, 12)]
    tentries = [e for k, e in enumerate(tentries) if k == 0 or e[1] != 0]
    assert len(tentries) >= 3
    assert all(max(r.timestamp for r in by_last[off]) == ts for ts, off in tentries)
    code, out, err = run(capfd, "dump", str(timeindex))
    assert code == 0, err
    assert out.splitlines() == [f"Dumping {timeindex}"] + [f"timestamp: {ts} offset: {off}" for ts, off in tentries]
    code, out, err = run(capfd, "dump", "--verify-index-only", str(index), str(timeindex))
    assert (code, out.splitlines(), err) == (0, [f"Dumping {index}", f"Dumping {timeindex}"], "")
    code, out, err = run(capfd, "dump", "--index-sanity-check", str(index), str(timeindex))
    assert code == 0 and f"{index} passed sanity check." in out and f"{timeindex} passed sanity check." in out
    code, out, err = run(capfd, "dump", "--json", str(index))
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[1:] == [{"type": "index_entry", "offset": rel, "position": pos} for rel, pos in entries]


def test_dump_index_reports_entries_the_log_does_not_back(capfd, tmp_path):
    """An entry pointing at the wrong batch, a timestamp no batch has, an offset no batch ends at, and an
    index that fails the broker's sanity check: reported as Kafka's tool does, with exit code 1."""
    index, timeindex, log = _indexed_partition(tmp_path)
    raw = bytearray(index.read_bytes())
    rel1, pos1 = struct.unpack_from(">ii", raw, 8)
    struct.pack_into(">ii", raw, 8, rel1 + 1, pos1)  # the second entry names an offset its batch does not end at
    index.write_bytes(bytes(raw))
    code, out, err = run(capfd, "dump", str(index))
    assert code == 1 and f"offset: {rel1 + 1} position: {pos1}" in out
    assert f"Mismatches in :{index.resolve()}" in err and f"  Index offset: {rel1 + 1}, log offset: {rel1}" in err
    struct.pack_into(">ii", raw, 8, 0, 0)  # a zero slot after the first: the end, as a preallocated tail
    struct.pack_into(">ii", raw, 16, rel1 + 5, pos1)
    index.write_bytes(bytes(raw))
    code, out, err = run(capfd, "dump", str(index))
    assert code == 0 and len(out.splitlines()) == 2, err
    struct.pack_into(">ii", raw, 8, -5, 10)  # offsets going backwards: the broker would rebuild it
    index.write_bytes(bytes(raw))
    code, out, err = run(capfd, "dump", "--index-sanity-check", str(index))
    assert code == 1 and "is corrupt" in err and "at byte 8" in err, err
    raw = bytearray(timeindex.read_bytes())
    ts0, off0 = struct.unpack_from(">qi", raw, 0)
    ts1, off1 = struct.unpack_from(">qi", raw, 12)
    struct.pack_into(">qi", raw, 0, ts0 + 1, off0)  # a timestamp no record has
    struct.pack_into(">qi", raw, 12, ts1, off1 - 1)  # an offset no batch ends at
    timeindex.write_bytes(bytes(raw))
    code, out, err = run(capfd, "dump", "--verify-index-only", str(timeindex))
    assert code == 1 and out.splitlines() == [f"Dumping {timeindex}"]
    assert f"Found timestamp mismatch in :{timeindex.resolve()}" in err
    assert f"  Index timestamp: {ts0 + 1}, log timestamp: {ts0}" in err
    assert f"Indexed offset: {off1 - 1}, found log offset: {off1}" in err
    empty = tmp_path / f"{7:020d}.index"
    empty.write_bytes(b"")
    code, out, err = run(capfd, "dump", str(empty))
    assert code == 0 and out.splitlines() == [f"Dumping {empty}", f"{empty} is empty."]
    odd = tmp_path / "backup.index"
    odd.write_bytes(bytes(8))
    code, out, err = run(capfd, "dump", str(odd))
    assert code == 2 and "not a segment file name" in err
    log.unlink()
    code, out, err = run(capfd, "dump", str(timeindex))
    assert code == 0 and "no 00000000000000000000.log beside it" in err


def test_dump_skip_record_metadata_prefixes_like_kafka(capfd, tmp_path):
    """DumpLogSegments with --skip-record-metadata --print-data-log: "| key: k payload: v", and with a null
    key " payload: v" (its payload is always printed after a plain space)."""
    b = kafkatx.BatchBuilder()
    b.append(b"v1", b"k1", timestamp=1)
    b.append(b"v2", None, timestamp=2)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b.build())
    code, out, err = run(capfd, "dump", "--print-data-log", "--skip-record-metadata", str(seg))
    assert code == 0, err
    assert out.splitlines()[-2:] == ["| key: k1 payload: v1", " payload: v2"]


# --------------------------------------------------------------------- --transaction-log-decoder
def _txn_state_segment(tmp_path):
    """A __transaction_state segment with one record a batch: values of both versions, a tombstone, a key of
    another record type, a truncated value and a record without a key."""
    from kafkatx.txnlog import TransactionState as S
    from kafkatx.txnlog import TxnMetadataValue, encode_txn_records

    t0 = 1_700_000_000_000
    parts = [
        encode_txn_records([("app", TxnMetadataValue(7, 0, 60000, S.Empty, None, t0))], version=0, timestamp=t0),
        encode_txn_records([("app", TxnMetadataValue(7, 1, 60000, S.Ongoing, {"t": [0, 1], "u": [2]}, t0 + 1, t0,
                                                     previous_producer_id=6, client_transaction_version=2))],
                           version=1),
        encode_txn_records([("app", TxnMetadataValue(7, 1, 60000, S.CompleteCommit, {}, t0 + 2, t0))], version=1),
        encode_txn_records([('a"\x1fé', None)]),
    ]
    for key, value in ((b"\x00\x05\x00\x01x", b"\x00\x00"), (b"\x00\x00\x00\x03app", b"\x00\x01\x00\x00"),
                       (None, b"\x00\x00")):  # fmt: skip
        b = kafkatx.BatchBuilder()
        b.append(value, key, timestamp=t0 + 9)
        parts.append(b.build())
    data = bytearray()
    for offset, part in enumerate(parts):
        data += struct.pack(">q", offset) + part[8:]  # one record a batch (the CRC does not cover the offset)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(data))
    return seg, t0


def test_dump_transaction_log_decoder_lines(capfd, tmp_path):
    """Keys and values in the JSON of Kafka's generated TransactionLogKey/TransactionLogValue converters, spelled
    out by hand from TransactionLogValue.json (field order as declared, tagged fields only at version 1 and only
    when not their default), with the messages DumpLogSegments' CoordinatorRecordMessageParser prints."""
    seg, t0 = _txn_state_segment(tmp_path)
    code, out, err = run(capfd, "dump", "--transaction-log-decoder", "--skip-record-metadata", str(seg))
    key = '{"type":"0","data":{"transactionalId":"app"}}'
    assert out.splitlines()[3::2] == [
        f'| key: {key} payload: {{"version":"0","data":{{"producerId":7,"producerEpoch":0,'
        f'"transactionTimeoutMs":60000,"transactionStatus":0,"transactionPartitions":null,'
        f'"transactionLastUpdateTimestampMs":{t0},"transactionStartTimestampMs":-1}}}}',
        f'| key: {key} payload: {{"version":"1","data":{{"producerId":7,"previousProducerId":6,"producerEpoch":1,'
        f'"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":[{{"topic":"t","partitionIds":'
        f'[0,1]}},{{"topic":"u","partitionIds":[2]}}],"transactionLastUpdateTimestampMs":{t0 + 1},'
        f'"transactionStartTimestampMs":{t0},"clientTransactionVersion":2}}}}',
        f'| key: {key} payload: {{"version":"1","data":{{"producerId":7,"producerEpoch":1,'
        f'"transactionTimeoutMs":60000,"transactionStatus":4,"transactionPartitions":[],'
        f'"transactionLastUpdateTimestampMs":{t0 + 2},"transactionStartTimestampMs":{t0}}}}}',
        '| key: {"type":"0","data":{"transactionalId":"a\\"\\u001Fé"}} payload: <DELETE>',
        "| key: Unknown record type 5 at offset 4, skipping.",
        "| key: Error at offset 5, skipping. __transaction_state value: truncated: value header needs 15 bytes, "
        "2 left (at byte 2)",
        "| key: Error at offset 6, skipping. the record has no key (a __transaction_state record always has one)",
    ]
    # the parts Kafka's tool would not stop at are all shown; the undecodable ones make the exit code 1
    assert code == 1
    assert "2 record(s) are not __transaction_state records, the first at offset 5" in err


def test_dump_transaction_log_decoder_record_metadata_and_json(capfd, tmp_path):
    seg, t0 = _txn_state_segment(tmp_path)
    code, out, _ = run(capfd, "dump", "--transaction-log-decoder", str(seg))
    assert code == 1
    line = out.splitlines()[3]
    assert line.startswith(f"| offset: 0 CreateTime: {t0} keySize: 7 valueSize: 37 sequence: -1 headerKeys: [] "
                           'key: {"type":"0","data":{"transactionalId":"app"}} payload: {"version":"0",')  # fmt: skip
    code, out, _ = run(capfd, "dump", "--transaction-log-decoder", "--json", str(seg))
    assert code == 1
    records = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]
    assert [r["offset"] for r in records] == list(range(7))
    assert records[0]["key"] == {"type": "0", "data": {"transactionalId": "app"}}
    assert records[1]["payload"]["data"]["transactionPartitions"] == [{"topic": "t", "partitionIds": [0, 1]},
                                                                     {"topic": "u", "partitionIds": [2]}]  # fmt: skip
    assert records[3]["payload"] == "<DELETE>"
    assert [("key" in r, r.get("skipped", "")[:26]) for r in records[4:]] == [
        (False, "Unknown record type 5 at o"), (False, "Error at offset 5, skippin"), (False, "Error at offset 6, skippin")]


def test_dump_transaction_log_decoder_over_a_coordinators_state_log(capfd, tmp_path):
    """Every record a TransactionCoordinator wrote, shown as JSON, carries the value the codec decodes."""
    from kafkatx.txncoord import TransactionCoordinator
    from kafkatx.txnlog import TransactionState, TxnMetadataValue, decode_txn_records

    with TransactionCoordinator(tmp_path) as coord:
        for i, commit in enumerate((True, False, True)):
            pid, epoch = coord.init_producer_id(f"app-{i}")
            coord.add_partitions(f"app-{i}", pid, epoch, [("orders", i), ("payments", 0)])
            coord.end_transaction(f"app-{i}", pid, epoch, commit=commit)
        segs = sorted(tmp_path.glob("__transaction_state-*/*.log"))
    assert segs
    names = {"producerId": "producer_id", "previousProducerId": "previous_producer_id", "nextProducerId":
             "next_producer_id", "producerEpoch": "producer_epoch", "transactionTimeoutMs": "transaction_timeout_ms",
             "transactionLastUpdateTimestampMs": "last_update_timestamp_ms", "transactionStartTimestampMs":
             "start_timestamp_ms", "clientTransactionVersion": "client_transaction_version"}  # fmt: skip
    seen = 0
    for seg in segs:
        code, out, err = run(capfd, "dump", "--transaction-log-decoder", "--json", str(seg))
        assert code == 0 and err == ""
        records = [o for o in map(json.loads, out.splitlines()) if o["type"] == "record"]
        want = decode_txn_records(seg.read_bytes())
        assert len(records) == len(want) > 0
        for got, w in zip(records, want, strict=True):
            assert got["key"]["data"]["transactionalId"] == w.transactional_id
            data = dict(got["payload"]["data"])
            parts = data.pop("transactionPartitions")
            status = data.pop("transactionStatus")
            value = TxnMetadataValue(**{names[k]: v for k, v in data.items()}, state=TransactionState(status),
                                     partitions=None if parts is None else {p["topic"]: p["partitionIds"]
                                                                            for p in parts})  # fmt: skip
            assert value == w.value
            seen += 1
    assert seen == 12  # Empty, Ongoing, PrepareCommit/Abort, CompleteCommit/Abort for each of the three
