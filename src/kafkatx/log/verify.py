"""Check a generated log directory against its manifest: what every reader must see, record for record."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field

from .generate import Manifest, record_checksum
from .reader import open_partition


@dataclass
class PartitionCheck:
    name: str
    log_end_offset: int
    last_stable_offset: int
    read_committed: int
    read_uncommitted: int
    problems: list = field(default_factory=list)


@dataclass
class OffsetsCheck:
    """The consumer group's committed offsets as the group coordinator loads them, against the manifest."""

    group: str
    partition: str
    offsets: dict
    problems: list = field(default_factory=list)


@dataclass
class VerifyReport:
    partitions: list
    offsets: OffsetsCheck | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def problems(self) -> list:
        out = [f"{p.name}: {msg}" for p in self.partitions for msg in p.problems]
        if self.offsets is not None:
            out += [f"{self.offsets.partition} (group {self.offsets.group}): {msg}" for msg in self.offsets.problems]
        return out


def verify_directory(root, manifest: Manifest | None = None, *, aborted_source: str = "auto") -> VerifyReport:
    """Read every partition of ``root`` with :mod:`kafkatx.log.reader` under both isolation levels and
    compare with the manifest: log end and last stable offsets, record counts and checksums, and the
    per-key sums of ``amount_cents`` a read_committed reader must see."""
    root = os.fspath(root)
    manifest = manifest or Manifest.load(root)
    checks = []
    for name, exp in sorted(manifest.partitions.items()):
        with open_partition(os.path.join(root, name)) as p:
            committed = list(p.read(isolation="read_committed", aborted_source=aborted_source))
            uncommitted = list(p.read(isolation="read_uncommitted"))
            check = PartitionCheck(name, p.log_end_offset, p.last_stable_offset, len(committed), len(uncommitted))
        problems = check.problems
        if check.log_end_offset != exp["log_end_offset"]:
            problems.append(f"log end offset {check.log_end_offset}, manifest {exp['log_end_offset']}")
        if check.last_stable_offset != exp["last_stable_offset"]:
            problems.append(f"last stable offset {check.last_stable_offset}, manifest {exp['last_stable_offset']}")
        for label, records, want in (("read_committed", committed, exp["read_committed"]),
                                     ("read_uncommitted", uncommitted, exp["read_uncommitted"])):  # fmt: skip
            got = record_checksum(records)
            if got != (want["records"], want["sha256"]):
                problems.append(f"{label}: {got[0]} records (sha256 {got[1][:12]}), manifest {want['records']} "
                                f"(sha256 {want['sha256'][:12]})")  # fmt: skip
        sums = defaultdict(int)
        foreign, first = 0, None  # records that are not the generator's: counted, the first one described
        for r in committed:
            try:
                key, amount = _amount_cents(r)
            except ValueError as exc:
                foreign += 1
                first = first or f"record at offset {r.offset} is not a generated record: {exc}"
                continue
            sums[key] += amount
        if foreign:
            problems.append(first + (f" (and {foreign - 1} more)" if foreign > 1 else ""))
        if dict(sums) != exp["read_committed"]["amount_cents_by_key"]:
            problems.append("read_committed per-key sums of amount_cents differ from the manifest")
        checks.append(check)
    return VerifyReport(checks, _check_offsets(root, manifest.consumer_offsets) if manifest.consumer_offsets else None)


def _check_offsets(root: str, exp: dict) -> OffsetsCheck:
    """Replay the group's ``__consumer_offsets`` partition (:func:`kafkatx.grouplog.load_offsets`) and compare
    its committed offsets with the manifest's; no offsets may be left pending (no open transaction sent any)."""
    from ..grouplog import load_offsets

    group, name = exp["group"], exp["partition"]
    path = os.path.join(root, name)  # (a __consumer_offsets-N name: Manifest.from_dict checked it)
    if not os.path.isdir(path):
        return OffsetsCheck(group, name, {}, [f"{name} is not a partition directory of {root}"])
    state = load_offsets(path)
    got = {f"{t}-{p}": c.offset for (g, t, p), c in state.offsets.items() if g == group}
    check = OffsetsCheck(group, name, got)
    if got != exp["offsets"]:
        differ = sorted(k for k in set(got) | set(exp["offsets"]) if got.get(k) != exp["offsets"].get(k))
        first = differ[0]
        check.problems.append(f"committed offsets differ from the manifest for {len(differ)} partitions (first "
                              f"{first}: {got.get(first)}, manifest {exp['offsets'].get(first)})")  # fmt: skip
    pending = sum(len(v) for v in state.pending.values())
    if pending:
        check.problems.append(f"{pending} offsets are pending in open transactions; the manifest has none")
    return check


def _amount_cents(record) -> tuple[str, int]:
    """(key, amount_cents) of a record the generator wrote; raises ValueError saying why another one is not."""
    if record.key is None:
        raise ValueError("null key")
    if record.value is None:
        raise ValueError("null value")
    try:
        key = record.key.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"key is not UTF-8 ({exc})") from None
    try:
        value = json.loads(record.value)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"value is not JSON ({exc})") from None
    amount = value.get("amount_cents") if isinstance(value, dict) else None
    if type(amount) is not int:
        raise ValueError(f"value has no integer amount_cents ({bytes(record.value[:40])!r})")
    return key, amount
