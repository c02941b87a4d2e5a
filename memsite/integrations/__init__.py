"""Surfaces for agent frameworks: the MCP server, AgentScope memory, a LangGraph store, Claude's memory tool,
Google ADK's memory service.

Each needs its optional extra (``memsite[mcp]``, ``memsite[agentscope]``,
``memsite[langgraph]``, ``memsite[anthropic]``, ``memsite[adk]``; the OpenAI
Agents SDK attaches the MCP server: ``memsite[openai-agents]``) and is
imported only when used, so the base install never loads them.
"""

from __future__ import annotations

from importlib import metadata


def unusable(what: str, package: str, wanted: str, extra: str, error: ImportError) -> str:
    """Why ``what`` cannot load, in one line naming the version of ``package`` found (or that there is none)."""
    try:
        found = metadata.version(package)
    except metadata.PackageNotFoundError:
        return f"{what} needs {package} {wanted}, which is not installed; pip install 'memsite[{extra}]'"
    return (f"{what} needs {package} {wanted}; {package} {found} is installed and cannot be used ({error}); "
            f"pip install 'memsite[{extra}]'")
