"""The HTML report: built from a real store, rendered by headless Chromium (Debian's package)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from recall_shim import MemoryStore
from recall_shim._report import CHART_IDS, write_report

from .conftest import DEMO_LOG, query

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryStore, Path]:
    folder = tmp_path_factory.mktemp("report")
    store = MemoryStore(folder / "r.duckdb")
    store.ingest(DEMO_LOG)
    store.build()
    for q in ("喜欢什么输出方式", "喜欢什么输出方式", "Where does the user live?"):
        store.recall(q, user_id="demo" if q.startswith("喜") else "alice", min_sim=0, top_k=1)
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
    assert "用户偏好简洁的输出，喜欢用表格" in top
    # the similarity chart marks the configured threshold
    sim = re.search(r'<svg class="chart" id="chart-similarity".*?</svg>', html, re.S).group(0)
    assert 'class="threshold"' in sim and "recall_min_sim 0.8" in sim


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
    for cid in CHART_IDS:
        assert f'id="{cid}"' in dom.stdout
    shot = tmp_path / "report.png"
    out = _chromium("--window-size=1400,1600", f"--screenshot={shot}", path.resolve().as_uri(),
                    profile=tmp_path / "profile")
    assert out.returncode == 0 and shot.exists(), out.stderr[-2000:]
    head = shot.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (1400, 1600)
