"""Names and paths in orbit's Markdown render verbatim (issue 18 item 5: ``src/flask/__init__.py``
showed as ``src/flask/init.py``): ``orbit_lsp.markdown.code`` / ``escape`` checked with a real
CommonMark parser (markdown-it-py), for chosen and for generated text; the hover of a package's
``__init__.py`` and the planner's answers rendered the same way."""

from __future__ import annotations

import html
import re

from hypothesis import given, settings, strategies as st
from markdown_it import MarkdownIt

from orbit_lsp.markdown import code, escape

MD = MarkdownIt("commonmark")


def inline_html(markdown: str) -> str:
    """The HTML of one paragraph, without the <p> wrapper."""
    out = MD.render(markdown).strip()
    assert out.startswith("<p>") and out.endswith("</p>"), out
    return out[3:-4]


def codes(markdown: str) -> list[str]:
    """The text of every code span in ``markdown``, unescaped."""
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", MD.render(markdown), re.S)]


def test_dunder_paths_and_names_stay_verbatim():
    assert inline_html("x " + code("src/flask/__init__.py")) == "x <code>src/flask/__init__.py</code>"
    assert inline_html("x " + code("Flask.__init__") + " and " + code("a*b*c")) == \
        "x <code>Flask.__init__</code> and <code>a*b*c</code>"
    # what it was before: a bare path loses its underscores to emphasis
    assert "<strong>init</strong>" in inline_html("x src/flask/__init__.py")
    assert inline_html("x " + escape("src/flask/__init__.py")) == "x src/flask/__init__.py"


def test_backticks_inside_a_name():
    assert codes("x " + code("a`b")) == ["a`b"]
    assert codes("x " + code("``odd``")) == ["``odd``"]
    assert codes("x " + code("`lead")) == ["`lead"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40))
def test_code_spans_hold_any_text(text):
    """Whatever a name or path contains, its code span shows exactly it (line ends as spaces;
    CommonMark normalises only those)."""
    assert codes("x " + code(text) + " y") == [text]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab _*`[]()<>#|~!&\\-+.:/=") + ["&amp;", "&copy;", "<b>", "__init__"]),
                min_size=1, max_size=20).map("".join).filter(lambda t: t == t.strip() and t != ""))
def test_escaped_prose_renders_as_itself(text):
    assert html.unescape(inline_html("x " + escape(text) + " y")) == f"x {text} y"


def test_hover_lists_the_first_files_of_each_hop_and_counts_all():
    """A hover lists the dependents its summary gives (``index.buffers.SHOWN_PER_HOP`` a hop at
    most), as code spans, with "…" when a hop has more, and counts every one; a package's
    users are shown the same way up to ``MAX_CALLERS``."""
    from orbit_lsp.index.buffers import MAX_CALLERS, SHOWN_PER_HOP
    from orbit_lsp.server.hover import render

    assert SHOWN_PER_HOP == 5
    deps = [{"path": f"pkg/m{i}.py", "hops": 1} for i in range(5)] + [{"path": "pkg/__init__.py", "hops": 2}]
    text = render({"type": "file", "path": "pkg/core.py", "symbols": 3, "dependents": deps,
                   "dependents_by_hop": [7, 1], "packages": []}, 3)
    assert "**Dependents** of `pkg/core.py`: 8 files" in text
    assert "- hop 1: 7 files (`pkg/m0.py`, `pkg/m1.py`, `pkg/m2.py`, `pkg/m3.py`, `pkg/m4.py`, …)" in text
    assert "- hop 2: 1 file (`pkg/__init__.py`)" in text
    text = render({"type": "file", "path": "pkg/core.py", "symbols": 3, "dependents": [],
                   "dependents_by_hop": [], "packages": []}, 3)
    assert "**Dependents** of `pkg/core.py`: none (no workspace file imports it, up to 3 hops)" in text
    users = [f"u{i}.py" for i in range(MAX_CALLERS + 2)]
    text = render({"type": "package", "name": "requests", "about": [], "users": users}, 3)
    assert f"Used by {MAX_CALLERS + 2} workspace files: " in text
    assert text.endswith(f"`u{MAX_CALLERS - 1}.py`, …")
