"""The memory website: plain functions that turn a memory repository into pages.

``snapshot`` reads the repository once; ``pages`` renders every page as
Markdown (memory text escaped or sanitized on the way); ``generate`` is
memsite's own step before and after a generator renders them (memory pages,
redirects, the search index); ``output`` writes a build into a fresh folder
swapped in whole. ``plugin`` (memsite's MkDocs plugin, also run by
ProperDocs) hands the pages to MkDocs with ``File.generated``; ``hooks`` runs
it for repositories made before; ``build`` runs MkDocs, ProperDocs or
Zensical (``memsite build --engine``).
"""
