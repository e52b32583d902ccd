#!/usr/bin/env python3
"""Capture record batches written by librdkafka, the C Kafka client, as test vectors.

    python3 -m venv /tmp/rdk-venv && /tmp/rdk-venv/bin/pip install confluent-kafka
    /tmp/rdk-venv/bin/python scripts/capture_librdkafka.py            # writes tests/vectors/librdkafka/
    /tmp/rdk-venv/bin/python scripts/capture_librdkafka.py --out DIR  # somewhere else

confluent-kafka's wheel bundles librdkafka; it is needed only here (never by kafkatx or its tests).

The script runs a minimal fake Kafka broker on 127.0.0.1 (one socket server thread, one thread per
connection) that speaks just enough of the protocol for a librdkafka producer: ApiVersions, Metadata
(one broker, itself; one topic with one partition), InitProducerId, FindCoordinator,
AddPartitionsToTxn, EndTxn and Produce.  It advertises only the non-flexible versions of every API but
ApiVersions, so all other requests and responses use the classic encodings, hand-rolled below.

Each case drives one ``confluent_kafka.Producer`` against a fresh broker.  Records are produced in
groups; each group is flushed before the next one starts, so each group becomes one Produce request
holding one record batch (or, when ``batch.num.messages`` is small, several batches and requests, as
librdkafka splits it; a batch never mixes groups, which is checked).  The broker keeps the exact ``records`` bytes of every Produce request,
assigns base offsets as a broker would (and one offset per transaction marker it would write on
EndTxn), and the script writes, per case:

* ``CASE.bin``: the captured batches, concatenated, exactly as librdkafka sent them (each batch still
  has base offset 0, as every producer writes it: a broker rewrites the base offset when appending);
* ``CASE.json``: what the producer was asked to send (every record's key, value, headers and the
  timestamp given to ``produce()``), the producer config, the librdkafka version, what the broker
  assigned (producer id and epoch, base offsets, marker offsets) and where each batch lies in the file.

Payload encoding in the sidecar: ``null``, or ``{"utf8": s}`` / ``{"b64": s}``, optionally with
``"times": n`` (the decoded bytes repeated ``n`` times, to keep large values small in JSON).

A hard timeout (``--timeout``, default 120 s) ends the process even if librdkafka or the fake broker
were to hang.
"""

from __future__ import annotations

import argparse
import base64
import faulthandler
import json
import pathlib
import random
import socket
import struct
import sys
import threading
import time

import confluent_kafka

TOPIC = "kafkatx-librdkafka"
NODE_ID = 1
CLUSTER_ID = "kafkatx-fake-cluster"

# api key -> (name, min version, max version).  Only non-flexible versions are advertised (except for
# ApiVersions itself), so the classic request/response encodings below suffice.  Fetch is advertised
# (and never called by a producer) because librdkafka derives its "message format v2" and "zstd"
# features from the Produce *and* Fetch versions a broker supports.
APIS = {
    0: ("Produce", 3, 7),
    1: ("Fetch", 0, 11),
    3: ("Metadata", 0, 8),
    10: ("FindCoordinator", 0, 2),
    18: ("ApiVersions", 0, 3),
    22: ("InitProducerId", 0, 1),
    24: ("AddPartitionsToTxn", 0, 2),
    26: ("EndTxn", 0, 2),
}

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 record batch header


# ------------------------------------------------------------------------------------ wire helpers
class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"request truncated at byte {self.pos} (+{n})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def i8(self) -> int:
        return self._unpack(">b")

    def i16(self) -> int:
        return self._unpack(">h")

    def i32(self) -> int:
        return self._unpack(">i")

    def i64(self) -> int:
        return self._unpack(">q")

    def boolean(self) -> bool:
        return self.i8() != 0

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode("utf-8")

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def array(self, item) -> list:
        n = self.i32()
        return [] if n < 0 else [item() for _ in range(n)]


class Writer:
    def __init__(self):
        self.buf = bytearray()

    def i8(self, v: int) -> Writer:
        self.buf += struct.pack(">b", v)
        return self

    def i16(self, v: int) -> Writer:
        self.buf += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> Writer:
        self.buf += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> Writer:
        self.buf += struct.pack(">q", v)
        return self

    def string(self, s: str | None) -> Writer:
        if s is None:
            return self.i16(-1)
        raw = s.encode("utf-8")
        self.i16(len(raw))
        self.buf += raw
        return self

    def uvarint(self, v: int) -> Writer:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)
        return self

    def array(self, items, write_item) -> Writer:
        self.i32(len(items))
        for item in items:
            write_item(item)
        return self


