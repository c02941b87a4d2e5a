"""The MkDocs hooks of a repository made before memsite was a plugin: ``hooks/memsite_hooks.py`` imports these.

They are the events of one :class:`~memsite.site.plugin.MemsitePlugin` that
reads its settings from ``extra.memsite`` (and notes that they moved). MkDocs
imports a hook module once per process; the plugin resets its state in
``on_config``.
"""

from __future__ import annotations

from .plugin import MemsitePlugin

__all__ = ["on_startup", "on_config", "on_pre_build", "on_files", "on_page_content", "on_post_page", "on_post_build",
           "on_build_error", "on_shutdown"]

_plugin = MemsitePlugin(from_hooks=True)
on_startup = _plugin.on_startup
on_config = _plugin.on_config
on_pre_build = _plugin.on_pre_build
on_files = _plugin.on_files
on_page_content = _plugin.on_page_content
on_post_page = _plugin.on_post_page
on_post_build = _plugin.on_post_build
on_build_error = _plugin.on_build_error
on_shutdown = _plugin.on_shutdown
