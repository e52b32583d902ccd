"""The compiled decoders inflate the payloads producers write -- zstd data frames, an lz4 frame of independent
blocks without block checksums or content size -- in C, with the system's libzstd and liblz4 where they can
be loaded (``_codec._inflate_fast``, ``_c/syslib.h``).  Every other payload, and any payload a library
rejects, goes through ``kafkatx.compression`` instead, as the pure-Python twin always does.

These tests hold the two paths to the same result: each payload variant, well-formed or damaged, decodes
to the same records (objects and Arrow) or raises the same error, in the compiled codec and in the twin.
"""

from __future__ import annotations

import struct
import threading

import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _spec
from conftest import load_backend, run_threads
from kafkatx import compression

CY = load_backend("cython")
PY = load_backend("python")
LZ4, ZSTD = 3, 4


def _plain(n=300, seed=1):
    b = CY.BatchBuilder(base_offset=500, producer_id=42, producer_epoch=3, base_sequence=0, transactional=True)
    for i in range(n):
        b.append(_spec.lcg_bytes(40 + i % 200, seed + i), b"key-%d" % i, timestamp=1_700_000_000_000 + i,
                 headers=[("h", b"%d" % i)] if i % 7 == 0 else ())
    return b.build()


PLAIN = _plain()
RECORDS = PLAIN[61:]


def _outcome(codec, data, **kw):
    """What decoding ``data`` gives: the records and the Arrow table, or the error's type and message."""
    try:
        recs = [_spec.rec_tuple(r) for r in codec.decode_records(data, **kw)]
        table = codec.decode_arrow(data, **kw).to_pydict()
        return ("ok", recs, table)
    except Exception as exc:  # noqa: BLE001 - compared below
        return ("error", type(exc).__name__, str(exc))


def _same_in_both(payload, cid, **kw):
    data = _spec.rebatch(PLAIN, payload, cid)
    got = _outcome(CY, data, **kw)
    assert got == _outcome(PY, data, **kw)
    return got


def _lz4(data=RECORDS, **kw):
    args = dict(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False, store_size=False)
    args.update(kw)
    return lz4.frame.compress(data, **args)


def _zstd(data=RECORDS, **kw):
    args = dict(write_content_size=False)
    args.update(kw)
    return zstandard.ZstdCompressor(**args).compress(data)


def _lz4_stored(data=RECORDS):
    """An lz4 frame whose blocks are all stored (the high bit of the block size), as liblz4 writes blocks
    that do not compress."""
    blocks = [struct.pack("<I", len(data[i : i + 65536]) | 0x80000000) + data[i : i + 65536]
              for i in range(0, len(data), 65536)]
    return compression.compress(LZ4, b"x")[:7] + b"".join(blocks) + bytes(4)


def _skippable(n=5):
    return struct.pack("<II", 0x184D2A50, n) + bytes(n)


LZ4_VARIANTS = {
    "kafkatx": compression.compress(LZ4, RECORDS),
    "content checksum": _lz4(content_checksum=True),
    "256 KiB blocks": _lz4(block_size=lz4.frame.BLOCKSIZE_MAX256KB),
    "4 MiB blocks": _lz4(block_size=lz4.frame.BLOCKSIZE_MAX4MB),
    "high compression": _lz4(compression_level=9),
    "stored blocks": _lz4_stored(),
    # not for the C path: the Python path reads them
    "content size": _lz4(store_size=True),
    "block checksums": _lz4(block_checksum=True),
    # not for Kafka: both reject them
    "linked blocks": _lz4(RECORDS * 3, block_linked=True),  # (one block alone is marked independent)
}

ZSTD_VARIANTS = {
    "kafkatx": compression.compress(ZSTD, RECORDS),
    "content size": _zstd(write_content_size=True),
    "checksum": _zstd(write_checksum=True),
    "level 19": _zstd(level=19),
    "small window": zstandard.ZstdCompressor(
        compression_params=zstandard.ZstdCompressionParameters(window_log=10, write_content_size=0)
    ).compress(RECORDS),
    "two frames": _zstd(RECORDS[:5000]) + _zstd(RECORDS[5000:]),  # (as kafkatx writes 64 KiB or more)
    "two frames, one with a content size": _zstd(RECORDS[:5000], write_content_size=True) + _zstd(RECORDS[5000:]),
    # not for the C path: the Python path reads them
    "skippable first": _skippable() + _zstd(),
    "skippable last": _zstd() + _skippable(),
    # both reject it
    "trailing byte": _zstd() + b"\x00",
}


C_PATH = {"lz4": ["kafkatx", "content checksum", "256 KiB blocks", "4 MiB blocks", "high compression",
                  "stored blocks"],
          "zstd": ["kafkatx", "content size", "checksum", "level 19", "small window", "two frames",
                   "two frames, one with a content size"]}


def test_the_c_path_takes_what_producers_write_and_leaves_the_rest():
    for codec, cid, variants in (("lz4", LZ4, LZ4_VARIANTS), ("zstd", ZSTD, ZSTD_VARIANTS)):
        for name, payload in variants.items():
            bound = CY._fast_path_bound(payload, cid)
            if name in C_PATH[codec]:
                assert bound >= len(RECORDS), (codec, name, bound)  # (the walk's bound: 128 KiB a zstd block)
            else:
                assert bound == -1, (codec, name, bound)


@pytest.mark.parametrize("name", list(LZ4_VARIANTS))
def test_lz4_payload_variants_decode_alike(name):
    got = _same_in_both(LZ4_VARIANTS[name], LZ4)
    if name == "linked blocks":
        assert got[:2] == ("error", "DecompressionError") and "linked" in got[2]
    else:
        assert got[0] == "ok" and len(got[1]) == 300


