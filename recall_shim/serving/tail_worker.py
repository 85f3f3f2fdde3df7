"""The hot tail's worker, shared by both targets (docs/serving.md "Hot tail"): a background
thread that calls the tail's ``sync`` every WORKER_POLL seconds or when kicked, and the immutable
state it publishes, which recall reads (waiting for the worker only when asked to).

``HotTail`` (DuckDB, serving/tail.py) and ``PgTail`` (targets/postgres/tail.py) subclass it; they
own what ``sync`` and ``reset`` do and what state they publish.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Generic, TypeVar

from recall_shim.errors import StoreNotBuilt

__all__ = ["TailWorker", "WORKER_POLL"]

log = logging.getLogger("agent_memory.tail")

WORKER_POLL = 0.05  # seconds between the worker's looks when nothing kicks it
RETRY_AFTER_FAILURE = 1.0  # seconds the worker rests after a failed sync

S = TypeVar("S")


class TailWorker(Generic[S]):
    """The worker thread and the published state of one tail (thread-safe).

    Subclasses implement ``sync`` (read what landed, publish a new state) and ``reset`` (forget
    everything read; publish the empty state)."""

    def __init__(self, empty: S, thread_name: str, fallback: str) -> None:
        self._state: S = empty
        self._changed = threading.Condition()
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._healthy = False  # the worker's last sync succeeded
        self._thread_name = thread_name
        self._fallback = fallback  # what answers while the worker fails (for the warning)

    def sync(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def reset(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def start_worker(self) -> None:
        """Keep the tail in a background thread (a long-lived server): recall then only reads."""
        if self.running:
            return
        self._stop.clear()
        self._worker = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
        self._worker.start()

    def kick(self) -> None:
        """Ask the worker to look now (e.g. after this process landed a message)."""
        self._kick.set()

    def _work(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(WORKER_POLL)
            self._kick.clear()
            if self._stop.is_set():
                break
            try:
                self.sync()
                self._healthy = True
            except StoreNotBuilt:
                self._healthy = False
            except Exception as exc:  # noqa: BLE001 - the worker logs and goes on; recall serves without the tail
                log.warning("the hot tail's worker failed (recall serves %s alone meanwhile): %s", self._fallback, exc)
                self._healthy = False
                self.reset()
                self._stop.wait(RETRY_AFTER_FAILURE)

    def _stop_worker(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._worker is not None:
            self._worker.join(timeout=30)
            self._worker = None

    def _wait_for(self, matches: Callable[[S], bool], wait: float) -> S | None:
        """The published state when ``matches`` it, else None. With a healthy worker running,
        waits up to ``wait`` seconds for such a state."""
        deadline = time.monotonic() + wait
        with self._changed:
            while True:
                state = self._state
                if matches(state):
                    return state
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not (self.running and self._healthy):
                    return None
                self._kick.set()
                self._changed.wait(remaining)

    def _publish(self, state: S) -> None:
        with self._changed:
            self._state = state
            self._changed.notify_all()
