"""LangGraph integration: a ``BaseStore`` over a memory store, and a node that logs each turn and
recalls for it (docs/agent_integration.md "LangGraph").

    from recall_shim import MemoryStore
    from recall_shim.langgraph import AgentMemoryStore, memory_node

    memory = MemoryStore("data/agent_memory.duckdb")
    store = AgentMemoryStore(memory)                 # graph.compile(store=store)
    store.put(("memories", "alice"), "k1", {"content": "I'm allergic to peanuts"})
    store.search(("memories", "alice"), query="what can't I eat?")   # at once (the hot tail)
    store.build()                                    # get / search without a query: after a build

Mapping (what BaseStore semantics cannot map exactly is said here and in the docs):

- namespace ``prefix + (user_id,)`` is the user's scope, ``prefix + (user_id, agent_id)`` the
  scope of one agent of that user (``prefix`` is ``("memories",)`` unless given);
- ``put`` appends one message to the session log: ``value["content"]`` when it is a string
  (``role`` and ``session_id`` are read from the value too; other keys are not kept), else the
  whole value as JSON text. The key is the message id, so keys are unique store-wide. The store
  is append-only: a key that was put before is refused (delete it and put a new key);
- items are recallable by ``search`` with a query at once (the store's hot tail, docs/serving.md
  "Hot tail"); ``get`` and ``search`` without a query read what a build made (``build()``, a
  scheduled ``agent-memory build``);
- ``search`` with a query is a recall (by default logged as an access, which reinforces the
  memory: a search on the agent's prompt path is use); without a query it lists the scope's
  current memories, strongest first. Results are memories: their key is a memory id;
- ``get`` takes a memory id or a message id of the scope;
- ``delete`` forgets a memory (by memory id) or every memory made from a message (by message id),
  with an audit record (docs/data_protection.md);
- ``list_namespaces`` lists the users (and their agents) the last build loaded.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        PutOp,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("recall_shim.langgraph needs the langgraph package: pip install 'agent-memory[langgraph]'") from exc

from recall_shim.errors import InvalidInput, InvalidQuery, StoreNotBuilt
from recall_shim.targets.duckdb import MemoryStore
from recall_shim.build.warehouse import read_warehouse, rows, tables

__all__ = ["AgentMemoryStore", "memory_node", "MEMORY_STATE_KEY"]

MEMORY_STATE_KEY = "memory"
DEFAULT_SESSION = "langgraph-store"
ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system"}


class AgentMemoryNamespaceError(InvalidQuery, InvalidNamespaceError):
    """A namespace that names no user scope of this store (LangGraph's own error type too)."""


def _utc(ts: datetime | None) -> datetime:
    if ts is None:
        return datetime.now(timezone.utc)
    return ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts


def _matches(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if condition.match_type == "prefix" else ns[len(ns) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))


def _value_matches(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    return not wanted or all(value.get(k) == v for k, v in wanted.items())


class AgentMemoryStore(BaseStore):
    """LangGraph ``BaseStore`` over a :class:`~recall_shim.MemoryStore` (see the module doc)."""

    def __init__(self, memory: MemoryStore, *, prefix: Sequence[str] = ("memories",),
                 record_access: bool = True, session_id: str = DEFAULT_SESSION) -> None:
        if not isinstance(memory, MemoryStore):
            raise InvalidInput("AgentMemoryStore needs a MemoryStore (the DuckDB target)")
        self.memory = memory
        self.prefix = tuple(prefix)
        self.record_access = record_access
        self.session_id = session_id

    # --- scope -------------------------------------------------------------------------
    def scope(self, namespace: tuple[str, ...]) -> tuple[str, str | None]:
        """(user_id, agent_id or None) of a namespace, or AgentMemoryNamespaceError."""
        ns = tuple(namespace)
        n = len(self.prefix)
        if ns[:n] != self.prefix or len(ns) not in (n + 1, n + 2):
            raise AgentMemoryNamespaceError(
                f"namespace {ns!r} is not {self.prefix + ('<user_id>',)!r} or {self.prefix + ('<user_id>', '<agent_id>')!r}")
        return ns[n], (ns[n + 1] if len(ns) == n + 2 else None)

    def _namespace(self, user_id: str, agent_id: str | None) -> tuple[str, ...]:
        return self.prefix + ((user_id,) if agent_id is None else (user_id, agent_id))

    def build(self, **kwargs: Any) -> Any:
        """Run a build (``MemoryStore.build``): items put since the last one become recallable."""
        return self.memory.build(**kwargs)

    # --- BaseStore ---------------------------------------------------------------------
    def batch(self, ops: Iterable[Any]) -> list[Any]:
        out: list[Any] = []
        for op in ops:
            if isinstance(op, GetOp):
                out.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op.namespace, op.key, op.value)
                out.append(None)
            elif isinstance(op, SearchOp):
                out.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                out.append(self._list_namespaces(op))
            else:
                raise InvalidQuery(f"unknown store operation {type(op).__name__}")
        return out

    async def abatch(self, ops: Iterable[Any]) -> list[Any]:
        """``batch`` in a worker thread (recall embeds the query and reads DuckDB, both blocking)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # --- operations --------------------------------------------------------------------
    def _rows(self, sql: str, params: Sequence[Any], needs: str) -> list[dict[str, Any]]:
        if not self.memory.paths.db.exists():
            return []
        with read_warehouse(self.memory.paths) as con:
            return rows(con, sql, params) if needs in tables(con) else []

    def _memory_rows(self, where: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        return self._rows(f"""
            select memory_id, user_id, kind, content, strength, created_at, valid_from, valid_to,
                   source_message_ids, agent_ids
            from long_term_memory where {where}""", params, "long_term_memory")

    def _memory_item(self, r: Mapping[str, Any], namespace: tuple[str, ...], score: float | None = None,
                     cls: type = SearchItem) -> Any:
        value = {"content": r["content"], "kind": r["kind"], "strength": float(r["strength"] or 0.0),
                 "source_message_ids": list(r["source_message_ids"] or []), "current": r["valid_to"] is None}
        kwargs = dict(namespace=namespace, key=r["memory_id"], value=value,
                      created_at=_utc(r["created_at"]), updated_at=_utc(r["valid_from"] or r["created_at"]))
        return cls(**kwargs, score=score) if cls is SearchItem else cls(**kwargs)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        user_id, agent_id = self.scope(namespace)
        agent_sql, agent_params = ("and list_contains(agent_ids, ?)", [agent_id]) if agent_id else ("", [])
        found = self._memory_rows(f"memory_id = ? and user_id = ? {agent_sql}", [key, user_id, *agent_params])
        if found:
            return self._memory_item(found[0], tuple(namespace), cls=Item)
        agent_sql = "and agent_id = ?" if agent_id else ""
        msgs = self._rows(f"""
            select m.message_id, m.role, m.session_id, m.agent_id, m.content, m.message_at, m.loaded_at,
                   (select list(t.memory_id order by t.memory_id) from long_term_memory as t
                    where t.user_id = m.user_id and list_contains(t.source_message_ids, m.message_id)) as memory_ids
            from session_messages as m where m.message_id = ? and m.user_id = ? {agent_sql}""",
                          [key, user_id, *agent_params], "session_messages")
        if not msgs:
            return None
        m = msgs[0]
        value = {"content": m["content"], "role": m["role"], "session_id": m["session_id"],
                 "agent_id": m["agent_id"], "memory_ids": list(m["memory_ids"] or [])}
        return Item(namespace=tuple(namespace), key=key, value=value,
                    created_at=_utc(m["message_at"]), updated_at=_utc(m["loaded_at"]))

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None) -> None:
        user_id, agent_id = self.scope(namespace)
        if value is None:
            self._delete(user_id, agent_id, key)
            return
        if not isinstance(key, str) or not key.strip():
            raise InvalidInput("a store key must be a non-empty string (it becomes the message id)")
        if self._rows("select 1 from session_messages where message_id = ?", [key], "session_messages"):
            raise InvalidInput(f"key {key!r} was put before: the memory store is append-only "
                               "(delete it and put the new value under a new key)")
        content = value.get("content")
        if not isinstance(content, str):
            content = json.dumps(dict(value), ensure_ascii=False, sort_keys=True, default=str)
        role = value.get("role") if isinstance(value.get("role"), str) else "user"
        session = value.get("session_id") if isinstance(value.get("session_id"), str) else self.session_id
        self.memory.remember(user_id, content, role=role, session_id=session, message_id=key, agent_id=agent_id)

    def _delete(self, user_id: str, agent_id: str | None, key: str) -> None:
        ids = [r["memory_id"] for r in self._memory_rows(
            "user_id = ? and (memory_id = ? or list_contains(source_message_ids, ?)) order by memory_id",
            [user_id, key, key])]
        for memory_id in ids:
            self.memory.forget(user_id=user_id, memory_id=memory_id, actor="langgraph-store")

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user_id, agent_id = self.scope(op.namespace_prefix)
        namespace = self._namespace(user_id, agent_id)
        if op.limit < 1 or op.offset < 0:
            raise InvalidQuery("limit must be at least 1 and offset at least 0")
        wanted = op.filter or {}
        if op.query is None:
            agent_sql, params = ("and list_contains(agent_ids, ?)", [agent_id]) if agent_id else ("", [])
            found = self._memory_rows(f"user_id = ? and valid_to is null {agent_sql} "
                                      "order by strength desc, created_at desc, memory_id", [user_id, *params])
            items = [self._memory_item(r, namespace) for r in found]
            items = [i for i in items if _value_matches(i.value, wanted)]
            return items[op.offset: op.offset + op.limit]
        kinds = [wanted["kind"]] if isinstance(wanted.get("kind"), str) else None
        try:
            hits = self.memory.recall(op.query, user_id=user_id, agent_id=agent_id, top_k=op.offset + op.limit, kinds=kinds,
                                      record_access=self.record_access)
        except StoreNotBuilt:
            return []
        meta = {r["memory_id"]: r for r in self._memory_rows(
            "memory_id in (select unnest(?::varchar[]))", [[h.memory_id for h in hits]])} if hits else {}
        items = []
        for h in hits:
            r = meta.get(h.memory_id) or {"memory_id": h.memory_id, "kind": h.kind, "content": h.content,
                                          "strength": h.strength, "source_message_ids": h.source_message_ids,
                                          "valid_to": None, "created_at": None, "valid_from": None}
            item = self._memory_item(r, namespace, score=h.score)
            if _value_matches(item.value, wanted):
                items.append(item)
        return items[op.offset: op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        scopes = self._rows("select distinct user_id, agent_id from session_messages", [], "session_messages")
        found = set()
        for r in scopes:
            found.add(self._namespace(r["user_id"], None))
            if r["agent_id"]:
                found.add(self._namespace(r["user_id"], r["agent_id"]))
        out = sorted(ns for ns in found if all(_matches(c, ns) for c in op.match_conditions or ()))
        if op.max_depth is not None:
            out = sorted({ns[: op.max_depth] for ns in out})
        return out[op.offset: op.offset + op.limit]


def _role_and_text(message: Any) -> tuple[str | None, str, str | None]:
    """(role, text, id) of a LangChain message or a {"role", "content"} dict."""
    if isinstance(message, Mapping):
        role, content, mid = message.get("role"), message.get("content"), message.get("id")
    else:
        role, content, mid = getattr(message, "type", None), getattr(message, "content", ""), getattr(message, "id", None)
    if isinstance(content, list):  # content blocks: keep the text parts
        content = "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content
                          if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text"))
    return ROLES.get(str(role)), str(content or ""), (str(mid) if mid else None)


def memory_node(memory: MemoryStore, *, top_k: int = 3, budget_chars: int = 1200, user_key: str = "user_id",
                agent_id: str | None = None, state_key: str = MEMORY_STATE_KEY,
                session_key: str = "thread_id") -> Callable[..., dict[str, Any]]:
    """A LangGraph node that logs the newest message of ``state["messages"]`` to the session log
    and, when it is the user's, recalls for it and writes the system-prompt block to
    ``state[state_key]`` ("" when nothing relevant is known or the store was never built).

    Add it before the model (logs the user's turn, recalls) and after it (logs the reply). The
    session is ``state[session_key]``, else the run's ``thread_id``; the message id is the
    message's own id (LangGraph's ``add_messages`` gives every message one), so a retried node
    logs nothing twice (the build rejects the repeat as ``duplicate_message_id``)."""

    def node(state: Mapping[str, Any], config: RunnableConfig | None = None) -> dict[str, Any]:
        messages = state.get("messages") or []
        if not messages:
            return {}
        role, text, mid = _role_and_text(messages[-1])
        if role is None or not text.strip():
            return {}
        user_id = state[user_key]
        session = state.get(session_key) or ((config or {}).get("configurable") or {}).get("thread_id") or "default"
        memory.remember(user_id, text, role=role, session_id=str(session), agent_id=agent_id,
                        message_id=f"lg_{mid}" if mid else f"lg_{uuid.uuid4().hex}")
        if role != "user":
            return {}
        try:
            block = memory.prompt([text], user_id=user_id, top_k=top_k, budget_chars=budget_chars)
        except StoreNotBuilt:
            block = ""
        return {state_key: block}

    # LangGraph passes the run's config to a node whose `config` parameter is typed RunnableConfig;
    # it reads the evaluated annotation (this module's are strings: `from __future__ import annotations`)
    node.__annotations__["config"] = RunnableConfig | None
    return node
