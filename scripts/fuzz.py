#!/usr/bin/env python3
"""Time-boxed fuzzing of kafkatx beyond what the test suite's property tests run (a few hundred examples).

    python scripts/fuzz.py codec  --seconds 120 --seed 1   # mutated record batches, compiled vs pure twin
    python scripts/fuzz.py logdir --seconds 120 --seed 1   # damaged partition directories

``codec``: batches written by kafkatx (uncompressed, gzip, snappy, lz4, zstd, with the producers' frame
options varied), then damaged -- bytes of the compressed payload flipped, cut or added with the CRC made
right again so the damage reaches the inflater; bytes of the records flipped before a valid compression;
or any byte of the batch flipped with the CRC left wrong -- and decoded to records and to Arrow by both
backends, a third of them with ``inflate_threads`` (the compiled codec's C workers take lz4 and zstd
payloads).  Each input must give the same records and columns, or the same error type, in both, and the
only errors allowed are KafkaTxErrors.

``logdir``: one or two files of a generated partition directory damaged (flipped, cut, zeroed, emptied or
appended to), then read read_committed and read_uncommitted, iterated as records, and reopened by a
``PartitionWriter``; anything but a result or a KafkaTxError is a finding, and so is a directory the
writer recovered that needs repairing again on the next open.  Each input also damages one file of the
workload's ``__consumer_offsets`` partition and replays it as the group coordinator loads it
(``kafkatx.grouplog.load_offsets``).  ``KAFKATX_NO_EXTENSIONS=1`` runs it on the pure-Python twin.

Under the sanitizers (the build CI's ``sanitizers`` job makes, ``KAFKATX_SANITIZE=1``)::

    LD_PRELOAD="$(gcc -print-file-name=libasan.so)" PYTHONMALLOC=malloc \\
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 python scripts/fuzz.py codec --seconds 300

Exits 1 with the findings listed (and each failing input kept under ``--keep``) if there are any.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import shutil
import sys
import tempfile
import time
import traceback

import cramjam
import lz4.frame
import zstandard

import kafkatx
from kafkatx import compression
from kafkatx._common import i64
from kafkatx.errors import KafkaTxError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from _damage import DAMAGES, STEPS, damage_file, run_step  # noqa: E402 - the tests' helpers
from _spec import HEADER_SIZE, rebatch  # noqa: E402



def _backends():
    import importlib

    return importlib.import_module("kafkatx._codec"), importlib.import_module("kafkatx._codec_py")


def _compress(rng: random.Random, cid: int, data: bytes) -> bytes:
    if cid == 1:
        return gzip.compress(data, compresslevel=rng.choice([1, 6, 9]))
    if cid == 2:  # Java's xerial framing or raw snappy as librdkafka writes it
        return compression.compress(2, data) if rng.random() < 0.5 else bytes(cramjam.snappy.compress_raw(data))
    if cid == 3:
        return lz4.frame.compress(data, block_size=rng.choice([lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB]),
                                  block_linked=False, store_size=rng.random() < 0.3,
                                  content_checksum=rng.random() < 0.3)  # fmt: skip
    if cid == 4:
        c = zstandard.ZstdCompressor(level=rng.choice([1, 3, 9]), write_content_size=rng.random() < 0.5,
                                     write_checksum=rng.random() < 0.3)  # fmt: skip
        if rng.random() < 0.3:  # two frames, as BatchBuilder(zstd_frames=2) writes large payloads
            cut = rng.randrange(len(data) + 1)
            return c.compress(data[:cut]) + c.compress(data[cut:])
        return c.compress(data)
    return data


def _plain_batch(rng: random.Random) -> bytes:
    b = kafkatx.BatchBuilder(base_offset=rng.randrange(1 << 40), producer_id=rng.randrange(1 << 20),
                             producer_epoch=rng.randrange(1 << 10), base_sequence=rng.randrange(1 << 20),
                             transactional=rng.random() < 0.5)  # fmt: skip
    for i in range(rng.randrange(1, 150)):
        value = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))) * rng.randrange(1, 8)
        b.append(value if rng.random() < 0.95 else None, b"key-%d" % i if rng.random() < 0.8 else None,
                 timestamp=1_700_000_000_000 + i, headers=[("h", b"%d" % i)] if i % 7 == 0 else ())  # fmt: skip
    return b.build()


def _outcome(codec, data: bytes, kw: dict):
    import pyarrow as pa

    summaries = _summaries(codec, data, kw)
    try:
        recs = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in codec.decode_records(data, **kw)]
        t = codec.decode_arrow(data, **kw)
        cols = {n: (c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c).to_pylist()
                for n, c in zip(t.schema.names, t.columns)}  # fmt: skip
        return ("ok", recs, cols, summaries)
    except KafkaTxError as exc:
        return ("error", type(exc).__name__, summaries)


def _summaries(codec, data: bytes, kw: dict) -> list:
    """Each batch's record_summary() (or its error), checked against what its records() give."""
    out = []
    opts = {k: v for k, v in kw.items() if k in ("verify_crc", "max_decompressed_size")}
    try:
        for b in codec.iter_batches(data, **opts):
            try:
                got = tuple(b.record_summary())
            except KafkaTxError as exc:
                got = (type(exc).__name__, str(exc), exc.position)
            try:
                rs = b.records()
                stamps = [r.timestamp for r in rs if r.timestamp != -1]
                in_sequence = [r.offset for r in rs] == [i64(b.base_offset + i) for i in range(len(rs))]
                want = (len(rs), min(stamps, default=-1), max(stamps, default=-1), in_sequence)
            except KafkaTxError as exc:
                want = (type(exc).__name__, str(exc), exc.position)
            if got != want:
                raise AssertionError(f"record_summary() {got} but records() give {want}")
            out.append(got[0] if isinstance(got[0], str) else got)  # (errors compared across backends by type)
    except KafkaTxError as exc:
        out.append(("iter_batches", type(exc).__name__))
    return out


