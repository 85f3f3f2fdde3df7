"""The requests of the memory operations, defined once for every interface.

Each operation (remember, ingest, recall, recall_many, prompt, forget, health, build) is one
strict pydantic model here: argument names, types, limits and defaults. The HTTP server
(recall_shim/interfaces/http.py) takes them as request bodies, the MCP server (recall_shim/interfaces/mcp.py)
publishes their JSON schemas as tool input schemas and validates tool arguments with them, and
the CLI's ``recall --batch`` parses each line with :class:`RecallRequest`. So HTTP and MCP take
the same arguments, and refuse the same ones:

- **strict types**: no string-to-number or string-to-bool coercion (``"top_k": "5"`` and
  ``"full_refresh": "yes"`` are refused), an integer is accepted where a number is expected;
- **no unknown arguments**: a misspelt or unsupported argument is an error naming it, never
  dropped silently;
- errors read as one sentence (:func:`describe_errors`), not pydantic's text.

Values the store checks against its own settings (top_k's upper bound, min_sim's range, kind
names, ids, content length) are checked there, on every path, with the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recall_shim.errors import InvalidInput, InvalidQuery

MAX_INGEST_ROWS = 10_000
MAX_QUERIES = 32

Query = Union[str, list[float]]
ONE_QUERY = "give exactly one of query (text) or vector"
NOT_BLANK = r"\S"  # a text with something in it besides whitespace


class Request(BaseModel):
    """Base of every operation's arguments: strict types, unknown arguments refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class RememberRequest(Request):
    user_id: str = Field(min_length=1, description="the user the message belongs to")
    content: str = Field(min_length=1, pattern=NOT_BLANK, description="the message text")
    role: str = Field("user", description="user, assistant or system")
    session_id: str = Field("default", description="the session the message belongs to")
    msg_seq: int | None = Field(None, description="position in the session (default: a clock value)")
    ts: str | None = Field(None, description="ISO-8601 timestamp (default: now, UTC)")
    message_id: str | None = Field(None, description="message id (default: generated)")
    agent_id: str | None = Field(None, description="the agent that logged the message")


class IngestRequest(Request):
    rows: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_INGEST_ROWS,
        description="session-log rows: user_id, session_id, msg_seq, role, content, ts, message_id, agent_id",
    )


class RecallOptions(Request):
    user_id: str = Field(min_length=1, description="recall is always scoped to one user")
    top_k: int | None = Field(None, description="results per query (default: the store's recall_top_k)")
    min_sim: float | None = Field(None, description="minimum raw cosine similarity (default: recall_min_sim)")
    kinds: list[str] | None = Field(None, description="only these kinds (fact, preference, skill, episode, assistant)")
    record_access: bool = Field(False, description="log returned memories as accesses (they reinforce at the next "
                                                   "build); recall is a look, not a use, unless this is true")
    agent_id: str | None = Field(None, description="narrow to memories with a source message from this agent")
    session_id: str | None = Field(None, description="narrow to memories with a source message from this session")


class RecallRequest(RecallOptions):
    query: str | None = Field(None, description="query text (or give vector)")
    vector: list[float] | None = Field(None, description="precomputed query embedding (or give query)")

    def one_query(self) -> str | list[float]:
        """The query text or the vector, or InvalidQuery unless exactly one is given."""
        if (self.query is None) == (self.vector is None):
            raise InvalidQuery(ONE_QUERY)
        return self.query if self.query is not None else list(self.vector or [])


class RecallManyRequest(RecallOptions):
    queries: list[Query] = Field(min_length=1, max_length=MAX_QUERIES,
                                 description="query texts or vectors, answered in one statement")


class PromptRequest(RecallManyRequest):
    budget_chars: int = Field(1200, ge=1, description="size budget of the prompt block in characters")
    record_access: bool = Field(True, description="log the memories put into the block as accesses (they "
                                                  "reinforce at the next build): a prompt is a use; false for "
                                                  "a look")


class ForgetRequest(Request):
    user_id: str | None = Field(None, description="forget every memory of this user (right to erasure)")
    memory_id: str | None = Field(None, description="forget one memory")
    actor: str | None = Field(None, description="who asked, for the audit trail (default: the interface, "
                                                "api or mcp)")


class HealthRequest(Request):
    pass


class BuildRequest(Request):
    full_refresh: bool = Field(False, description="rebuild incremental models from the landed files")
    vars: dict[str, Any] | None = Field(None, description="dbt vars a caller may set: only as_of, an ISO-8601 "
                                                          "date or timestamp, e.g. {\"as_of\": \"2026-12-01\"}")


@dataclass(frozen=True)
class Operation:
    """One operation: its MCP tool name (also the MemoryService method), its HTTP path, its
    arguments, what it does, and the truthful MCP hints (read_only: changes nothing a caller
    sees; destructive: removes data; idempotent: calling twice has no further effect)."""

    name: str
    path: str
    request: type[Request]
    description: str
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    http_status: int = 200


