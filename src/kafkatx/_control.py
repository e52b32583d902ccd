"""Control records (transaction markers and KRaft control records), shared by both backends."""

from __future__ import annotations

import struct

from .errors import InvalidRecordError

ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = range(7)
CONTROL_TYPE_NAMES = ("abort", "commit", "leader_change", "snapshot_header", "snapshot_footer", "kraft_version",
                      "kraft_voters")  # fmt: skip
CONTROL_TYPE_IDS = {name: i for i, name in enumerate(CONTROL_TYPE_NAMES)}


class ControlRecord:
    """The first record of a control batch, parsed as Kafka does.

    ``type`` is ``"abort"``, ``"commit"``, a KRaft type name, or ``"unknown"`` (ignored by consumers);
    ``type_id`` the raw id.  For ABORT/COMMIT markers ``marker_version`` and ``coordinator_epoch`` come
    from the value (``EndTransactionMarker``); for other types they are ``None`` and ``value`` holds the
    raw bytes of the generated KRaft message.
    """

    __slots__ = ("offset", "timestamp", "type", "type_id", "key_version", "marker_version", "coordinator_epoch",
                 "value")  # fmt: skip

    def __init__(self, offset, timestamp, type_id, key_version, marker_version=None, coordinator_epoch=None,
                 value=None):  # fmt: skip
        self.offset = offset
        self.timestamp = timestamp
        self.type_id = type_id
        self.type = CONTROL_TYPE_NAMES[type_id] if 0 <= type_id < len(CONTROL_TYPE_NAMES) else "unknown"
        self.key_version = key_version
        self.marker_version = marker_version
        self.coordinator_epoch = coordinator_epoch
        self.value = value

    @property
    def is_marker(self) -> bool:
        return self.type_id in (ABORT, COMMIT)

    def _tuple(self):
        return (self.offset, self.timestamp, self.type_id, self.key_version, self.marker_version,
                self.coordinator_epoch, self.value)  # fmt: skip

    def __eq__(self, other):
        if not isinstance(other, ControlRecord):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None

    def __repr__(self):
        extra = (
            f", marker_version={self.marker_version}, coordinator_epoch={self.coordinator_epoch}"
            if self.is_marker
            else ""
        )
        return (f"ControlRecord(type={self.type!r}, type_id={self.type_id}, key_version={self.key_version}, "
                f"offset={self.offset}, timestamp={self.timestamp}{extra})")  # fmt: skip


def parse_control_record(record, position=None, base_offset=None) -> ControlRecord:
    """Parse a control record's key (and marker value) with Java's rules (ControlRecordType,
    EndTransactionMarker): a key under 4 bytes or with a negative version is invalid; versions above 0
    are read as version 0; a marker value under 6 bytes or with a negative version is invalid."""
    key = record.key
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key is shorter than 4 bytes", position, base_offset)
    version, type_id = struct.unpack_from(">hh", key)
    if version < 0:
        raise InvalidRecordError(
            f"invalid version {version} of control record key, may indicate data corruption", position, base_offset
        )
    if type_id not in (ABORT, COMMIT):
        return ControlRecord(record.offset, record.timestamp, type_id, version, value=record.value)
    value = record.value
    if value is None or len(value) < 6:
        raise InvalidRecordError("end transaction marker value is shorter than 6 bytes", position, base_offset)
    marker_version, coordinator_epoch = struct.unpack_from(">hi", value)
    if marker_version < 0:
        raise InvalidRecordError(
            f"invalid version {marker_version} of end transaction marker", position, base_offset
        )
    return ControlRecord(record.offset, record.timestamp, type_id, version, marker_version, coordinator_epoch)
