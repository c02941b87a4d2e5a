"""memsite: agent memory in a git repository, read as a website, reviewed as pull requests."""

from .api import MemoryStore, from_env
from .config import Config
from .errors import (
    CacheError,
    ConfigError,
    ConflictError,
    DiskFull,
    FormatError,
    InvalidInput,
    LLMError,
    MemsiteError,
    NotFound,
    ProtocolError,
    RepositoryError,
    SecretFound,
)
from .extract import Candidate, Extractor
from .model import Memory, short_id
from .protocol import Task
from .ranking import decay_score
from .skills import SkillCandidate, render_skill
from .store import Transaction

__version__ = "0.1.0"

__all__ = [
    "CacheError",
    "Candidate",
    "Config",
    "ConfigError",
    "ConflictError",
    "DiskFull",
    "Extractor",
    "FormatError",
    "InvalidInput",
    "LLMError",
    "Memory",
    "MemoryStore",
    "MemsiteError",
    "NotFound",
    "ProtocolError",
    "RepositoryError",
    "SecretFound",
    "SkillCandidate",
    "Task",
    "Transaction",
    "decay_score",
    "from_env",
    "render_skill",
    "short_id",
]
