"""Memory files as an earlier build read them: a site build parses only the files that changed since.

Parsing 100,000 memory files (YAML frontmatter, checked field by field)
takes most of a build that follows a few writes. What a file parses to
depends only on its bytes, its folder and memsite's settings, so each
folder's memories are kept in ``.memsite/site-parsed/`` (a cache: deleting it
costs one slower build) with the size, times and inode each file had and a
digest of its bytes; a file whose size, times and inode are the same is not
read again. Each memory's entry in the lists
(:class:`Entries`) is kept there too, made again only for a memory read anew.

The cache is Python pickles, which run code when read: one is read only
when it and its folder belong to this user and no one else may write them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..features.expiry import SITE_PARSED
from ..foundation.config import Config
from ..foundation.record import Memory
from .output import version

FOLDER = f".memsite/{SITE_PARSED}"
Signature = tuple[int, int, int, int]  # size, mtime_ns, ctime_ns, inode
Kept = tuple[Signature, Memory, str]  # a file's signature when it was read, its memory, a digest of its bytes
FIELDS = tuple(field.name for field in dataclasses.fields(Memory))  # in the order Memory() takes them


class Parsed:
    """The memories of one build's read, by folder under memories/ (``under`` paths); :meth:`save` keeps them."""

    def __init__(self, root: Path, config: Config) -> None:
        self.folder = root / FOLDER
        self.salt = hashlib.sha256(repr((version(), config)).encode("utf-8")).hexdigest()[:16]
        self.kept: dict[str, dict[str, Kept]] = {}
        self.seen: dict[str, set[str]] = {}
        self.changed: set[str] = set()
        self.origins: dict[str, tuple[str, str, str]] = {}  # ``under`` -> what its memory was read from

    def read(self, path: str, under: str, parse: Callable[[bytes], Memory | None]) -> Memory | None:
        """The memory in the file ``path`` (``under`` memories/): as parsed before when the file is the same,
        else ``parse(its bytes)`` (whose errors are raised, and nothing kept). ``origins[under]`` then says what
        it was read from (these settings, the file's place and a digest of its bytes): the same origin, the same
        memory, in any copy of the repository."""
        folder, _, name = under.rpartition("/")
        entries = self._entries(folder)
        self.seen.setdefault(folder, set()).add(name)
        st = os.stat(path)
        signature = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        hit = entries.get(name)
        if hit is not None and hit[0] == signature:
            self.origins[under] = (self.salt, under, hit[2])
            return hit[1]
        if hit is not None:
            del entries[name]
            self.changed.add(folder)
        with open(path, "rb") as file:
            data = file.read()
        memory = parse(data)
        digest = hashlib.sha256(data).hexdigest()[:24]
        self.origins[under] = (self.salt, under, digest)
        if memory is not None:
            entries[name] = (signature, memory, digest)
            self.changed.add(folder)
        return memory

    def save(self) -> None:
        """Write the folders whose files changed (or went) since they were kept; a cache that cannot be written
        (a read-only checkout) is left as it is."""
        for folder, entries in self.kept.items():
            gone = set(entries) - self.seen.get(folder, set())
            for name in gone:
                del entries[name]
            if gone or folder in self.changed:
                try:
                    self._write(folder, entries)
                except OSError:
                    return

    def _file(self, folder: str) -> Path:
        return self.folder / f"{hashlib.sha256((self.salt + folder).encode('utf-8')).hexdigest()[:24]}.pickle"

    def _entries(self, folder: str) -> dict[str, Kept]:
        entries = self.kept.get(folder)
        if entries is None:
            entries = self.kept[folder] = self._load(folder)
        return entries

    def _load(self, folder: str) -> dict[str, Kept]:
        data = _read(self._file(folder))
        if data.get("fields") != FIELDS:
            return {}  # (one an earlier version wrote: read anew)
        try:
            return {name: (signature, Memory(*values), digest)
                    for name, (signature, values, digest) in data["memories"].items()}
        except (TypeError, ValueError, AttributeError):
            return {}

    def _write(self, folder: str, entries: dict[str, Kept]) -> None:
        """Each memory kept as the values of its fields (``FIELDS``): read back in half the time a pickled
        object takes (a second at 100,000 memories)."""
        _write(self._file(folder), {"fields": FIELDS, "memories": {
            name: (signature, tuple(getattr(memory, field) for field in FIELDS), digest)
            for name, (signature, memory, digest) in entries.items()}})


class Entries:
    """Each memory's entry in the lists as the last build made it, by what the memory was read from
    (:attr:`Parsed.origins`): a build makes only the entries of the memories read anew.

    Kept beside the parsed memories (``FOLDER``: a purge drops them all), read
    only when they and their folder belong to this user and no one else may
    write them, as those are.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / FOLDER / "entries.pickle"  # (an origin names the settings it was read with)
        self.before: dict[str, tuple[object, str]] = _read(self.path)
        self.now: dict[str, tuple[object, str]] = {}
        self.made = 0

    def get(self, memory_id: str, origin: object, make: Callable[[], str]) -> str:
        """The entry of ``memory_id``: as made before from the same ``origin``, else ``make()``; None as the
        origin: made, and not kept (an entry that depends on more than its memory)."""
        hit = self.before.get(memory_id)
        if origin is not None and hit is not None and hit[0] == origin:
            made = hit[1]
        else:
            made = make()
            self.made += 1
        if origin is not None:
            self.now[memory_id] = (origin, made)
        return made

    def save(self) -> None:
        """Keep the entries made in this build for the next, once they are more than a few of them (writing
        100,000 entries costs more than making a few hundred again); not where the cache cannot be written."""
        if self.made <= len(self.now) // 20 and self.before:
            return
        try:
            _write(self.path, self.now)
        except OSError:
            pass  # a read-only checkout: the next build makes them again


def _write(path: Path, data: object) -> None:
    """Write ``data`` as a pickle only this user may read and write (a temporary file, then renamed)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.memsite-tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        pickle.dump(data, file, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(temp, path)


def _read(path: Path) -> dict[Any, Any]:
    """The dictionary pickled in ``path`` when it and its folder are this user's own (:func:`_own`); else, or
    when it cannot be read, an empty one."""
    try:
        if not (_own(path.parent) and _own(path)):
            return {}
        with open(path, "rb") as file:
            data = pickle.load(file)  # (this user's own file, writable by no one else: _own)
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _own(path: Path) -> bool:
    """Whether ``path`` belongs to this user and no one else may change it."""
    st = os.lstat(path)
    return (st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)))