def fuzz_codec(rng: random.Random, deadline: float, keep: str) -> tuple[int, list]:
    cy, py = _backends()
    findings, n = [], 0
    while time.monotonic() < deadline:
        cid = rng.choice([0, 1, 2, 3, 4, 3, 4])
        base = _plain_batch(rng)
        records = bytearray(base[HEADER_SIZE:])
        how = rng.choice(["payload", "records", "raw"])
        if how == "records":
            for _ in range(rng.randrange(1, 4)):
                records[rng.randrange(len(records))] ^= rng.randrange(1, 256)
            data = rebatch(base, _compress(rng, cid, bytes(records)), cid)
        else:
            payload = bytearray(_compress(rng, cid, bytes(records)))
            m = rng.choice(["flip", "cut", "append"])
            if m == "flip" and payload:
                for _ in range(rng.randrange(1, 4)):
                    payload[rng.randrange(len(payload))] ^= rng.randrange(1, 256)
            elif m == "cut" and payload:
                del payload[rng.randrange(len(payload)) :]
            else:
                payload += bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 9)))
            data = rebatch(base, payload, cid)
            if how == "raw":
                raw = bytearray(data)
                raw[rng.randrange(len(raw))] ^= rng.randrange(1, 256)
                data = bytes(raw)
        data *= rng.randrange(1, 4)
        kw = {"verify_crc": how != "raw" or rng.random() < 0.5}
        if rng.random() < 0.3:
            kw["max_decompressed_size"] = rng.randrange(1, 1 << 16)
        if rng.random() < 0.3:  # payloads inflated ahead: the compiled codec's C workers for lz4 and zstd
            kw["inflate_threads"] = rng.choice([1, 2])
        try:
            a, b = _outcome(cy, data, kw), _outcome(py, data, kw)
            problem = None if a == b else f"backends differ: {a[:2] if a[0] == 'error' else 'ok'} / " \
                                          f"{b[:2] if b[0] == 'error' else 'ok'}"  # fmt: skip
        except Exception:  # noqa: BLE001 - the finding
            problem = traceback.format_exc(limit=4)
        if problem:
            path = os.path.join(keep, f"codec-{n}.bin")
            with open(path, "wb") as fh:
                fh.write(data)
            findings.append(f"{path} (codec {cid}, {how}, {kw}): {problem}")
        n += 1
    return n, findings


