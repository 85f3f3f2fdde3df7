"""The hand-written everyday probe set (format: probes/everyday.json, README "Recall quality").

A probe is one question a user (or the agent on the user's behalf) really asks, with the message
ids that answer it (`expect`) and, for changed facts, the ids that state the old value
(`outdated`). Every message becomes a session-log row (ts = its session's started_at plus one
minute per position); every probe is asked at the file's `asked_at`, which is the build's as_of.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import metrics, runner

LANGS = ("en", "zh", "mixed")
CATEGORIES = ("identity", "home", "work", "family", "pets", "partner", "health", "diet", "likes", "dislikes",
              "habits", "skills", "languages", "plans", "events", "answer_style", "update", "negation",
              "assistant", "time")
ROLES = ("user", "assistant")
TS_FORMAT = "%Y-%m-%d %H:%M:%S"
TOP_K = 10
METRICS = ["top-1", "top-3", "outdated above current"]


class ProbeFormatError(ValueError):
    """The probe file breaks the format (probes/everyday.json); the message lists every problem."""


@dataclass
class Probe:
    probe_id: str
    user_id: str
    lang: str
    category: str
    question: str
    expect: list[str]
    outdated: list[str]


@dataclass
class ProbeSet:
    asked_at: str
    messages: list[dict[str, Any]]  # session-log rows
    owner: dict[str, str]           # message_id -> user_id
    content: dict[str, str]         # message_id -> content
    probes: list[Probe]


def _ts(value: Any, what: str, problems: list[str]) -> datetime | None:
    try:
        return datetime.strptime(str(value), TS_FORMAT)
    except ValueError:
        problems.append(f"{what}: {value!r} is not 'YYYY-MM-DD HH:MM:SS'")
        return None


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _messages(data: dict[str, Any], asked: datetime | None, problems: list[str]) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    rows: list[dict[str, Any]] = []
    owner: dict[str, str] = {}
    content: dict[str, str] = {}
    users = data.get("users")
    if not isinstance(users, list) or not users:
        problems.append("users: a non-empty list is required")
        return rows, owner, content
    seen_users: set[str] = set()
    for u in users:
        uid = u.get("user_id") if isinstance(u, dict) else None
        if not _nonempty_str(uid):
            problems.append("users: every user needs a user_id")
            continue
        if uid in seen_users:
            problems.append(f"user {uid}: listed twice")
        seen_users.add(uid)
        for s in u.get("sessions") or []:
            sid = s.get("session_id") if isinstance(s, dict) else None
            if not _nonempty_str(sid):
                problems.append(f"user {uid}: every session needs a session_id")
                continue
            start = _ts(s.get("started_at"), f"session {sid} started_at", problems)
            for seq, m in enumerate(s.get("messages") or [], start=1):
                mid = m.get("id") if isinstance(m, dict) else None
                if not _nonempty_str(mid):
                    problems.append(f"session {sid} message {seq}: no id")
                    continue
                if mid in owner:
                    problems.append(f"message {mid}: id used twice")
                    continue
                if m.get("role") not in ROLES:
                    problems.append(f"message {mid}: role must be one of {ROLES}, got {m.get('role')!r}")
                if not _nonempty_str(m.get("content")):
                    problems.append(f"message {mid}: empty content")
                ts = start + timedelta(minutes=seq - 1) if start else None
                if ts and asked and ts >= asked:
                    problems.append(f"message {mid}: at {ts} is not before asked_at")
                owner[mid] = uid
                content[mid] = str(m.get("content"))
                rows.append({"user_id": uid, "session_id": sid, "msg_seq": seq, "role": m.get("role"),
                             "content": m.get("content"), "ts": ts.strftime(TS_FORMAT) if ts else None,
                             "message_id": mid})
    return rows, owner, content


def _probe(p: Any, owner: dict[str, str], users: set[str], problems: list[str]) -> Probe | None:
    pid = p.get("id") if isinstance(p, dict) else None
    if not _nonempty_str(pid):
        problems.append("probes: every probe needs an id")
        return None
    uid = p.get("user_id")
    bad = len(problems)
    if uid not in users:
        problems.append(f"probe {pid}: unknown user_id {uid!r}")
    if p.get("lang") not in LANGS:
        problems.append(f"probe {pid}: lang must be one of {LANGS}, got {p.get('lang')!r}")
    if p.get("category") not in CATEGORIES:
        problems.append(f"probe {pid}: unknown category {p.get('category')!r}")
    if not _nonempty_str(p.get("question")):
        problems.append(f"probe {pid}: empty question")
    lists: dict[str, list[str]] = {}
    for key in ("expect", "outdated"):
        ids = p.get(key, [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            problems.append(f"probe {pid}: {key} must be a list of message ids")
            ids = []
        for mid in ids:
            if mid not in owner:
                problems.append(f"probe {pid}: {key} id {mid} names no message")
            elif owner[mid] != uid:
                problems.append(f"probe {pid}: {key} id {mid} belongs to user {owner[mid]}, not {uid}")
        lists[key] = list(ids)
    if not lists["expect"]:
        problems.append(f"probe {pid}: expect needs at least one message id")
    if set(lists["expect"]) & set(lists["outdated"]):
        problems.append(f"probe {pid}: ids both expected and outdated: {sorted(set(lists['expect']) & set(lists['outdated']))}")
    if len(problems) > bad:
        return None
    return Probe(pid, uid, p["lang"], p["category"], p["question"], lists["expect"], lists["outdated"])


def load_probes(path: Path) -> ProbeSet:
    """Read and validate a probe file; raises ProbeFormatError naming every problem found."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProbeFormatError(f"cannot read probe file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ProbeFormatError(f"{path}: the top level must be a JSON object")
    problems: list[str] = []
    asked = _ts(data.get("asked_at"), "asked_at", problems)
    rows, owner, content = _messages(data, asked, problems)
    users = {r["user_id"] for r in rows} | {u.get("user_id") for u in data.get("users") or [] if isinstance(u, dict)}
    probes: list[Probe] = []
    ids: set[str] = set()
    raw = data.get("probes")
    if not isinstance(raw, list) or not raw:
        problems.append("probes: a non-empty list is required")
        raw = []
    for p in raw:
        probe = _probe(p, owner, users, problems)
        if probe is None:
            continue
        if probe.probe_id in ids:
            problems.append(f"probe {probe.probe_id}: id used twice")
        ids.add(probe.probe_id)
        probes.append(probe)
    if problems:
        shown = "\n  ".join(problems[:30]) + (f"\n  ... and {len(problems) - 30} more" if len(problems) > 30 else "")
        raise ProbeFormatError(f"{path}: {len(problems)} problem(s):\n  {shown}")
    return ProbeSet(str(data["asked_at"]), rows, owner, content, probes)


