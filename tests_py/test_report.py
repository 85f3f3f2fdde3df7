"""The HTML report: built from a real store, rendered by headless Chromium (Debian's package)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from datetime import date
from pathlib import Path

import duckdb
import pytest

from recall_shim import MemoryStore
from recall_shim.report.charts import histogram, line_chart
from recall_shim.report.page import CHART_IDS, collect, write_report

from .conftest import DEMO_LOG, copy_store, query

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryStore, Path]:
    folder = tmp_path_factory.mktemp("report")
    store = MemoryStore(folder / "store.duckdb")
    store.ingest(DEMO_LOG)
    # a Chinese-speaking user without standing intents: the threshold chart samples her messages;
    # her second output-format preference supersedes the first
    for seq, text in enumerate(["以后请用表格回答", "我养了一只猫叫咪咪", "我喜欢喝绿茶和乌龙茶",
                                "周末我们去杭州玩了两天，西湖很美", "以后请用列表回答"], start=1):
        store.remember("xiaomei", text, session_id="zh-1", msg_seq=seq, ts=f"2026-01-0{seq}T09:00:00Z")
    store.build()
    for q in ("喜欢什么输出方式", "喜欢什么输出方式", "Where does the user live?"):
        store.recall(q, user_id="demo" if q.startswith("喜") else "alice", min_sim=0, top_k=1, record_access=True)
    store.build()
    return store, write_report(store.paths.db, folder / "out" / "report.html")


def test_report_is_self_contained_and_shows_the_store(report: tuple[MemoryStore, Path]) -> None:
    store, path = report
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    # nothing is fetched: no src/href attributes, no CSS url(), the only URL is the SVG namespace
    assert not re.search(r"\b(src|href)\s*=", html) and "url(" not in html
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    for cid in CHART_IDS:
        assert f'id="{cid}"' in html
    current = query(store, "select count(*) from long_term_memory where valid_to is null")[0][0]
    assert f"<b>{current}</b><span>current memories</span>" in html
    # the top-accessed chart has one bar per accessed memory
    accessed = query(store, "select count(*) from long_term_memory where valid_to is null and access_count > 0")[0][0]
    top = re.search(r'<svg class="chart" id="chart-top-accessed".*?</svg>', html, re.S).group(0)
    assert accessed >= 2 and top.count('class="bar"') == accessed
    assert "简洁的输出" in top  # the answer of the recalls above (demo-s1-1)
    # the similarity chart marks the configured threshold
    sim = re.search(r'<svg class="chart" id="chart-similarity".*?</svg>', html, re.S).group(0)
    assert 'class="threshold"' in sim and "recall_min_sim 0.8" in sim


def _chart(html: str, chart_id: str) -> str:
    return re.search(rf'<svg class="chart" id="{chart_id}".*?</svg>', html, re.S).group(0)


def test_threshold_chart_samples_messages_of_users_without_intents(report: tuple[MemoryStore, Path]) -> None:
    store, path = report
    data = collect(store.paths.db)
    intents, sampled = data.similarity_queries
    # demo's and alice's standing intents; xiaomei has none: her five messages are sampled
    assert intents == query(store, "select count(*) from int_recall_intent_embeddings")[0][0] > 0 and sampled == 5
    with_intents = query(store, """
        select count(*) from int_recall_intent_embeddings as i
        inner join long_term_memory as m on m.user_id = i.user_id and m.valid_to is null""")[0][0]
    assert len(data.similarities) > with_intents
    assert f"{intents} standing intents, 5 sampled messages" in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("intents", ["none", "no table"])
def test_threshold_chart_works_for_a_store_without_standing_intents(report: tuple[MemoryStore, Path], tmp_path: Path,
                                                                   intents: str) -> None:
    store, _ = report
    db = copy_store(store.paths.db, tmp_path / "store")
    con = duckdb.connect(str(db))
    try:  # a store of users without intents, or one whose project has no intents model at all
        con.execute("delete from int_recall_intent_embeddings" if intents == "none"
                    else "drop table int_recall_intent_embeddings")
    finally:
        con.close()
    html = write_report(db, tmp_path / "report.html").read_text(encoding="utf-8")
    sampled = collect(db).similarity_queries
    assert sampled[0] == 0 and sampled[1] > 5  # every user's messages are sampled now, not only xiaomei's
    sim = _chart(html, "chart-similarity")
    assert sim.count('class="bar"') > 0 and 'class="threshold"' in sim and 'class="empty"' not in sim
    assert f"0 standing intents, {sampled[1]} sampled messages" in html


def test_superseded_memories_are_marked(report: tuple[MemoryStore, Path]) -> None:
    _, path = report
    html = path.read_text(encoding="utf-8")
    rows = re.findall(r'<tr class="superseded">(.*?)</tr>', html)
    assert any("用户希望用表格回答" in r and "superseded 2026-01-05" in r for r in rows), rows
    assert "用户希望用列表回答" in re.search(r'<tr><td class="user_id">xiaomei</td><td class="kind">preference</td>'
                                    r'<td class="content">用户希望用列表回答</td><td class="status">current</td>', html).group(0)
    kinds = _chart(html, "chart-kinds-over-time")
    assert 'data-series="superseded (all kinds)"' in kinds and 'stroke-dasharray="6,4"' in kinds


def _y_labels(svg: str) -> list[str]:
    return re.findall(r'text-anchor="end" font-size="11">([^<]+)</text>', svg)


def test_count_axes_have_integer_ticks() -> None:
    for top in range(1, 200):
        svg = histogram("h", "counts", [0.0, 0.5, 1.0], {"memories": [top, 1]}, "x")
        labels = _y_labels(svg)
        assert labels and all(re.fullmatch(r"\d+", t) for t in labels), (top, labels)
        line = line_chart("l", "counts", {"fact": [(date(2026, 1, 1), 1.0), (date(2026, 1, 2), float(top))]}, "n")
        assert all(re.fullmatch(r"\d+", t) for t in _y_labels(line)), (top, _y_labels(line))


def test_charts_fill_the_card_and_count_axes_are_whole(report: tuple[MemoryStore, Path]) -> None:
    html = report[1].read_text(encoding="utf-8")
    for cid in CHART_IDS[:3]:
        labels = _y_labels(_chart(html, cid))
        assert labels and all(re.fullmatch(r"\d+", t) for t in labels), (cid, labels)
    assert html.count('class="chart"') == 4 and html.count('width="100%"') == 4


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],  # type: ignore[list-item]
                          capture_output=True, text=True, timeout=180)


def test_report_renders_in_headless_chromium(report: tuple[MemoryStore, Path], tmp_path: Path) -> None:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: scripts/setup.sh installs Debian's chromium package")
        pytest.skip("chromium is not installed (scripts/setup.sh installs it when run as root)")
    _, path = report
    dom = _chromium("--dump-dom", path.resolve().as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the page's own script counts the charts the browser laid out with a non-empty box
    assert 'data-charts-rendered="4"' in dom.stdout
    assert 'data-charts-fill-card="4"' in dom.stdout  # each chart is as wide as its card
    # the Chinese content renders in a CJK font (scripts/setup.sh installs Debian's fonts-noto-cjk)
    fonts = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    assert "Noto Sans CJK" in fonts, "no CJK font: scripts/setup.sh installs fonts-noto-cjk"
    assert "咪咪" in dom.stdout and "简洁的输出" in dom.stdout
    for cid in CHART_IDS:
        assert f'id="{cid}"' in dom.stdout
    shot = tmp_path / "report.png"
    out = _chromium("--window-size=1400,1600", f"--screenshot={shot}", path.resolve().as_uri(),
                    profile=tmp_path / "profile")
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1400, 1600)
