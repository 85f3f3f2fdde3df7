"""``agent-memory report``: one self-contained HTML page about a store, for analysts.

Plots (inline SVG scaled to the card width, no external URL, no JavaScript library): memories
per kind over time (superseded ones as their own dashed line), the strength histogram, the
similarity histogram of recall queries against their user's memories (standing intents, else a
sample of the user's own messages: ``recall_shim/report/similarity.py``; to choose ``recall_min_sim``), and the
most accessed memories; plus summary figures, what the last build added (superseded memories
marked) and the LLM token ledger. Reads the warehouse read-only, waiting for a running build to
finish (``_warehouse.read_warehouse``).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

import duckdb

from recall_shim.report.charts import hbar_chart, histogram, line_chart
from recall_shim.errors import StoreNotBuilt
from recall_shim.common.paths import StorePaths
from recall_shim.report.similarity import collect_similarities
from recall_shim.build.warehouse import read_warehouse, rows as _rows, tables as _tables

CHART_IDS = ("chart-kinds-over-time", "chart-strength", "chart-similarity", "chart-top-accessed")
SUPERSEDED = "superseded (all kinds)"  # the dashed series of the first chart, by the day it was superseded


@dataclass
class ReportData:
    db: str
    summary: dict[str, Any]
    kinds_over_time: dict[str, list[tuple[date, float]]]
    strengths: list[float]
    similarities: list[tuple[float, bool]]  # (cosine, is the best match of its query)
    min_sim: float | None
    top_accessed: list[dict[str, Any]]
    last_build_added: list[dict[str, Any]]
    llm: dict[str, Any] | None
    similarity_queries: tuple[int, int] = (0, 0)  # (standing intents, sampled messages)
    generated_at: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def collect(db: str | os.PathLike[str]) -> ReportData:
    """Read what the report shows from the store's warehouse."""
    paths = StorePaths.of(db)
    with read_warehouse(paths) as con:
        return _collect(con, paths)


def _collect(con: duckdb.DuckDBPyConnection, paths: StorePaths) -> ReportData:
    tables = _tables(con)
    if "long_term_memory" not in tables:
        raise StoreNotBuilt(f"{paths.db} has no long_term_memory: run `agent-memory build --db {paths.db}` first")
    summary = _rows(con, """
        select
            count(distinct user_id) as users,
            count(*) filter (where valid_to is null) as current_memories,
            count(*) filter (where valid_to is not null) as superseded_memories,
            coalesce(sum(access_count) filter (where valid_to is null), 0) as accesses,
            max(strength_as_of) as strength_as_of
        from long_term_memory""")[0]
    for name, table in (("accepted_messages", "session_messages"), ("rejected_rows", "session_log_rejects")):
        summary[name] = con.execute(f"select count(*) from {table}").fetchone()[0] if table in tables else None
    settings = _rows(con, "select default_min_sim, embedding_model from recall_queries limit 1") \
        if "recall_queries" in tables else []
    min_sim = float(settings[0]["default_min_sim"]) if settings else None
    if settings:
        summary["embedding_model"] = settings[0]["embedding_model"]

    per_day: dict[str, dict[date, int]] = defaultdict(lambda: defaultdict(int))
    for kind, day, n in con.execute(
        "select kind, created_at::date, count(*) from long_term_memory group by all order by 2, 1"
    ).fetchall():
        per_day[kind][day] += n
    kinds_over_time: dict[str, list[tuple[date, float]]] = {}
    for kind in sorted(per_day):
        total = 0
        kinds_over_time[kind] = []
        for day in sorted(per_day[kind]):
            total += per_day[kind][day]
            kinds_over_time[kind].append((day, float(total)))
    superseded, total = [], 0
    for day, n in con.execute("select valid_to::date, count(*) from long_term_memory where valid_to is not null "
                              "group by all order by 1").fetchall():
        total += n
        superseded.append((day, float(total)))
    if superseded:
        kinds_over_time[SUPERSEDED] = superseded

    strengths = [float(r[0]) for r in con.execute(
        "select strength from long_term_memory where valid_to is null and strength is not null").fetchall()]

    sims = collect_similarities(con)

    top_accessed = _rows(con, """
        select memory_id, user_id, kind, content, access_count, round(strength, 3) as strength, last_accessed
        from long_term_memory
        where valid_to is null and access_count > 0
        order by access_count desc, strength desc, memory_id
        limit 10""")

    last_build_added: list[dict[str, Any]] = []
    if {"session_log", "session_messages"} <= tables:
        last_build_added = _rows(con, """
            with loads as (
                select m.message_id, l.loaded_at
                from session_messages as m
                inner join session_log as l using (landing_id)
            ),
            first_loads as (
                select t.memory_id, min(loads.loaded_at) as first_loaded_at
                from long_term_memory as t, unnest(t.source_message_ids) as s(message_id)
                inner join loads using (message_id)
                group by t.memory_id
            )
            select t.user_id, t.kind, t.content,
                case when t.valid_to is null then 'current' else 'superseded ' || t.valid_to::date end as status,
                f.first_loaded_at as loaded_at
            from long_term_memory as t
            inner join first_loads as f using (memory_id)
            where f.first_loaded_at = (select max(loaded_at) from session_log)
            order by t.user_id, t.kind, t.content
            limit 50""")

    llm = None
    if "llm_token_ledger" in tables:
        llm = _rows(con, """
            select count(*) as builds, coalesce(sum(batches_ok), 0) as batches_ok,
                   coalesce(sum(batches_failed), 0) as batches_failed,
                   coalesce(sum(memories_kept), 0) as memories_kept,
                   coalesce(sum(prompt_tokens), 0) as prompt_tokens,
                   coalesce(sum(completion_tokens), 0) as completion_tokens
            from llm_token_ledger""")[0]

    return ReportData(str(paths.db), summary, kinds_over_time, strengths, sims.pairs, min_sim,
                      top_accessed, last_build_added, llm, (sims.intents, sims.messages))


