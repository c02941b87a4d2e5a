"""MkDocs hooks that render this memory repository as its website (see memsite.site.hooks)."""

from memsite.site.hooks import on_config, on_files  # noqa: F401