@pytest.mark.parametrize("name", list(ZSTD_VARIANTS))
def test_zstd_payload_variants_decode_alike(name):
    got = _same_in_both(ZSTD_VARIANTS[name], ZSTD)
    if name == "trailing byte":
        assert got[:2] == ("error", "DecompressionError")
    else:
        assert got[0] == "ok" and len(got[1]) == 300


@pytest.mark.parametrize("cid", [LZ4, ZSTD])
def test_a_payload_over_max_decompressed_size_is_refused_alike(cid):
    payload = compression.compress(cid, RECORDS)
    assert _same_in_both(payload, cid, max_decompressed_size=len(RECORDS) - 1)[:2] == (
        "error", "DecompressedSizeError")
    for limit in (len(RECORDS), 1 << 20):
        assert _same_in_both(payload, cid, max_decompressed_size=limit)[0] == "ok"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cid=st.sampled_from([LZ4, ZSTD]), variant=st.integers(0, 4), data=st.data())
def test_damaged_payloads_decode_or_fail_alike(cid, variant, data):
    """Bytes of a well-formed payload changed, cut or added (with the batch's CRC recomputed, so the damage
    reaches the inflater): the compiled codec and the twin give the same records or the same error."""
    names = ["kafkatx", "content checksum", "256 KiB blocks", "stored blocks", "4 MiB blocks"] if cid == LZ4 else \
        ["kafkatx", "content size", "checksum", "level 19", "two frames"]
    payload = bytearray((LZ4_VARIANTS if cid == LZ4 else ZSTD_VARIANTS)[names[variant]])
    how = data.draw(st.sampled_from(["flip", "cut", "append"]))
    if how == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            pos = data.draw(st.integers(0, len(payload) - 1))
            payload[pos] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del payload[data.draw(st.integers(0, len(payload) - 1)):]
    else:
        payload += data.draw(st.binary(min_size=1, max_size=8))
    _same_in_both(bytes(payload), cid)


def test_header_bytes_of_each_frame_flipped_decode_or_fail_alike():
    """Every bit of the frame headers (and the first block headers), one at a time."""
    for cid, payload in ((LZ4, LZ4_VARIANTS["kafkatx"]), (ZSTD, ZSTD_VARIANTS["content size"])):
        for pos in range(16):
            for bit in range(8):
                damaged = bytearray(payload)
                damaged[pos] ^= 1 << bit
                _same_in_both(bytes(damaged), cid)


def test_threads_decode_compressed_logs_at_once():
    """Each thread has its own buffer and zstd context: four threads decoding lz4 and zstd logs together get
    what one thread gets."""
    logs = [_spec.rebatch(_plain(n=200, seed=s), compression.compress(cid, _plain(n=200, seed=s)[61:]), cid)
            for s, cid in ((1, LZ4), (2, ZSTD), (3, LZ4), (4, ZSTD))]
    want = [[_spec.rec_tuple(r) for r in CY.decode_records(log)] for log in logs]

    def work(i):
        for _ in range(100):
            assert [_spec.rec_tuple(r) for r in CY.decode_records(logs[i])] == want[i]
            assert CY.decode_arrow(logs[i]).num_rows == 200

    assert run_threads(work, 4) == []


@pytest.mark.skipif(not (CY.ZSTD_SYSTEM_VERSION and CY.LZ4_SYSTEM_VERSION),
                    reason="the C path needs the system's libzstd and liblz4")
def test_a_finished_thread_frees_its_zstd_context_and_buffer():
    """The libzstd context and the inflation buffer a thread gets on its first payload are freed when the
    thread ends: 200 threads one after another leave none behind."""
    logs = [_spec.rebatch(PLAIN, compression.compress(cid, RECORDS), cid) for cid in (LZ4, ZSTD)]
    before = CY._thread_resources()
    held = []

    def work():
        for log in logs:
            assert CY.decode_records(log)[-1].value == PY.decode_records(log)[-1].value
        held.append(CY._thread_resources())

    for _ in range(200):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert len(held) == 200
    # each thread held a context and a buffer of its own while it ran; a thread's are freed as it exits, a
    # moment after join() returns, so a few threads (of this test or the ones before) may still be counted
    # at any time -- never the 200 that threads not freeing theirs would leave
    assert all(z >= 1 and b >= 1 for z, b in held)
    assert max(z for z, _ in held) <= before[0] + 10 and max(b for _, b in held) <= before[1] + 10
    after = CY._thread_resources()
    assert after[0] <= before[0] + 10 and after[1] <= before[1] + 10


def test_a_frame_inflating_past_its_walked_bound_is_refused_whatever_the_thread_buffer_held():
    """A damaged zstd frame (found by scripts/fuzz.py, seed 1701) that libzstd inflates past the bound its
    block headers give: refused with the same error on both backends, also on a thread whose reusable
    buffer an earlier, larger payload had grown (the Python path once let libzstd fill the whole buffer)."""
    import os
    import pathlib

    data = (pathlib.Path(__file__).parent / "vectors" / "zstd-output-past-bound.bin").read_bytes()
    grow = struct.pack("<II", 0x184D2A50, 4) + bytes(4) + _zstd(os.urandom(1000) * 3000, write_content_size=True)
    got = {}

    def work(grown):
        if grown:
            assert len(compression.decompress_view(ZSTD, grow)) == 3_000_000  # (the Python path: a skippable frame)
        got[grown] = [_outcome(codec, data, verify_crc=False) for codec in (CY, PY)]

    for grown in (False, True):
        assert run_threads(lambda _i, g=grown: work(g), 1) == []
    for grown in (False, True):
        assert got[grown][0] == got[grown][1]  # both backends, the same error and message
        assert got[grown][0][:2] == ("error", "DecompressionError")  # (libzstd's words depend on its context's past)
