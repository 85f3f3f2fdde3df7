"""A first-come, first-served lock: waiting threads get it in the order they asked.

``threading.Lock`` makes no promise of order, so a caller that re-takes it in a loop can keep
winning against a waiting one. The server takes its recall lane per small chunk of work, and a
fair lane is what lets a light request interleave with a heavy one.
"""

from __future__ import annotations

import threading


class FairLane:
    """A ticket lock: ``acquire`` waits until every earlier ticket was released."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._next = 0
        self._serving = 0

    def acquire(self, blocking: bool = True) -> bool:
        with self._cond:
            if not blocking and self._next != self._serving:
                return False
            ticket = self._next
            self._next += 1
            while ticket != self._serving:
                self._cond.wait()
            return True

    def release(self) -> None:
        with self._cond:
            self._serving += 1
            self._cond.notify_all()

    def __enter__(self) -> "FairLane":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
