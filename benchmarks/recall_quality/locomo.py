"""LoCoMo (snap-research/LoCoMo, data/locomo10.json, CC BY-NC 4.0) through the CLI.

The file is read from a path the user downloaded; it is never copied into the repository. The
mapping into the session log (README "Recall quality", docs/recall.md "Yardsticks"):
  - one store user per conversation (user_id = the conversation's sample_id, e.g. conv-26);
  - every turn role=user: both speakers are people talking about themselves;
  - session_id = <sample_id>:session_<N>, msg_seq = the turn's 1-based position in the session;
  - message_id = <sample_id>:<dia_id> (dia_ids repeat across conversations);
  - ts = the session's date_time ("1:56 pm on 8 May, 2023") plus one minute per turn: the
    conversations keep their own calendar, so a question naming a date ("in May 2023") means it
    (see to_session_log);
  - content = the turn text, optionally prefixed with the speaker's name ("Caroline: ..."); a
    turn that shares a photo carries its caption as LoCoMo's own evaluation prompts render it
    ("<text> [shares a photo of ...]", task_eval/evaluation_stats.py); `images="none"` drops it
    (the mapping before 2026-12-07: 45% of the questions have an evidence turn with a photo, 31%
    only such turns, and some answers are in the caption alone).
Questions of categories 1-4 with evidence; category 5 (adversarial, unanswerable) is skipped.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import metrics, runner

# LoCoMo's category numbers, named as in the paper (checked against the data: category 1
# questions have 3.1 evidence turns on average and 98% more than one, category 2 questions are
# 81% "when ..." questions, category 3 asks for inference beyond the text ("what fields would
# Caroline be likely to pursue"), category 4 has one evidence turn in 95% of questions, category 5
# questions carry an adversarial_answer)
CATEGORY_NAMES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop"}
SKIPPED_CATEGORIES = {5: "adversarial"}
DATE_FORMAT = "%I:%M %p on %d %B, %Y"
TS_FORMAT = "%Y-%m-%d %H:%M:%S"
CONTENT_FORMS = ("text", "speaker")  # the turn text / "<speaker>: <turn text>"
IMAGE_FORMS = ("caption", "none")  # a shared photo: its caption appended as "[shares ...]" / dropped
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")


class LocomoFormatError(ValueError):
    """The LoCoMo file does not have the structure this loader expects."""


@dataclass
class Turn:
    speaker: str
    dia_id: str
    text: str
    caption: str | None = None  # blip_caption of a photo the turn shares


@dataclass
class Session:
    number: int
    started_at: datetime
    turns: list[Turn]


@dataclass
class Conversation:
    sample_id: str
    sessions: list[Session]


@dataclass
class Question:
    question_id: str
    sample_id: str
    question: str
    category: str
    evidence: list[str]  # message_ids (<sample_id>:<dia_id>)
    dropped_evidence: list[str] = field(default_factory=list)  # raw ids naming no turn


@dataclass
class Locomo:
    conversations: list[Conversation]
    questions: list[Question]
    skipped: dict[str, int]  # reason -> questions left out


def parse_locomo_datetime(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> datetime(2023, 5, 8, 13, 56)."""
    try:
        return datetime.strptime(" ".join(str(text).split()), DATE_FORMAT)
    except ValueError as exc:
        raise LocomoFormatError(f"unparseable session date_time {text!r} (expected e.g. '1:56 pm on 8 May, 2023')") from exc


def normalise_evidence(raw: list[Any], known: set[str]) -> tuple[list[str], list[str]]:
    """LoCoMo evidence ids as dia_ids of turns that exist, in order, without repeats; a few entries
    hold several ids ('D8:6; D9:17', 'D9:1 D4:4') or typos ('D:11:26', 'D30:05'). Returns
    (dia_ids, dropped raw entries that name no turn)."""
    out: list[str] = []
    dropped: list[str] = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry).strip()):
            if not part:
                continue
            m = _DIA_ID.fullmatch(part)
            dia = f"D{m.group(1)}:{m.group(2)}" if m else part
            if dia not in known:
                dropped.append(part)
            elif dia not in out:
                out.append(dia)
    return out, dropped


