"""MCP server (stdio transport) exposing the memory operations as tools for agent runtimes.

    agent-memory mcp --db data/agent_memory.duckdb

Tools: remember, ingest, recall, recall_many, prompt, forget, health, build: the operations of
recall_shim/interfaces/requests.py, with the same arguments as the HTTP API (each tool's input schema is
its request model's JSON schema, and arguments are validated by that model: strict types,
unknown arguments refused). Annotations: recall, recall_many, prompt and health are read-only
(prompt logs the memories of its block as accesses unless record_access is false: a prompt is
a use; recall and recall_many log nothing unless record_access is true: docs/recall.md
"Access"), forget is destructive and idempotent. A call that fails returns an ``isError`` result whose text is the
project's own message (never a traceback or pydantic's text). Nothing but the protocol is
written to stdout. Over stdio the client is the process that started the server, so there is
no token; the same limits apply as over HTTP (MemoryService: the build var allow-list, at most
32 queries and 8,000 query characters per call, one build at a time).

The server is the SDK's low-level ``Server`` with only the tools handlers, so ``initialize``
and ``server/discover`` derive the same capabilities (tools, nothing else) from one place.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import anyio

from recall_shim.common.paths import package_version
from recall_shim.errors import AgentMemoryError
from recall_shim.interfaces.requests import BY_NAME, OPERATIONS, Operation, parse
from recall_shim.interfaces.service import MemoryService

try:
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the server extra
    raise ImportError(
        f"the MCP server needs the 'server' extra: pip install 'agent-memory[server]' ({exc})"
    ) from exc

log = logging.getLogger("agent_memory.mcp")

INSTRUCTIONS = (
    "Long-term memory of users across sessions. Call `remember` with each user message worth "
    "keeping (it is recallable within seconds), and `prompt` or `recall` with what the "
    "user is asking, always with the user's id, to get what you know about them."
)
VERSION = package_version()
DEFAULT_ACTOR = "mcp"
INVALID_PARAMS = -32602  # JSON-RPC: an unknown tool is a protocol error, not a tool result


def tool_of(op: Operation) -> types.Tool:
    """The MCP tool of one operation: its request model's JSON schema and truthful hints."""
    return types.Tool(
        name=op.name, description=op.description, input_schema=op.request.model_json_schema(),
        annotations=types.ToolAnnotations(read_only_hint=op.read_only,
                                          destructive_hint=None if op.read_only else op.destructive,
                                          idempotent_hint=None if op.read_only else op.idempotent,
                                          open_world_hint=False),
    )


TOOLS = [tool_of(op) for op in OPERATIONS]


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def call_tool(service: MemoryService, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """Run one tool call: parse with the operation's request model, call the service, answer
    with the result as structured content and as JSON text (for clients that ignore the former)."""
    op = BY_NAME.get(name)
    if op is None:
        raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}; the tools are {', '.join(BY_NAME)}")
    try:
        request = parse(op, arguments)
        if op.name == "forget" and getattr(request, "actor", None) is None:
            request = request.model_copy(update={"actor": DEFAULT_ACTOR})
        result = service.call(op, request)
    except AgentMemoryError as exc:
        return _error(f"{type(exc).__name__}: {exc}")
    except Exception:  # a bug: the client gets no internals, the log gets the traceback
        log.exception("tool %s failed", name)
        return _error(f"internal error in {name}; the details are in the server's log")
    text = json.dumps(result, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result)


def create_mcp_server(service: MemoryService) -> Server[Any]:
    """An MCP server whose tools call ``service`` (one store, model loaded once)."""

    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def on_call(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # the service blocks (embedding, DuckDB, dbt): off the event loop, like the SDK's sync tools
        return await anyio.to_thread.run_sync(call_tool, service, params.name, params.arguments)

    return Server("agent-memory", version=VERSION, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=on_call)


def run_stdio(db: str | os.PathLike[str] | None) -> None:
    """Serve MCP over stdin/stdout until the client closes the pipe."""
    service = MemoryService(db)
    service.warm_up()
    server = create_mcp_server(service)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        service.close()
