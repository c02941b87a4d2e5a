"""The ``memsite`` command: a thin shell over the Python API.

Commands hold no logic of their own; a ``MemsiteError`` becomes one line on
stderr and exit status 1, never a traceback.
"""

from . import agents, doctor, learning, memories, protocol, site  # noqa: F401 (they register the commands)
from .common import main

__all__ = ["main"]