def fuzz_logdir(rng: random.Random, deadline: float, keep: str) -> tuple[int, list]:
    from kafkatx.grouplog import load_offsets
    from kafkatx.log import generate, wait_for_release
    from kafkatx.log.generate import Manifest

    findings, n = [], 0
    with tempfile.TemporaryDirectory(prefix="kafkatx-fuzz-") as tmp:
        src = os.path.join(tmp, "src")
        generate(src, records=3000, partitions=1, segment_bytes=32 << 10, batch_records=(5, 60),
                 seed=rng.randrange(1 << 30), workers=0, txn_state_partitions=1)  # fmt: skip
        part = os.path.join(src, "orders-0")
        names = sorted(os.listdir(part))
        small = [x for x in names if not x.endswith(".log")]
        offsets = os.path.join(src, Manifest.load(src).consumer_offsets["partition"])
        while time.monotonic() < deadline:
            work = os.path.join(tmp, "orders-0")
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(part, work)
            damage = []
            for _ in range(rng.randrange(1, 3)):
                name = rng.choice(small if rng.random() < 0.7 else names)
                how, k = rng.choice(DAMAGES), rng.randrange(1, 256)
                at = damage_file(os.path.join(work, name), how, rng.random(), k)
                damage.append(f"{name} {how} {k} at {at}")
            for step in STEPS:
                try:
                    run_step(work, step)
                except KafkaTxError:
                    pass
                except Exception:  # noqa: BLE001 - the finding
                    kept = os.path.join(keep, f"logdir-{n}")
                    shutil.rmtree(kept, ignore_errors=True)
                    shutil.copytree(part, kept)  # the undamaged directory, with the damage listed
                    findings.append(f"{kept} + {damage}, {step}: {traceback.format_exc(limit=4)}")
                    break
            # the group's __consumer_offsets partition, damaged likewise: the coordinator's replay of it
            work = os.path.join(tmp, os.path.basename(offsets))
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(offsets, work)
            name = rng.choice(sorted(os.listdir(work)))
            how, k = rng.choice(DAMAGES), rng.randrange(1, 256)
            at = damage_file(os.path.join(work, name), how, rng.random(), k)
            try:
                load_offsets(work)
            except KafkaTxError:
                pass
            except Exception:  # noqa: BLE001 - the finding
                kept = os.path.join(keep, f"offsets-{n}")
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(offsets, kept)
                findings.append(f"{kept} + {name} {how} {k} at {at}, load_offsets: {traceback.format_exc(limit=4)}")
            wait_for_release()
            n += 1
    return n, findings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", choices=("codec", "logdir"))
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to run (default %(default)s)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    ap.add_argument("--keep", default=os.path.join(tempfile.gettempdir(), "kafkatx-fuzz-findings"),
                    help="where failing inputs are kept (default %(default)s)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else time.time_ns() % (1 << 32)
    os.makedirs(args.keep, exist_ok=True)
    print(f"kafkatx {kafkatx.__version__} backend={kafkatx.BACKEND}; {args.target} for {args.seconds:g} s, "
          f"seed {seed}", flush=True)  # fmt: skip
    run = fuzz_codec if args.target == "codec" else fuzz_logdir
    n, findings = run(random.Random(seed), time.monotonic() + args.seconds, args.keep)
    print(f"{n} inputs, {len(findings)} findings")
    for f in findings[:20]:
        print(" -", f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
