"""The git settings memsite's own writes must honour, read once when a repository is opened.

memsite writes objects, refs, reflogs and the index itself instead of running
git, so it does what git would do with the same configuration:

- ``extensions.objectFormat`` / ``extensions.refStorage``: memsite writes
  SHA-1 objects and loose ref files; a repository using anything else is
  refused at open rather than silently corrupted;
- ``core.logAllRefUpdates``: whether a missing reflog is created;
- ``core.fsync``, ``core.fsyncObjectFiles`` and ``core.fsyncMethod``: which
  files are flushed to disk, and how;
- ``core.looseCompression`` / ``core.compression``: the zlib level of the
  objects memsite writes (memory clones store them: level 0);
- ``gc.auto`` / ``gc.autoPackLimit``: whether git's automatic maintenance
  runs. With it on, a commit's objects go into one small pack, and memsite
  merges its packs as they add up; with it off, they are written loose, as
  git would, and left to whoever runs maintenance.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..foundation.errors import RepositoryError

# core.fsync words and the components each names (git 2.39, environment.c).
_COMPONENTS = {
    "loose-object": {"loose-object"},
    "pack": {"pack"},
    "pack-metadata": {"pack-metadata"},
    "commit-graph": {"commit-graph"},
    "index": {"index"},
    "reference": {"reference"},
    "objects": {"loose-object", "pack"},
    "derived-metadata": {"pack-metadata", "commit-graph"},
    "committed": {"loose-object", "pack", "reference"},
    "added": {"loose-object", "pack", "reference", "index"},
    "all": {"loose-object", "pack", "pack-metadata", "commit-graph", "index", "reference"},
}
# What git flushes when core.fsync is not set: packs and their metadata, not loose objects, refs or the index.
DEFAULT_FSYNC = frozenset({"pack", "pack-metadata", "commit-graph"})
FSYNC_METHODS = ("fsync", "writeout-only", "batch")

Flush = Callable[[int], None]


def parse_fsync(value: str) -> frozenset[str]:
    """The components a ``core.fsync`` value names, read as git 2.39 reads it.

    Words are separated by commas; ``-word`` removes; a word may be a prefix
    (git matches ``strncmp``); ``none`` as the last word drops the default.
    """
    current = set(DEFAULT_FSYNC)
    positive: set[str] = set()
    negative: set[str] = set()
    words = value.split(",")
    for i, raw in enumerate(words):
        word = raw.lstrip(" \t\n\r")
        if word == "none" and i == len(words) - 1:  # git compares the whole remainder with 'none'
            current = set()
            continue
        negated = word.startswith("-")
        word = word[1:] if negated else word
        if not word:
            if negated:
                break  # git stops reading at a lone '-'
            continue
        for name, components in _COMPONENTS.items():
            if name.startswith(word):
                (negative if negated else positive).update(components)
    return frozenset((current - negative) | positive)


# What points git at a repository. A git hook inherits them (GIT_DIR from a
# linked worktree's hooks, GIT_INDEX_FILE from a commit's): passed on, they
# would send the git commands memsite runs in its repository to that one.
LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE")


def git_environment(**given: str) -> dict[str, str]:
    """The environment of a git command memsite runs in a repository it names (by folder or ``--git-dir``)."""
    env = {name: value for name, value in os.environ.items() if name not in LOCATION_VARIABLES}
    env.update(given)
    return env


class GitConfig:
    """git's configuration as ``git config --list`` shows it: every level, the later value of a key winning.

    Keys are looked up as git spells them, in any case: ``core.bare``,
    ``merge.memsite-memory.driver`` (the subsection as it was written).
    """

    def __init__(self, values: Mapping[str, str], local: Mapping[str, str]) -> None:
        self._values = dict(values)  # every level
        self._local = dict(local)  # this clone's own (.git/config, and a worktree's config.worktree)

    @classmethod
    def parse(cls, listing: bytes) -> GitConfig:
        """Read what ``git config -z --list --show-scope`` printed: ``<scope>\\0<key>\\n<value>\\0`` for each."""
        values: dict[str, str] = {}
        local: dict[str, str] = {}
        fields = listing.decode("utf-8", "surrogateescape").split("\0")
        for scope, item in zip(fields[0::2], fields[1::2]):
            key, newline, value = item.partition("\n")
            key = _normal_key(key)
            values[key] = value if newline else "true"  # a key with no '=' is a true boolean, to git
            if scope in ("local", "worktree"):
                local[key] = values[key]
        return cls(values, local)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of ``key`` (the last one set, as git's ``--get`` gives), or ``default``."""
        return self._values.get(_normal_key(key), default)

    def __contains__(self, key: str) -> bool:
        return _normal_key(key) in self._values

    def local(self, key: str) -> str | None:
        """The value of ``key`` in this clone's own config (``.git/config``), or None."""
        return self._local.get(_normal_key(key))


def _normal_key(key: str) -> str:
    """``Section.Sub.Option`` as git compares keys: section and option in any case, the subsection as it is."""
    section, _, rest = key.partition(".")
    sub, dot, option = rest.rpartition(".")
    return f"{section.lower()}.{sub}{dot}{option.lower()}" if dot else f"{section.lower()}.{option.lower()}"


