"""Surfaces for agent frameworks: the MCP server and AgentScope's long-term memory.

Each needs its optional extra (``memsite[mcp]``, ``memsite[agentscope]``) and
is imported only when used, so the base install never loads them.
"""
