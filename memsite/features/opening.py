"""The storage as every part of memsite opens it.

:class:`memsite.storage.Storage` imports no feature, so the two it needs are
handed to it here, in one place the facade and ``doctor`` share: the git
settings every clone needs (merge drivers, attributes; :func:`clone_settings`)
and the history's account of a removed memory (:func:`removal`, for the
"removed in commit ..." answer to a missing id).
"""

from __future__ import annotations

import os
from typing import Any

from ..storage import Storage
from .history import removal
from .merge import clone_settings


def open_storage(path: str | os.PathLike[str] = ".", agent: str | None = None, **options: Any) -> Storage:
    """Open the storage at ``path`` for ``agent``; ``options`` are :class:`Storage`'s own (clock, embedder...)."""
    return Storage(path, agent, git_settings=clone_settings, removal=removal, **options)
