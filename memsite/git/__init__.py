"""Git plumbing: objects, refs, the index and the working tree.

Knows nothing about memories. Everything it writes is read back by git itself
in the tests (``git fsck --strict``, ``git cat-file``, ``git status``).
"""

from .objects import PACK_TMP_PREFIX, Entry, ObjectStore, blob_id
from .refs import RefMoved, Refs
from .repo import Author, Repository
from .settings import git_environment
from .worktree import FilesAhead

__all__ = ["PACK_TMP_PREFIX", "Author", "Entry", "FilesAhead", "ObjectStore", "RefMoved", "Refs", "Repository", "blob_id",
           "git_environment"]
