"""dbt-duckdb plugin: registers ``embed(text, model, form)`` on every dbt connection.

Referenced from ``profiles.yml`` (``module: recall_shim.build.dbt_plugin``). ``embed`` is an arrow UDF,
so DuckDB hands it whole batches of rows; it returns ``FLOAT[]`` (NULL for NULL/blank text) and
the ``embed_sql`` macro casts the result to ``FLOAT[embedding_dim]``. It also creates the store's
landing folders so that ``dbt build`` works on a store no writer has touched yet.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from dbt.adapters.duckdb.plugins import BasePlugin

from recall_shim.common.embedding import embed_texts
from recall_shim.common.paths import StorePaths

__all__ = ["Plugin"]


def _embed_arrow(texts: pa.Array, models: pa.Array, forms: pa.Array) -> pa.Array:
    values = texts.to_pylist()
    model_names = models.to_pylist()
    form_names = forms.to_pylist()
    out: list[Any] = [None] * len(values)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (text, model, form) in enumerate(zip(values, model_names, form_names)):
        if text is None or not str(text).strip() or model is None or form is None:
            continue
        groups.setdefault((model, form), []).append(i)
    for (model, form), idx in groups.items():
        vecs = embed_texts(model, form, [values[i] for i in idx])
        for row, vec in zip(idx, vecs):
            out[row] = vec
    return pa.array(
        [None if v is None else np.asarray(v, dtype=np.float32) for v in out],
        type=pa.list_(pa.float32()),
    )


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        # Runs before dbt opens the database: create the store's folders (the warehouse's parent
        # included, so a plain `dbt build` works on a fresh clone).
        self.config = plugin_config
        if self.creds is not None and self.creds.path and self.creds.path != ":memory:":
            StorePaths.of(self.creds.path).ensure()

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        conn.create_function(
            "embed",
            _embed_arrow,
            [duckdb.sqltype("VARCHAR"), duckdb.sqltype("VARCHAR"), duckdb.sqltype("VARCHAR")],
            duckdb.list_type(duckdb.sqltype("FLOAT")),
            type="arrow",
            null_handling="special",
            side_effects=False,
        )
