"""Shared fixtures: every codec test runs on the compiled extension and on the pure-Python twin."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

VECTORS = pathlib.Path(__file__).parent / "vectors"
GOLDEN = VECTORS / "java-golden"
STORAGE = VECTORS / "java-storage"
ORACLE_RUN_SH = pathlib.Path(__file__).parent / "oracle" / "run.sh"

BACKENDS = ["cython", "python"]
_MODULES = {"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}


def load_backend(name: str):
    """The codec module for ``name``; a missing extension fails the test (never a silent skip)."""
    return importlib.import_module(_MODULES[name])


@pytest.fixture(params=BACKENDS)
def codec(request):
    return load_backend(request.param)


def run_threads(work, n: int) -> list:
    """Run ``work(i)`` for i in range(n), each on its own thread, all at once; the exceptions they raised."""
    errors = []

    def run(i):
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def golden_cases():
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    return [c["name"] for c in manifest["cases"]]


def load_golden(name: str):
    return (GOLDEN / f"{name}.bin").read_bytes(), json.loads((GOLDEN / f"{name}.json").read_text())


def local_spark(app_name: str, **conf):
    """A ``local[2]`` Spark session for the Spark tests (UI off, UTC, two shuffle partitions, ``conf`` on top;
    the caller stops it).  Skips without ``java``; the Python workers run this interpreter, so they use the
    backend the suite runs on (``KAFKATX_NO_EXTENSIONS`` is inherited)."""
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH (Spark runs on the JVM)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(app_name).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC"))  # fmt: skip
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def pytest_report_header(config):
    try:
        import kafkatx

        return f"kafkatx backend: {kafkatx.BACKEND} (python {sys.version.split()[0]})"
    except Exception as exc:  # pragma: no cover
        return f"kafkatx import failed: {exc}"


@pytest.fixture(autouse=True)
def _no_unraisable(capfd):
    """Fail any test during which an exception was swallowed in C ("Exception ignored in ...")."""
    yield
    err = capfd.readouterr().err
    if "Exception ignored" in err:
        pytest.fail(f"an exception was ignored during the test:\n{err}")


# ------------------------------------------------------------------------------ Kafka's Java classes
def _oracle_lib() -> pathlib.Path:
    default = pathlib.Path.home() / ".cache" / "kafkatx-oracle" / "lib"
    return pathlib.Path(os.environ.get("KAFKATX_ORACLE_LIB", default))


def _run_sh(*args, check=True):
    env = dict(os.environ)
    env.setdefault("PIP", f"{sys.executable} -m pip")
    env.setdefault("PYTHON", sys.executable)
    proc = subprocess.run(["bash", str(ORACLE_RUN_SH), *map(str, args)], capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        pytest.fail(f"run.sh {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def kafka_oracle():
    """``tests/oracle/run.sh`` ready to run: Kafka's jars fetched into the cache if missing (a fresh machine),
    the oracle compiled once per session.  Skipped only when ``java`` is not on PATH."""
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH")
    if not (_oracle_lib() / "kafka-clients-4.3.0.jar").is_file():
        _run_sh("fetch-jars")
    assert (_oracle_lib() / "kafka-clients-4.3.0.jar").is_file(), "run.sh fetch-jars did not produce the jars"
    _run_sh("compile")
    return _run_sh


@pytest.fixture
def oracle_dump(kafka_oracle):
    """Kafka's ``dump`` of one file that must be wholly valid: its JSON lines, the summary checked."""

    def dump(path: pathlib.Path) -> list:
        proc = kafka_oracle("dump", path, "--b64-limit", "0", check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        summary = lines[-1]
        assert summary["type"] == "summary" and summary["ok"] is True
        assert summary["valid_bytes"] == summary["size"] == path.stat().st_size
        batches = [x for x in lines if x["type"] == "batch"]
        assert batches and all(b["crc_valid"] and b["ensure_valid"] == "ok" for b in batches)
        return lines

    return dump
