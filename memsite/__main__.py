"""``python -m memsite``: the same as the ``memsite`` command."""

from .cli import main

main(prog_name="memsite")
