"""Commit objects: who wrote them, their trees and parents, and the files they hold.

Read from the object store directly (a commit never changes, so each one's
root tree is remembered); a commit is written as git writes one, and never
moves a branch (see :meth:`Repository.commit` for that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..foundation.errors import RepositoryError
from .object_database import ObjectDatabase
from .objects import Entry

WRITER_DOMAIN = "memsite.invalid"  # of the email on every commit memsite writes (.invalid: a name, not a mailbox)


@dataclass(frozen=True)
class Author:
    name: str
    email: str

    @classmethod
    def writer(cls, name: str) -> Author:
        """The identity of ``name`` (an agent) on the commits memsite writes: a name at WRITER_DOMAIN."""
        return cls(name, f"{name}@{WRITER_DOMAIN}")

    def ident(self, when: int) -> str:
        return f"{self.name} <{self.email}> {when} +0000"


class Commits:
    """The commits of one repository, read and written through its :class:`ObjectDatabase`."""

    def __init__(self, objects: ObjectDatabase) -> None:
        self.objects = objects
        self._trees: dict[str, bytes] = {}  # commit id -> its root tree id

    def root_tree(self, commit: str | None) -> bytes | None:
        """The root tree id of ``commit`` (None for no commit)."""
        if commit is None:
            return None
        tree = self._trees.get(commit)  # a commit never changes: each write reads its parent's twice
        if tree is None:
            kind, data = self.objects.read(bytes.fromhex(commit))
            if kind != "commit" or not data.startswith(b"tree "):
                raise RepositoryError(f"{commit}: is not a commit")
            tree = self._remember_tree(commit, bytes.fromhex(data[5:45].decode()))
        return tree

    def _remember_tree(self, commit: str, tree: bytes) -> bytes:
        if len(self._trees) > 4096:
            self._trees.clear()
        self._trees[commit] = tree
        return tree

    def parents(self, commit: str) -> list[str]:
        """The parent commit ids of ``commit``."""
        return [parent.decode() for parent in self.header(commit).get(b"parent", [])]

    def header(self, commit: str) -> dict[bytes, list[bytes]]:
        """The header of ``commit``: each field's values (tree, parent, author, committer), in order."""
        return self._parse(commit)[0]

    def subject(self, commit: str) -> tuple[str, int]:
        """The first line of ``commit``'s message, and when it was committed (seconds since the epoch)."""
        fields, message = self._parse(commit)
        committer = fields.get(b"committer", [b""])[-1].split(b" ")
        when = int(committer[-2]) if len(committer) >= 2 and committer[-2].isdigit() else 0
        return message.partition(b"\n")[0].decode("utf-8", "replace"), when

    def _parse(self, commit: str) -> tuple[dict[bytes, list[bytes]], bytes]:
        kind, data = self.objects.read(bytes.fromhex(commit))
        if kind != "commit":
            raise RepositoryError(f"{commit}: is not a commit")
        head, _, message = data.partition(b"\n\n")
        fields: dict[bytes, list[bytes]] = {}
        for line in head.split(b"\n"):
            key, _, value = line.partition(b" ")
            fields.setdefault(key, []).append(value)
        return fields, message

    def files_under(self, commit: str | None, folder: str) -> dict[str, bytes]:
        """Every file under ``folder`` at ``commit``: path -> content."""
        entry = self.objects.lookup(self.root_tree(commit), folder)
        if entry is None or not entry.is_tree:
            return {}
        return {f"{folder}/{rel}": self.objects.read_blob(item.sha) for rel, item in self.objects.walk(entry.sha)}

    def read_file(self, commit: str | None, path: str) -> bytes | None:
        """The bytes of ``path`` at ``commit``, or None if it has no such file."""
        entry = self.objects.lookup(self.root_tree(commit), path)
        if entry is None or entry.is_tree:
            return None
        return self.objects.read_blob(entry.sha)

    def write_change(
        self,
        base: bytes | None,
        entries: Mapping[str, Entry | None],
        parent: str | None,
        message: str,
        author: Author,
        when: int,
    ) -> str | None:
        """Write the trees of ``base`` with ``entries`` (path -> Entry, or None to remove) and a commit of them on top
        of ``parent``; its id, or None if the tree is unchanged."""
        tree = self.objects.apply(base, entries)
        if tree == base:
            return None
        if tree is None:
            tree = self.objects.write(b"tree", b"")
        return self.write(tree, [parent] if parent else [], message, author, when)

    def write(self, tree: bytes, parents: Sequence[str | None], message: str, author: Author, when: int) -> str:
        """Store a commit object of ``tree`` with ``parents`` (no branch moves); returns its id."""
        ident = author.ident(when)
        lines = [f"tree {tree.hex()}", *(f"parent {p}" for p in parents), f"author {ident}", f"committer {ident}",
                 "", message.rstrip("\n") + "\n"]
        commit = self.objects.write(b"commit", "\n".join(lines).encode("utf-8")).hex()
        self._remember_tree(commit, tree)
        return commit


__all__ = ["WRITER_DOMAIN", "Author", "Commits"]
