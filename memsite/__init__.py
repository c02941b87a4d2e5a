"""memsite: agent memory in a git repository, read as a website, reviewed as pull requests."""

from .api import MemoryStore, from_env
from .features.extract import Candidate, Extractor
from .features.protocol import Task
from .features.purge import PurgePlan, PurgeResult
from .features.skills import SkillCandidate, render_skill
from .foundation.config import Config
from .foundation.decay import decay_score
from .foundation.errors import (
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
from .foundation.record import Memory, short_id
from .storage import Transaction

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
    "PurgePlan",
    "PurgeResult",
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
