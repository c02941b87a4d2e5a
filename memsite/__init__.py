"""memsite: agent memory in a git repository, read as a website, reviewed as pull requests."""

from .config import Config
from .errors import (
    ConfigError,
    ConflictError,
    FormatError,
    InvalidInput,
    MemsiteError,
    NotFound,
    ProtocolError,
    RepositoryError,
    SecretFound,
)
from .core import from_env
from .model import Memory
from .protocol import Task
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
    "ProtocolError",
    "RepositoryError",
    "SecretFound",
    "Task",
    "Transaction",
    "decay_score",
    "from_env",
]
