"""File reads and durable writes shared by the modules that read and write Kafka's files."""

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


def read_whole_file(path) -> bytes:
    """The contents of a small file, read with one descriptor and no buffered file object (a partition of
    thousands of segments reads as many index files)."""
    fd = os.open(os.fspath(path), os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
