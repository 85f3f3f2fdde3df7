"""MCP server (stdio transport) exposing the memory operations as tools for agent runtimes.

    agent-memory mcp --db data/agent_memory.duckdb

Tools: remember, ingest, recall, recall_many, prompt, forget, health, build. A tool that fails
on bad input returns an MCP error result whose text is the clear message (never a traceback).
Nothing but the protocol is written to stdout. Over stdio the client is the process that started
the server, so there is no token; the same limits apply as over HTTP (MemoryService: the build
var allow-list, at most 32 queries and 8,000 query characters per call, one build at a time).
"""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

from recall_shim.errors import AgentMemoryError
from recall_shim.interfaces.service import MemoryService

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:  # pragma: no cover - exercised only without the server extra
    raise ImportError(
        f"the MCP server needs the 'server' extra: pip install 'agent-memory[server]' ({exc})"
    ) from exc

T = TypeVar("T")

INSTRUCTIONS = (
    "Long-term memory of users across sessions. Call `remember` with each user message worth "
    "keeping (it becomes recallable after the next build), and `prompt` or `recall` with what the "
    "user is asking, always with the user's id, to get what you know about them."
)


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except AgentMemoryError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def create_mcp_server(service: MemoryService) -> MCPServer:
    """An MCP server whose tools call ``service`` (one store, model loaded once)."""
    server = MCPServer("agent-memory", instructions=INSTRUCTIONS, version="0.1.0")

    @server.tool(description="Append one message to the user's session log. Durable when it returns; "
                             "recallable after the next build.")
    def remember(user_id: str, content: str, role: str = "user", session_id: str = "default",
                 ts: str | None = None, message_id: str | None = None,
                 agent_id: str | None = None) -> dict[str, Any]:
        return _call(service.remember, user_id, content, role=role, session_id=session_id, ts=ts,
                     message_id=message_id, agent_id=agent_id)

    @server.tool(description="Land many session-log rows (objects with user_id, session_id, msg_seq, "
                             "role, content, ts, message_id) in one file.")
    def ingest(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return _call(service.ingest, rows)

    @server.tool(description="Recall one user's memories most relevant to a query "
                             "(ranked by fused vector + lexical relevance weighted by strength; docs/recall.md).")
    def recall(user_id: str, query: str, top_k: int | None = None, min_sim: float | None = None,
               kinds: list[str] | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> dict[str, Any]:
        return _call(service.recall, user_id, query, top_k=top_k, min_sim=min_sim, kinds=kinds,
                     agent_id=agent_id, session_id=session_id)

    @server.tool(description="Recall for several intents of one user at once; one result list per query.")
    def recall_many(user_id: str, queries: list[str], top_k: int | None = None,
                    min_sim: float | None = None, kinds: list[str] | None = None,
                    agent_id: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        return _call(service.recall_many, user_id, queries, top_k=top_k, min_sim=min_sim, kinds=kinds,
                     agent_id=agent_id, session_id=session_id)

    @server.tool(description="Recall for the queries and return the memories as a system-prompt block "
                             "('' when nothing relevant is known).")
    def prompt(user_id: str, queries: list[str], budget_chars: int = 1200,
               top_k: int | None = None) -> dict[str, Any]:
        return _call(service.prompt, user_id, queries, budget_chars=budget_chars, top_k=top_k)

    @server.tool(description="Forget one memory (memory_id) or every memory of a user (user_id) "
                             "everywhere, at once; audited (docs/data_protection.md).")
    def forget(user_id: str | None = None, memory_id: str | None = None,
               actor: str = "mcp") -> dict[str, Any]:
        return _call(service.forget, user_id=user_id, memory_id=memory_id, actor=actor)

    @server.tool(description="Is the store ready (a snapshot published)? Which model and defaults it uses.")
    def health() -> dict[str, Any]:
        return _call(service.health)

    @server.tool(description="Run the build (load landed messages, extract, embed, decay, test) "
                             "and publish a new snapshot. Takes seconds to minutes. as_of: compute "
                             "strength as of this ISO-8601 date or timestamp (default: now).")
    def build(full_refresh: bool = False, as_of: str | None = None) -> dict[str, Any]:
        return _call(service.build, full_refresh=full_refresh, vars=None if as_of is None else {"as_of": as_of})

    return server


def run_stdio(db: str | os.PathLike[str] | None) -> None:
    """Serve MCP over stdin/stdout until the client closes the pipe."""
    service = MemoryService(db)
    service.warm_up()
    try:
        create_mcp_server(service).run("stdio")
    finally:
        service.close()
