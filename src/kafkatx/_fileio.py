"""Durable file writes shared by the modules that write Kafka's files."""

from __future__ import annotations

import os


def fsync_dir(directory) -> None:
    """fsync a directory, so a rename or a new file in it survives a crash (no-op where unsupported)."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path, data, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` all at once: write a temporary file, fsync it, rename it over the
    target and fsync the directory (without ``fsync``, only the write and the rename)."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))
