"""The one exception tree: core code raises these, the surfaces translate them.

The CLI turns a ``MemsiteError`` into one line on stderr; the site plugin turns it
into a MkDocs ``PluginError``. A message names what is wrong, where, and the fix.
"""

from __future__ import annotations


class MemsiteError(Exception):
    """Base class of every error memsite raises on purpose."""


class ConfigError(MemsiteError):
    """The memsite configuration is invalid; the message lists every problem."""


class InvalidInput(MemsiteError):
    """An argument to a write was refused; nothing was written."""


class SecretFound(InvalidInput):
    """Text about to be written looks like a credential; nothing was written."""


class FormatError(MemsiteError):
    """A file in the repository breaks the memory format (file, field, fix)."""


class NotFound(MemsiteError):
    """No memory (or other record) with the given id exists."""


class ProtocolError(MemsiteError):
    """A task could not be started or closed as the memory protocol requires.

    ``missing`` names the closing steps that could not be done (nothing was
    committed); it is empty when the problem is starting the task.
    """

    def __init__(self, message: str, missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing = list(missing or [])


class RepositoryError(MemsiteError):
    """The git repository is missing, unusable, or was changed under a write."""


class ConflictError(RepositoryError):
    """The branch moved during a write in a way memsite could not retry."""


class LLMError(MemsiteError):
    """A language-model endpoint failed, timed out, or answered with something unusable."""


class DiskFull(RepositoryError):
    """The disk (or quota) ran out during a write; nothing was written."""


class CacheError(RepositoryError):
    """The derived SQLite files in ``.memsite/`` failed; they can be deleted and rebuilt."""
