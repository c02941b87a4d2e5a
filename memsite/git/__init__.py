"""Git plumbing: objects, packs, refs, the index and the working tree, and the one door into git.

Knows nothing about memories. Everything it writes is read back by git itself
in the tests (``git fsck --strict``, ``git cat-file``, ``git status``).
Modules outside this package reach git only through :class:`Repository` (and
:func:`merge_file` where there is no repository): no subprocess of git, no
GitPython, anywhere else.
"""

from .commits import Author
from .object_store import ObjectStore
from .objects import Entry, blob_id
from .pack import PACK_TMP_PREFIX
from .refs import RefMoved, Refs
from .repo import Repository
from .settings import git_environment
from .worktree import FilesAhead

__all__ = ["PACK_TMP_PREFIX", "Author", "Entry", "FilesAhead", "ObjectStore", "RefMoved", "Refs", "Repository", "blob_id",
           "git_environment"]
