"""LLM extraction: ask an OpenAI-compatible chat endpoint (Ollama, vLLM, OpenAI, ...) to turn a
user's new messages into kind/content memories with provenance.

Runs inside ``dbt build`` from the Python model ``int_llm_extraction_batches``; off unless an
endpoint URL is configured (env ``AGENT_MEMORY_LLM_URL`` or var ``llm_url``). Messages are sent in
batches of one user's messages; each batch is retried on timeouts, connection errors, 429 and 5xx,
then recorded as ``failed`` and sent again at the next build. Nothing here raises: a failing
endpoint never fails the build, and rule extraction runs regardless. See docs/llm_extraction.md.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

URL_ENV = "AGENT_MEMORY_LLM_URL"
MODEL_ENV = "AGENT_MEMORY_LLM_MODEL"
KEY_ENV = "AGENT_MEMORY_LLM_KEY"  # read from the environment only: never written to dbt's target/

MAX_CONTENT_CHARS = 500
SLOT_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

SYSTEM_PROMPT = """You extract long-term memories about one user from their chat messages.
Reply with JSON only, no prose, in exactly this shape:
{"memories": [{"kind": "fact", "content": "...", "source_message_ids": ["..."], "slot": null}]}
Rules:
- kind is one of: KINDS. fact = who the user is or what they have or did; preference = what
  they like or how they want answers; skill = what they know how to do or have worked with.
- content is one durable statement about the user in the third person, in the language of the
  message ("User lives in Paris", "用户喜欢用表格"), at most 200 characters.
- source_message_ids lists the ids of the messages the memory comes from (only ids you were given).
- slot names a single-valued attribute (home_city, name, job, output_format) when the memory
  replaces an earlier value of it, else null.
- Skip greetings, questions, and requests about the current conversation only.
- If nothing is worth remembering, reply {"memories": []}."""


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the endpoint. ``url`` empty means LLM extraction is off."""

    url: str = ""
    model: str = ""
    key: str | None = None
    batch_size: int = 20
    timeout_seconds: float = 60.0
    max_retries: int = 2
    retry_backoff_seconds: float = 1.0
    max_batches_per_build: int = 50
    max_message_chars: int = 4000
    kinds: tuple[str, ...] = ("fact", "preference", "skill")

    @property
    def enabled(self) -> bool:
        return bool(self.url.strip())

    @classmethod
    def resolve(cls, options: Mapping[str, Any]) -> "LLMConfig":
        """From dbt config values (vars), falling back to the environment for url/model/key."""
        def opt(name: str, default: Any) -> Any:
            value = options.get(name)
            return default if value is None or value == "" else value

        return cls(
            url=str(opt("llm_url", os.environ.get(URL_ENV, ""))),
            model=str(opt("llm_model", os.environ.get(MODEL_ENV, ""))),
            key=os.environ.get(KEY_ENV) or None,
            batch_size=max(1, int(opt("llm_batch_size", cls.batch_size))),
            timeout_seconds=float(opt("llm_timeout_seconds", cls.timeout_seconds)),
            max_retries=max(0, int(opt("llm_max_retries", cls.max_retries))),
            retry_backoff_seconds=float(opt("llm_retry_backoff_seconds", cls.retry_backoff_seconds)),
            max_batches_per_build=max(0, int(opt("llm_max_batches_per_build", cls.max_batches_per_build))),
            max_message_chars=max(1, int(opt("llm_max_message_chars", cls.max_message_chars))),
            kinds=tuple(opt("llm_kinds", cls.kinds)),
        )


def chat_completions_url(base: str) -> str:
    """``http://host:11434`` / ``.../v1`` / ``.../v1/chat/completions`` -> the completions URL."""
    b = base.strip().rstrip("/")
    if b.endswith("/chat/completions"):
        return b
    if b.endswith("/v1"):
        return b + "/chat/completions"
    return b + "/v1/chat/completions"


@dataclass
class Message:
    message_id: str
    user_id: str
    content: str


@dataclass
class BatchResult:
    """One batch sent to the endpoint in one build: its memories or why it failed."""

    user_id: str
    message_ids: list[str]
    status: str = "failed"  # ok | failed
    error: str | None = None
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    memories: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    batch_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class _Retryable(Exception):
    pass


def make_batches(messages: Iterable[Message], size: int) -> list[list[Message]]:
    """Consecutive messages of one user, at most ``size`` per batch (input order kept)."""
    out: list[list[Message]] = []
    for m in messages:
        if out and out[-1][0].user_id == m.user_id and len(out[-1]) < size:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def _strip_fences(text: str) -> str:
    t = text.strip()
    fenced = re.match(r"^```[a-zA-Z]*\s*(.*?)\s*```$", t, re.S)
    return fenced.group(1) if fenced else t


