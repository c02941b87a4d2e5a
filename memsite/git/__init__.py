"""Git plumbing: objects, packs, refs, the index and the working tree, and the one door into git.

Knows nothing about memories. Everything it writes is read back by git itself
in the tests (``git fsck --strict``, ``git cat-file``, ``git status``).
Modules outside this package reach git only through :class:`Repository`
(``repo.git`` runs git in it), :class:`Git` for a folder that is not a
repository yet, and :func:`merge_file`: no git process of their own
(``tests/test_layers.py`` checks).
"""

from .commands import Git, GitFailed, merge_file
from .commits import Author
from .maintenance import keep_of
from .object_database import ObjectDatabase
from .objects import Entry, blob_id
from .pack import PACK_TMP_PREFIX
from .refs import RefMoved, Refs
from .repo import Repository
from .settings import GitConfig, git_environment
from .worktree import FilesAhead

__all__ = ["PACK_TMP_PREFIX", "Author", "Entry", "FilesAhead", "Git", "GitConfig", "GitFailed", "ObjectDatabase",
           "RefMoved", "Refs", "Repository", "blob_id", "git_environment", "keep_of", "merge_file"]