OPERATIONS: tuple[Operation, ...] = (
    Operation("remember", "/remember", RememberRequest,
              "Append one message to the user's session log. Durable when it returns; recallable before any "
              "build (the hot tail: at once in-process, within seconds through a server), folded into the memories at the next build.", read_only=False, http_status=202),
    Operation("ingest", "/ingest", IngestRequest,
              "Land many session-log rows (objects with user_id, session_id, msg_seq, role, content, ts, "
              "message_id, agent_id) as one file.", read_only=False, http_status=202),
    # what counts as using a memory (docs/recall.md "Access"): prompt (the block goes into the
    # agent's prompt) logs its memories as accesses, which reinforce at the next build, unless
    # record_access is false; recall and recall_many are a look and log nothing unless
    # record_access is true. Neither changes a memory or what a recall returns before a build.
    Operation("recall", "/recall", RecallRequest,
              "Recall one user's memories most relevant to a query text or vector (ranked by fused vector "
              "+ lexical relevance weighted by strength; docs/recall.md).", read_only=True),
    Operation("recall_many", "/recall-many", RecallManyRequest,
              "Recall for several intents of one user in one statement; one result list per query.",
              read_only=True),
    Operation("prompt", "/prompt", PromptRequest,
              "Recall for the queries and return the memories as a system-prompt block ('' when nothing "
              "relevant is known).", read_only=True),
    Operation("forget", "/forget", ForgetRequest,
              "Forget one memory (memory_id) or every memory of a user (user_id) everywhere, at once; "
              "audited (docs/data_protection.md).", read_only=False, destructive=True, idempotent=True),
    Operation("health", "/health", HealthRequest,
              "Is the store ready (a snapshot published)? Which model and defaults it uses.",
              read_only=True, idempotent=True),
    Operation("build", "/build", BuildRequest,
              "Run the build (load landed messages, extract, embed, decay, test) and publish a new "
              "snapshot. Takes seconds to minutes.", read_only=False),
)
BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}

_EXPECTED = {"int_type": "an integer", "float_type": "a number", "bool_type": "true or false",
             "string_type": "a string", "list_type": "a list", "dict_type": "an object",
             "model_type": "an object", "model_attributes_type": "an object"}


def _shown(value: Any) -> str:
    kind = {str: "the string", bool: "the boolean", int: "the integer", float: "the number",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}"[:80] if isinstance(value, (str, bool, int, float)) else kind


def _is_type_tag(part: str) -> bool:
    return part in ("str", "int", "float", "bool") or part.startswith(("list[", "dict["))


def describe_errors(errors: Sequence[Mapping[str, Any]], skip: tuple[str, ...] = ()) -> str:
    """One clear sentence for pydantic validation ``errors`` (``loc`` parts in ``skip``, such as
    HTTP's ``body``, are left out of the argument names)."""
    unknown = sorted({".".join(str(p) for p in e["loc"] if p not in skip) for e in errors
                      if e.get("type") == "extra_forbidden"})
    parts = [f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"] if unknown else []
    seen: set[str] = set()
    for e in errors:
        kind = e.get("type", "")
        if kind == "extra_forbidden":
            continue
        loc = [str(p) for p in e.get("loc", ()) if p not in skip]
        # a union (a query text or vector) reports each branch, tagged with its type; name it once
        union = any(_is_type_tag(p) for p in loc)
        name = ".".join(p for p in loc if not _is_type_tag(p)) or "the body"
        if name in seen:
            continue
        seen.add(name)
        ctx = e.get("ctx") or {}
        if union:
            parts.append(f"{name} must be a query text or a vector (a list of numbers), got {_shown(e.get('input'))}")
        elif kind == "missing":
            parts.append(f"{name} is required")
        elif kind == "string_too_short" or (kind == "string_pattern_mismatch" and ctx.get("pattern") == NOT_BLANK):
            parts.append(f"{name} must not be empty")
        elif kind == "too_short":
            parts.append(f"{name} must be a non-empty list")
        elif kind == "too_long":
            parts.append(f"at most {ctx.get('max_length')} {name} per request, got {ctx.get('actual_length')}")
        elif kind == "greater_than_equal":
            parts.append(f"{name} must be at least {ctx.get('ge')}, got {_shown(e.get('input'))}")
        elif kind in _EXPECTED:
            parts.append(f"{name} must be {_EXPECTED[kind]}, got {_shown(e.get('input'))}")
        else:
            parts.append(f"{name}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


def parse(op: Operation | str, arguments: Any) -> Request:
    """The arguments of one call of ``op``, validated, or :class:`InvalidInput` with the clear
    message (unknown arguments named, no coercion)."""
    operation = BY_NAME[op] if isinstance(op, str) else op
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidInput(f"the arguments of {operation.name} must be an object, got {_shown(arguments)}")
    try:
        return operation.request.model_validate(dict(arguments))
    except ValidationError as exc:
        raise InvalidInput(f"invalid arguments for {operation.name}: "
                           + describe_errors(exc.errors(include_url=False))) from None


def arguments(request: Request) -> dict[str, Any]:
    """A parsed request as keyword arguments of the MemoryService method of the same name."""
    return {name: getattr(request, name) for name in type(request).model_fields}
