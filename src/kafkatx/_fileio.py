"""File reads and durable writes shared by the modules that read and write Kafka's files."""

from __future__ import annotations

import mmap
import os
import threading
from contextlib import contextmanager

# Flags of every descriptor opened on Kafka's files: no newline translation on Windows, not inherited by
# child processes where the OS allows (0 where a flag does not exist).
O_BINARY = getattr(os, "O_BINARY", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_SEEK_LOCK = threading.Lock()


def _pwrite_seek(fd: int, data, offset: int) -> int:
    """``os.pwrite`` where the OS has none (Windows): a seek and a write, under a lock for the process (a
    descriptor kafkatx writes at offsets is written at offsets only)."""
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.write(fd, data)


def _pread_seek(fd: int, n: int, offset: int) -> bytes:
    """``os.pread`` where the OS has none (Windows): a seek and a read, under the same lock."""
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, n)


def _writev_each(fd: int, buffers) -> int:
    """``os.writev`` where the OS has none (Windows): each buffer written in turn.  Returns the bytes
    written, fewer than all at a short write or where an error stops it after some were written (the
    error then comes at the caller's next write), as a short ``writev`` does."""
    done = 0
    for b in buffers:
        view = memoryview(b)
        try:
            n = os.write(fd, view)
        except OSError:
            if done:
                return done
            raise
        done += n
        if n < view.nbytes:
            break
    return done


pwrite = getattr(os, "pwrite", _pwrite_seek)
pread = getattr(os, "pread", _pread_seek)
writev = getattr(os, "writev", _writev_each)


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
    fd = os.open(os.fspath(path), os.O_RDONLY | O_BINARY | O_CLOEXEC)
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


# Files this large are mapped with MADV_HUGEPAGE (below): 2 MiB, a PMD-sized huge page with 4 KiB base pages
# (x86-64, most arm64 kernels; larger elsewhere, where smaller maps are merely advised in vain).
HUGE_MAP_MIN = 2 << 20
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)


def map_read_only(fd: int, size: int) -> mmap.mmap:
    """The first ``size`` bytes (> 0) of the file open at ``fd``, memory-mapped read-only.

    A map of 2 MiB or more is advised ``MADV_HUGEPAGE`` (Linux; transparent huge pages in "madvise" mode,
    the common default): the pages this map reads in from disk then come into the page cache as 2 MiB
    folios, which this and every later map of the file take 2 MiB at a time.  Read in 4 KiB at a time,
    mapping a gigabyte of segments costs ~0.1 s of page-table work on each read and ~0.06 s to unmap;
    in 2 MiB folios, ~0.01 s each.  Pages already cached keep their size.  The advice is a hint: where
    it is refused, nothing else changes."""
    m = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    if size >= HUGE_MAP_MIN and _MADV_HUGEPAGE is not None:
        try:
            m.madvise(_MADV_HUGEPAGE)
        except OSError:  # pragma: no cover - kernels without transparent huge pages
            pass
    return m


def close_map(m) -> None:
    """Close a memory map, unless a view of it is still alive (batches handed out, or the frames of an
    exception's traceback holding a decoder's view): then it is unmapped when the last view goes."""
    try:
        m.close()
    except BufferError:
        pass


@contextmanager
def mapped(path, size: int):
    """The first ``size`` bytes (> 0) of the file at ``path``, memory-mapped read-only for the ``with``
    block.  An error raised in the block is the one that propagates: a view of the map still held by its
    traceback never turns it into a BufferError from closing the map."""
    with open(path, "rb") as fh:
        m = map_read_only(fh.fileno(), size)
    try:
        yield m
    finally:
        close_map(m)
