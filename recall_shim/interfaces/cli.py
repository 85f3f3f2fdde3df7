"""``agent-memory``: a thin command line over :class:`recall_shim.MemoryStore` (or, with
``--target postgres``, :class:`recall_shim.PgMemoryStore`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from recall_shim.errors import AgentMemoryError, BuildFailed, InvalidInput, InvalidQuery
from recall_shim.interfaces.cli_parser import make_parser
from recall_shim.interfaces.requests import arguments, parse
from recall_shim.recall.prompt import when
from recall_shim.targets.duckdb import project_dir
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
        print(f"{m.rank:>2}. [{m.kind}] {m.content}{when(m)}  (sim {m.similarity:.3f}, strength {m.strength:.3f},"
              f" score {m.score:.3f})")


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


def build_parser() -> argparse.ArgumentParser:
    return make_parser({
        "ingest": cmd_ingest,
        "remember": cmd_remember,
        "build": cmd_build,
        "recall": cmd_recall,
        "forget": cmd_forget,
        "similarity": cmd_similarity,
        "demo": cmd_demo,
        "report": cmd_report,
        "serve": cmd_serve,
        "mcp": cmd_mcp,
    })


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
