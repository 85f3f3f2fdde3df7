"""Install like a library: the built wheel (not editable) in a fresh venv outside any checkout
runs demo, remember, build, recall, serve and mcp, with the dbt project shipped inside the
package and the default store in the per-user data folder, the same for CLI and Python API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from .conftest import ROOT, RunningServer


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(dist.glob("agent_memory-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"{wheel}[server]"], check=True, capture_output=True)
    home, cwd = work / "home", work / "elsewhere"
    home.mkdir()
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "XDG_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"HOME": str(home), "OMP_WAIT_POLICY": "passive", "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})
    return {"venv": venv, "exe": str(venv / "bin" / "agent-memory"), "env": env, "cwd": cwd,
            "default_db": home / ".local" / "share" / "agent-memory" / "agent_memory.duckdb"}


def run(inst: dict[str, object], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(inst["exe"]), *args], cwd=inst["cwd"], env=inst["env"], capture_output=True,
                          text=True, timeout=900)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_the_installed_package_carries_the_project_and_no_checkout(installed: dict[str, object]) -> None:
    py = str(Path(str(installed["venv"])) / "bin" / "python")
    out = subprocess.run([py, "-c", "import json, recall_shim\n"
                          "from recall_shim.common.paths import project_dir\n"
                          "from recall_shim.targets.duckdb import default_db\n"
                          "print(json.dumps([recall_shim.__file__, str(project_dir()), str(default_db()), recall_shim.__version__,"
                          " str(recall_shim.MemoryStore().paths.db)]))"],
                         cwd=installed["cwd"], env=installed["env"], capture_output=True, text=True, check=True)
    module, project, db, version, api_db = json.loads(out.stdout)
    assert not module.startswith(str(ROOT)) and str(installed["venv"]) in module
    assert Path(project) == Path(module).parent / "project"
    assert (Path(project) / "dbt_project.yml").is_file() and (Path(project) / "models" / "marts").is_dir()
    assert Path(db) == Path(api_db) == installed["default_db"]  # the Python API's default is the CLI's
    assert run(installed, "--version").stdout.strip() == f"agent-memory {version}" and version != "unknown"


def test_demo_remember_build_recall_from_outside_any_checkout(installed: dict[str, object]) -> None:
    demo = run(installed, "demo")
    assert "用户偏好简洁的输出" in demo.stdout  # the seed's answer, recalled from the shipped demo log
    assert Path(str(installed["default_db"])).is_file()  # the per-user default store, not ./data
    assert not (Path(str(installed["cwd"])) / "data").exists()
    run(installed, "remember", "--user", "wheel-user", "I keep bees on my roof in Lisbon.")
    log = Path(str(installed["cwd"])) / "log.jsonl"
    log.write_text(json.dumps({"user_id": "wheel-user", "session_id": "w2", "msg_seq": 1, "role": "user",
                               "content": "My sister is called Ines.", "ts": "2026-11-30T10:00:00Z",
                               "message_id": "wheel-ingested-1"}) + "\n", encoding="utf-8")
    assert "landed 1 rows" in run(installed, "ingest", str(log)).stdout
    built = run(installed, "build", "-v").stdout
    assert "Running with dbt=" in built and "\x1b" not in built  # dbt's output as plain text
    hits = json.loads(run(installed, "recall", "--user", "wheel-user", "--json", "--min-sim", "0",
                          "what do I keep on my roof?").stdout)
    assert any("bees" in h["content"] for h in hits)
    hits = json.loads(run(installed, "recall", "--user", "wheel-user", "--json", "--min-sim", "0",
                          "what is my sister called?").stdout)
    assert any("wheel-ingested-1" in h["source_message_ids"] for h in hits)


def test_the_store_follows_agent_memory_db(installed: dict[str, object]) -> None:
    other = Path(str(installed["cwd"])) / "other" / "store.duckdb"
    env = {**installed["env"], "AGENT_MEMORY_DB": str(other)}  # type: ignore[dict-item]
    proc = subprocess.run([str(installed["exe"]), "remember", "--user", "env-user", "I like figs."],
                          cwd=installed["cwd"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    landed = "".join(p.read_text(encoding="utf-8") for p in other.parent.glob("store.inbox/messages/*.jsonl"))
    assert proc.stdout.strip() in landed and "I like figs." in landed
    py = str(Path(str(installed["venv"])) / "bin" / "python")
    api = subprocess.run([py, "-c", "import recall_shim; print(recall_shim.MemoryStore().paths.db)"],
                         cwd=installed["cwd"], env=env, capture_output=True, text=True, check=True)
    assert Path(api.stdout.strip()) == other


def test_serve_and_mcp_from_the_installed_package(installed: dict[str, object], tmp_path: Path) -> None:
    db = str(installed["default_db"])
    if not Path(db).exists():
        run(installed, "demo")
    server = RunningServer(Path(db), tmp_path / "serve.log", env=dict(installed["env"]), exe=str(installed["exe"]))  # type: ignore[arg-type]
    try:
        r = httpx.get(server.url + "/health", headers=server.headers, timeout=30)
        assert r.status_code == 200 and r.json()["ready"] is True
    finally:
        server.stop()

    async def tools() -> list[str]:
        params = StdioServerParameters(command=str(installed["exe"]), args=["mcp"], env=dict(installed["env"]))  # type: ignore[arg-type]
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    res = await session.call_tool("recall", {"user_id": "demo", "query": "喜欢什么输出方式", "top_k": 1})
                    assert not res.is_error and res.structured_content["results"]
                    return [t.name for t in (await session.list_tools()).tools]

    assert "recall" in anyio.run(tools)
