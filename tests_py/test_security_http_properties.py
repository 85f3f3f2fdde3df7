"""Property: random JSON bodies (random types, ids, vars, nesting) thrown at the real HTTP API
(/remember, /ingest, /recall, /recall-many, /build with vars) never crash it: every answer is a
success or a 4xx with a JSON ``error``, never a 500 or a traceback. The store is a copy of the
built demo store, so recall runs for real; no body here can start a build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recall_shim import MemoryStore

from .conftest import RunningServer

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(), st.text(max_size=40),
                    st.sampled_from(["demo", " demo", "", "*", "%", "demo\x00", "2026-01-01", "x" * 3000]))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                           max_leaves=12)
ids = st.one_of(st.text(max_size=30), st.sampled_from(["demo", "../etc", "a" * 300, "\u202e", "demo\n"]), scalars)
vectors = st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5) | st.just([0.01] * 384)
fields = {
    "user_id": ids, "content": json_values, "role": ids, "session_id": ids, "msg_seq": json_values, "ts": ids,
    "message_id": ids, "agent_id": ids, "query": st.one_of(st.text(max_size=60), json_values), "vector": vectors,
    "queries": st.lists(st.one_of(st.text(max_size=60), vectors, json_values), max_size=6) | json_values,
    "top_k": json_values, "min_sim": json_values, "kinds": json_values, "record_access": json_values,
    "rows": st.lists(st.dictionaries(st.sampled_from(["user_id", "content", "ts", "msg_seq", "role", "session_id",
                                                      "message_id", "agent_id", "extra"]), json_values, max_size=9),
                     max_size=4) | json_values,
}
structured = st.fixed_dictionaries({}, optional=fields)
# /build: never a body that would start a real build (null or {} would): every body has a var
# off the allow-list, an as_of that is not a date, or is no object at all
def _starts_no_build(v: dict) -> bool:
    return any(k != "as_of" for k in v) or not (v["as_of"] is None or (isinstance(v["as_of"], str)
                                                                         and v["as_of"][:1].isdigit()))


bad_vars = st.dictionaries(st.text(max_size=20) | st.sampled_from(["store_path", "llm_url", "as_of", "max_content_chars"]),
                           json_values, min_size=1, max_size=3).filter(_starts_no_build)
build_bodies = st.one_of(st.fixed_dictionaries({"vars": bad_vars}, optional={"full_refresh": json_values}),
                         json_values.filter(lambda b: b is not None and not isinstance(b, dict)),
                         st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in ("vars", "full_refresh")),
                                         json_values, min_size=1, max_size=3))
requests = st.one_of(
    st.tuples(st.sampled_from(["/remember", "/ingest", "/recall", "/recall-many", "/prompt"]),
              st.one_of(structured, json_values)),
    st.tuples(st.just("/build"), build_bodies),
)


@pytest.fixture(scope="module")
def server(demo_store: MemoryStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    folder = tmp_path_factory.mktemp("props")
    src = demo_store.paths.db
    for sibling in src.parent.iterdir():  # the warehouse, inbox and serving snapshots, copied as they are
        if sibling.name.startswith(src.stem + "."):
            (shutil.copytree if sibling.is_dir() else shutil.copy2)(sibling, folder / sibling.name)
    running = RunningServer(folder / src.name, folder / "server.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(server: RunningServer) -> Iterator[httpx.Client]:
    """One keep-alive connection (a new client per request costs more than most requests)."""
    with httpx.Client(base_url=server.url, timeout=120,
                      headers={**server.headers, "content-type": "application/json"}) as c:
        yield c


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=requests)
def test_random_bodies_never_crash_the_server(client: httpx.Client, request: tuple[str, Any]) -> None:
    path, body = request
    # json.dumps writes NaN and Infinity as bare tokens (not JSON, but Python parsers take them)
    r = client.post(path, content=json.dumps(body).encode())
    assert r.status_code < 500, (path, body, r.status_code, r.text[:500])
    assert "Traceback" not in r.text
    if r.status_code >= 400:
        assert isinstance(r.json().get("error"), str) and r.json()["error"], (path, body, r.text[:500])