# ------------------------------------------------------------------------------------ fake broker
class FakeBroker:
    """One broker (node 1) leading the single partition of ``TOPIC``; also the transaction coordinator."""

    def __init__(self, producer_id: int, producer_epoch: int):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.log_end_offset = 0
        self.produced = []  # one dict per Produce request (its records bytes and what we answered)
        self.markers = []  # transaction markers a real broker would append (offset, kind)
        self.events = []  # (api name, version) of every request, in arrival order
        self.init_producer_id = []
        self.end_txn = []
        self.add_partitions = []
        self.errors = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.threads = [threading.Thread(target=self._accept_loop, name="fake-broker", daemon=True)]
        self.threads[0].start()

    # -- plumbing
    def close(self) -> None:
        self.stop.set()
        for t in list(self.threads):
            t.join(timeout=2)
        self.sock.close()

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), name="fake-broker-conn", daemon=True)
            self.threads.append(t)
            t.start()

    def _recv_exact(self, conn, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            if self.stop.is_set():
                return None
            try:
                chunk = conn.recv(n - len(buf))
            except socket.timeout:
                continue
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _serve(self, conn) -> None:
        conn.settimeout(0.2)
        try:
            while not self.stop.is_set():
                head = self._recv_exact(conn, 4)
                if head is None:
                    return
                frame = self._recv_exact(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                response = self._handle(frame)
                if response is None:
                    return  # unsupported request: drop the connection (and the error is recorded)
                conn.sendall(struct.pack(">i", len(response)) + response)
        except Exception as exc:  # recorded, reported by the driver
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def _handle(self, frame: bytes) -> bytes | None:
        r = Reader(frame)
        api_key, version, correlation_id = r.i16(), r.i16(), r.i32()
        r.string()  # client id
        name = APIS.get(api_key, (f"api{api_key}",))[0]
        with self.lock:
            self.events.append((name, version))
        handler = getattr(self, f"_api_{name}", None)
        if handler is None or not APIS[api_key][1] <= version <= APIS[api_key][2]:
            self.errors.append(f"unexpected request {name} v{version}")
            return None
        if api_key == 18 and version >= 3:
            r.tagged_fields()  # request header v2; the response header stays v0 for ApiVersions
        body = Writer()
        handler(r, version, body)
        return struct.pack(">i", correlation_id) + bytes(body.buf)

    # -- APIs
    def _api_ApiVersions(self, r: Reader, version: int, w: Writer) -> None:
        w.i16(0)
        if version >= 3:
            w.uvarint(len(APIS) + 1)
            for key, (_, lo, hi) in sorted(APIS.items()):
                w.i16(key).i16(lo).i16(hi).uvarint(0)
            w.i32(0).uvarint(0)  # throttle, no tagged fields
            return
        w.array(sorted(APIS.items()), lambda kv: w.i16(kv[0]).i16(kv[1][1]).i16(kv[1][2]))
        if version >= 1:
            w.i32(0)

    def _api_Metadata(self, r: Reader, version: int, w: Writer) -> None:
        if version >= 3:
            w.i32(0)  # throttle
        w.i32(1).i32(NODE_ID).string("127.0.0.1").i32(self.port)
        if version >= 1:
            w.string(None)  # rack
        if version >= 2:
            w.string(CLUSTER_ID)
        if version >= 1:
            w.i32(NODE_ID)  # controller
        w.i32(1).i16(0).string(TOPIC)
        if version >= 1:
            w.i8(0)  # not internal
        w.i32(1).i16(0).i32(0).i32(NODE_ID)  # partition 0, no error, leader = us
        if version >= 7:
            w.i32(0)  # leader epoch
        w.i32(1).i32(NODE_ID).i32(1).i32(NODE_ID)  # replicas, isr
        if version >= 5:
            w.i32(0)  # offline replicas
        if version >= 8:
            w.i32(-2147483648).i32(-2147483648)  # topic, cluster authorized operations (not requested)

    def _api_FindCoordinator(self, r: Reader, version: int, w: Writer) -> None:
        if version >= 1:
            w.i32(0).i16(0).string(None)
        else:
            w.i16(0)
        w.i32(NODE_ID).string("127.0.0.1").i32(self.port)

    def _api_InitProducerId(self, r: Reader, version: int, w: Writer) -> None:
        txn_id, txn_timeout = r.string(), r.i32()
        with self.lock:
            self.init_producer_id.append({"transactional_id": txn_id, "transaction_timeout_ms": txn_timeout,
                                          "api_version": version})  # fmt: skip
        w.i32(0).i16(0).i64(self.producer_id).i16(self.producer_epoch)

    def _api_AddPartitionsToTxn(self, r: Reader, version: int, w: Writer) -> None:
        txn_id, pid, epoch = r.string(), r.i64(), r.i16()
        topics = r.array(lambda: (r.string(), r.array(r.i32)))
        with self.lock:
            self.add_partitions.append({"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                        "topics": [[t, p] for t, p in topics]})  # fmt: skip
        w.i32(0).array(topics, lambda t: (w.string(t[0]), w.array(t[1], lambda p: w.i32(p).i16(0))))

    def _api_EndTxn(self, r: Reader, version: int, w: Writer) -> None:
        txn_id, pid, epoch, committed = r.string(), r.i64(), r.i16(), r.boolean()
        with self.lock:
            # the coordinator would now write a COMMIT/ABORT marker into every partition of the transaction
            kind = "commit" if committed else "abort"
            self.end_txn.append({"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                 "committed": committed, "api_version": version})  # fmt: skip
            self.markers.append({"offset": self.log_end_offset, "kind": kind, "producer_id": pid,
                                 "producer_epoch": epoch})  # fmt: skip
            self.log_end_offset += 1
        w.i32(0).i16(0)

    def _api_Produce(self, r: Reader, version: int, w: Writer) -> None:
        txn_id, acks, timeout = r.string(), r.i16(), r.i32()
        topics = r.array(lambda: (r.string(), r.array(lambda: (r.i32(), r.bytes_()))))
        answers = []
        with self.lock:
            for topic, partitions in topics:
                parts = []
                for partition, records in partitions:
                    base = self.log_end_offset
                    batches = []  # (base offset we assign, the batch's exact bytes)
                    pos = 0
                    while records is not None and pos + BATCH_HEADER.size <= len(records):
                        header = BATCH_HEADER.unpack_from(records, pos)
                        size = 12 + header[1]
                        batches.append((self.log_end_offset, records[pos : pos + size]))
                        self.log_end_offset += header[6] + 1  # lastOffsetDelta + 1
                        pos += size
                    if records is None or pos != len(records):
                        self.errors.append(f"Produce: records of {len(records or b'')} bytes hold partial batches")
                    self.produced.append({"topic": topic, "partition": partition, "batches": batches,
                                          "transactional_id": txn_id, "acks": acks, "timeout_ms": timeout,
                                          "api_version": version})  # fmt: skip
                    parts.append((partition, base))
                answers.append((topic, parts))

        def partition_response(p):
            w.i32(p[0]).i16(0).i64(p[1])
            if version >= 2:
                w.i64(-1)  # log append time: CreateTime topic
            if version >= 5:
                w.i64(0)  # log start offset

        w.array(answers, lambda t: (w.string(t[0]), w.array(t[1], partition_response)))
        if version >= 1:
            w.i32(0)  # throttle


# ------------------------------------------------------------------------------------ the cases
def rec(value, key=None, headers=None, timestamp=None):
    return {"key": key, "value": value, "headers": headers, "timestamp": timestamp}


def mixed_records(tag: str, ts: int) -> list:
    """Every record shape: null/empty/binary keys and values, tombstones, headers, explicit timestamps."""
    filler = (f"{tag} kafkatx librdkafka vector; " * 6).encode()
    return [
        rec(b"first value " + filler, key=b"key-0", timestamp=ts),
        rec(b"no key " + filler),  # null key, timestamp chosen by librdkafka (now)
        rec(b"", key=b"key-empty-value", timestamp=ts + 1),  # empty (not null) value
        rec(None, key=b"key-tombstone", timestamp=ts + 2),  # null value: a tombstone
        rec(b"empty key " + filler, key=b"", timestamp=ts + 3),
        rec(b"with headers " + filler, key=b"key-headers", timestamp=ts + 4,
            headers=[("trace-id", b"0af7651916cd43dd8448eb211c80319c"), ("empty", b""), ("null", None),
                     ("dup", b"1"), ("dup", b"2"), ("cl\u00e9-\u043a\u043b\u044e\u0447", "\u00fc".encode())]),
        rec(bytes(range(256)) * 2, key=bytes(range(255, -1, -1)), timestamp=ts + 5),  # binary payloads
        rec(b"earlier timestamp " + filler, key=b"key-back", timestamp=ts - 60_000),  # negative delta
        rec(b"large timestamp delta " + filler, key=b"key-far", timestamp=ts + 86_400_000),
        rec(b"last " + filler, key=b"key-last", timestamp=ts + 7),
    ]


def simple_records(tag: str, n: int, ts: int, start: int = 0) -> list:
    return [rec(f"{tag} value {i} ".encode() * 8, key=f"{tag}-{i}".encode(), timestamp=ts + i)
            for i in range(start, start + n)]  # fmt: skip


def bulk_records(seed: int, n: int, ts: int) -> list:
    """Many mid-sized compressible values (a few hundred KiB in all): multi-block lz4 frames and the like."""
    rnd = random.Random(seed)
    words = ["kafka", "record", "batch", "producer", "librdkafka", "offset", "epoch", "sequence", "crc"]
    out = []
    for i in range(n):
        unit = " ".join(rnd.choice(words) for _ in range(6)) + f" #{i};"
        out.append(rec({"repeat": unit, "times": 10 + i % 20}, key=f"bulk-{i:04d}".encode(), timestamp=ts + i))
    return out


TS = 1_718_000_000_000  # fixed base for explicit timestamps (2024-06-10)

BASE_CONFIG = {
    "linger.ms": 500,  # every group is produced well within linger and then flushed as one batch
    "batch.num.messages": 10000,
    "acks": "all",
    "message.timeout.ms": 10000,
    "socket.timeout.ms": 5000,
}


def cases() -> list:
    out = []
    for i, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        out.append({
            "name": f"{codec}_plain",
            "config": {"compression.type": codec, "enable.idempotence": False},
            "groups": [mixed_records(codec, TS + 1000 * i)],
        })  # fmt: skip
        out.append({
            "name": f"{codec}_idempotent",
            "config": {"compression.type": codec, "enable.idempotence": True},
            "groups": [mixed_records(codec + "-a", TS + 1000 * i + 100),
                       simple_records(codec + "-b", 5, TS + 1000 * i + 200),
                       simple_records(codec + "-c", 1, TS + 1000 * i + 300)],
            "producer_id": 1_000_000_000_000 + i,  # beyond 32 bits
            "producer_epoch": 7 + i,
        })  # fmt: skip
    # a few hundred KiB uncompressed: several lz4 and zstd blocks, one large raw snappy block
    for i, codec in enumerate(("snappy", "lz4", "zstd")):
        out.append({
            "name": f"{codec}_bulk",
            "config": {"compression.type": codec, "enable.idempotence": True},
            "groups": [bulk_records(i, 300, TS + 10_000 * (i + 1))],
            "producer_id": 2000 + i,
            "producer_epoch": 0,
        })  # fmt: skip
    out.append({
        # librdkafka splits one flush into several batches (and Produce requests, up to 5 in flight)
        "name": "zstd_small_batches",
        "config": {"compression.type": "zstd", "enable.idempotence": True, "batch.num.messages": 4},
        "groups": [simple_records("small", 11, TS + 70_000)],
        "producer_id": 5000,
        "producer_epoch": 1,
    })  # fmt: skip
    out.append({
        "name": "none_small_batches",
        "config": {"compression.type": "none", "enable.idempotence": False, "batch.num.messages": 3},
        "groups": [simple_records("small", 7, TS + 71_000)],
    })  # fmt: skip
    out.append({
        "name": "transactional",
        "config": {"compression.type": "none", "transactional.id": "kafkatx-librdkafka-txn"},
        "groups": [simple_records("txn1", 3, TS + 50_000), simple_records("txn2", 2, TS + 50_100),
                   mixed_records("txn3", TS + 50_200)],
        "transactions": [{"groups": [0], "outcome": "commit"}, {"groups": [1], "outcome": "abort"},
                         {"groups": [2], "outcome": "commit"}],
        "producer_id": 4000,
        "producer_epoch": 3,
    })  # fmt: skip
    out.append({
        "name": "transactional_lz4",
        "config": {"compression.type": "lz4", "transactional.id": "kafkatx-librdkafka-txn-lz4"},
        "groups": [simple_records("t-a", 4, TS + 60_000), simple_records("t-b", 3, TS + 60_100),
                   simple_records("t-c", 2, TS + 60_200)],
        "transactions": [{"groups": [0, 1], "outcome": "abort"}, {"groups": [2], "outcome": "commit"}],
        "producer_id": 4001,
        "producer_epoch": 0,
    })  # fmt: skip
    return out


# ------------------------------------------------------------------------------------ driving
def payload_bytes(spec) -> bytes | None:
    if spec is None or isinstance(spec, bytes):
        return spec
    return spec["repeat"].encode() * spec["times"]


def payload_json(spec):
    if spec is None:
        return None
    if isinstance(spec, dict):
        return {"utf8": spec["repeat"], "times": spec["times"]}
    try:
        return {"utf8": spec.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(spec).decode("ascii")}


def run_case(case: dict, deadline: float) -> dict:
    broker = FakeBroker(case.get("producer_id", 0), case.get("producer_epoch", 0))
    config = dict(BASE_CONFIG, **case["config"])
    reports = []
    try:
        producer = confluent_kafka.Producer(dict(config, **{"bootstrap.servers": f"127.0.0.1:{broker.port}"}))

        def on_delivery(err, msg):
            reports.append((err.str() if err else None, msg.offset(), msg.partition()))

        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"case {case['name']}: out of time")
            return left

        def produce_group(producer, records) -> None:
            for r in records:
                kw = {"value": payload_bytes(r["value"]), "key": r["key"], "partition": 0, "on_delivery": on_delivery}
                if r["headers"] is not None:
                    kw["headers"] = r["headers"]
                if r["timestamp"] is not None:
                    kw["timestamp"] = r["timestamp"]
                producer.produce(TOPIC, **kw)
            left = producer.flush(min(remaining(), 30))
            if left:
                raise RuntimeError(f"case {case['name']}: {left} messages not delivered: {broker.errors}")

        t0 = int(time.time() * 1000)
        if "transactions" in case:
            order = [g for txn in case["transactions"] for g in txn["groups"]]
            if order != list(range(len(case["groups"]))):
                raise ValueError(f"case {case['name']}: transactions must take the groups in order")
            producer.init_transactions(min(remaining(), 30))
            for txn in case["transactions"]:
                producer.begin_transaction()
                for g in txn["groups"]:
                    produce_group(producer, case["groups"][g])
                if txn["outcome"] == "commit":
                    producer.commit_transaction(min(remaining(), 30))
                else:
                    producer.abort_transaction(min(remaining(), 30))
        else:
            for group in case["groups"]:
                produce_group(producer, group)
        t1 = int(time.time() * 1000)
        producer.flush(min(remaining(), 10))
        del producer  # closes the connections
    finally:
        broker.close()
    if broker.errors:
        raise RuntimeError(f"case {case['name']}: fake broker errors: {broker.errors}")
    failed = [rep for rep in reports if rep[0] is not None]
    if failed:
        raise RuntimeError(f"case {case['name']}: delivery failed: {failed[:3]}")
    return {"broker": broker, "reports": reports, "t0": t0, "t1": t1, "config": config}


def describe(case: dict, result: dict) -> tuple[bytes, dict]:
    broker = result["broker"]
    groups = case["groups"]
    group_of = [g for g, group in enumerate(groups) for _ in group]  # record index -> its group
    txn_of_group = {g: t for t, txn in enumerate(case.get("transactions", [])) for g in txn["groups"]}
    blob = bytearray()
    batches = []
    first = 0
    for r, req in enumerate(broker.produced):
        for base_offset, batch in req["batches"]:
            header = BATCH_HEADER.unpack_from(batch, 0)
            count = header[12]
            if header[0] != 0 or header[6] != count - 1 or req["partition"] != 0:
                raise RuntimeError(f"case {case['name']}: unexpected batch header {header}")
            if first + count > len(group_of) or len({group_of[i] for i in range(first, first + count)}) != 1:
                raise RuntimeError(f"case {case['name']}: a batch spans records of two groups (or too many)")
            batches.append({
                "position": len(blob),
                "size": len(batch),
                "first_record": first,
                "record_count": count,
                "group": group_of[first],
                "transaction": txn_of_group.get(group_of[first]),
                "broker_base_offset": base_offset,
                "produce_request": dict({k: req[k] for k in ("api_version", "acks", "timeout_ms", "transactional_id")},
                                        index=r),
            })  # fmt: skip
            blob += batch
            first += count
    if first != len(group_of):
        raise RuntimeError(f"case {case['name']}: {len(group_of)} records produced, {first} captured")
    expected_offsets = sorted(b["broker_base_offset"] + i for b in batches for i in range(b["record_count"]))
    delivered = sorted(rep[1] for rep in result["reports"])
    if delivered != expected_offsets:
        raise RuntimeError(f"case {case['name']}: delivery reports {delivered} != assigned {expected_offsets}")
    idempotent = bool(case["config"].get("enable.idempotence")) or "transactional.id" in case["config"]
    sidecar = {
        "name": case["name"],
        "librdkafka_version": confluent_kafka.libversion()[0],
        "confluent_kafka_version": confluent_kafka.__version__,
        "topic": TOPIC,
        "partition": 0,
        "producer_config": result["config"],
        "idempotent": idempotent,
        "transactional": "transactional.id" in case["config"],
        "compression": case["config"]["compression.type"],
        "produce_window_ms": [result["t0"], result["t1"]],
        "broker": {
            "producer_id": broker.producer_id if idempotent else None,
            "producer_epoch": broker.producer_epoch if idempotent else None,
            "init_producer_id": broker.init_producer_id,
            "add_partitions_to_txn": broker.add_partitions,
            "end_txn": broker.end_txn,
            "markers": broker.markers,
            "log_end_offset": broker.log_end_offset,
            "requests": [f"{name} v{v}" for name, v in broker.events],
        },
        "transactions": case.get("transactions", []),
        "batches": batches,
        "records": [
            {"key": payload_json(r["key"]), "value": payload_json(r["value"]), "timestamp": r["timestamp"],
             "headers": [[k, payload_json(v)] for k, v in (r["headers"] or [])]}
            for group in groups for r in group
        ],  # fmt: skip
    }
    return bytes(blob), sidecar


def to_json(sidecar: dict) -> str:
    """Indented JSON, but one line per record and per batch (the bulk cases stay small)."""
    rows = {k: sidecar[k] for k in ("records", "batches")}
    text = json.dumps(dict(sidecar, records="@records", batches="@batches"), indent=1, ensure_ascii=False)
    for k, items in rows.items():
        lines = ",\n  ".join(json.dumps(item, ensure_ascii=False) for item in items)
        text = text.replace(f'"@{k}"', f"[\n  {lines}\n ]" if items else "[]")
    return text + "\n"


def main(argv=None) -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=root / "tests" / "vectors" / "librdkafka")
    ap.add_argument("--timeout", type=float, default=120.0, help="hard limit for the whole run, in seconds")
    ap.add_argument("--only", action="append", help="capture only this case (repeatable)")
    args = ap.parse_args(argv)
    faulthandler.dump_traceback_later(args.timeout, exit=True)  # the hard stop, whatever hangs
    deadline = time.monotonic() + args.timeout - 5
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"librdkafka {confluent_kafka.libversion()[0]} (confluent-kafka {confluent_kafka.__version__})")
    for case in cases():
        if args.only and case["name"] not in args.only:
            continue
        blob, sidecar = describe(case, run_case(case, deadline))
        (args.out / f"{case['name']}.bin").write_bytes(blob)
        (args.out / f"{case['name']}.json").write_text(to_json(sidecar))
        print(f"{case['name']:22} {len(sidecar['batches'])} batches, {len(sidecar['records'])} records, "
              f"{len(blob)} bytes")  # fmt: skip
    faulthandler.cancel_dump_traceback_later()
    return 0


if __name__ == "__main__":
    sys.exit(main())
