"""The model client: chat completions on any OpenAI-compatible endpoint through the ``openai``
package, with ordered fallback models and bounded rate-limit handling.

``ModelClient(settings).complete(messages, deadline=…, cancel=…) -> ModelReply`` sends the
conversation to the first model that is not rate-limited:

- the ``openai`` client runs with ``max_retries=0``: it never retries (or sleeps) by itself, so a
  429 reaches orbit at once;
- HTTP 429: the model is put on cooldown for as long as ``Retry-After-Ms`` / ``Retry-After``
  (seconds or an HTTP date) says — 60 s without a header, 1 hour for ``insufficient_quota``
  (not retryable) — and the next fallback model is asked at once. Cooldowns live in the client,
  so the next question also skips a limited model until its time has passed;
- when every model is on cooldown: wait for the earliest one if that is at most
  ``agent_max_wait_s`` away (cancellable), else raise ``RateLimited`` at once ("rate-limited,
  retry after ~60 min");
- HTTP 5xx: the next model is tried; when none is left, ``ModelError`` with the status;
- timeout (``agent_request_timeout_s``, or less when the question's deadline is closer) and
  connection failures: ``ModelError`` at once, with the endpoint (never the key);
- a reply whose ``content`` is empty but that carries ``reasoning`` / ``reasoning_content``
  (reasoning models): the last valid JSON action found in the reasoning text is used;
- a reply cut off by its length (``finish_reason: "length"``) is a failed turn, never parsed (its
  reasoning holds only drafts): the same model is asked again with a larger budget
  (``max_tokens`` = twice the tokens it used, ``LENGTH_RETRY_MIN_TOKENS`` … ``LENGTH_RETRY_MAX_TOKENS``;
  ``max_completion_tokens`` when the endpoint asks for that name), then each fallback model with
  that budget; when every model was cut off, ``ModelError`` says so. The client keeps the budget
  learnt per model for its later requests.

The API key is passed to the ``openai`` client only; it never appears in a message, a log line
or the audit log (messages from the endpoint are scrubbed of it too).
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from orbit_lsp.config import Settings

log = logging.getLogger("orbit_lsp.agent.model")

DEFAULT_RATE_WAIT_S = 60.0    # a 429 without Retry-After
QUOTA_COOLDOWN_S = 3600.0     # insufficient_quota: not retryable soon
MIN_COOLDOWN_S = 0.5          # "Retry-After: 0" must not become a busy loop
MAX_ATTEMPTS_PER_MODEL = 3    # 429 answers per model for one completion
LENGTH_RETRY_MIN_TOKENS = 4096   # reply budget (max_tokens) after a reply cut off by its length
LENGTH_RETRY_MAX_TOKENS = 32768
MAX_LENGTH_CUTS_PER_MODEL = 2    # a model cut off twice (once with the larger budget) is not asked again
PLACEHOLDER_KEY = "sk-no-key-configured"  # local endpoints often need none; the client wants one


class ModelError(Exception):
    """The model endpoint failed: timeout, connection error, HTTP error, unusable reply. The
    message names the endpoint and model, never the API key."""


class RateLimited(ModelError):
    """Every configured model is rate-limited for longer than orbit waits. ``retry_after``:
    seconds until the earliest one may be asked again."""

    def __init__(self, message: str, retry_after: float):
        self.retry_after = retry_after
        super().__init__(message)


class Cancelled(Exception):
    """The question was cancelled by the user."""


@dataclass
class ModelReply:
    """One completion: ``text`` (content, or the JSON recovered from the reasoning text),
    ``model`` (the configured name that answered), ``from_reasoning`` (content was empty),
    ``usage`` (token counts when the endpoint sends them), ``attempts`` (every request made for
    this reply: [{"model", "status", "error"?, "retry_after"?}])."""

    text: str
    model: str
    from_reasoning: bool = False
    usage: dict = field(default_factory=dict)
    attempts: list[dict] = field(default_factory=list)


def _header(headers: Any, name: str) -> str | None:
    try:
        v = headers.get(name)
    except Exception:  # noqa: BLE001 - headers of an odd shape: treat as absent
        return None
    return v if isinstance(v, str) and v.strip() else None


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from a 429's headers: ``retry-after-ms`` (milliseconds), else
    ``retry-after`` as seconds or as an HTTP date (relative to ``now``, Unix seconds). None
    when absent or unreadable."""
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = _header(headers, "retry-after")
    if ra is None:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _human(seconds: float) -> str:
    if seconds >= 90 * 60:
        return f"~{seconds / 3600:.0f} h"
    if seconds >= 90:
        return f"~{seconds / 60:.0f} min"
    return f"~{seconds:.0f} s"


