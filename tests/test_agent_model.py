"""The model client against a real loopback chat-completions server: reasoning-only replies,
HTTP 429 with Retry-After and fallback (shared case 030), timeouts, 5xx, the API key never
echoed."""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from agent_harness import answer, completion, content, cut_off, rate_limited, reasoning_only, server_error
from conftest import shared_case
from orbit_lsp.agent.model import ModelClient, ModelError, RateLimited, extract_action, retry_after_seconds
from orbit_lsp.config import Settings

KEY = "sk-test-SECRETKEY-0123456789"
MSGS = [{"role": "user", "content": "what depends on util.py?"}]


def client(srv, fallbacks=("fallback",), clock=time.monotonic, **kw) -> ModelClient:
    s = Settings(agent_base_url=srv.url, agent_api_key=KEY, agent_model="primary",
                 agent_fallback_models=list(fallbacks), **kw)
    return ModelClient(s, clock=clock)


def scenario(sid: str) -> dict:
    data = json.loads((shared_case("030-http-429-retry-after") / "scenarios.json").read_text())
    return next(s for s in data["scenarios"] if s["id"].startswith(sid))


def script_scenario(srv, sc: dict, headers: dict | None = None, repeat: int = 3) -> None:
    for model, replies in sc["replies"].items():
        for r in replies:
            r = dict(r)
            if headers is not None and r["status"] == 429:
                r["headers"] = headers
            srv.script(model, *([r] * repeat))


