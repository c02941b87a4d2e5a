"""MkDocs hooks that render this memory repository as its website (see memsite.site.hooks)."""

from memsite.site.hooks import *  # noqa: F403 (every hook memsite defines)