_LONE_SURROGATE = re.compile(r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """``value`` (a string, or lists/dicts of them) with every unpaired UTF-16 surrogate replaced
    by U+FFFD: a model's JSON may escape one (``"\\ud800"``), and such text cannot be encoded
    for the next request, SQLite or the client."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    return value


MAX_ACTION_SCAN_CHARS = 65_536  # an action is looked for in the last this many characters of a reply


def extract_action(text: str, keys: tuple[str, ...] = ("tool", "answer")) -> dict | None:
    """The last JSON action in ``text`` (an object with one of ``keys``; the outer one when an
    action holds objects), else the last top-level JSON object, else None. Code fences and prose
    around it are ignored. Objects are tried from the end of the text backwards; only the last
    ``MAX_ACTION_SCAN_CHARS`` characters are searched and the decoder's work is bounded (a few
    passes over them): deeply nested or endless half-objects are given up on, never a
    ``RecursionError``."""
    if len(text) > MAX_ACTION_SCAN_CHARS:
        text = text[-MAX_ACTION_SCAN_CHARS:]
    dec = json.JSONDecoder()
    last: tuple[dict, int] | None = None  # the object starting last (or holding it), its end
    budget = 8 * len(text) + 1024  # characters the decoder may read in all
    i = text.rfind("{")
    while i != -1 and budget > 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            budget -= max(1, exc.pos - i)
        except (ValueError, RecursionError):  # nested deeper than the decoder's stack
            budget -= len(text) - i
        else:
            budget -= end - i
            if isinstance(obj, dict):
                if any(k in obj for k in keys):
                    return obj
                if last is None or end >= last[1]:  # the last object, or one holding it
                    last = (obj, end)
        i = text.rfind("{", 0, i)
    return last[0] if last is not None else None


class ModelClient:
    """Chat completions with fallbacks (see the module docstring). Thread-safe; keep one per
    settings so cooldowns carry over between questions. ``clock`` (monotonic seconds) is
    injectable for tests of cooldown expiry."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.monotonic,
                 audit: Callable[..., Any] | None = None):
        if not settings.agent_model:
            raise ModelError("no model configured (set ORBIT_MODEL or the agentModel setting)")
        self.models = [settings.agent_model] + [m for m in settings.agent_fallback_models
                                                if m != settings.agent_model]
        self.base_url = settings.agent_base_url
        self.request_timeout = settings.agent_request_timeout_s
        self.max_wait = settings.agent_max_wait_s
        key = settings.agent_api_key.get_secret_value() if settings.agent_api_key else ""
        self._key = key
        import openai  # here, not at the top: it takes 0.3-0.6 s, and a language server starts without a model

        self._client = openai.OpenAI(api_key=key or PLACEHOLDER_KEY, base_url=self.base_url,
                                     max_retries=0, timeout=self.request_timeout)
        self.clock = clock
        self.audit = audit
        self._cooldown: dict[str, float] = {}  # model -> clock time when it may be asked again
        self._budgets: dict[str, int] = {}     # model -> reply budget learnt from replies cut off
        self._budget_name = "max_tokens"       # or "max_completion_tokens" once the endpoint asked for it
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def close(self) -> None:
        self._client.close()

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def cooldowns(self) -> dict[str, float]:
        """Seconds left per rate-limited model."""
        now = self.clock()
        with self._lock:
            return {m: t - now for m, t in self._cooldown.items() if t > now}

    def complete(self, messages: list[dict], *, deadline: float | None = None,
                 cancel: threading.Event | None = None,
                 audit: Callable[..., Any] | None = None) -> ModelReply:
        """One completion for ``messages`` (OpenAI chat format). ``deadline``: ``time.monotonic()``
        by which the question must be done (bounds each request's timeout and any rate-limit
        wait). ``audit(kind, **details)`` receives one ``"model_call"`` record per request (default:
        the client's ``audit``). Raises ``RateLimited``, ``ModelError``, ``Cancelled``."""
        import openai  # loaded by __init__ already

        audit = audit or self.audit
        attempts: list[dict] = []
        errors: list[str] = []
        cut: dict[str, int] = {}         # model -> replies cut off by their length
        budget: int | None = None        # reply token budget sent after a cut
        budget_name = self._budget_name
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            now = self.clock()
            with self._lock:
                ready = [m for m in self.models if self._cooldown.get(m, 0.0) <= now]
                waits = {m: self._cooldown[m] - now for m in self.models if m not in ready}
            tried_5xx = {a["model"] for a in attempts if a.get("status", 0) >= 500}
            ready = [m for m in ready if m not in tried_5xx and cut.get(m, 0) < MAX_LENGTH_CUTS_PER_MODEL]
            if not ready:
                if (tried_5xx or cut) and not waits:
                    raise ModelError("; ".join(errors))
                wait = min(waits.values()) if waits else 0.0
                left = None if deadline is None else deadline - time.monotonic()
                if wait > self.max_wait or (left is not None and wait > left) or not waits:
                    names = ", ".join(f"{m} ({_human(s)})" for m, s in sorted(waits.items(), key=lambda kv: kv[1]))
                    raise RateLimited(f"rate-limited: every configured model is limited, retry after "
                                      f"{_human(wait)} [{names}]", wait)
                log.info("all models rate-limited; waiting %.1f s", wait)
                if cancel is not None:
                    if cancel.wait(wait):
                        raise Cancelled("cancelled")
                else:
                    time.sleep(wait)
                continue
            model = ready[0]
            if sum(1 for a in attempts if a["model"] == model and a.get("status") == 429) >= MAX_ATTEMPTS_PER_MODEL:
                raise RateLimited(f"rate-limited: {model} answered 429 {MAX_ATTEMPTS_PER_MODEL} times in a row; "
                                  f"giving up for this question", self.cooldowns().get(model, 0.0))
            timeout = self.request_timeout
            if deadline is not None:
                timeout = min(timeout, max(0.5, deadline - time.monotonic()))
            with self._lock:
                learned = self._budgets.get(model)
            ask_for = max(budget or 0, learned or 0) or None
            extra = {budget_name: ask_for} if ask_for is not None else {}
            try:
                resp = self._client.chat.completions.create(model=model, messages=messages, timeout=timeout,
                                                            **extra)
            except openai.RateLimitError as exc:
                body = exc.body if isinstance(exc.body, dict) else {}
                code = str(body.get("code") or body.get("type") or "")
                quota = "insufficient_quota" in code or "insufficient_quota" in str(exc)
                delay = retry_after_seconds(exc.response.headers)
                if delay is None:
                    delay = QUOTA_COOLDOWN_S if quota else DEFAULT_RATE_WAIT_S
                elif quota:
                    delay = max(delay, QUOTA_COOLDOWN_S)
                delay = max(delay, MIN_COOLDOWN_S)
                with self._lock:
                    self._cooldown[model] = self.clock() + delay
                attempts.append({"model": model, "status": 429, "retry_after": round(delay, 3),
                                 "error": "insufficient_quota" if quota else "rate_limited"})
                self._audit_call(audit, model, 429, error="insufficient quota" if quota else f"rate-limited for {_human(delay)}")
                log.info("model %s rate-limited (%s); cooldown %.1f s", model, code or "429", delay)
                continue
            except openai.APITimeoutError:
                self._audit_call(audit, model, None, error="timeout")
                raise ModelError(f"the model endpoint {self.where} did not answer within {timeout:.0f} s "
                                 f"(model {model})") from None
            except openai.APIConnectionError as exc:
                self._audit_call(audit, model, None, error="connection")
                raise ModelError(f"cannot reach the model endpoint {self.where}: "
                                 f"{self._scrub(str(exc.__cause__ or exc))}") from None
            except openai.APIStatusError as exc:
                status = exc.status_code
                msg = self._scrub(_error_message(exc))
                if status == 400 and extra and budget_name == "max_tokens" and "max_completion_tokens" in msg:
                    budget_name = self._budget_name = "max_completion_tokens"  # api.openai.com's reasoning models
                    self._audit_call(audit, model, status, error=msg)
                    continue
                attempts.append({"model": model, "status": status, "error": msg})
                self._audit_call(audit, model, status, error=msg)
                if status >= 500:
                    errors.append(f"model endpoint error HTTP {status} from {model}: {msg}")
                    continue
                raise ModelError(f"the model endpoint refused the request (HTTP {status}, model {model}): {msg}") from None
            if _finish_reason(resp) == "length":
                usage = resp.usage.model_dump() if getattr(resp, "usage", None) is not None else {}
                used = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None
                cut[model] = cut.get(model, 0) + 1
                budget = min(LENGTH_RETRY_MAX_TOKENS,
                             max(LENGTH_RETRY_MIN_TOKENS, 2 * (used or 0), 2 * (ask_for or 0)))
                with self._lock:
                    self._budgets[model] = max(self._budgets.get(model, 0), budget)
                spent = f"{used} tokens" if used is not None else "its token limit"
                attempts.append({"model": model, "status": 200, "error": "cut off (finish_reason length)",
                                 "completion_tokens": used, "next_budget": budget})
                self._audit_call(audit, model, 200, error=f"reply cut off at {spent} (finish_reason length)",
                                 usage=usage)
                errors.append(f"the reply of model {model} was cut off at {spent} (finish_reason length)"
                              + (f" with max_tokens={extra[budget_name]}" if extra else ""))
                log.info("model %s reply cut off at %s; asking again with a budget of %d", model, spent, budget)
                continue
            attempts.append({"model": model, "status": 200})
            return self._reply(resp, model, attempts, audit)

    def _reply(self, resp: Any, model: str, attempts: list[dict], audit) -> ModelReply:
        try:
            msg = resp.choices[0].message
        except (AttributeError, IndexError, TypeError):
            self._audit_call(audit, model, 200, error="no choices")
            raise ModelError(f"the model endpoint sent a reply without choices (model {model})") from None
        content = (getattr(msg, "content", None) or "").strip()
        usage = resp.usage.model_dump() if getattr(resp, "usage", None) is not None else {}
        from_reasoning = False
        if not content:
            extra = dict(getattr(msg, "model_extra", None) or {})
            reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
            if isinstance(reasoning, dict):  # some servers send {"content": …} / {"text": …}
                reasoning = reasoning.get("content") or reasoning.get("text") or json.dumps(reasoning)
            action = extract_action(str(reasoning)) if reasoning else None
            if action is None:
                self._audit_call(audit, model, 200, error="empty reply", usage=usage)
                raise ModelError(f"model {model} returned an empty reply"
                                 + (" (its reasoning holds no JSON action)" if reasoning else ""))
            content, from_reasoning = json.dumps(action), True
        self._audit_call(audit, model, 200, usage=usage, from_reasoning=from_reasoning)
        content = without_lone_surrogates(content)  # it is sent back with the next request
        return ModelReply(text=content, model=model, from_reasoning=from_reasoning, usage=usage,
                          attempts=attempts)

    def _audit_call(self, audit, model: str, status: int | None, **details: Any) -> None:
        if audit is not None:
            try:
                audit("model_call", model=model, endpoint=self.where, status=status, **details)
            except Exception:  # noqa: BLE001 - the audit never breaks a question
                log.exception("audit failed")


def _finish_reason(resp: Any) -> str | None:
    try:
        return resp.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        return None


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(exc.message)[:300] if getattr(exc, "message", None) else type(exc).__name__
