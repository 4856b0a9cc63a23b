"""What every command gets: the parsed arguments, the settings and a lazily opened store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from orbit_lsp.cli.errors import PROG, UsageError


def _exclude_patterns(patterns: list[str] | None) -> list[str] | None:
    """``--exclude`` values checked as gitignore patterns (``UsageError`` names a bad one)."""
    if not patterns:
        return None
    import pathspec
    for pattern in patterns:
        if not pattern.strip():
            raise UsageError("--exclude needs a non-empty gitignore-style pattern")
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError) as exc:
            raise UsageError(f"--exclude {pattern!r} is not a gitignore-style pattern: {exc}") from None
    return list(patterns)


class Ctx:
    def __init__(self, args: argparse.Namespace):
        from pydantic import ValidationError

        from orbit_lsp.config import Settings

        self.args = args
        try:
            self.settings = Settings.from_env(
                falkordb_url=args.falkordb_url,
                graph_key=getattr(args, "graph_key", None),
                data_dir=Path(args.data_dir).expanduser() if args.data_dir else None,
                exclude=_exclude_patterns(getattr(args, "exclude", None)))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "settings"
            raise UsageError(f"invalid setting {field}: {err.get('msg')}") from None
        url = self.settings.falkordb_url
        if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
            origin = "--falkordb-url" if args.falkordb_url is not None else "ORBIT_FALKORDB_URL"
            raise UsageError(f"{origin} must start with redis://, rediss:// or unix://")
        self.json = bool(getattr(args, "json", False))
        self._store = None

    @property
    def store(self):
        if self._store is None:
            from orbit_lsp.graph.connection import GraphStore
            self._store = GraphStore(self.settings)
            if self._store.embedded and self.args.command != "db":  # db status/stop never start it
                self._say_if_starting()
        return self._store

    def _say_if_starting(self) -> None:
        """A note on stderr when the embedded FalkorDB is not answering yet: it is about to be
        started (or is starting, or loading its saved graphs), which can take seconds."""
        from orbit_lsp.graph import embedded

        paths = embedded.EmbeddedPaths.for_data_dir(Path(self.settings.data_dir))
        if embedded.ping(paths.socket):
            return
        try:
            saved = (paths.dir / "orbit.rdb").stat().st_size
        except OSError:
            saved = 0
        data = f" and loading its saved graphs ({saved / (1 << 20):.0f} MB)" if saved >= (1 << 20) else ""
        if embedded.server_lock_held(paths):
            self.note(f"the embedded FalkorDB is starting{data or ' or loading its data'}; waiting for it")
        else:
            self.note(f"starting the embedded FalkorDB{data}")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def note(self, text: str) -> None:
        print(f"{PROG}: {text}", file=sys.stderr)