def _bool(value: Any, key: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "yes", "on"):
        return True
    if text in ("false", "no", "off", ""):
        return False
    try:
        return int(text) != 0
    except ValueError:
        raise RepositoryError(f"git config {key} = {value!r} is not a boolean; "
                              f"fix it with 'git config {key} true'") from None


def _level(value: Any) -> int:
    """A zlib level as git reads ``core.compression``: -1 is zlib's default (6); out of range, git's own 1."""
    try:
        level = int(str(value).strip())
    except ValueError:
        return 1
    return 6 if level == -1 else level if 0 <= level <= 9 else 1


def _int(value: Any, default: int) -> int:
    """A number as git reads one (``1k`` is 1024); a value git would refuse keeps git's default here."""
    text = str(value).strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return default


def _full_flush(fd: int) -> None:
    if sys.platform == "darwin":  # fsync alone leaves the data in the drive's cache there; git asks for more
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
        except OSError:
            pass
    os.fsync(fd)


def _writeout_flush(fd: int) -> None:
    # git hands the data to the disk without waiting for a cache flush
    # (sync_file_range); Python has no such call, and fsync is the safe side.
    os.fsync(fd)


@dataclass(frozen=True)
class GitSettings:
    """What memsite reads from git's configuration (every level: system, global, repository)."""

    object_format: str = "sha1"
    ref_storage: str = "files"
    log_refs: str = "normal"  # core.logAllRefUpdates: "none", "normal" (true) or "always"
    fsync: frozenset[str] = DEFAULT_FSYNC
    fsync_method: str = "fsync"
    fsync_object_files: bool = False
    loose_compression: int = 1  # core.looseCompression, else core.compression, else 1 (git's default)
    auto_gc: int = 6700  # gc.auto: 0 turns git's automatic maintenance off
    auto_pack_limit: int = 50  # gc.autoPackLimit: packs from which 'git gc --auto' repacks everything; 0: never
    bare: bool = False  # core.bare: in a linked worktree, whether the repository it belongs to has no worktree itself

    @classmethod
    def read(cls, config: GitConfig) -> GitSettings:
        """Read from git's configuration (see :meth:`memsite.git.commands.Git.config`)."""
        def get(section: str, option: str, default: Any) -> Any:
            return config.get(f"{section}.{option}", default)

        log = get("core", "logallrefupdates", None)
        if log is None:
            log_refs = "normal"  # git's default in a repository with a working tree
        elif str(log).strip().lower() == "always":
            log_refs = "always"
        else:
            log_refs = "normal" if _bool(log, "core.logAllRefUpdates") else "none"
        method = str(get("core", "fsyncmethod", "fsync")).strip().lower()
        if method not in FSYNC_METHODS:
            method = "fsync"  # git warns about an unknown method and keeps its default
        return cls(
            object_format=str(get("extensions", "objectformat", "sha1")).strip().lower(),
            ref_storage=str(get("extensions", "refstorage", "files")).strip().lower(),
            log_refs=log_refs,
            fsync=parse_fsync(str(get("core", "fsync", ""))) if "core.fsync" in config else DEFAULT_FSYNC,
            fsync_method=method,
            fsync_object_files=_bool(get("core", "fsyncobjectfiles", "false"), "core.fsyncObjectFiles"),
            loose_compression=_level(get("core", "loosecompression", get("core", "compression", 1))),
            auto_gc=_int(get("gc", "auto", 6700), 6700),
            auto_pack_limit=_int(get("gc", "autopacklimit", 50), 50),
            bare=_bool(get("core", "bare", "false"), "core.bare"),
        )

    def check_supported(self, where: object) -> None:
        """Refuse a repository memsite would write wrongly; ``where`` names it in the message.

        Raises:
            RepositoryError: it uses another object format or ref storage.
        """
        if self.object_format != "sha1":
            raise RepositoryError(f"{where}: memsite supports SHA-1 repositories; this one uses {self.object_format}")
        if self.ref_storage != "files":
            raise RepositoryError(f"{where}: memsite supports repositories with loose ref files; "
                                  f"this one uses {self.ref_storage}")

    def autocreate_reflog(self, ref: str) -> bool:
        """Whether a ref update creates a missing reflog (as git's ``should_autocreate_reflog``)."""
        if self.log_refs == "always":
            return True
        if self.log_refs == "normal":
            return ref == "HEAD" or ref.startswith(("refs/heads/", "refs/remotes/", "refs/notes/"))
        return False

    @property
    def maintained(self) -> bool:
        """Whether git's automatic maintenance is on (``gc.auto`` and ``gc.autoPackLimit`` both non-zero)."""
        return self.auto_gc > 0 and self.auto_pack_limit > 0

    def flush(self, component: str) -> Flush | None:
        """How to flush a file of ``component`` (``loose-object``, ``pack``, ``index``, ...); None: not at all."""
        wanted = component in self.fsync or (component == "loose-object" and self.fsync_object_files)
        if not wanted or os.environ.get("GIT_TEST_FSYNC", "1").strip().lower() in ("0", "false", "no", "off"):
            return None
        return _writeout_flush if self.fsync_method == "writeout-only" else _full_flush