def _edges(lo: float, hi: float, width: float, max_bins: int = 60) -> list[float]:
    lo = math.floor(lo / width) * width
    hi = max(math.ceil(hi / width) * width, lo + width)
    while (hi - lo) / width > max_bins:
        width *= 2
    n = max(1, round((hi - lo) / width))
    return [round(lo + i * width, 10) for i in range(n + 1)]


def _counts(values: list[float], edges: list[float]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for v in values:
        i = min(max(0, int((v - edges[0]) / (edges[1] - edges[0]))), len(counts) - 1)
        counts[i] += 1
    return counts


def charts(data: ReportData) -> dict[str, str]:
    """The four SVG charts, by id."""
    out = {CHART_IDS[0]: line_chart(CHART_IDS[0], "Memories per kind over time (cumulative, by creation day)",
                                     data.kinds_over_time, "memories", dashed={SUPERSEDED})}
    s_edges = _edges(min(data.strengths + [0.3]), 1.0, 0.05)
    out[CHART_IDS[1]] = histogram(CHART_IDS[1], "Strength of current memories", s_edges,
                                  {"memories": _counts(data.strengths, s_edges)} if data.strengths else {},
                                  "strength (1 = fresh; decays towards var strength_floor)")
    sims = [s for s, _ in data.similarities]
    if sims:
        lo = min(sims + ([data.min_sim] if data.min_sim is not None else []))
        sim_edges = _edges(lo, max(sims + [lo + 0.01]), 0.01)
        layers = {"other memories": _counts([s for s, best in data.similarities if not best], sim_edges),
                  "best match per query": _counts([s for s, best in data.similarities if best], sim_edges)}
    else:
        sim_edges, layers = [0.0, 1.0], {}
    out[CHART_IDS[2]] = histogram(CHART_IDS[2], "Cosine similarity of recall queries to their user's memories",
                                  sim_edges, layers, "raw cosine similarity", threshold=data.min_sim,
                                  threshold_label="recall_min_sim")
    labels = [f"[{m['kind']}] {m['content']} ({m['user_id']})" for m in data.top_accessed]
    out[CHART_IDS[3]] = hbar_chart(CHART_IDS[3], "Most accessed current memories", labels,
                                   [float(m["access_count"]) for m in data.top_accessed], "recall accesses")
    return out


def _table(rows: list[dict[str, Any]], cols: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join(
        ('<tr class="superseded">' if str(r.get("status", "")).startswith("superseded") else "<tr>")
        + "".join(f'<td class="{escape(c)}">{escape("" if r.get(c) is None else str(r.get(c)))}</td>' for c in cols)
        + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC",sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}.meta{color:#666;font-size:12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:16px 0}.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.card span{font-size:11px;color:#666}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:14px}
svg.chart{display:block;width:100%;height:auto}
.panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px}.panel p{font-size:12px;color:#555;margin:4px 8px}
table{border-collapse:collapse;background:#fff;font-size:12px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left}
tr.superseded td{color:#888;text-decoration:line-through}tr.superseded td.status{text-decoration:none}
.empty{color:#888;font-size:12px}
"""

# Marks the page once the browser has laid out every chart, and counts the charts as wide as their card
# (less its padding); tests read both from the DOM.
SCRIPT = """
(function(){var n=0,f=0;document.querySelectorAll('svg.chart').forEach(function(s){var b=s.getBBox();
if(b.width>0&&b.height>0){n++;}var w=s.getBoundingClientRect().width,p=s.parentElement.clientWidth;
if(w>=p-20){f++;}});document.body.setAttribute('data-charts-rendered',String(n));
document.body.setAttribute('data-charts-fill-card',String(f));})();
"""

NOTES = {
    CHART_IDS[0]: "Cumulative count of memories (current and superseded) by the day they were first said; "
                  "the dashed line counts superseded memories by the day a newer value replaced them.",
    CHART_IDS[1]: "Strength decays per day since the last access or mention and recovers on each one; "
                  "recall ranks by fused relevance weighted by strength.",
    CHART_IDS[2]: "Every (query, current memory of the same user) pair. Queries are the standing intents of "
                  "seeds/recall_intents.csv for users that have some, else a sample of each user's own messages "
                  "(never paired with memories made from that message). A good recall_min_sim keeps the best "
                  "matches right of the line and most others left.",
    CHART_IDS[3]: "Accesses are recalls that returned the memory; each reinforces it at the next build.",
}


def render_html(data: ReportData) -> str:
    s = data.summary
    cards = [("users", s.get("users")), ("current memories", s.get("current_memories")),
             ("superseded", s.get("superseded_memories")), ("accepted messages", s.get("accepted_messages")),
             ("rejected rows", s.get("rejected_rows")), ("accesses", s.get("accesses"))]
    if data.llm and data.llm["builds"]:
        cards += [("LLM tokens in", data.llm["prompt_tokens"]), ("LLM tokens out", data.llm["completion_tokens"])]
    card_html = "".join(f'<div class="card"><b>{escape(str(v if v is not None else "-"))}</b><span>{escape(k)}</span></div>'
                        for k, v in cards)
    notes = dict(NOTES)
    notes[CHART_IDS[2]] += " Here: {} standing intents, {} sampled messages.".format(*data.similarity_queries)
    panels = "".join(f'<div class="panel">{svg}<p>{escape(notes[cid])}</p></div>' for cid, svg in charts(data).items())
    added = _table(data.last_build_added, ["user_id", "kind", "content", "status", "loaded_at"],
                   "The last build added no memories.")
    top = _table(data.top_accessed, ["user_id", "kind", "content", "access_count", "strength", "last_accessed"],
                 "No recall has accessed a memory yet.")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>agent-memory report</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>
<body>
<h1>agent-memory report</h1>
<div class="meta">store {escape(data.db)} · strength as of {escape(str(s.get('strength_as_of')))} ·
embedding model {escape(str(s.get('embedding_model', '-')))} · generated {escape(data.generated_at)}</div>
<div class="cards">{card_html}</div>
<div class="grid">{panels}</div>
<h2>Added by the last build that loaded messages</h2>{added}
<h2>Most accessed memories</h2>{top}
<script>{SCRIPT}</script>
</body></html>
"""


def write_report(db: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Collect the store's figures and write the HTML page to ``out``; returns its path."""
    html = render_html(collect(db))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return path
