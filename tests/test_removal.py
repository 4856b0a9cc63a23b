"""The removal proof (orbit_lsp.edits.removal) on the editor workspace, without LSP: each
refusal with its reason, the removed lines, and "unknown" when the file scan runs out of time."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orbit_lsp.edits.removal import removal
from orbit_lsp.index.indexer import WorkspaceIndexer

WORKSPACE = Path(__file__).parent / "editor_workspace"


@pytest.fixture(scope="module")
def ix(store, tmp_path_factory):
    root = tmp_path_factory.mktemp("removal") / "ws"
    shutil.copytree(WORKSPACE, root)
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    yield ix
    ix.graph.delete()
    ix.cache_path.unlink(missing_ok=True)


def check(ix, rel: str, qual: str, **kw):
    return removal(ix.graph, ix.root, rel, (ix.root / rel).read_text(), qual, **kw)


@pytest.mark.parametrize("rel, qual, reason", [
    ("util.py", "util.used", "used is exported in __all__"),
    ("util.py", "util.cached_unused", "cached_unused is decorated"),
    ("util.py", "util.mystery", "1 function(s) make calls to 'mystery' that could not be bound"),
    ("util.py", "util.referenced", "referenced is mentioned in main.py"),
    ("util.py", "util.Box.__repr__", "__repr__ is a dunder method"),
    ("util.py", "util.test_like", "may be collected by a test runner"),
    ("util.py", "util.only_named_elsewhere", "only_named_elsewhere is mentioned in settings_demo.py"),
    ("handlers.py", "handlers.Handler.do_GET", "a method of a class with a base class"),
    ("dispatch.py", "dispatch.cmd_hello", "dispatch.py looks names up dynamically"),
    ("main.py", "main.run", "run has 1 caller(s)"),
    ("util.py", "util.Box", "is a class"),
    ("util.py", "util.nothing", "util.nothing is not in the graph"),
])
def test_refused_with_reason(ix, rel, qual, reason):
    r = check(ix, rel, qual)
    assert not r.ok and reason in r.reason, r.reason


def test_removable(ix):
    text = (ix.root / "util.py").read_text()
    r = check(ix, "util.py", "util.unused_helper")
    assert r.ok and "not mentioned elsewhere in the 6 file(s) of the workspace (2 of them importing util.py)" in r.reason
    assert r.new_text == text.replace("def unused_helper(x):\n    return x * 2\n\n\n", "")
    lines = text.split("\n")
    assert (r.start, r.end) == (lines.index("def unused_helper(x):"), lines.index("def unused_helper(x):") + 4)
    assert r.cypher and all("query" in c for c in r.cypher)
    spare = check(ix, "util.py", "util.Box.spare")
    assert spare.ok and "    def spare(self):" not in spare.new_text


def test_scan_out_of_time_is_unknown(ix):
    r = check(ix, "util.py", "util.unused_helper", scan_budget_s=0)
    assert not r.ok and "whether it is used is unknown" in r.reason


# -- blank lines left behind (issue 18 item 13) ------------------------------------------------

BLANKS = {
    # the last function of the file: the file ends with the code before it, no blank line
    "tail.py": ("def keep():\n    return 1\n\n\ndef unused_tail():\n    return 2\n",
                "tail.unused_tail", "def keep():\n    return 1\n"),
    # the same, with stray blank lines at the end of the file
    "tail2.py": ("def keep():\n    return 1\n\n\ndef unused_tail2():\n    return 2\n\n\n",
                 "tail2.unused_tail2", "def keep():\n    return 1\n"),
    # the first statement of the file
    "head.py": ("def unused_head():\n    return 2\n\n\ndef keep():\n    return 1\n",
                "head.unused_head", "def keep():\n    return 1\n"),
    # the last method of a class followed by a top-level def: two blank lines stay (PEP 8 E302)
    "klass.py": ("class K:\n    def a(self):\n        return 1\n\n    def unused_m(self):\n        return 2\n\n\n"
                 "def keep(k):\n    return k.a()\n",
                 "klass.K.unused_m",
                 "class K:\n    def a(self):\n        return 1\n\n\ndef keep(k):\n    return k.a()\n"),
    # between two methods: one blank line stays
    "methods.py": ("class M:\n    def a(self):\n        return 1\n\n    def unused_mid(self):\n        return 2\n\n"
                   "    def b(self):\n        return self.a()\n",
                   "methods.M.unused_mid",
                   "class M:\n    def a(self):\n        return 1\n\n    def b(self):\n        return self.a()\n"),
}


@pytest.fixture(scope="module")
def blanks(store, tmp_path_factory):
    root = tmp_path_factory.mktemp("blanks") / "ws"
    root.mkdir()
    for name, (text, _, _) in BLANKS.items():
        (root / name).write_text(text)
    ix = WorkspaceIndexer(root, store)
    ix.index_all()
    yield ix
    ix.graph.delete()
    ix.cache_path.unlink(missing_ok=True)


@pytest.mark.parametrize("rel", sorted(BLANKS))
def test_removal_leaves_pep8_blank_lines(blanks, rel):
    text, qual, expected = BLANKS[rel]
    r = removal(blanks.graph, blanks.root, rel, text, qual)
    assert r.ok, r.reason
    assert r.new_text == expected
    # the line range says the same as the text
    lines = text.splitlines(keepends=True)
    assert "".join(lines[:r.start] + lines[r.end:]) == expected
