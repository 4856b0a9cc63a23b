"""``orbit_lsp.agent.propose``: the proposal protocol with the real ``openai`` client against the
loopback chat-completions server, graph tools on a real FalkorDB graph (case 025: a workspace
full of fake secrets), and ``restore`` of redacted placeholders."""

from __future__ import annotations

import json

import pytest

from agent_harness import action, content, reasoning_only
from orbit_lsp.agent.model import ModelClient
from orbit_lsp.agent.propose import Unrestorable, restore, run_propose, system_prompt
from orbit_lsp.agent.redact import MARK, redact
from orbit_lsp.agent.tools import Toolbox
from orbit_lsp.index.indexer import WorkspaceIndexer

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def ws025(store, settings, case_workspace):
    ix = WorkspaceIndexer(case_workspace("025"), store, settings)
    ix.index_all()
    yield ix
    ix.graph.delete()


@pytest.fixture
def model(settings, srv):
    m = ModelClient(settings.model_copy(update={"agent_base_url": srv.url, "agent_model": "m",
                                                "agent_fallback_models": []}))
    yield m
    m.close()


def edit(new_text: str, explanation: str = "done") -> dict:
    return content(json.dumps({"edit": {"new_text": new_text, "explanation": explanation}}))


def test_restore_puts_secrets_back_in_order():
    original = 'A = "sk-proj-ORBITFAKE000000000000"\nB = "AKIAORBITFAKE0000001"\n'
    red, n = redact(original)
    assert n == 2 and red.count(MARK) == 2
    assert restore(original, red, red.replace("A =", "ALPHA =")) == original.replace("A =", "ALPHA =")
    assert restore(original, red, "x = 1\n") == "x = 1\n"  # no placeholder: nothing to restore
    # moved, dropped: each placeholder is known by the name before it
    assert restore(original, red, red.split("\n")[1] + "\n" + red.split("\n")[0] + "\n") == \
        original.split("\n")[1] + "\n" + original.split("\n")[0] + "\n"
    assert restore(original, red, f'B = "{MARK}"\n') == 'B = "AKIAORBITFAKE0000001"\n'
    with pytest.raises(Unrestorable):
        restore(original, red, f'C = "{MARK}"\n')  # one of two, under a new name: which one?
    with pytest.raises(Unrestorable):
        restore("x = 1\n", "x = 1\n", f'x = "{MARK}"\n')  # the selection had no secret


def test_edit_after_a_tool_step_without_secrets_in_any_request(ws025, model, srv, settings):
    text = (ws025.root / "settings.py").read_text()
    start = text.index("def connect")
    selection = text[start:]

    def rename(req: dict) -> dict:
        first = req["json"]["messages"][1]["content"]
        sel = first.split("<<<SELECTION\n", 1)[1].rsplit("\nSELECTION>>>", 1)[0]
        return edit(sel.replace("def connect(", "def connect_to_api("), "renamed")

    srv.script("m", action("find_symbol", name="connect"))
    srv.default = rename
    tb = Toolbox(ws025.graph, ws025.root, settings)
    res = run_propose("Rename connect to connect_to_api", selection, model, tb, path="settings.py",
                      start_line=10, end_line=15, context="the selection is function settings.connect")
    assert res.error is None and res.model == "m" and res.explanation == "renamed"
    assert res.new_text == selection.replace("def connect(", "def connect_to_api(")  # secrets restored
    assert [s.tool for s in res.steps] == ["find_symbol"] and res.steps[0].rows == 1
    assert res.redactions >= 3
    assert all("ORBITFAKE" not in b for b in srv.bodies())
    callers = json.loads(srv.requests[1]["json"]["messages"][-1]["content"])["result"]["candidates"][0]["callers"]
    assert [c["qual"] for c in callers] == ["client.headers"]
    assert '{"edit": {"new_text"' in srv.requests[0]["json"]["messages"][0]["content"]


def test_reasoning_only_reply_and_invalid_replies(ws025, model, srv, settings):
    tb = Toolbox(ws025.graph, ws025.root, settings)
    srv.script("m", reasoning_only('I will answer {"edit": {"new_text": "x = 2\\n", "explanation": "two"}}'))
    res = run_propose("Make it two", "x = 1\n", model, tb, path="settings.py", start_line=1, end_line=1)
    assert res.new_text == "x = 2\n" and res.error is None
    srv.script("m", content('{"edit": {"text": "x"}}'), content("sure!"))
    res = run_propose("Make it two", "x = 1\n", model, tb, path="settings.py", start_line=1, end_line=1)
    assert res.new_text is None and "invalid reply twice" in res.error
    # the explanation of the first invalid reply reached the model
    assert '"edit" must be an object with "new_text"' in srv.requests[-1]["json"]["messages"][-1]["content"]


def test_step_limit_and_repeated_calls(ws025, model, srv, settings):
    tb = Toolbox(ws025.graph, ws025.root, settings)
    srv.script("m", action("find_symbol", name="connect"), action("find_symbol", name="connect"),
               action("impact_of", path="settings.py"))
    res = run_propose("Anything", "x = 1\n", model, tb, path="settings.py", start_line=1, end_line=1, max_steps=2)
    assert res.new_text is None and "step limit reached: 2" in res.error
    assert res.steps[1].note == "same call as step 1; not run again"


def test_prompt_describes_the_protocol():
    p = system_prompt(5)
    assert '{"no_change": "<why>"}' in p and "[REDACTED]" in p and "cannot write files" in p and "at most 5" in p
