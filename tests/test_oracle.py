"""Apache Kafka's own Java classes read what kafkatx writes.

(a) Always run, from the stored verdicts in ``tests/vectors/oracle-verdicts/`` (made by
    ``tests/oracle/make_verdicts.py``): Kafka accepted every stored ``.bin`` (valid CRCs, ``ensureValid``,
    every record iterated), kafkatx decodes each ``.bin`` to exactly the records Kafka reported, and kafkatx
    today still writes the same bytes (uncompressed cases) or the same records (compressed cases).
(b) ``@pytest.mark.java``: regenerate kafkatx's output for every case with each backend and run the live
    oracle (``tests/oracle/run.sh``) on it: two JVM calls in all (one ``dump`` of every case concatenated,
    one ``build`` of every spec).  Skipped only when ``java`` is not on PATH; missing jars are fetched into
    ``$KAFKATX_ORACLE_LIB`` (default ``~/.cache/kafkatx-oracle/lib``) by conftest's ``kafka_oracle``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ORACLE = HERE / "oracle"
VERDICTS = HERE / "vectors" / "oracle-verdicts"


def _load_cases_module():
    spec = importlib.util.spec_from_file_location("kafkatx_oracle_cases", ORACLE / "kafkatx_cases.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


kc = _load_cases_module()
SPECS = kc.cases()
NAMES = list(SPECS)
UNCOMPRESSED = [n for n in NAMES if kc.is_uncompressed(SPECS[n])]
COMPRESSED = [n for n in NAMES if not kc.is_uncompressed(SPECS[n])]
STORED = sorted(p.name[: -len(".verdict.json")] for p in VERDICTS.glob("*.verdict.json"))
_BACKEND_MODULES = {"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}


def verdict(name: str) -> dict:
    return json.loads((VERDICTS / f"{name}.verdict.json").read_text(encoding="utf-8"))


def stored_bin(name: str) -> bytes:
    return (VERDICTS / f"{name}.bin").read_bytes()


def all_records(v: dict) -> list:
    return [r for b in v["batches"] for r in b["records"]]


def header_fields(batches: list, drop=()) -> list:
    """The batch fields kafkatx reports, taken from oracle batches (minus ``drop``)."""
    return [{k: b[k] for k in kc.KAFKATX_BATCH_FIELDS if k not in drop} for b in batches]




def kafkatx_view(codec, data: bytes, drop=()) -> tuple[list, list]:
    """(batch fields, per-batch records) as kafkatx's ``codec`` reads ``data``."""
    batches = list(codec.iter_batches(data))
    fields = [{k: v for k, v in kc.kafkatx_batch(b).items() if k not in drop} for b in batches]
    return fields, [kc.kafkatx_records(b.records()) for b in batches]


# ============================================================================ (a) stored verdicts
def test_every_case_has_a_current_verdict():
    assert STORED == sorted(NAMES), "run tests/oracle/make_verdicts.py: cases and stored verdicts differ"
    stale = [n for n in NAMES if verdict(n)["spec_sha256"] != kc.spec_sha256(SPECS[n])]
    assert not stale, f"these cases changed since their verdict was made (rerun make_verdicts.py): {stale}"


def test_verdicts_stay_small():
    total = sum(p.stat().st_size for p in VERDICTS.iterdir())
    assert total < 2_000_000, f"oracle verdicts grew to {total} bytes"


@pytest.mark.parametrize("name", STORED)
def test_kafka_accepted_stored_bytes(name):
    v = verdict(name)
    data = stored_bin(name)
    assert hashlib.sha256(data).hexdigest() == v["bin_sha256"] and len(data) == v["bin_size"]
    assert v["exit_code"] == 0, v["errors"]
    assert v["errors"] == []
    s = v["summary"]
    assert s["ok"] is True
    assert s["valid_bytes"] == s["size"] == len(data) and s["trailing_bytes"] == 0
    assert s["batches"] == len(v["batches"]) == len(SPECS[name]["batches"])
    assert s["records"] == len(all_records(v)) == sum(len(b["records"]) for b in SPECS[name]["batches"])
    pos = 0
    for b in v["batches"]:
        assert b["position"] == pos
        pos += b["size_in_bytes"]
        assert b["crc_valid"] is True and b["crc"] == b["crc_computed"]
        assert b["ensure_valid"] == "ok"
        assert b["records_parsed"] == b["count"] == len(b["records"])
        assert b["is_control"] is False
    assert pos == len(data)


@pytest.mark.parametrize("name", UNCOMPRESSED)
def test_stored_uncompressed_bytes_equal_kafka_builder(name):
    """Kafka's MemoryRecordsBuilder wrote the same bytes for the same spec when the verdict was made."""
    v = verdict(name)
    assert v["same_bytes_as_kafka_builder"] is True
    assert v["kafka_builder_sha256"] == v["bin_sha256"]


@pytest.mark.parametrize("name", STORED)
def test_kafkatx_reads_stored_bytes_like_kafka(name, codec):
    v = verdict(name)
    data = stored_bin(name)
    fields, records = kafkatx_view(codec, data)
    assert fields == header_fields(v["batches"])
    assert records == [b["records"] for b in v["batches"]]
    for verify in (True, False):
        out = codec.decode_records(data, verify_crc=verify)
        assert kc.kafkatx_records(out) == all_records(v)
        assert out.next_offset == v["batches"][-1]["last_offset"] + 1
        assert out.valid_bytes == len(data) and out.trailing_bytes == 0


