"""The heavy, append-only files of a serving index *generation* (recall_shim/serving/index.py).

Per heavy row: the raw float32 vector (``vectors.f32``), the payload bytes (JSON [content,
source_message_ids], ``payload.bin``) and the payload's end offset (``payload_end.i64``). A heavy
row never changes once written. Consecutive index folders of one generation share these files by
hard link (same inode): a build links the previous folder's files into its temporary folder and
appends only the new and changed rows (O(new)). Each folder's ``meta.json`` records the prefix it
may read (``heavy``: generation, rows, payload_bytes); the per-row light array ``vrow.npy`` maps a
snapshot row to its heavy row.

Crash safety: a killed build can leave a torn tail beyond the newest published prefix. The next
build truncates the files to the longest prefix any published folder of the generation records
before it appends, so no published folder ever reads a byte past its own prefix, and no byte a
published folder reads is ever rewritten.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VECTORS, PAYLOAD, PAYLOAD_END = "vectors.f32", "payload.bin", "payload_end.i64"
HEAVY_FILES = (VECTORS, PAYLOAD, PAYLOAD_END)


@dataclass(frozen=True)
class HeavyPrefix:
    """What one index folder may read of its generation's heavy files (meta.json ``heavy``)."""

    generation: str
    rows: int
    payload_bytes: int

    def as_meta(self) -> dict[str, object]:
        return {"generation": self.generation, "rows": self.rows, "payload_bytes": self.payload_bytes}

    @classmethod
    def of(cls, meta: dict) -> "HeavyPrefix":
        h = meta["heavy"]
        return cls(str(h["generation"]), int(h["rows"]), int(h["payload_bytes"]))


def new_generation() -> str:
    return os.urandom(8).hex()


def published_prefix(parent: Path, prefix: HeavyPrefix) -> HeavyPrefix:
    """The longest prefix of ``prefix``'s generation that any published index folder (``*.index``
    with a meta.json) in ``parent`` records: what a build may truncate the files down to."""
    rows, size = prefix.rows, prefix.payload_bytes
    for d in parent.iterdir():
        if not d.name.endswith(".index") or not d.is_dir():
            continue
        try:
            h = json.loads((d / "meta.json").read_text()).get("heavy") or {}
        except (OSError, ValueError):
            continue
        if h.get("generation") == prefix.generation:
            rows, size = max(rows, int(h["rows"])), max(size, int(h["payload_bytes"]))
    return HeavyPrefix(prefix.generation, rows, size)


class HeavyWriter:
    """Appends heavy rows to a folder's heavy files: a fresh generation (empty files) or the
    previous folder's files linked and cut back to ``start`` (the published prefix)."""

    def __init__(self, folder: Path, dim: int, link_from: Path | None = None, start: HeavyPrefix | None = None) -> None:
        self.dim = dim
        self.row_bytes = 4 * dim
        if link_from is not None and start is not None:
            for name in HEAVY_FILES:
                os.link(link_from / name, folder / name)
            self.generation, self.rows, self.payload_bytes = start.generation, start.rows, start.payload_bytes
        else:  # a fresh generation: new inodes (a name left here may be a link to published files)
            for name in HEAVY_FILES:
                (folder / name).unlink(missing_ok=True)
            self.generation, self.rows, self.payload_bytes = new_generation(), 0, 0
        self.first_new = self.rows  # heavy rows before this are shared with older folders
        self._fds = {name: os.open(folder / name, os.O_WRONLY | os.O_CREAT, 0o644) for name in HEAVY_FILES}
        # a killed build may have appended a torn tail past the published prefix: cut it off
        for name, size in ((VECTORS, self.rows * self.row_bytes), (PAYLOAD, self.payload_bytes),
                           (PAYLOAD_END, self.rows * 8)):
            if os.fstat(self._fds[name]).st_size != size:
                os.ftruncate(self._fds[name], size)

    def append(self, vectors: np.ndarray, data: bytes | memoryview, rel_ends: np.ndarray) -> np.ndarray:
        """Append rows: float32 ``vectors`` (m, dim), their payloads concatenated in ``data`` with
        each row's end offset in ``rel_ends`` (relative to ``data``). Returns the rows' heavy rows."""
        m = len(vectors)
        if not m:
            return np.zeros(0, dtype=np.int64)
        vec = np.ascontiguousarray(vectors, dtype=np.float32)
        assert vec.shape == (m, self.dim) and len(rel_ends) == m
        ends = np.asarray(rel_ends, dtype=np.int64) + self.payload_bytes
        _pwrite_all(self._fds[VECTORS], memoryview(vec).cast("B"), self.rows * self.row_bytes)
        _pwrite_all(self._fds[PAYLOAD], memoryview(data).cast("B"), self.payload_bytes)
        _pwrite_all(self._fds[PAYLOAD_END], memoryview(np.ascontiguousarray(ends)).cast("B"), self.rows * 8)
        out = np.arange(self.rows, self.rows + m, dtype=np.int64)
        self.rows += m
        self.payload_bytes = int(ends[-1])
        return out

    def prefix(self) -> HeavyPrefix:
        return HeavyPrefix(self.generation, self.rows, self.payload_bytes)

    def close(self) -> None:
        for fd in self._fds.values():
            os.fsync(fd)
            os.close(fd)
        self._fds = {}


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while len(data):
        n = os.pwrite(fd, data, offset)
        data, offset = data[n:], offset + n


