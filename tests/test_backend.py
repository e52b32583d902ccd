"""The backend choice, and the constants both backends agree on."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import kafkatx
import pytest

from conftest import load_backend, load_golden

# where the kafkatx under test was imported from (src/ for an editable install, site-packages for a
# wheel): the subprocesses below must import that one, not the source tree (no compiled codec in an
# sdist's tree, or one built for another Python)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(kafkatx.__file__)))


def test_layout_constants_match_the_compiled_enums():
    from kafkatx import _consts

    layout = load_backend("cython").LAYOUT
    assert layout, "the compiled codec exports its layout constants"
    for name, value in layout.items():
        mirror = {"LENGTH_OFFSET": "SIZE_OFFSET"}.get(name, name)
        assert getattr(_consts, mirror) == value, name
    # the chained offsets end at the 61-byte header Kafka documents
    assert layout["RECORD_BATCH_OVERHEAD"] == 61
    assert layout["ATTRIBUTES_OFFSET"] == 21


def test_backend_names():
    assert load_backend("cython").BACKEND == "cython"
    assert load_backend("python").BACKEND == "python"


def test_both_backends_export_the_same_names():
    c, p = load_backend("cython"), load_backend("python")
    assert sorted(c.__all__) == sorted(p.__all__)
    for name in c.__all__:
        assert hasattr(c, name) and hasattr(p, name), name


def test_both_backends_take_the_same_constructor_keywords():
    """Every keyword the twin's constructors name is accepted by the compiled classes (whose __init__ cannot be
    introspected), and both build equal objects from the same keywords."""
    data, _ = load_golden("segment_mixed")
    kwargs = {
        "BatchBuilder": dict(base_offset=5, producer_id=7, producer_epoch=1, base_sequence=0, transactional=True,
                             compression="none", compression_level=None, timestamp_type="create_time",
                             partition_leader_epoch=3, log_append_time=None, delete_horizon_ms=None, zstd_frames=1),
        "BatchIterator": dict(data=data, verify_crc=True, max_decompressed_size=1 << 20),
        "ReadCommittedFilter": dict(aborted_transactions=[(1001, 3)], isolation="read_committed",
                                    last_stable_offset=None, fetch_offset=None, verify_crc=True,
                                    max_decompressed_size=1 << 20, inflate_threads=1),
        "Record": dict(offset=1, timestamp=2, key=b"k", value=b"v", headers=(("h", None),), sequence=3),
        "RecordBatch": dict(data=data, position=0, size=None, max_decompressed_size=1 << 20, verify_crc=True),
    }  # fmt: skip
    c, p = load_backend("cython"), load_backend("python")
    for name, kw in kwargs.items():
        twin_params = set(inspect.signature(getattr(p, name).__init__).parameters) - {"self"}
        assert twin_params == set(kw), (name, twin_params ^ set(kw))
        made = [getattr(m, name)(**kw) for m in (c, p)]
        if name == "BatchBuilder":
            for b in made:
                b.append(b"v", b"k", timestamp=9)
            made = [b.build() for b in made]
        elif name == "ReadCommittedFilter":
            made = [list(f.feed(data)) for f in made]
        elif name == "BatchIterator":
            made = [[b.base_offset for b in it] for it in made]
        elif name == "RecordBatch":
            made = [(b.base_offset, b.last_offset, b.crc, list(b)) for b in made]
        assert made[0] == made[1], name


@pytest.mark.parametrize("method", ["append", "build", "size_in_bytes"])
def test_builder_methods_have_the_twins_signature(method):
    """The compiled builder's per-record methods are plain C methods (for speed); inspect still reads their
    signatures, the twin's."""
    c, p = load_backend("cython"), load_backend("python")

    def shape(sig):  # (a C method's self is positional-only)
        return [(q.name, q.POSITIONAL_OR_KEYWORD if q.kind == q.POSITIONAL_ONLY else q.kind, q.default)
                for q in sig.parameters.values()]  # fmt: skip

    assert shape(inspect.signature(getattr(c.BatchBuilder, method))) == \
        shape(inspect.signature(getattr(p.BatchBuilder, method)))


def _run(code: str, **env):
    full = dict(os.environ, **env)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, full.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)


@pytest.mark.parametrize("value, expected", [("1", "python"), ("0", "cython"), ("", "cython")])
def test_no_extensions_switch(value, expected):
    r = _run("import kafkatx; print(kafkatx.BACKEND, kafkatx.iter_batches.__module__)", KAFKATX_NO_EXTENSIONS=value)
    assert r.returncode == 0, r.stderr
    backend, module = r.stdout.split()
    assert backend == expected
    assert module == ("kafkatx._codec_py" if expected == "python" else "kafkatx._codec")


def test_missing_extension_is_an_import_error_not_a_silent_fallback():
    code = (
        "import sys; sys.modules['kafkatx._codec'] = None\n"
        "try:\n    import kafkatx\nexcept ImportError as e:\n    print('ImportError:', e)\n"
        "else:\n    print('imported', kafkatx.BACKEND)\n"
    )
    r = _run(code, KAFKATX_NO_EXTENSIONS="")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ImportError:"), r.stdout
    assert "KAFKATX_NO_EXTENSIONS=1" in r.stdout