def parse_memories(text: str, message_ids: Sequence[str], kinds: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, rejected) memories from the model's reply. Raises ValueError when it is not the
    expected JSON at all; an item that breaks a rule is kept in ``rejected`` with its reason."""
    try:
        doc = json.loads(_strip_fences(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"reply is not JSON: {exc}") from None
    items = doc.get("memories") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ValueError("reply has no 'memories' list")
    allowed = set(message_ids)
    kept: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for item in items:
        reason = None
        if not isinstance(item, dict):
            rejected.append({"item": item, "reason": "not_an_object"})
            continue
        kind = str(item.get("kind") or "").strip().lower()
        content = re.sub(r"\s+", " ", str(item.get("content") or "")).strip()
        sources = item.get("source_message_ids") or []
        if isinstance(sources, str):
            sources = [sources]
        valid_sources = sorted({str(s) for s in sources if str(s) in allowed}) if isinstance(sources, list) else []
        slot = item.get("slot")
        slot = str(slot).strip().lower() if slot not in (None, "", "null") else None
        if kind not in kinds:
            reason = "unknown_kind"
        elif not content:
            reason = "empty_content"
        elif len(content) > MAX_CONTENT_CHARS:
            reason = "content_too_long"
        elif not valid_sources:
            reason = "no_valid_source_message"
        elif slot is not None and not SLOT_RE.match(slot):
            reason = "invalid_slot"
        if reason:
            rejected.append({"item": item, "reason": reason})
        else:
            kept.append({"kind": kind, "content": content, "slot": slot, "source_message_ids": valid_sources})
    return kept, rejected


def _post(config: LLMConfig, payload: dict[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.key:
        headers["Authorization"] = f"Bearer {config.key}"
    req = urllib.request.Request(chat_completions_url(config.url), data=json.dumps(payload).encode("utf-8"),
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=config.timeout_seconds) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        message = f"HTTP {exc.code} from the endpoint: {detail}"
        if exc.code == 429 or exc.code >= 500:
            raise _Retryable(message) from None
        raise RuntimeError(message) from None
    except (socket.timeout, TimeoutError):
        raise _Retryable(f"timed out after {config.timeout_seconds:g}s") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (socket.timeout, TimeoutError)):
            raise _Retryable(f"timed out after {config.timeout_seconds:g}s") from None
        raise _Retryable(f"cannot reach the endpoint: {exc.reason}") from None
    except (ConnectionError, OSError) as exc:
        raise _Retryable(f"connection failed: {exc}") from None
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        raise _Retryable("the endpoint's response is not JSON") from None
    if not isinstance(doc, dict):
        raise _Retryable("the endpoint's response is not a JSON object")
    return doc


def extract_batch(config: LLMConfig, batch: Sequence[Message],
                  sleep: Callable[[float], None] = time.sleep) -> BatchResult:
    """Send one batch, retrying transient failures; never raises."""
    result = BatchResult(user_id=batch[0].user_id, message_ids=[m.message_id for m in batch])
    user_payload = {"user_id": batch[0].user_id,
                    "messages": [{"id": m.message_id, "text": m.content[: config.max_message_chars]} for m in batch]}
    payload = {
        "model": config.model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT.replace("KINDS", ", ".join(config.kinds))},
            {"role": "user", "content": json.dumps(user_payload, ensure_ascii=False)},
        ],
    }
    for attempt in range(config.max_retries + 1):
        result.attempts = attempt + 1
        try:
            doc = _post(config, payload)
            usage = doc.get("usage") or {}
            result.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            result.completion_tokens += int(usage.get("completion_tokens") or 0)
            try:
                text = doc["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                raise _Retryable("the response has no choices[0].message.content") from None
            try:
                result.memories, result.rejected = parse_memories(str(text), result.message_ids, config.kinds)
            except ValueError as exc:
                raise _Retryable(str(exc)) from None
            result.status, result.error = "ok", None
            return result
        except _Retryable as exc:
            result.error = str(exc)
            if attempt < config.max_retries:
                sleep(config.retry_backoff_seconds * (2 ** attempt))
        except Exception as exc:  # a 4xx or anything unexpected: record it, do not retry now
            result.error = f"{type(exc).__name__}: {exc}"
            break
    result.status = "failed"
    return result


def run_extraction(config: LLMConfig, messages: Iterable[Message]) -> list[BatchResult]:
    """Batch ``messages`` and send at most ``max_batches_per_build`` batches; the rest wait for
    the next build (they are not recorded, so they stay pending)."""
    if not config.enabled:
        return []
    batches = make_batches(messages, config.batch_size)[: config.max_batches_per_build]
    return [extract_batch(config, b) for b in batches]


BATCH_COLUMNS = ("batch_id", "build_id", "attempted_at", "user_id", "message_ids", "status", "error",
                 "attempts", "llm_model", "prompt_tokens", "completion_tokens", "memories_json", "rejected_json")


def batch_rows(results: Sequence[BatchResult], model: str) -> dict[str, list[Any]]:
    """Column lists for the int_llm_extraction_batches relation (one row per batch attempt)."""
    build_id = uuid.uuid4().hex
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    cols: dict[str, list[Any]] = {c: [] for c in BATCH_COLUMNS}
    for r in results:
        row = {
            "batch_id": r.batch_id, "build_id": build_id, "attempted_at": now, "user_id": r.user_id,
            "message_ids": r.message_ids, "status": r.status, "error": r.error, "attempts": r.attempts,
            "llm_model": model, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "memories_json": json.dumps(r.memories, ensure_ascii=False),
            "rejected_json": json.dumps(r.rejected, ensure_ascii=False, default=str),
        }
        for c in BATCH_COLUMNS:
            cols[c].append(row[c])
    return cols
