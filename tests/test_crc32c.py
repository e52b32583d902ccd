"""CRC-32C (Castagnoli): known vectors, the ``crc32c`` package as an independent oracle, continuation."""

from __future__ import annotations

import array
import mmap
import os
import pathlib
import random
import shutil
import subprocess
import sys
import sysconfig
import threading

import crc32c as crc32c_pkg
import pytest

# RFC 3720 (iSCSI) appendix B.4 test vectors, plus the standard check value.
KNOWN = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"a", 0xC1D04330),
]


@pytest.mark.parametrize("data,want", KNOWN, ids=[f"len{len(d)}-{i}" for i, (d, _) in enumerate(KNOWN)])
def test_known_values(codec, data, want):
    assert crc32c_pkg.crc32c(data) == want  # the oracle agrees with the published vectors
    assert codec.crc32c(data) == want
    assert codec.crc32c(bytearray(data)) == want
    assert codec.crc32c(memoryview(data)) == want


def test_zeros_of_many_lengths(codec):
    for n in (1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4096, 16383, 16384, 16385, 100_000):
        assert codec.crc32c(bytes(n)) == crc32c_pkg.crc32c(bytes(n)), n


def test_random_buffers_against_the_crc32c_package(codec):
    rng = random.Random(20241025)
    lengths = list(range(0, 130)) + [255, 256, 257, 1023, 1024, 1025, 4095, 4097, 16383, 16384, 16385, 70_001]
    for n in lengths:
        data = rng.randbytes(n)
        assert codec.crc32c(data) == crc32c_pkg.crc32c(data), n


def test_unaligned_views(codec):
    """Every start alignment (hardware CRC paths often special-case the first bytes)."""
    rng = random.Random(7)
    big = rng.randbytes(40_000)
    mv = memoryview(big)
    for start in range(17):
        for n in (0, 1, 5, 8, 13, 64, 1000, 20_000):
            assert codec.crc32c(mv[start : start + n]) == crc32c_pkg.crc32c(big[start : start + n]), (start, n)


def test_continuation(codec):
    rng = random.Random(99)
    for _ in range(200):
        a = rng.randbytes(rng.randrange(0, 300))
        b = rng.randbytes(rng.randrange(0, 300))
        assert codec.crc32c(b, codec.crc32c(a)) == codec.crc32c(a + b) == crc32c_pkg.crc32c(a + b)
    data = rng.randbytes(50_000)
    c = 0
    for i in range(0, len(data), 777):
        c = codec.crc32c(data[i : i + 777], c)
    assert c == crc32c_pkg.crc32c(data)
    assert codec.crc32c(b"", 0x12345678) == 0x12345678  # empty input leaves the running CRC unchanged
    assert codec.crc32c(b"456789", codec.crc32c(b"123")) == 0xE3069283


def test_other_buffer_types(codec, tmp_path):
    rng = random.Random(3)
    raw = rng.randbytes(10_000)
    want = crc32c_pkg.crc32c(raw)
    arr = array.array("I")
    arr.frombytes(raw)
    assert codec.crc32c(arr) == want  # multi-byte items: the CRC is over the raw bytes
    path = tmp_path / "blob"
    path.write_bytes(raw)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            assert codec.crc32c(mm) == want
        finally:
            mm.close()  # fails with BufferError if crc32c leaked its buffer export


def test_rejects_str(codec):
    with pytest.raises(TypeError):
        codec.crc32c("123456789")


def test_concurrent_threads_large_buffers(codec):
    """Two threads CRC different multi-MB buffers at the same time (the compiled path drops the GIL)."""
    rng = random.Random(5)
    bufs = [rng.randbytes(3 << 20), bytearray(rng.randbytes((3 << 20) + 13))]
    want = [crc32c_pkg.crc32c(bytes(b)) for b in bufs]
    results = [[], []]
    errors = []
    start = threading.Barrier(2)

    def work(i):
        try:
            start.wait()
            for _ in range(2):
                results[i].append(codec.crc32c(bufs[i]))
        except BaseException as exc:  # noqa: BLE001 - reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [[want[0]] * 2, [want[1]] * 2]


# The folding path (VPCLMULQDQ, taken from 256 bytes on) has a branch per block size: 256-byte steps,
# then 64-byte and 16-byte blocks, then 0-15 bytes.  Every mix of those, at every start alignment.
FOLD_LENGTHS = sorted({b + t for b in (256, 512, 768, 4096) for t in (0, 1, 8, 15, 16, 17, 63, 64, 65, 79, 255)} | {255})


def test_every_block_mix_of_the_folding_path(codec):
    rng = random.Random(2026)
    big = rng.randbytes(6000)
    mv = memoryview(big)
    for start in range(16):
        for n in FOLD_LENGTHS:
            seed = rng.getrandbits(32)
            want = crc32c_pkg.crc32c(big[start : start + n], seed)
            assert codec.crc32c(mv[start : start + n], seed) == want, (start, n)


def _c_compiler():
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(cc.split()[0]) or shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(sys.platform == "win32", reason="the self-test is built with a GCC-style command line")
def test_every_c_implementation_against_the_table(tmp_path):
    """scripts/crc32c_selftest.c checks every implementation this CPU runs (not only the one dispatched
    to) against the table one: known vectors, every length to 4096 at every alignment, the block-size
    boundaries, random lengths to 2 MiB, continuation."""
    cc = _c_compiler()
    if cc is None:
        pytest.skip("no C compiler on this machine (one is needed to build the self-test)")
    source = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "crc32c_selftest.c"
    exe = tmp_path / "crc32c_selftest"
    subprocess.run([cc, "-O2", "-std=c99", "-o", str(exe), str(source)], check=True)
    out = subprocess.run([str(exe), "--quick"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all checks passed" in out.stdout
    assert "table" in out.stdout
