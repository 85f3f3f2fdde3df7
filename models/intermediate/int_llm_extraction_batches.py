"""One row per batch of user messages sent to the LLM extraction endpoint in one build.

Off unless var llm_url (env AGENT_MEMORY_LLM_URL) is set: then it returns no rows. Incremental
and never full-refreshed (LLM replies are a paid, non-reproducible input): messages already in
an `ok` batch are never sent again; messages of `failed` batches are sent again next build.
The client lives in recall_shim/build/llm.py; see docs/llm_extraction.md.
"""

import pyarrow as pa

from recall_shim.build.llm import BATCH_COLUMNS, LLMConfig, Message, batch_rows, run_extraction
from recall_shim.common.sql import sql_literal

SCHEMA = pa.schema([
    ("batch_id", pa.string()),
    ("build_id", pa.string()),
    ("attempted_at", pa.timestamp("us")),
    ("user_id", pa.string()),
    ("message_ids", pa.list_(pa.string())),
    ("status", pa.string()),
    ("error", pa.string()),
    ("attempts", pa.int32()),
    ("llm_model", pa.string()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("memories_json", pa.string()),
    ("rejected_json", pa.string()),
])


def model(dbt, session):
    dbt.config(materialized="incremental", incremental_strategy="append", full_refresh=False)
    config = LLMConfig.resolve({
        "llm_url": dbt.config.get("llm_url"),
        "llm_model": dbt.config.get("llm_model"),
        "llm_batch_size": dbt.config.get("llm_batch_size"),
        "llm_timeout_seconds": dbt.config.get("llm_timeout_seconds"),
        "llm_max_retries": dbt.config.get("llm_max_retries"),
        "llm_retry_backoff_seconds": dbt.config.get("llm_retry_backoff_seconds"),
        "llm_max_batches_per_build": dbt.config.get("llm_max_batches_per_build"),
        "llm_max_message_chars": dbt.config.get("llm_max_message_chars"),
        "llm_kinds": dbt.config.get("llm_kinds"),
    })
    roles = dbt.config.get("extract_roles")
    messages = dbt.ref("int_messages_validated")
    pending = []
    if config.enabled:
        done = set()
        if dbt.is_incremental:
            done = {r[0] for r in session.sql(
                f"select distinct unnest(message_ids) from {dbt.this} where status = 'ok'"
            ).fetchall()}
        role_list = ", ".join(sql_literal(str(r)) for r in roles or ["user"])
        rows = (messages.filter(f"reject_reason is null and role in ({role_list})")
                .order("user_id, message_at, message_id")
                .project("message_id, user_id, content")
                .fetchall())
        pending = [Message(mid, uid, text) for mid, uid, text in rows if mid not in done]
    results = run_extraction(config, pending)
    cols = batch_rows(results, config.model)
    return pa.table([pa.array(cols[c], type=SCHEMA.field(c).type) for c in BATCH_COLUMNS], schema=SCHEMA)