@pytest.mark.parametrize("name", UNCOMPRESSED)
def test_kafkatx_still_writes_stored_bytes(name, codec):
    assert kc.build_case(codec, SPECS[name]) == stored_bin(name)


@pytest.mark.parametrize("name", COMPRESSED)
def test_kafkatx_still_writes_stored_records(name, codec):
    v = verdict(name)
    out = kc.build_case(codec, SPECS[name])
    drop = ("position", "size_in_bytes", "crc")  # compressed sizes may change with the codec libraries
    fields, records = kafkatx_view(codec, out, drop)
    assert fields == header_fields(v["batches"], drop)
    assert records == [b["records"] for b in v["batches"]]
    assert all(b.is_valid for b in codec.iter_batches(out, verify_crc=False))


# ============================================================================ (b) the live oracle
@pytest.fixture(scope="module")
def live(kafka_oracle, tmp_path_factory):
    """Every case written now by each backend, read by Kafka in one JVM call; Kafka's builder in another."""
    d = tmp_path_factory.mktemp("oracle-live")
    outputs, failures = {}, {}
    for backend, module in _BACKEND_MODULES.items():
        try:
            codec = importlib.import_module(module)
            outputs[backend] = {n: kc.build_case(codec, SPECS[n]) for n in NAMES}
        except Exception as exc:  # reported by every test of this backend
            failures[backend] = exc
    ranges, chunks, pos = [], [], 0
    for backend, cases in outputs.items():
        for name, data in cases.items():
            (d / f"{backend}-{name}.bin").write_bytes(data)
            ranges.append((f"{backend}/{name}", pos, pos + len(data)))
            chunks.append(data)
            pos += len(data)
    dumped = {}
    if chunks:
        everything = d / "all-cases.bin"
        everything.write_bytes(b"".join(chunks))
        proc = kafka_oracle("dump", everything, "--b64-limit", "0", check=False)
        assert proc.returncode in (0, 2), f"oracle dump failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        split, orphans, summary = kc.parse_dump(proc.stdout, ranges)
        dumped = {"exit": proc.returncode, "split": split, "orphans": orphans, "summary": summary, "size": pos}
    # Kafka's MemoryRecordsBuilder on the uncompressed specs, all in one spec file
    combined = {"batches": [b for n in UNCOMPRESSED for b in SPECS[n]["batches"]]}
    (d / "uncompressed.json").write_text(json.dumps(combined, ensure_ascii=True))
    kafka_oracle("build", d / "uncompressed.json", d / "uncompressed.bin", d / "uncompressed.sidecar.json")
    java_bytes = (d / "uncompressed.bin").read_bytes()
    java_batches = json.loads((d / "uncompressed.sidecar.json").read_text())["batches"]
    built, i = {}, 0
    for n in UNCOMPRESSED:
        k = len(SPECS[n]["batches"])
        first, last = java_batches[i], java_batches[i + k - 1]
        built[n] = java_bytes[first["position"] : last["position"] + last["size_in_bytes"]]
        i += k
    return {"outputs": outputs, "failures": failures, "dump": dumped, "kafka_built": built}


def _output(live, backend, name) -> bytes:
    if backend in live["failures"]:
        raise live["failures"][backend]
    return live["outputs"][backend][name]


@pytest.mark.java
def test_live_oracle_read_everything(live):
    """The whole concatenation (every case of every working backend) is valid to Kafka, with no tail left."""
    dump = live["dump"]
    assert dump, f"no backend produced output: {live['failures']}"
    assert dump["orphans"] == []
    assert dump["exit"] == 0
    s = dump["summary"]
    assert s["ok"] is True and s["valid_bytes"] == dump["size"] and s["trailing_bytes"] == 0


@pytest.mark.java
@pytest.mark.parametrize("backend", list(_BACKEND_MODULES))
@pytest.mark.parametrize("name", NAMES)
def test_live_kafka_reads_kafkatx_output(live, backend, name):
    data = _output(live, backend, name)
    batches, errors = live["dump"]["split"][f"{backend}/{name}"]
    assert errors == []
    assert len(batches) == len(SPECS[name]["batches"])
    pos = 0
    for b in batches:
        assert b["position"] == pos
        pos += b["size_in_bytes"]
        assert b["crc_valid"] is True and b["crc"] == b["crc_computed"]
        assert b["ensure_valid"] == "ok"
        assert b["records_parsed"] == b["count"] == len(b["records"])
    assert pos == len(data)
    codec = importlib.import_module(_BACKEND_MODULES[backend])
    fields, records = kafkatx_view(codec, data)
    assert fields == header_fields(batches)
    assert records == [b["records"] for b in batches]
    # and the records are the ones in the stored verdict
    assert [r for rs in records for r in rs] == all_records(verdict(name))


@pytest.mark.java
@pytest.mark.parametrize("backend", list(_BACKEND_MODULES))
@pytest.mark.parametrize("name", UNCOMPRESSED)
def test_live_uncompressed_bytes_equal_kafka_builder(live, backend, name):
    assert _output(live, backend, name) == live["kafka_built"][name]
