"""The memory store: the only part of memsite that talks to git."""

from .memories import MemoryStore, Transaction

__all__ = ["MemoryStore", "Transaction"]
