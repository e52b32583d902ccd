"""Shared fixtures: every codec test runs on the compiled extension and on the pure-Python twin."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys

import pytest

VECTORS = pathlib.Path(__file__).parent / "vectors"
GOLDEN = VECTORS / "java-golden"
STORAGE = VECTORS / "java-storage"

BACKENDS = ["cython", "python"]
_MODULES = {"cython": "kafkatx._codec", "python": "kafkatx._codec_py"}


def load_backend(name: str):
    """The codec module for ``name``; a missing extension fails the test (never a silent skip)."""
    return importlib.import_module(_MODULES[name])


@pytest.fixture(params=BACKENDS)
def codec(request):
    return load_backend(request.param)


def golden_cases():
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    return [c["name"] for c in manifest["cases"]]


def load_golden(name: str):
    return (GOLDEN / f"{name}.bin").read_bytes(), json.loads((GOLDEN / f"{name}.json").read_text())


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
