"""Interfaces over the stores: the agent-memory CLI, the HTTP API, the MCP server, and the service layer they share (caller vars allow-list, HTTP guard, fair lane)."""
