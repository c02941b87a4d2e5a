"""The memory website: plain functions that turn a memory repository into pages.

``snapshot`` reads the repository once; ``pages`` renders every page as
Markdown (memory text escaped or sanitized on the way); ``plugin`` (memsite's
MkDocs plugin) is the only module that knows MkDocs, adding the pages to a
build with ``File.generated``; ``hooks`` runs it for repositories made before.
"""