def _conversation(sample: dict[str, Any]) -> Conversation:
    sample_id = sample.get("sample_id")
    conv = sample.get("conversation")
    if not isinstance(sample_id, str) or not sample_id or not isinstance(conv, dict):
        raise LocomoFormatError("every sample needs a sample_id and a conversation object")
    sessions: list[Session] = []
    for key, turns in conv.items():
        m = _SESSION_KEY.fullmatch(key)
        if not m:
            continue
        if not isinstance(turns, list):
            raise LocomoFormatError(f"{sample_id}: {key} is not a list of turns")
        if not turns:
            continue
        when = conv.get(f"{key}_date_time")
        if when is None:
            raise LocomoFormatError(f"{sample_id}: {key} has no {key}_date_time")
        parsed: list[Turn] = []
        for t in turns:
            if not isinstance(t, dict) or not all(isinstance(t.get(k), str) for k in ("speaker", "dia_id", "text")):
                raise LocomoFormatError(f"{sample_id}: {key}: every turn needs string speaker, dia_id and text")
            caption = t.get("blip_caption")
            parsed.append(Turn(t["speaker"], t["dia_id"], t["text"],
                               caption.strip() if isinstance(caption, str) and caption.strip() else None))
        sessions.append(Session(int(m.group(1)), parse_locomo_datetime(when), parsed))
    if not sessions:
        raise LocomoFormatError(f"{sample_id}: no sessions")
    sessions.sort(key=lambda s: s.number)
    return Conversation(sample_id, sessions)


def load_locomo(path: Path) -> Locomo:
    """Read locomo10.json: conversations and the questions of categories 1-4 that have evidence."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LocomoFormatError(f"cannot read LoCoMo file {path}: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise LocomoFormatError("a LoCoMo file is a non-empty JSON list of samples")
    conversations: list[Conversation] = []
    questions: list[Question] = []
    skipped: dict[str, int] = {}
    for sample in data:
        conv = _conversation(sample)
        if any(c.sample_id == conv.sample_id for c in conversations):
            raise LocomoFormatError(f"duplicate sample_id {conv.sample_id}")
        conversations.append(conv)
        known = {t.dia_id for s in conv.sessions for t in s.turns}
        for i, qa in enumerate(sample.get("qa") or [], start=1):
            cat = qa.get("category")
            if cat in SKIPPED_CATEGORIES:
                reason = f"category {cat} ({SKIPPED_CATEGORIES[cat]})"
            elif cat not in CATEGORY_NAMES:
                raise LocomoFormatError(f"{conv.sample_id} question {i}: unknown category {cat!r}")
            else:
                evidence, dropped = normalise_evidence(qa.get("evidence") or [], known)
                if evidence:
                    questions.append(Question(f"{conv.sample_id}#q{i}", conv.sample_id, str(qa["question"]),
                                              CATEGORY_NAMES[cat], [f"{conv.sample_id}:{d}" for d in evidence],
                                              dropped))
                    continue
                reason = "no evidence naming a turn"
            skipped[reason] = skipped.get(reason, 0) + 1
    return Locomo(conversations, questions, skipped)


def to_session_log(locomo: Locomo, content_form: str = "text", images: str = "caption") -> tuple[list[dict[str, Any]], str]:
    """Session-log rows of every conversation and the as_of to build with: midnight after the day
    the latest conversation ends.

    Every turn keeps its conversation's own date: 12% of the questions name one ("What did John
    attend with his colleagues in March 2023?"). One build has one as_of, so a conversation that
    ended earlier is asked later than the day after its last session: its memories sit nearer
    the strength floor (with strength_weight 0.05 the factor differs by at most 0.035 between a
    fresh memory and one at the floor, and a user's memories are only ranked against each
    other). Until 2026-12-07 every conversation was shifted by whole days to end on the same
    day, which moved the dates the questions name."""
    if content_form not in CONTENT_FORMS:
        raise ValueError(f"content_form must be one of {CONTENT_FORMS}, got {content_form!r}")
    if images not in IMAGE_FORMS:
        raise ValueError(f"images must be one of {IMAGE_FORMS}, got {images!r}")
    end = max(s.started_at + timedelta(minutes=len(s.turns) - 1) for c in locomo.conversations for s in c.sessions).date()
    rows: list[dict[str, Any]] = []
    for c in locomo.conversations:
        for s in c.sessions:
            for seq, t in enumerate(s.turns, start=1):
                ts = s.started_at + timedelta(minutes=seq - 1)
                text = t.text.strip()
                if t.caption and images == "caption":
                    text = f"{text} [shares {t.caption}]"
                rows.append({
                    "user_id": c.sample_id,
                    "session_id": f"{c.sample_id}:session_{s.number}",
                    "msg_seq": seq,
                    "role": "user",
                    "content": f"{t.speaker}: {text}" if content_form == "speaker" else text,
                    "ts": ts.strftime(TS_FORMAT),
                    "message_id": f"{c.sample_id}:{t.dia_id}",
                })
    as_of = datetime.combine(end + timedelta(days=1), datetime.min.time()).strftime(TS_FORMAT)
    return rows, as_of


def recall_requests(locomo: Locomo, top_k: int) -> list[dict[str, Any]]:
    """One recall --batch line per question, for its conversation's user, with no threshold."""
    return [{"id": q.question_id, "user_id": q.sample_id, "query": q.question, "top_k": top_k, "min_sim": -1}
            for q in locomo.questions]