class HeavyReader:
    """Reads a folder's heavy rows up to its recorded prefix: the memory map for small scans, pread
    (page cache, not the process's RSS) for big users; contiguous runs of heavy rows are one read."""

    def __init__(self, folder: Path, dim: int, prefix: HeavyPrefix) -> None:
        self.dim, self.row_bytes, self.prefix = dim, 4 * dim, prefix
        sizes = {name: (folder / name).stat().st_size for name in HEAVY_FILES}
        if (sizes[VECTORS] < prefix.rows * self.row_bytes or sizes[PAYLOAD] < prefix.payload_bytes
                or sizes[PAYLOAD_END] < prefix.rows * 8):
            raise ValueError(f"heavy files of {folder} are shorter than its recorded prefix")
        rows = prefix.rows
        self.vectors = (np.memmap(folder / VECTORS, dtype=np.float32, mode="r", shape=(rows, dim)) if rows
                        else np.zeros((0, dim), dtype=np.float32))
        self.ends = np.memmap(folder / PAYLOAD_END, dtype=np.int64, mode="r", shape=(rows,)) if rows else np.zeros(0, np.int64)
        self.payload = (np.memmap(folder / PAYLOAD, dtype=np.uint8, mode="r", shape=(prefix.payload_bytes,))
                        if prefix.payload_bytes else np.zeros(0, np.uint8))
        self._fd = os.open(folder / VECTORS, os.O_RDONLY)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def payload_bytes(self, v: int) -> bytes:
        lo = int(self.ends[v - 1]) if v > 0 else 0
        return bytes(self.payload[lo : int(self.ends[v])])

    def rows(self, vr: np.ndarray, mapped: bool) -> np.ndarray:
        """float32 vectors of heavy rows ``vr`` (in that order)."""
        m = len(vr)
        if not m:
            return np.zeros((0, self.dim), dtype=np.float32)
        first = int(vr[0])
        contiguous = int(vr[-1]) - first == m - 1 and (m < 3 or bool(np.all(np.diff(vr) == 1)))
        if mapped:
            return self.vectors[first : first + m] if contiguous else self.vectors[vr]
        if contiguous:
            return self._pread(first, m)
        brk = np.flatnonzero(np.diff(vr) != 1) + 1
        starts, stops = np.concatenate([[0], brk]).tolist(), np.append(brk, m).tolist()
        size = self.row_bytes
        data = b"".join(os.pread(self._fd, (b - a) * size, int(vr[a]) * size) for a, b in zip(starts, stops))
        return np.frombuffer(data, dtype=np.float32).reshape(m, self.dim)

    def _pread(self, first: int, m: int) -> np.ndarray:
        data = os.pread(self._fd, m * self.row_bytes, first * self.row_bytes)
        return np.frombuffer(data, dtype=np.float32).reshape(m, self.dim)
