"""Smoke test of ``bench/resolve_phase.py`` (the resolve phase of a full build alone) on a tiny
workspace, so it cannot rot: it parses once into the states file, resolves as the full build
does, reports its figures and pickles every file's edges; a second run from the states file
resolves to the same edges. Nothing is timed."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `bench` is not an installed package

from bench import resolve_phase  # noqa: E402

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "class Base:\n    def run(self):\n        self.helper.work()\n",
    "pkg/tools.py": "class Tool:\n    def work(self):\n        pass\n",
    "pkg/sub.py": "from pkg.base import Base\nfrom pkg.tools import Tool\n\n\nclass Sub(Base):\n"
                  "    def __init__(self):\n        self.helper = Tool()\n",
}


def test_resolve_phase_reports_figures_and_the_same_edges_from_its_states(tmp_path, capsys):
    ws = tmp_path / "ws"
    for rel, text in FILES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    states, first, second = tmp_path / "states.pkl", tmp_path / "a.edges", tmp_path / "b.edges"
    assert resolve_phase.main([str(ws), "--states", str(states), "--edges", str(first)]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["files"] == len(FILES)
    assert figures["value_flow"] is True  # a small workspace: parameter values on, as the indexer does
    assert figures["resolve_cpu_s"] >= 0 and figures["decodes"] >= len(FILES)
    assert states.exists()
    assert resolve_phase.main([str(ws), "--states", str(states), "--edges", str(second)]) == 0
    edges = dict(pickle.loads(first.read_bytes()))
    assert edges == dict(pickle.loads(second.read_bytes()))
    # Base.run reads helper, which only Sub sets: the call binds to Tool.work
    assert set(edges["pkg/base.py"].calls) == {("Base.run", "pkg/tools.py", "Tool.work")}