class FakeClock:
    """Monotonic seconds under the test's control (cooldown expiry without sleeping)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_plain_reply_and_request_shape(srv):
    srv.script("primary", answer("ok"))
    rep = client(srv).complete(MSGS)
    assert rep.model == "primary" and json.loads(rep.text) == {"answer": "ok"} and not rep.from_reasoning
    [req] = srv.requests
    assert req["path"] == "/v1/chat/completions" and req["json"]["messages"] == MSGS
    assert req["headers"].get("authorization") == f"Bearer {KEY}"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_only_reply_recovers_last_json_action(srv, field):
    text = ('I could call {"tool": "impact_of", "args": {"path": "a.py"}} but better: '
            '```json\n{"tool": "find_symbol", "args": {"name": "helper"}}\n``` and {"not": "an action"}')
    srv.script("primary", reasoning_only(text, field))
    rep = client(srv).complete(MSGS)
    assert rep.from_reasoning
    assert json.loads(rep.text) == {"tool": "find_symbol", "args": {"name": "helper"}}


def test_reasoning_without_json_is_a_clear_error(srv):
    srv.script("primary", reasoning_only("hmm, let me think about it"))
    with pytest.raises(ModelError, match="empty reply"):
        client(srv).complete(MSGS)


# -- replies cut off by their length (issue 20 item 17) -----------------------------------------------

DRAFT = 'Draft: {"answer": "util.py has no dependents"} wait, I should check importers first'


def test_reply_cut_off_is_asked_again_with_a_larger_budget(srv):
    srv.script("primary", cut_off(DRAFT, completion_tokens=3000), answer("a.py and b.py import util.py"))
    rep = client(srv).complete(MSGS)
    assert json.loads(rep.text) == {"answer": "a.py and b.py import util.py"} and rep.model == "primary"
    first, second = (r["json"] for r in srv.requests)
    assert "max_tokens" not in first and second["max_tokens"] == 6000  # twice what the cut reply used
    assert second["messages"] == MSGS  # the draft is not part of the conversation
    assert rep.attempts[0] == {"model": "primary", "status": 200, "error": "cut off (finish_reason length)",
                               "completion_tokens": 3000, "next_budget": 6000}


def test_cut_off_twice_goes_to_the_fallback_with_the_budget(srv):
    srv.script("primary", cut_off(DRAFT, completion_tokens=100), cut_off(DRAFT, completion_tokens=4096))
    srv.script("fallback", answer("from the fallback"))
    rep = client(srv).complete(MSGS)
    assert json.loads(rep.text) == {"answer": "from the fallback"} and rep.model == "fallback"
    assert srv.models() == ["primary", "primary", "fallback"]
    assert [r["json"].get("max_tokens") for r in srv.requests] == [None, 4096, 8192]


def test_every_model_cut_off_is_a_clear_error_not_the_draft(srv):
    srv.script("primary", cut_off(DRAFT, text='{"answer": "partial'), cut_off(DRAFT))
    srv.script("fallback", cut_off(DRAFT), cut_off(DRAFT))
    with pytest.raises(ModelError, match=r"cut off at 1024 tokens \(finish_reason length\)") as ei:
        client(srv).complete(MSGS)
    assert "primary" in str(ei.value) and "fallback" in str(ei.value)
    assert len(srv.requests) == 4


def test_budget_named_max_completion_tokens_when_the_endpoint_asks(srv):
    srv.script("primary", cut_off(DRAFT),
               {"status": 400, "headers": {}, "body": {"error": {
                   "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                              "Use 'max_completion_tokens' instead.", "type": "invalid_request_error"}}},
               answer("ok"))
    rep = client(srv).complete(MSGS)
    assert json.loads(rep.text) == {"answer": "ok"}
    assert srv.requests[1]["json"]["max_tokens"] == 4096
    assert srv.requests[2]["json"]["max_completion_tokens"] == 4096 and "max_tokens" not in srv.requests[2]["json"]


def test_extract_action():
    assert extract_action('x {"a": 1} y {"answer": "z"} {"b": 2}') == {"answer": "z"}
    assert extract_action("no json") is None


def test_extract_action_survives_nested_and_endless_json():
    """Model text nested past the JSON decoder's stack, or full of half-objects, is no action
    (never a RecursionError traceback, never quadratic work); an action after it is found."""
    from orbit_lsp.agent.loop import parse_action

    deep = '{"a": [' * 100_000
    assert extract_action(deep) is None
    assert parse_action(deep, ("answer",)) == (None, "the reply is not a JSON object")
    half = ('{"a":' * 900 + "1") * 20  # each '{' opens a long object that never closes
    assert extract_action(half + ' then {"answer": "ok"}') == {"answer": "ok"}


def test_deeply_nested_reply_is_explained_to_the_model(srv):
    from orbit_lsp.agent.loop import parse_action

    srv.script("primary", content('{"tool": [' * 50_000))
    rep = client(srv).complete(MSGS)
    assert parse_action(rep.text, ("answer",))[1] == "the reply is not a JSON object"


def test_retry_after_forms():
    assert retry_after_seconds({"retry-after": "20"}) == 20
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = time.time()
    date = email.utils.formatdate(now + 90, usegmt=True)
    assert 88 <= retry_after_seconds({"retry-after": date}, now=now) <= 91
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None


def test_s1_retry_after_seconds_switches_to_fallback_at_once(srv):
    sc = scenario("S1")
    script_scenario(srv, sc)
    clock = FakeClock()
    c = client(srv, clock=clock)
    t0 = time.monotonic()
    rep = c.complete(MSGS)
    assert time.monotonic() - t0 < 2.0
    assert rep.model == "fallback" and "util.py is imported by app.py" in rep.text
    assert [a["model"] for a in rep.attempts] == ["primary", "fallback"] and rep.attempts[0]["retry_after"] == 20
    # ask #2 at t=5: straight to the fallback
    clock.now += 5
    assert c.complete(MSGS).model == "fallback"
    assert srv.models() == ["primary", "fallback", "fallback"]
    # ask #3 at t=25: the primary may be used again
    clock.now += 20
    srv.queues["primary"] = [answer("primary is back")]
    assert c.complete(MSGS).model == "primary"
    assert srv.models().count("primary") == 2


def test_s2_retry_after_ms(srv):
    script_scenario(srv, scenario("S2"))
    clock = FakeClock()
    c = client(srv, clock=clock)
    assert c.complete(MSGS).model == "fallback"
    assert 1.4 <= c.cooldowns()["primary"] <= 1.5
    clock.now += 1.0
    assert c.complete(MSGS).model == "fallback"  # not retried before 1.5 s
    assert srv.models().count("primary") == 1


def test_s3_retry_after_http_date(srv):
    date = email.utils.formatdate(time.time() + 90, usegmt=True)
    script_scenario(srv, scenario("S3"), headers={"retry-after": date})
    clock = FakeClock()
    c = client(srv, clock=clock)
    assert c.complete(MSGS).model == "fallback"
    assert 85 <= c.cooldowns()["primary"] <= 91
    clock.now += 60
    assert c.complete(MSGS).model == "fallback"
    assert srv.models().count("primary") == 1


def test_s4_both_limited_long_wait_is_a_clear_error_at_once(srv):
    script_scenario(srv, scenario("S4"))
    c = client(srv)
    t0 = time.monotonic()
    with pytest.raises(RateLimited) as ei:
        c.complete(MSGS)
    assert time.monotonic() - t0 < 5
    msg = str(ei.value)
    assert "rate-limited" in msg and "~60 min" in msg and KEY not in msg
    assert sorted(srv.models()) == ["fallback", "primary"]  # at most one request per model
    with pytest.raises(RateLimited):  # the next question does not ask them again either
        c.complete(MSGS)
    assert len(srv.requests) == 2


def test_s5_insufficient_quota_is_not_retried(srv):
    script_scenario(srv, scenario("S5"))
    c = client(srv)
    assert c.complete(MSGS).model == "fallback"
    assert c.complete(MSGS).model == "fallback"
    assert srv.models() == ["primary", "fallback", "fallback"]


def test_short_wait_when_all_limited_then_retry(srv):
    srv.script("primary", rate_limited({"retry-after-ms": "300"}), answer("after the wait"))
    srv.script("fallback", rate_limited({"retry-after-ms": "600"}))
    t0 = time.monotonic()
    rep = client(srv).complete(MSGS)
    waited = time.monotonic() - t0
    assert rep.model == "primary" and "after the wait" in rep.text
    assert 0.25 <= waited < 3
    assert srv.models() == ["primary", "fallback", "primary"]


def test_timeout_is_a_clear_error(srv):
    srv.script("primary", content("{}", delay=2.0))
    c = client(srv, agent_request_timeout_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(ModelError, match="did not answer within"):
        c.complete(MSGS)
    assert time.monotonic() - t0 < 1.9


def test_5xx_tries_the_fallback_then_a_clear_error(srv):
    srv.script("primary", server_error(502))
    srv.script("fallback", answer("fine"))
    assert client(srv).complete(MSGS).model == "fallback"
    srv.reset()
    srv.script("primary", server_error(503))
    srv.script("fallback", server_error(500))
    with pytest.raises(ModelError) as ei:
        client(srv).complete(MSGS)
    assert "HTTP 503" in str(ei.value) and "HTTP 500" in str(ei.value) and "upstream exploded" in str(ei.value)


def test_unreachable_endpoint_and_4xx_do_not_echo_the_key(srv):
    srv.script("primary", {"status": 401, "headers": {},
                           "body": {"error": {"message": f"Incorrect API key provided: {KEY}"}}})
    with pytest.raises(ModelError) as ei:
        client(srv).complete(MSGS)
    assert "HTTP 401" in str(ei.value) and KEY not in str(ei.value)
    s = Settings(agent_base_url="http://127.0.0.1:9/v1", agent_api_key=KEY, agent_model="m")
    with pytest.raises(ModelError) as ei:
        ModelClient(s).complete(MSGS)
    assert "cannot reach" in str(ei.value) and KEY not in str(ei.value)
    assert KEY not in repr(s) and KEY not in str(s.model_dump())


def test_completion_shape_is_openai_compatible():
    assert completion({"content": "x"})["choices"][0]["message"]["content"] == "x"


def test_api_key_never_logged_even_at_debug(srv, caplog):
    import logging
    srv.script("primary", rate_limited({"retry-after": "5"}))
    srv.script("fallback", answer("ok"))
    with caplog.at_level(logging.DEBUG):
        client(srv).complete(MSGS)
    assert caplog.records and KEY not in caplog.text


def test_retry_after_zero_is_bounded(srv):
    srv.default = rate_limited({"retry-after": "0"})
    t0 = time.monotonic()
    with pytest.raises(RateLimited, match="3 times"):
        client(srv, fallbacks=()).complete(MSGS)
    assert len(srv.requests) == 3 and time.monotonic() - t0 < 3