def score_probe(p: Probe, results: list[dict[str, Any]]) -> dict[str, float]:
    expect, outdated = set(p.expect), set(p.outdated)
    m = {"top-1": float(metrics.top_n(expect, results, 1)), "top-3": float(metrics.top_n(expect, results, 3))}
    if outdated:
        m["outdated above current"] = float(metrics.outdated_above_current(expect, outdated, results))
    return m


def prompt_states_both(p: Probe, prompt: str, memories: list[dict[str, Any]]) -> bool:
    """The prompt block holds a line of a memory derived from an outdated message and a line of
    one derived from an expect message (memories: the same recall with the CLI's defaults)."""
    shown = [m for m in memories if f"- {m['content']}" in prompt]
    src = [set(m["source_message_ids"]) for m in shown]
    return any(s & set(p.outdated) for s in src) and any(s & set(p.expect) for s in src)


def run(path: Path, out: Path, base_vars: dict[str, Any], tries: list[tuple[str, dict[str, Any]]] | None = None,
        reuse: bool = False) -> tuple[str, dict[str, Any]]:
    """Ingest the probe set's messages (unless ``reuse`` finds the store built), measure every
    yardstick mode and each candidate setting of ``tries``; returns (report, results)."""
    modes = runner.YARDSTICK_MODES + list(tries or [])
    ps = load_probes(path)
    db = out / "probes.duckdb"
    with_old = [p for p in ps.probes if p.outdated]
    print(f"probes: {len(ps.probes)} probes ({len(with_old)} with outdated), {len(ps.messages)} messages; "
          f"asked_at {ps.asked_at}; store {db}", flush=True)
    if not runner.existing_store(db, reuse):
        runner.cli(db, "ingest", str(runner.write_jsonl(out / "probes.jsonl", ps.messages)))
    requests = [{"id": p.probe_id, "user_id": p.user_id, "query": p.question, "top_k": TOP_K, "min_sim": -1}
                for p in ps.probes]
    defaults = [{"id": p.probe_id, "user_id": p.user_id, "query": p.question} for p in with_old]
    columns = [label for label, _ in modes]
    scores: dict[str, dict[str, dict[str, float]]] = {}
    both: dict[str, int] = {}
    for label, vars_ in modes:
        runner.build(db, ps.asked_at, {**base_vars, **vars_})
        res = runner.run_batch(db, requests)
        scores[label] = metrics.mean_by_group(
            (("overall", f"lang {p.lang}", p.category), score_probe(p, res[p.probe_id])) for p in ps.probes)
        shipped_like = runner.run_batch(db, defaults) if defaults else {}
        both[label] = sum(prompt_states_both(p, runner.prompt_block(db, p.user_id, p.question), shipped_like[p.probe_id])
                          for p in with_old)
        o = scores[label]["overall"]
        print(f"  {label}: " + "  ".join(f"{m} {o[m]:.3f}" for m in METRICS if m in o), flush=True)
    if modes[-1][1]:
        runner.build(db, ps.asked_at, base_vars)  # leave the store as shipped
    langs = [f"lang {lang}" for lang in LANGS]
    report = [metrics.table("Everyday probes: overall and per language", columns, scores, ["overall"] + langs, METRICS, "set"),
              metrics.table("Everyday probes: per category", columns, scores, list(CATEGORIES), METRICS)]
    n_old = len(with_old)
    lines = ["### Everyday probes with `outdated`: counts", "",
             "| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    lines.append(f"| outdated above current (of {n_old}) | " + " | ".join(
        f"{round(scores[c]['overall'].get('outdated above current', 0) * n_old)}" for c in columns) + " |")
    lines.append(f"| prompt states both (of {n_old}) | " + " | ".join(str(both[c]) for c in columns) + " |")
    report.append("\n".join(lines))
    report.append(f"Top-1/top-3 over recall top_k {TOP_K} without threshold; the prompt block with the CLI's defaults "
                  f"(var recall_top_k, recall_min_sim, --budget 1200); as_of = asked_at {ps.asked_at}.")
    return "\n\n".join(report), {"asked_at": ps.asked_at, "probes": len(ps.probes), "with_outdated": n_old,
                                 "scores": scores, "prompt_states_both": both}
