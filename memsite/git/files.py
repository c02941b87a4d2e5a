"""Whole files written the way git writes them: to a temporary name, in full, then renamed into place."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``: a full disk first shortens a write, and only the next one fails."""
    view, done = memoryview(data), 0
    while done < len(data):
        done += os.write(fd, view[done:])


def pwrite_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the start of the file ``fd`` (whatever follows it stays)."""
    view, done = memoryview(data), 0
    while done < len(data):
        done += os.pwrite(fd, view[done:], done)


def open_in_folder(path: str, flags: int, mode: int) -> int:
    """``os.open(path, flags, mode)``, making the folder first if it is missing."""
    try:
        return os.open(path, flags, mode)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, flags, mode)


def store(path: str, tmp: str, data: bytes, *, mode: int, flush: Callable[[int], None] | None = None) -> None:
    """Put ``data`` at ``path`` through ``tmp`` (same folder): a reader or a crash never sees half a file.

    The temporary file is removed if anything fails (a full disk leaves no
    partial file behind); its folder is made if missing.
    """
    fd = open_in_folder(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | BINARY, mode)
    try:
        try:
            write_all(fd, data)
            if flush is not None:
                flush(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
