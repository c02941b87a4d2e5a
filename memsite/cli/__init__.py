"""The ``memsite`` command: a thin shell over the Python API.

The rules every command follows (``tests/test_cli_shell.py`` checks each):

- A command computes nothing the facade does not offer: it calls
  :class:`memsite.MemoryStore` (and ``memsite.site`` for the website) and
  formats what comes back. From below the facade it imports only formatting,
  terminal and input helpers, and constants its options show.
- Errors are handled in one place, :class:`~memsite.cli.common.MemsiteGroup`:
  a ``MemsiteError`` from any command is one line on stderr and exit status 1,
  never a traceback (``--debug`` shows one for an unexpected error).
- Options that mean the same on every command are declared once, in
  :mod:`memsite.cli.common`: ``--json`` (print the result as JSON), ``--by
  AGENT`` (only memories that agent wrote), ``--as-of WHEN``, and the filters
  ``-c/--category`` and ``--all`` (superseded memories too). ``--agent``,
  before or after any command, says who writes.
"""

from . import agents, doctor, learning, memories, protocol, site  # noqa: F401 (they register the commands)
from .common import main

__all__ = ["main"]
