"""memsite: agent memory in a git repository, read as a website, reviewed as pull requests."""

from .config import Config
from .errors import (
    ConfigError,
    ConflictError,
    FormatError,
    InvalidInput,
    MemsiteError,
    NotFound,
    RepositoryError,
    SecretFound,
)
from .model import Memory
from .ranking import decay_score
from .store import MemoryStore, Transaction

__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "ConflictError",
    "FormatError",
    "InvalidInput",
    "Memory",
    "MemoryStore",
    "MemsiteError",
    "NotFound",
    "RepositoryError",
    "SecretFound",
    "Transaction",
    "decay_score",
]
