"""The memory store: memory files, catalog, transactions, activity and vectors over memsite.git."""

from .memories import Storage
from .transaction import Transaction

__all__ = ["Storage", "Transaction"]
