"""The ``agent-memory`` command line's arguments and help texts (one parser, used by
recall_shim/interfaces/cli.py, which runs the commands). PostgreSQL-only commands and help come
from recall_shim/interfaces/cli_postgres.py."""

from __future__ import annotations

import argparse
from typing import Callable, Mapping

from recall_shim.common.paths import package_version
from recall_shim.interfaces.cli_postgres import DB_HELP, add_postgres_commands
from recall_shim.targets import TARGET_ENV
from recall_shim.targets.duckdb import DEFAULT_DB_ENV

__all__ = ["Command", "make_parser"]

Command = Callable[[argparse.Namespace], int]


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


def make_parser(commands: Mapping[str, Command]) -> argparse.ArgumentParser:
    """The whole command line; ``commands`` maps each command name to the function that runs it."""
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
    s.set_defaults(func=commands["ingest"])

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
    s.set_defaults(func=commands["remember"])

    s = sub.add_parser("build", parents=[common], help="run dbt build and publish a serving snapshot (postgres: build the tables)",
                       description="Run `dbt build` (load landed rows, extract, embed, decay, test) for this "
                                   "store and publish a read-only serving snapshot.")
    s.add_argument("--full-refresh", action="store_true", help="rebuild incremental models from the landed files")
    s.add_argument("--vars", default=None, help="dbt vars as JSON, e.g. '{\"as_of\": \"2026-12-01\"}'")
    s.add_argument("--select", default=None, help="dbt selector")
    s.add_argument("-v", "--verbose", action="store_true", help="print dbt's output")
    s.set_defaults(func=commands["build"])

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
    s.set_defaults(func=commands["recall"])

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
    s.set_defaults(func=commands["forget"])

    s = sub.add_parser("similarity", parents=[common], help="histogram of query-memory similarities, to choose --min-sim",
                       description="Print the distribution of cosine similarities between queries and every "
                                   "current memory of a user (histogram and quantiles), so min_sim can be set "
                                   "at a quantile of real traffic instead of guessed.")
    s.add_argument("query", nargs="*", metavar="QUERY", help="queries typical of your agent")
    s.add_argument("--user", default=None, help="the user whose memories to compare against")
    s.add_argument("--batch", default=None, metavar="FILE", help='JSON lines {"user_id", "query"} (- for stdin)')
    s.add_argument("--bins", type=int, default=20, help="histogram bins (default 20)")
    s.add_argument("--json", action="store_true", help="print quantiles and histogram as JSON")
    s.set_defaults(func=commands["similarity"])

    s = sub.add_parser("demo", parents=[common], help="ingest the demo log, build, recall the seed's questions",
                       description="Ingest demo/session_log.jsonl (once per store), build, and recall the "
                                   "reference design's three questions, printing the prompt block.")
    s.add_argument("--top-k", type=int, default=3, help="results per question (default 3)")
    s.set_defaults(func=commands["demo"])

    s = sub.add_parser("report", parents=[common], help="write a self-contained HTML report with plots",
                       description="Write one HTML page (inline SVG, no external URLs) about this store: "
                                   "memories per kind over time, strength and similarity histograms, most "
                                   "accessed memories, what the last build added. See docs/report.md.")
    s.add_argument("--out", default="report.html", metavar="FILE", help="output file (default report.html)")
    s.set_defaults(func=commands["report"])

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
    s.set_defaults(func=commands["serve"])

    s = sub.add_parser("mcp", parents=[common], help="run an MCP server over stdio for agent runtimes",
                       description="Serve the memory operations as MCP tools over stdin/stdout (remember, "
                                   "ingest, recall, recall_many, prompt, forget, health, build). See "
                                   "docs/server.md.")
    s.set_defaults(func=commands["mcp"])
    add_postgres_commands(sub, common)
    return p