def score(locomo: Locomo, results: dict[str, list[dict[str, Any]]], ks: list[int]) -> dict[str, dict[str, float]]:
    rows = [((q.category, "overall"), metrics.score_question(set(q.evidence), results[q.question_id], ks))
            for q in locomo.questions]
    return metrics.mean_by_group(rows)


def run(path: Path, out: Path, content_forms: list[str], ks: list[int], base_vars: dict[str, Any],
        modes: list[tuple[str, dict[str, Any]]] | None = None, reuse: bool = False,
        images: str = "caption") -> tuple[str, dict[str, Any]]:
    """Ingest, build and recall LoCoMo once per content form, measuring each mode (default: the
    yardsticks BM25 only, vector only, shipped hybrid); ``reuse`` keeps a store already built
    there (no ingest); returns (Markdown report, results)."""
    modes = modes or runner.YARDSTICK_MODES
    locomo = load_locomo(path)
    n_turns = sum(len(s.turns) for c in locomo.conversations for s in c.sessions)
    cats = [CATEGORY_NAMES[c] for c in sorted(CATEGORY_NAMES)]
    n_cat = {c: sum(q.category == c for q in locomo.questions) for c in cats}
    skipped = ", ".join(f"{n} {r}" for r, n in sorted(locomo.skipped.items()))
    print(f"LoCoMo: {len(locomo.conversations)} conversations, {n_turns} turns, {len(locomo.questions)} questions "
          f"({', '.join(f'{c} {n}' for c, n in n_cat.items())}); skipped {skipped}", flush=True)
    requests = recall_requests(locomo, max(max(ks), 10))
    metric_names = [f"any@{k}" for k in ks] + [f"frac@{k}" for k in ks]
    columns = [label for label, _ in modes]
    report: list[str] = []
    results: dict[str, Any] = {"questions": len(locomo.questions), "skipped": locomo.skipped, "forms": {}}
    for form in content_forms:
        stem = f"locomo-{form}" + ("" if images == "caption" else f"-images-{images}")
        db = out / f"{stem}.duckdb"
        rows, as_of = to_session_log(locomo, form, images)
        log = runner.write_jsonl(out / f"{stem}.jsonl", rows)
        t0 = time.monotonic()
        print(f"content form {form!r}, images {images!r}: ingest {len(rows)} messages, as_of {as_of}, store {db}", flush=True)
        if not runner.existing_store(db, reuse):
            runner.cli(db, "ingest", str(log))
        raw = runner.measure_modes(db, as_of, modes, base_vars, requests)
        counts = runner.store_counts(db)
        scores = {label: score(locomo, raw[label], ks) for label in columns}
        elapsed = time.monotonic() - t0
        for label in columns:
            o = scores[label]["overall"]
            print(f"  {label}: " + "  ".join(f"{m} {o[m]:.3f}" for m in metric_names), flush=True)
        report.append(metrics.table(
            f"LoCoMo, content {form!r}, images {images!r}: " + " vs ".join(columns), columns, scores,
            cats + ["overall"], metric_names))
        report.append(f"Store: {counts['messages']} messages, {counts['embedded_texts']} embedded texts = "
                      f"{counts['embedded_per_message']:.3f} per message; memories by kind "
                      f"{json.dumps(counts['memories'])}; as_of {as_of}; {elapsed / 60:.1f} min.")
        results["forms"][form] = {"as_of": as_of, "store": counts, "scores": scores, "minutes": elapsed / 60}
        print("\n" + "\n\n".join(report[-2:]) + "\n", flush=True)  # each form's table as soon as it is done
    if len(content_forms) > 1:
        lines = ["### LoCoMo, shipped hybrid: content forms compared (overall)", "",
                 "| metric | " + " | ".join(content_forms) + " |", "|---|" + "---|" * len(content_forms)]
        for m in metric_names:
            lines.append(f"| {m} | " + " | ".join(
                metrics.fmt(results["forms"][f]["scores"][runner.SHIPPED]["overall"][m]) for f in content_forms) + " |")
        report.append("\n".join(lines))
    return "\n\n".join(report), results
