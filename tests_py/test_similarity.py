"""Threshold guidance: the similarity distribution of queries against a user's memories."""

from __future__ import annotations

import json

import pytest

from recall_shim import InvalidQuery, MemoryStore

from .conftest import query
from .test_cli import run


def test_distribution_covers_every_current_memory(demo_store: MemoryStore) -> None:
    sims = demo_store.similarity_distribution(["喜欢什么输出方式", "做过什么数据分析"], user_id="demo")
    n = query(demo_store, "select count(*) from long_term_memory where user_id = 'demo' and valid_to is null")[0][0]
    assert len(sims) == 2 * n and all(-1 <= s <= 1 for s in sims)
    best = demo_store.recall("喜欢什么输出方式", user_id="demo", min_sim=-1, top_k=1, record_access=False)[0]
    assert max(sims) >= best.similarity - 1e-6
    with pytest.raises(InvalidQuery):
        demo_store.similarity_distribution([], user_id="demo")


def test_similarity_command_prints_quantiles(demo_store: MemoryStore) -> None:
    out = run("similarity", "喜欢什么输出方式", "--user", "demo", "--json", "--db", str(demo_store.paths.db))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["n"] > 0 and data["quantiles"]["p50"] <= data["quantiles"]["p90"] <= data["max"]
    assert sum(data["histogram"]["counts"]) == data["n"]
    text = run("similarity", "喜欢什么输出方式", "--user", "demo", "--db", str(demo_store.paths.db))
    assert "quantiles:" in text.stdout and "--min-sim" in text.stdout
