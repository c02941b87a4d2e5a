"""memsite: agent memory in a git repository, read as a website, reviewed as pull requests.

What this module exports is the public API, under semantic versioning
(CHANGELOG.md): the names in ``__all__``, and every type a public method takes
or returns is among them (``tests/test_api_surface.py`` checks both). Every
exported class and function is also inside the error boundary: the loop at the
end translates OS, SQLite and git failures into memsite's errors at each public
method (:func:`memsite.storage.failures.boundary`), so a method added later is
covered without a decorator of its own.
"""

from .api import MemoryStore, from_env
from .features.check import CheckResult
from .features.doctor import Finding
from .features.extract import Candidate, Extractor
from .features.history import DayReport
from .features.migrate import Migration
from .features.protocol import Task
from .features.purge import PurgePlan, PurgeResult
from .features.recall import Hit
from .features.relevance import Why
from .features.review import Change, Diff
from .features.skills import SkillCandidate, render_skill
from .features.sync import IntegrateResult, SyncResult
from .features.world import World
from .foundation.config import Capacity, Category, Config, Watermark
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
from .storage.failures import boundary, translated

__version__ = "0.2.0"

__all__ = [
    "CacheError",
    "Candidate",
    "Capacity",
    "Category",
    "Change",
    "CheckResult",
    "Config",
    "ConfigError",
    "ConflictError",
    "DayReport",
    "Diff",
    "DiskFull",
    "Extractor",
    "Finding",
    "FormatError",
    "Hit",
    "IntegrateResult",
    "InvalidInput",
    "LLMError",
    "Memory",
    "MemoryStore",
    "MemsiteError",
    "Migration",
    "NotFound",
    "ProtocolError",
    "PurgePlan",
    "PurgeResult",
    "RepositoryError",
    "SecretFound",
    "SkillCandidate",
    "SyncResult",
    "Task",
    "Transaction",
    "Watermark",
    "Why",
    "World",
    "decay_score",
    "from_env",
    "render_skill",
    "short_id",
]

for _name in __all__:
    _public = globals()[_name]
    if isinstance(_public, type):
        if not issubclass(_public, BaseException):
            boundary(_public)
    else:
        globals()[_name] = translated(_public)
del _name, _public
