"""A watched folder (``index.watcher.watch_folder``, what the language server and the MCP
server's live workspaces watch with) is watched for changes only. Reading its files must put
nothing in the kernel's event queue: the indexer reads every file of a folder (so do editors and
grep), and on a large folder the "opened" and "closed without a write" events overflowed the
queue (16,384 events by default) within a second; watchdog then walked the whole tree again to
restore its watches, every second of a cold index."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from watchdog.events import FileSystemEventHandler

from orbit_lsp.index.watcher import watch_folder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the inotify event mask")


class _Seen(FileSystemEventHandler):
    def __init__(self):
        super().__init__()
        self.events: list = []
        self.cond = threading.Condition()

    def on_any_event(self, event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def kinds(self) -> set[tuple[str, str]]:
        with self.cond:
            return {(e.event_type, str(e.src_path).rsplit("/", 1)[-1]) for e in self.events}


def test_reads_reach_no_one_and_changes_still_do(tmp_path):
    from watchdog.observers.inotify_c import InotifyConstants as C

    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
    seen = _Seen()
    observer = watch_folder(seen, tmp_path)
    try:
        masks = [e.get_event_mask_from_filter() for e in observer.emitters]
        assert masks and not any(m & (C.IN_OPEN | C.IN_CLOSE_NOWRITE | C.IN_ACCESS) for m in masks)
        for _ in range(50):
            for p in sorted(tmp_path.iterdir()):
                p.read_bytes()
        (tmp_path / "m0.py").write_text("x = 2\n")
        (tmp_path / "new.py").write_text("")
        (tmp_path / "m1.py").unlink()
        (tmp_path / "m2.py").rename(tmp_path / "m3.py")
        (tmp_path / "pkg").mkdir()
        want = {("modified", "m0.py"), ("created", "new.py"), ("deleted", "m1.py"), ("moved", "m2.py"),
                ("created", "pkg")}
        deadline = time.monotonic() + 10
        with seen.cond:
            while not want <= {(e.event_type, str(e.src_path).rsplit("/", 1)[-1]) for e in seen.events}:
                left = deadline - time.monotonic()
                assert left > 0, f"changes not seen: {want - seen.kinds()}"
                seen.cond.wait(left)
        assert not {kind for kind, _ in seen.kinds()} & {"opened", "closed_no_write"}
    finally:
        observer.stop()
        observer.join()
