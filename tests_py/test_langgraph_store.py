"""recall_shim.langgraph against the real langgraph package: a StateGraph with a scripted chat model
(no LLM) runs two sessions and recalls across them; the BaseStore operations, sync and async. One
store, one build, shared by the module (the delete test forgets bob's memory and runs last)."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from langgraph.store.base import BaseStore, InvalidNamespaceError  # noqa: E402

from recall_shim import InvalidInput, MemoryStore  # noqa: E402
from recall_shim.langgraph import AgentMemoryStore, memory_node  # noqa: E402

from .conftest import ROOT  # noqa: E402

ALICE, ALICE_PLANNER, BOB = ("memories", "alice"), ("memories", "alice", "planner"), ("memories", "bob")


class State(TypedDict):
    messages: Annotated[list, add_messages]
    user_id: str
    memory: str


class ScriptedModel:
    """A chat model without an LLM: answers from a script and keeps every system prompt it saw."""

    def __init__(self) -> None:
        self.system_prompts: list[str] = []

    def __call__(self, state: State) -> dict[str, Any]:
        system = "You are a helpful assistant.\n\n" + state.get("memory", "")
        prompt = [SystemMessage(system), *state["messages"]]
        self.system_prompts.append(prompt[0].content)
        return {"messages": [AIMessage(f"(scripted reply {len(self.system_prompts)})")]}


def make_graph(memory: MemoryStore, model: ScriptedModel, store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("recall", memory_node(memory))      # logs the user's turn, recalls for it
    graph.add_node("model", model)
    graph.add_node("log_reply", memory_node(memory))   # logs the reply
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "model")
    graph.add_edge("model", "log_reply")
    graph.add_edge("log_reply", END)
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def say(app: Any, thread: str, text: str) -> dict[str, Any]:
    return app.invoke({"messages": [HumanMessage(text)], "user_id": "alice"},
                      {"configurable": {"thread_id": thread}})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    memory = MemoryStore(tmp_path_factory.mktemp("langgraph") / "store.duckdb")
    store = AgentMemoryStore(memory)
    model = ScriptedModel()
    app = make_graph(memory, model, store)
    say(app, "s1", "I'm allergic to peanuts")
    state = say(app, "s1", "my dog is called Biscuit")
    store.put(ALICE, "note-1", {"content": "My favourite colour is teal"})
    store.put(ALICE_PLANNER, "note-2", {"content": "I work night shifts as a nurse", "session_id": "plan-1"})
    store.put(BOB, "note-3", {"food": "noodles", "city": "Lyon"})
    session1_prompts = list(model.system_prompts)
    store.build()
    say(app, "s2", "Am I allergic to anything?")
    say(app, "s2", "What is my dog called?")
    return {"memory": memory, "store": store, "model": model, "session1_prompts": session1_prompts,
            "session1_messages": state["messages"]}


def test_graph_recalls_across_sessions(world: dict[str, Any]) -> None:
    first, second = world["session1_prompts"]
    assert first == second == "You are a helpful assistant.\n\n"  # nothing known before the first build
    allergy, dog = world["model"].system_prompts[2:]
    assert "What you remember about this user" in allergy and "I'm allergic to peanuts" in allergy
    assert "User has a dog named Biscuit" in dog
    # both turns of session 1 are in the session log, under the thread's session id
    store: AgentMemoryStore = world["store"]
    human, reply = world["session1_messages"][0], world["session1_messages"][1]
    got = store.get(ALICE, f"lg_{human.id}")
    assert got is not None and got.value["content"] == "I'm allergic to peanuts"
    assert got.value["role"] == "user" and got.value["session_id"] == "s1" and got.value["memory_ids"]
    got = store.get(ALICE, f"lg_{reply.id}")
    assert got is not None and got.value["role"] == "assistant" and got.value["content"] == "(scripted reply 1)"


def test_put_then_get_by_key_and_by_memory_id(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]
    item = store.get(ALICE, "note-1")
    assert item is not None and item.key == "note-1" and item.namespace == ALICE
    assert item.value["content"] == "My favourite colour is teal" and item.value["role"] == "user"
    assert item.value["session_id"] == "langgraph-store" and item.created_at.tzinfo is not None
    memory = store.get(ALICE, item.value["memory_ids"][0])
    assert memory is not None and memory.value["current"] and "teal" in memory.value["content"]
    # an agent-scoped item is visible in its agent's namespace and in the user's, not in another agent's
    assert store.get(ALICE_PLANNER, "note-2").value["session_id"] == "plan-1"
    assert store.get(ALICE, "note-2") is not None
    assert store.get(("memories", "alice", "other"), "note-2") is None
    # a dict without "content" is stored as its JSON text; another user cannot read it
    bob = store.get(BOB, "note-3")
    assert bob is not None and json.loads(bob.value["content"]) == {"city": "Lyon", "food": "noodles"}
    assert store.get(ALICE, "note-3") is None and store.get(ALICE, "no-such-key") is None
    # empty content is refused at once, as on every path that remembers one message
    with pytest.raises(InvalidInput, match="content must not be empty"):
        store.put(ALICE, "note-blank", {"content": " \n"})
    # append-only: a key that was put before is refused
    with pytest.raises(InvalidInput, match="append-only"):
        store.put(ALICE, "note-1", {"content": "My favourite colour is red"})


def test_search_recalls_and_lists(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]
    hits = store.search(ALICE, query="What is my favourite colour?", limit=3)
    assert hits and "teal" in hits[0].value["content"] and isinstance(hits[0].score, float)
    assert hits[0].namespace == ALICE and hits[0].key != "note-1"  # results are memories
    assert store.get(ALICE, hits[0].key).value["content"] == hits[0].value["content"]
    listed = store.search(ALICE, limit=50)
    contents = [i.value["content"] for i in listed]
    assert "User has a dog named Biscuit" in contents and all(i.score is None for i in listed)
    strengths = [i.value["strength"] for i in listed]
    assert strengths == sorted(strengths, reverse=True)
    facts = store.search(ALICE, filter={"kind": "fact"}, limit=50)
    assert facts and {i.value["kind"] for i in facts} == {"fact"}
    assert [i.key for i in store.search(ALICE, limit=2, offset=1)] == [i.key for i in listed[1:3]]
    # the agent scope holds only what that agent logged
    planner = store.search(ALICE_PLANNER, limit=50)
    assert planner and all("nurse" in i.value["content"] for i in planner)
    assert not store.search(("memories", "carol"), query="anything?")


def test_list_namespaces(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]
    assert store.list_namespaces() == [ALICE, ALICE_PLANNER, BOB]
    assert store.list_namespaces(max_depth=2) == [ALICE, BOB]
    assert store.list_namespaces(suffix=("planner",)) == [ALICE_PLANNER]
    assert store.list_namespaces(prefix=("memories", "bob")) == [BOB]
    assert store.list_namespaces(prefix=("memories", "*"), limit=1, offset=1) == [ALICE_PLANNER]


def test_async_operations(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]

    async def run() -> tuple[Any, ...]:
        await store.aput(ALICE, "note-async", {"content": "I am learning the cello"})
        return await asyncio.gather(store.aget(ALICE, "note-1"), store.aget(ALICE, "note-async"),
                                    store.asearch(ALICE, query="What is my favourite colour?", limit=1),
                                    store.alist_namespaces(max_depth=2))

    got, pending, hits, spaces = asyncio.run(run())
    assert got.value["content"] == "My favourite colour is teal"
    assert pending is None  # put, landed, recallable and readable after the next build
    assert "teal" in hits[0].value["content"] and spaces == [ALICE, BOB]
    landed = "".join(p.read_text() for p in world["memory"].paths.messages.glob("*.jsonl"))
    assert '"message_id": "note-async"' in landed and "learning the cello" in landed


def test_namespaces_outside_a_user_scope_are_refused(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]
    for bad in [("memories",), ("other", "alice"), ("memories", "alice", "planner", "extra")]:
        with pytest.raises(InvalidNamespaceError):
            store.get(bad, "note-1")
    with pytest.raises(InvalidNamespaceError):
        store.search(("memories",), query="anything?")


def test_delete_forgets_the_memories_of_a_key(world: dict[str, Any]) -> None:
    store: AgentMemoryStore = world["store"]
    memory_ids = store.get(BOB, "note-3").value["memory_ids"]
    assert memory_ids and store.search(BOB, limit=10)
    store.delete(BOB, "note-3")
    assert store.search(BOB, limit=10) == []
    assert all(store.get(BOB, m) is None for m in memory_ids)
    audit = world["memory"].paths.audit.read_text(encoding="utf-8")
    assert "langgraph-store" in audit
    # the async form: alice's colour note and every memory made from it (the docs example below
    # needs only her dog)
    colour = store.get(ALICE, "note-1").value["memory_ids"]
    assert colour and store.search(ALICE, query="What is my favourite colour?", limit=1)[0].key in colour
    asyncio.run(store.adelete(ALICE, "note-1"))
    assert store.get(ALICE, "note-1") is None and all(store.get(ALICE, m) is None for m in colour)
    assert all("teal" not in i.value["content"] for i in store.search(ALICE, limit=50))


def test_docs_example_runs(world: dict[str, Any]) -> None:
    from .test_agent_integration import example

    namespace: dict[str, Any] = {}
    exec(compile(example("langgraph-store"), str(ROOT / "docs" / "agent_integration.md"), "exec", dont_inherit=True),
         namespace)
    app = namespace["build_graph"](world["memory"])
    out = app.invoke({"messages": [HumanMessage("What is my dog called?")], "user_id": "alice"},
                     {"configurable": {"thread_id": "docs"}})
    assert "Biscuit" in out["memory"]


def test_without_langgraph_the_import_names_the_extra() -> None:
    import subprocess
    import sys

    code = ("import sys\nsys.modules['langgraph'] = sys.modules['langchain_core'] = None\n"
            "import recall_shim.langgraph\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "pip install 'agent-memory[langgraph]'" in proc.stderr, proc.stderr[-2000:]
