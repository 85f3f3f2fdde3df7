"""``agent-memory``: a thin command line over :class:`recall_shim.MemoryStore` (or, with
``--target postgres``, :class:`recall_shim.PgMemoryStore`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from recall_shim.errors import AgentMemoryError, BuildFailed, InvalidInput, InvalidQuery
from recall_shim.interfaces.cli_postgres import DB_HELP, add_postgres_commands
from recall_shim.interfaces.requests import arguments, parse
from recall_shim.targets.duckdb import DEFAULT_DB_ENV, project_dir
from recall_shim.common.paths import package_version
from recall_shim.store import Store
from recall_shim.targets import TARGET_ENV, open_store

BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, what a shell reports for a tool whose reader closed the pipe
SEED_QUESTIONS = ["喜欢什么输出方式", "做过什么数据分析", "熟悉什么部署工具"]


def _store(args: argparse.Namespace) -> Store:
    return open_store(args.db)


def cmd_ingest(args: argparse.Namespace) -> int:
    store = _store(args)
    failed = 0
    for f in args.files:
        try:
            rep = store.ingest(f, force=args.force)
        except InvalidInput as exc:  # the whole file is refused: nothing of it landed
            print(f"agent-memory: {exc}", file=sys.stderr)
            failed += 1
            continue
        if rep.skipped:
            print(f"{f}: already ingested into this store (use --force to land it again)")
            continue
        line = f"{f}: landed {rep.rows} rows"
        if rep.refused:
            reasons = ", ".join(f"{reason} {n}" for reason, n in rep.refused.items())
            line += (f"; {sum(rep.refused.values())} of them refused at the door and kept only as rejects "
                     f"(session_log_rejects): {reasons}")
        print(line)
    return 2 if failed else 0


def cmd_remember(args: argparse.Namespace) -> int:
    r = parse("remember", {"user_id": args.user, "content": args.content, "role": args.role,
                           "session_id": args.session, "msg_seq": args.msg_seq, "ts": args.ts,
                           "message_id": args.message_id, "agent_id": args.agent})
    mid = _store(args).remember(**arguments(r))
    print(mid)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    vars_ = json.loads(args.vars) if args.vars else None
    res = _store(args).build(full_refresh=args.full_refresh, vars=vars_, select=args.select)
    if args.verbose:
        print(res.output)
    if getattr(res, "snapshot", None) is None and os.environ.get(TARGET_ENV) == "postgres":
        print(f"built in {res.seconds:.1f}s on postgres (recall reads the live tables)")
        return 0
    if res.skipped:
        print(f"{res.output}; serving snapshot: {res.snapshot}")
        return 0
    print(f"built in {res.seconds:.1f}s; serving snapshot: {res.snapshot or '(not published)'}")
    return 0


def _print_results(results: Sequence[Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps([m.as_dict() for m in results], ensure_ascii=False))
        return
    if not results:
        print("(no memories above the threshold)")
    for m in results:
        print(f"{m.rank:>2}. [{m.kind}] {m.content}  (sim {m.similarity:.3f}, strength {m.strength:.3f}, score {m.score:.3f})")


def _batch(store: Store, path: str, defaults: dict[str, Any]) -> int:
    """Answer one recall per JSON line: each line is a recall request (recall_shim/interfaces/requests.py,
    the same arguments as HTTP and MCP) plus an optional ``id``; the command's flags fill in
    what a line leaves out."""
    fh = sys.stdin if path == "-" else open(path, encoding="utf-8")
    failures = 0
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            req: Any = None
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise InvalidQuery("each line must be a JSON object")
                given = {k: v for k, v in req.items() if k != "id"}
                merged = {**{k: v for k, v in defaults.items() if v is not None and k != "no_access"}, **given}
                r = parse("recall", merged)
                q = r.one_query()  # type: ignore[attr-defined]
                options = {k: v for k, v in arguments(r).items() if k not in ("query", "vector")}
                # a line may opt in (record_access true), --record-access opts every line in, --no-access wins
                options["record_access"] = ((options["record_access"] or defaults["record_access"])
                                            and not defaults["no_access"])
                results = store.recall(q, **options)
                out: dict[str, Any] = {"id": req.get("id", lineno), "results": [m.as_dict() for m in results]}
            except (AgentMemoryError, json.JSONDecodeError) as exc:
                failures += 1
                rid = req.get("id", lineno) if isinstance(req, dict) else lineno
                out = {"id": rid, "error": str(exc)}
            print(json.dumps(out, ensure_ascii=False), flush=True)
    return 1 if failures else 0


def cmd_recall(args: argparse.Namespace) -> int:
    store = _store(args)
    kinds = args.kind or None
    if args.batch:
        return _batch(store, args.batch, {"user_id": args.user, "top_k": args.top_k, "min_sim": args.min_sim,
                                          "kinds": kinds, "record_access": args.record_access,
                                          "no_access": args.no_access,
                                          "agent_id": args.agent, "session_id": args.session})
    if not args.query:
        raise InvalidQuery("give a QUERY (several for multi-intent recall) or --batch FILE")
    if args.user is None:
        raise InvalidQuery("--user is required: recall is always scoped to one user")
    # a prompt block goes into an agent's prompt: a use (recorded unless --no-access); a listing is a
    # look (recorded only with --record-access). docs/recall.md "Access"
    record = (args.prompt or args.record_access) and not args.no_access
    groups = store.recall_many(args.query, user_id=args.user, top_k=args.top_k, min_sim=args.min_sim,
                               kinds=kinds, record_access=record,
                               agent_id=args.agent, session_id=args.session)
    if args.prompt:
        from recall_shim.recall.prompt import format_prompt

        print(format_prompt([m for g in groups for m in g], budget_chars=args.budget))
        return 0
    if len(groups) == 1:
        _print_results(groups[0], args.json)
        return 0
    if args.json:
        print(json.dumps([{"query": q, "results": [m.as_dict() for m in g]} for q, g in zip(args.query, groups)],
                         ensure_ascii=False))
        return 0
    for q, g in zip(args.query, groups):
        print(f"## {q}")
        _print_results(g, False)
    return 0


QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)


def cmd_similarity(args: argparse.Namespace) -> int:
    import numpy as np

    store = _store(args)
    sims: list[float] = []
    if args.batch:
        with (sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")) as fh:
            for line in fh:
                if line.strip():
                    req = json.loads(line)
                    sims += store.similarity_distribution([req["query"]], user_id=req.get("user_id", args.user))
    if args.query:
        if args.user is None:
            raise InvalidQuery("--user is required: similarity is always scoped to one user")
        sims += store.similarity_distribution(args.query, user_id=args.user)
    if not sims:
        raise InvalidQuery("no similarities: give QUERY arguments with --user, or --batch FILE, for a user with memories")
    arr = np.asarray(sims)
    qs = {f"p{int(q * 100)}": float(np.quantile(arr, q)) for q in QUANTILES}
    if args.json:
        counts, edges = np.histogram(arr, bins=args.bins)
        print(json.dumps({"n": len(sims), "min": float(arr.min()), "max": float(arr.max()), "quantiles": qs,
                          "histogram": {"edges": edges.tolist(), "counts": counts.tolist()}}))
        return 0
    counts, edges = np.histogram(arr, bins=args.bins)
    width = max(counts.max(), 1)
    print(f"{len(sims)} query-memory cosine similarities, min {arr.min():.3f}, max {arr.max():.3f}")
    for c, lo, hi in zip(counts, edges, edges[1:]):
        print(f"  {lo:6.3f} - {hi:6.3f} | {'#' * int(round(40 * c / width)):<40} {c}")
    print("quantiles: " + "  ".join(f"{k} {v:.3f}" for k, v in qs.items()))
    print(f"e.g. --min-sim {qs['p90']:.3f} keeps the most similar 10% of query-memory pairs")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if args.user is None and args.memory is None:
        raise InvalidInput("give --user USER (forget the whole user) or --memory MEMORY_ID")
    rep = _store(args).forget(user_id=args.user, memory_id=args.memory, actor=args.actor)
    if args.json:
        print(json.dumps(rep.as_dict(), ensure_ascii=False))
        return 0
    what = f"memory {rep.memory_id}" if rep.scope == "memory" else f"user {rep.user_id}"
    # what was removed, in the caller's terms (rows per table and index bookkeeping: --json)
    done = f"removed {rep.memories} memories and {rep.messages} messages"
    if not rep.found:
        done += " (nothing stored was found; tombstoned anyway)"
    print(f"forgot {what}: {done}; audit record {rep.audit_id} by {rep.actor} at {rep.forgotten_at}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    store = _store(args)
    demo_file = project_dir() / "demo" / "session_log.jsonl"
    rep = store.ingest(demo_file)
    print(f"1. session log: {demo_file.name}: " + ("already ingested" if rep.skipped else f"landed {rep.rows} rows"))
    res = store.build()
    print(f"2. dbt build: extraction, embeddings, decay and tests passed in {res.seconds:.1f}s")
    print(f"   serving snapshot: {res.snapshot}")
    print("3. recall for user 'demo' (the reference design's three intents, one statement):")
    seed_kinds = ["preference", "fact", "skill"]  # the reference design recalls extracted memories
    groups = store.recall_many(SEED_QUESTIONS, user_id="demo", top_k=args.top_k, kinds=seed_kinds,
                               record_access=False)
    for q, g in zip(SEED_QUESTIONS, groups):
        print(f"   {q} -> " + (" / ".join(f"{m.content} ({m.similarity:.3f})" for m in g) or "(nothing)"))
    print("4. system-prompt block:\n")
    print(store.prompt(SEED_QUESTIONS, user_id="demo", top_k=1, kinds=seed_kinds, record_access=False))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from recall_shim.interfaces.http import serve
    except ImportError as exc:
        print(f"agent-memory: {exc}", file=sys.stderr)
        return 2
    serve(args.db, host=args.host, port=args.port, log_level=args.log_level, token_file=args.token_file,
          no_auth=args.no_auth, allow_hosts=args.allow_host, max_body_bytes=args.max_body_bytes,
          header_timeout=args.header_timeout, body_timeout=args.body_timeout,
          keep_alive_timeout=args.keep_alive_timeout, limit_concurrency=args.limit_concurrency)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from recall_shim.interfaces.mcp import run_stdio
    except ImportError as exc:
        print(f"agent-memory: {exc}", file=sys.stderr)
        return 2
    run_stdio(args.db)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from recall_shim.report.page import write_report

    if os.environ.get(TARGET_ENV) == "postgres":
        raise InvalidInput("report reads a DuckDB store; it is not available on the postgres target")
    path = write_report(args.db if args.db is not None else _store(args).paths.db, args.out)
    print(f"report written to {path}")
    return 0


def _global_flags(top: bool) -> argparse.ArgumentParser:
    """--db and --target, accepted before and after the command name. Only the top-level parser
    sets their defaults: a subcommand's parser must not overwrite a value given before it
    (``agent-memory --db X remember ...``), so its copies default to SUPPRESS."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", default=None if top else argparse.SUPPRESS, metavar="PATH",
                        help=f"the store's DuckDB file (env {DEFAULT_DB_ENV}; default: agent_memory.duckdb in the "
                             f"checkout's data/ when run from one, else in the per-user data folder){DB_HELP}; "
                             "before or after COMMAND")
    common.add_argument("--target", default=argparse.SUPPRESS, choices=["duckdb", "postgres"],
                        help=f"duckdb (default) or postgres: PostgreSQL + pgvector named by the AGENT_MEMORY_PG_* "
                             f"variables (env {TARGET_ENV}; docs/scaling_out.md); before or after COMMAND")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _global_flags(top=False)
    p = argparse.ArgumentParser(prog="agent-memory", description="Long-term memory for AI agents (dbt on DuckDB, or PostgreSQL + pgvector with --target postgres).",
                                parents=[_global_flags(top=True)])
    p.add_argument("--version", action="version", version=f"agent-memory {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("ingest", parents=[common], help="land a CSV, JSONL or Parquet file of session-log rows",
                       description="Land session-log rows (user_id, session_id, msg_seq, role, content, ts, "
                                   "message_id, agent_id) from CSV, JSONL or Parquet files. Run `build` to extract "
                                   "them. CSV: a BOM, any header case, the delimiters , ; tab | and ', ' separators "
                                   "are read; a file without user_id and content columns or with broken quoting is "
                                   "refused whole (exit 2, nothing landed). Rows the door refuses (ids breaking the "
                                   "id rule, content over var max_content_chars, lines that are not JSON objects) "
                                   "land only as rejects with their reason, and are counted in the output. See "
                                   "docs/data_protection.md.")
    s.add_argument("files", nargs="+", metavar="FILE", help="CSV, JSONL or Parquet files")
    s.add_argument("--force", action="store_true", help="land a file again even if it was ingested before")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("remember", parents=[common], help="append one message to the session log",
                       description="Append one message to the session log; prints its message_id. Refused "
                                   "(exit 2, nothing landed) when an id breaks the id rule or the content is longer "
                                   "than var max_content_chars (docs/data_protection.md).")
    s.add_argument("content", help="the message text")
    s.add_argument("--user", required=True, help="the user the message belongs to")
    s.add_argument("--role", default="user", help="user, assistant or system (default user)")
    s.add_argument("--session", default="default", help="session id (default: default)")
    s.add_argument("--msg-seq", type=int, default=None, help="position in the session (default: a clock value)")
    s.add_argument("--ts", default=None, help="ISO-8601 timestamp (default now, UTC)")
    s.add_argument("--message-id", default=None, help="message id (default: generated)")
    s.add_argument("--agent", default=None, help="the agent that logged the message")
    s.set_defaults(func=cmd_remember)

    s = sub.add_parser("build", parents=[common], help="run dbt build and publish a serving snapshot (postgres: build the tables)",
                       description="Run `dbt build` (load landed rows, extract, embed, decay, test) for this "
                                   "store and publish a read-only serving snapshot.")
    s.add_argument("--full-refresh", action="store_true", help="rebuild incremental models from the landed files")
    s.add_argument("--vars", default=None, help="dbt vars as JSON, e.g. '{\"as_of\": \"2026-12-01\"}'")
    s.add_argument("--select", default=None, help="dbt selector")
    s.add_argument("-v", "--verbose", action="store_true", help="print dbt's output")
    s.set_defaults(func=cmd_build)

    s = sub.add_parser("recall", parents=[common], help="recall a user's memories for one or more queries",
                       description="Recall memories of one user. Several QUERY arguments are answered in one "
                                   "statement (multi-intent). --min-sim applies to raw cosine similarity; "
                                   "results rank by fused vector + lexical relevance weighted by strength.")
    s.add_argument("query", nargs="*", metavar="QUERY")
    s.add_argument("--user", default=None, help="the user scope (required unless every --batch line has user_id)")
    s.add_argument("--top-k", type=int, default=None, help="results per query (default: var recall_top_k)")
    s.add_argument("--min-sim", type=float, default=None, help="minimum raw cosine similarity (default: var recall_min_sim)")
    s.add_argument("--kind", action="append", default=None, help="only this kind (repeatable)")
    s.add_argument("--json", action="store_true", help="print results as JSON")
    s.add_argument("--prompt", action="store_true", help="print the system-prompt block instead")
    s.add_argument("--budget", type=int, default=1200, help="prompt size budget in characters")
    s.add_argument("--batch", default=None, metavar="FILE",
                   help='JSON lines {"id", then the arguments of HTTP /recall: "user_id","query" or "vector","top_k",'
                        '"min_sim","kinds","record_access","agent_id","session_id"} (- for stdin; the flags fill in '
                        'what a line leaves out; an unknown argument is an error); prints one {"id","results"} '
                        'line per query')
    s.add_argument("--record-access", action="store_true",
                   help="record the returned memories as accesses (they reinforce at the next build); a recall "
                        "is a look and records nothing by default, --prompt is a use and records by default")
    s.add_argument("--no-access", action="store_true", help="record no access, not even for --prompt (evaluations)")
    s.add_argument("--agent", default=None, help="narrow to memories with a source message from this agent")
    s.add_argument("--session", default=None, help="narrow to memories with a source message from this session")
    s.set_defaults(func=cmd_recall)

    s = sub.add_parser("forget", parents=[common], help="forget a user or one memory everywhere (audited)",
                       description="Remove a user's data (--user) or one memory and its source messages "
                                   "(--memory) from the landing files, the warehouse, the serving snapshots "
                                   "and dbt's logs, keep a tombstone (ids only) so the next build cannot "
                                   "bring it back, and append an audit record (what, when, by whom, counts; "
                                   "no content) to <stem>.audit.jsonl. Waits for a running build.")
    s.add_argument("--user", default=None, help="the user to forget (with --memory: the memory's owner, checked)")
    s.add_argument("--memory", default=None, metavar="MEMORY_ID", help="the memory to forget")
    s.add_argument("--actor", default=None, help="who asks, for the audit record (default: $AGENT_MEMORY_ACTOR or the login name)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser("similarity", parents=[common], help="histogram of query-memory similarities, to choose --min-sim",
                       description="Print the distribution of cosine similarities between queries and every "
                                   "current memory of a user (histogram and quantiles), so min_sim can be set "
                                   "at a quantile of real traffic instead of guessed.")
    s.add_argument("query", nargs="*", metavar="QUERY", help="queries typical of your agent")
    s.add_argument("--user", default=None, help="the user whose memories to compare against")
    s.add_argument("--batch", default=None, metavar="FILE", help='JSON lines {"user_id", "query"} (- for stdin)')
    s.add_argument("--bins", type=int, default=20, help="histogram bins (default 20)")
    s.add_argument("--json", action="store_true", help="print quantiles and histogram as JSON")
    s.set_defaults(func=cmd_similarity)

    s = sub.add_parser("demo", parents=[common], help="ingest the demo log, build, recall the seed's questions",
                       description="Ingest demo/session_log.jsonl (once per store), build, and recall the "
                                   "reference design's three questions, printing the prompt block.")
    s.add_argument("--top-k", type=int, default=3, help="results per question (default 3)")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("report", parents=[common], help="write a self-contained HTML report with plots",
                       description="Write one HTML page (inline SVG, no external URLs) about this store: "
                                   "memories per kind over time, strength and similarity histograms, most "
                                   "accessed memories, what the last build added. See docs/report.md.")
    s.add_argument("--out", default="report.html", metavar="FILE", help="output file (default report.html)")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("serve", parents=[common], help="run the HTTP JSON API (OpenAPI at /openapi.json)",
                       description="Run a long-lived HTTP server over this store: remember, ingest, recall, "
                                   "recall-many, prompt, forget, build, health. The model and the compiled "
                                   "query stay loaded; reads use published snapshots, so it never blocks a "
                                   "build. See docs/server.md.")
    s.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1, loopback only)")
    s.add_argument("--port", type=int, default=8765, help="TCP port (default 8765)")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="server log level (default info)")
    s.add_argument("--token-file", default=None, metavar="FILE",
                   help="file holding the bearer token (default $AGENT_MEMORY_TOKEN_FILE or <store>.token beside "
                        "the store; created with a new token, mode 0600, when missing). $AGENT_MEMORY_TOKEN wins")
    s.add_argument("--no-auth", action="store_true",
                   help="accept requests without a token (refused unless --host is loopback)")
    s.add_argument("--allow-host", action="append", default=None, metavar="NAME",
                   help="an extra name the Host header may carry (repeatable; also $AGENT_MEMORY_ALLOWED_HOSTS, "
                        "comma-separated); the bound host and localhost/127.0.0.1/[::1] are always allowed")
    s.add_argument("--max-body-bytes", type=int, default=None, metavar="N",
                   help="largest request body (default $AGENT_MEMORY_MAX_BODY_BYTES or 1048576); larger gets 413")
    s.add_argument("--header-timeout", type=float, default=10.0, metavar="S",
                   help="close a connection whose request head takes longer (default 10)")
    s.add_argument("--body-timeout", type=float, default=30.0, metavar="S",
                   help="answer 408 to a request whose body takes longer (default 30)")
    s.add_argument("--keep-alive-timeout", type=float, default=5.0, metavar="S",
                   help="close an idle keep-alive connection after this (default 5)")
    s.add_argument("--limit-concurrency", type=int, default=64, metavar="N",
                   help="answer 503 beyond this many open connections or requests (default 64)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("mcp", parents=[common], help="run an MCP server over stdio for agent runtimes",
                       description="Serve the memory operations as MCP tools over stdin/stdout (remember, "
                                   "ingest, recall, recall_many, prompt, forget, health, build). See "
                                   "docs/server.md.")
    s.set_defaults(func=cmd_mcp)
    add_postgres_commands(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "target", None):  # the servers (serve, mcp) open their store from the environment too
        os.environ[TARGET_ENV] = args.target
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not as a traceback at exit
        return code
    except BrokenPipeError:  # e.g. `agent-memory forget ... --json | head -c1`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except BuildFailed as exc:
        print(f"agent-memory: {exc}\n{exc.output[-4000:]}", file=sys.stderr)
        return 1
    except AgentMemoryError as exc:
        print(f"agent-memory: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
