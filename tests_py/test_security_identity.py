"""Message and memory identity (docs/data_protection.md, "Identity: per-user message ids,
collision-free memory ids"): a message is (user_id, message_id), memory ids cannot collide
across users, duplicates inside one file keep the first row, and recall never returns another
user's memory even when every id the users chose collides. One store, built once."""

from __future__ import annotations

import hashlib
import pytest

from recall_shim import MemoryStore

from .conftest import query

TS = "2026-11-01 10:00:00"
# two users whose bot framework numbers messages per session: both send "1" and "2"
ALICE = [("1", "I live in Zqaliceville."), ("2", "I prefer zqalicetea with honey.")]
BOB = [("1", "I live in Zqbobtown."), ("2", "I prefer zqbobcoffee without sugar.")]
# under the old scheme md5("ev|episode" | "fact" | c) == md5("ev" | "episode" | "fact|" + c)
COLLIDE_USER_A, COLLIDE_USER_B = "ev|episode", "ev"
COLLIDE_FACT = "I live in Zqcollidecity."  # -> fact "User lives in Zqcollidecity" of user A
COLLIDE_EPISODE = "fact|User lives in Zqcollidecity"  # an episode of user B (4 terms)
DUPLICATES = 8  # pairs of rows with one message_id in one file: the first must win every time


def legacy_memory_id(user: str, kind: str, normalised: str) -> str:
    return "mem_" + hashlib.md5(f"{user}|{kind}|{normalised}".encode()).hexdigest()


def rows() -> list[dict]:
    out = []
    for user, msgs in (("alice", ALICE), ("bob", BOB)):
        for mid, text in msgs:
            out.append({"user_id": user, "session_id": "s1", "msg_seq": int(mid), "role": "user",
                        "content": text, "ts": TS, "message_id": mid})
    out.append({"user_id": COLLIDE_USER_A, "session_id": "s1", "msg_seq": 1, "role": "user",
                "content": COLLIDE_FACT, "ts": TS, "message_id": "1"})
    out.append({"user_id": COLLIDE_USER_B, "session_id": "s1", "msg_seq": 1, "role": "user",
                "content": COLLIDE_EPISODE, "ts": TS, "message_id": "1"})
    for i in range(DUPLICATES):
        for version in ("first", "second"):
            out.append({"user_id": "dup", "session_id": "d", "msg_seq": i, "role": "user",
                        "content": f"I prefer zq{version}{i} drinks.", "ts": TS, "message_id": f"d-{i}"})
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    s = MemoryStore(tmp_path_factory.mktemp("identity") / "store.duckdb")
    s.remember_many(rows())
    s.build()  # before the fix: the unique tests on message_id / memory_id fail the build
    return s


def test_message_identity_is_per_user(store: MemoryStore) -> None:
    accepted = query(store, "select user_id, message_id from session_messages where user_id in ('alice', 'bob')"
                            " order by all")
    assert accepted == [("alice", "1"), ("alice", "2"), ("bob", "1"), ("bob", "2")]
    assert query(store, "select count(*) from session_log_rejects where user_id in ('alice', 'bob')")[0][0] == 0
    # provenance joins (user_id, message_id): each user's memory comes from its own session rows
    for user, town in (("alice", "Zqaliceville"), ("bob", "Zqbobtown")):
        mems = query(store, "select user_id, source_message_ids from long_term_memory where content like ?",
                     [f"%{town}%"])
        assert {m[0] for m in mems} == {user} and all(m[1] == ["1"] for m in mems)


def test_memory_ids_cannot_collide_across_users(store: MemoryStore) -> None:
    fact = query(store, "select memory_id, user_id, kind from long_term_memory where content = ?",
                 ["User lives in Zqcollidecity"])
    episode = query(store, "select memory_id, user_id, kind from long_term_memory where content = ?",
                    [COLLIDE_EPISODE])
    assert [(u, k) for _, u, k in fact] == [(COLLIDE_USER_A, "fact")]
    assert [(u, k) for _, u, k in episode] == [(COLLIDE_USER_B, "episode")]
    # the two triples really collide under the old scheme, and not under the new one
    assert legacy_memory_id(COLLIDE_USER_A, "fact", "user lives in zqcollidecity") == legacy_memory_id(
        COLLIDE_USER_B, "episode", COLLIDE_EPISODE.lower())
    assert fact[0][0] != episode[0][0] and fact[0][0].startswith("mem2_")
    assert query(store, "select count(*) - count(distinct memory_id) from long_term_memory")[0][0] == 0
    assert query(store, "select count(*) - count(distinct extraction_id) from ("
                        " select extraction_id from int_memories_extracted union all"
                        " select extraction_id from int_episodes_extracted)")[0][0] == 0


def test_duplicate_message_ids_in_one_file_keep_the_first(store: MemoryStore) -> None:
    kept = query(store, "select message_id, content from session_messages where user_id = 'dup' order by all")
    assert kept == sorted((f"d-{i}", f"I prefer zqfirst{i} drinks.") for i in range(DUPLICATES))
    rejected = query(store, "select message_id, reject_reason, content from session_log_rejects"
                            " where user_id = 'dup' order by all")
    assert rejected == sorted((f"d-{i}", "duplicate_message_id", f"I prefer zqsecond{i} drinks.")
                              for i in range(DUPLICATES))


def test_recall_never_returns_another_users_memory(store: MemoryStore) -> None:
    users = ["alice", "bob", COLLIDE_USER_A, COLLIDE_USER_B, "dup"]
    owner = dict(query(store, "select memory_id, user_id from long_term_memory"))
    queries = ["where does the user live?", "what does the user like to drink?", "User lives in Zqcollidecity",
               COLLIDE_EPISODE, "zqalicetea", "zqbobcoffee", "Zqbobtown", "Zqaliceville", "fact", "episode"]
    recalls = foreign = returned = 0
    for _ in range(5):
        for user in users:
            for group in store.recall_many(queries, user_id=user, min_sim=-1, top_k=20, record_access=False):
                recalls += 1
                returned += len(group)
                foreign += sum(owner.get(m.memory_id) != user for m in group)
    assert recalls == 250 and returned > recalls
    assert foreign == 0
    # the colliding pair each sees exactly its own memory of the collided text
    assert {m.kind for m in store.recall(COLLIDE_EPISODE, user_id=COLLIDE_USER_B, min_sim=-1, top_k=20,
                                         record_access=False)} == {"episode"}
    assert {m.content for m in store.recall("User lives in Zqcollidecity", user_id=COLLIDE_USER_A, min_sim=-1,
                                            top_k=20, record_access=False, kinds=["fact"])} == {
        "User lives in Zqcollidecity"}
