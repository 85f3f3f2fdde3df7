"""The heavy caller of benchmarks/security_flood (a module of its own so that spawned processes
can import it)."""

from __future__ import annotations

from typing import Any

import httpx


def heavy_caller(url: str, headers: dict, body: bytes, stop: Any, statuses: Any) -> None:
    """One heavy caller (its own process, so it takes no GIL from the light caller)."""
    with httpx.Client(base_url=url, headers={**headers, "content-type": "application/json"}, timeout=600) as c:
        while not stop.is_set():
            code = c.post("/recall-many", content=body).status_code
            statuses.append(code)
