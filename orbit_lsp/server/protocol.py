"""pygls's LSP protocol with every request answered, a cheaper way of writing responses, and
the idle garbage collector (``server.heap``) told about every message.

Every frame the transport reads goes to ``OrbitProtocol.handle_frame``, which answers what pygls
would leave unanswered (pygls logs the error of a frame it cannot structure and sends nothing,
so the client's request never completes):

- a body that is not UTF-8, or not JSON: ParseError (-32700) with id null;
- JSON that is not a JSON-RPC 2.0 message (not an object, ``jsonrpc`` not "2.0", an id that
  is not a string or integer, a method that is not a string): InvalidRequest (-32600), with
  the request's id when it has a usable one, else null;
- a request whose params the method's lsprotocol type refuses (a negative or >= 2^31 line, a
  missing ``position``, a wrong type…): InvalidParams (-32602) naming the offending fields;
- a request after ``shutdown``: InvalidRequest;
- a string holding a lone surrogate, or a URI holding a NUL, anywhere in params:
  InvalidParams naming where (``params.textDocument.uri``).

A request without a ``params`` member is given ``params: null`` (JSON-RPC allows omitting it):
custom requests then reach their handler, which validates them (``app.raw_params``).
Notifications that cannot be structured are logged and dropped (there is no one to answer);
nothing of this is shown to the user as a message.

pygls turns a response into JSON by unstructuring the whole message with cattrs, which walks
every dict, list and string of the result one call at a time: ~2.7 ms for an ``orbit/impact``
answer listing 1,400 dependent files, ~25 µs per code lens. Here the envelope (``jsonrpc``,
``id``, ``result``) is written by hand: ``json.dumps`` walks plain JSON itself and hands each
lsprotocol object it meets (a ``CodeLens``, a ``Hover``…) back to ``_serialize_message``,
where cattrs unstructures that object as before. The bytes sent are the same.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import cattrs
from cattrs.v import format_exception
from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_DETAILS = 5  # structuring errors named in one InvalidParams message

_ENVELOPE = frozenset({"id", "jsonrpc", "result"})
_IS_RESPONSE: dict[type, bool] = {}


def _is_response(cls: type) -> bool:
    """True for a success-response class (``JsonRPCResponseMessage``, lsprotocol's ``…Response``):
    an attrs class whose fields are exactly ``id``, ``jsonrpc`` and ``result``."""
    known = _IS_RESPONSE.get(cls)
    if known is None:
        known = _IS_RESPONSE[cls] = attrs.has(cls) and {f.name for f in attrs.fields(cls)} == _ENVELOPE
    return known


def _usable_id(msg_id: Any) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


MAX_SCAN_NODES = 200_000  # JSON values of one message's params checked by ``_unusable_text``


def _unusable_text(value: Any, where: str = "params", nul_anywhere: bool = False) -> str | None:
    """Where in ``value`` (JSON data) a string holds a lone surrogate (ill-formed Unicode: no
    file, text or database can hold it), or a NUL: in a URI (a member named ``uri``/``…Uri``)
    always, in any string with ``nul_anywhere`` (requests: a NUL ends a Cypher text at
    FalkorDB, so a query holding one is refused there with a parser error); e.g.
    ``"params.textDocument.uri"``. None when every string is usable. Notifications keep NULs
    in document text (a file may hold them)."""
    stack: list[tuple[Any, str, bool]] = [(value, where, False)]
    seen = 0
    while stack and seen < MAX_SCAN_NODES:
        v, path, is_uri = stack.pop()
        seen += 1
        if isinstance(v, str):
            if (is_uri or nul_anywhere) and "\x00" in v:
                return path
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return path
        elif isinstance(v, dict):
            for k, x in v.items():
                key = str(k)
                stack.append((x, f"{path}.{key}", key.lower().endswith("uri")))
        elif isinstance(v, list):
            stack.extend((x, f"{path}[{i}]", is_uri) for i, x in enumerate(v))
    return None


def _describe(exc: BaseException, type_: Any) -> str:
    if type(exc) is ValueError and str(exc):  # lsprotocol's range validators say what is wrong
        return str(exc)[:200]
    return format_exception(exc, type_)


def _structuring_error(exc: BaseException) -> str:
    """What is wrong with params, e.g. ``invalid value for type, expected int @
    $.params.position.line``, from cattrs's error tree (the first ``MAX_DETAILS``)."""
    try:
        details = (cattrs.transform_error(exc, path="$", format_exception=_describe)
                   if isinstance(exc, cattrs.BaseValidationError) else [])
    except Exception:  # noqa: BLE001 - the message is best effort
        details = []
    if not details:
        details = [f"{type(exc).__name__}: {exc}"[:200]]
    more = len(details) - MAX_DETAILS
    text = "; ".join(d[:200] for d in details[:MAX_DETAILS])
    return text + (f"; and {more} more" if more > 0 else "")


class OrbitProtocol(LanguageServerProtocol):
    def reply_error(self, msg_id: Any, code: int, message: str) -> None:
        """Send a JSON-RPC error response (``id`` null when the request's id is unknown)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id if _usable_id(msg_id) else None,
                         "error": {"code": code, "message": message}})

    def _send_response(self, msg_id: Any, result: Any | None = None, error: Any | None = None) -> None:
        """pygls's, except that a plain result (a dict or list) of a method without a result type
        of its own (``orbit/*`` requests answer JSON data) is sent as it is, not first copied
        whole by cattrs (an impact listing 2,719 dependents, 444 KB: 5-8 ms through pygls, 2 ms
        as it is). attrs objects inside are unstructured as pygls does (``_serialize_message``)."""
        if error is None and msg_id not in self._result_types and type(result) in (dict, list):
            self._send_data({"jsonrpc": self.VERSION, "id": msg_id, "result": result})
            return
        super()._send_response(msg_id, result, error)

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """pygls's, except that a handler refusing its params (InvalidParams) is answered
        without logging a traceback: the input was at fault, not the server, and a client
        sending many such requests would fill its log."""
        if future.done() and not future.cancelled():
            exc = future.exception()
            if isinstance(exc, JsonRpcException) and exc.code == INVALID_PARAMS:
                self._request_futures.pop(msg_id, None)
                log.info("request %s: %s", msg_id, exc.message)
                self._send_response(msg_id, error=exc.to_response_error())
                return
        super()._send_handler_result(future, msg_id=msg_id)

    def _structure(self, data: dict, method: Any) -> Any:
        """The message object for ``data``: pygls's structuring for LSP methods and responses;
        a request or notification of a method without an lsprotocol type (``orbit/*``) keeps
        its params as plain JSON data (pygls would turn objects into namedtuples, renaming keys
        that are not identifiers)."""
        if isinstance(method, str):
            message_type = self.get_message_type(method)
            if message_type is None:
                if "id" in data:
                    return JsonRPCRequestMessage(id=data["id"], method=method, jsonrpc="2.0", params=data["params"])
                return JsonRPCNotification(method=method, jsonrpc="2.0", params=data["params"])
            return self._converter.structure(data, message_type)
        if "error" in data:
            return self._converter.structure(data, ResponseErrorMessage)
        return self.structure_message(data)  # a response to one of the server's requests

    def handle_frame(self, body: bytes) -> None:
        """Parse, check, structure and handle one message body (see the module's doc); never
        raises."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.reply_error(None, PARSE_ERROR, f"message body is not valid UTF-8 (byte {exc.start})")
            return
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.reply_error(None, PARSE_ERROR, f"message body is not valid JSON: {str(exc)[:200]}")
            return
        if not isinstance(data, dict):
            self.reply_error(None, INVALID_REQUEST, "a message must be a JSON object (batches are not supported)")
            return
        has_id, msg_id, method = "id" in data, data.get("id"), data.get("method")
        is_request = has_id and "method" in data
        if data.get("jsonrpc") != "2.0":
            if is_request or "method" not in data:
                self.reply_error(msg_id, INVALID_REQUEST, 'the message must have "jsonrpc": "2.0"')
            return
        if "method" in data and not isinstance(method, str):
            if has_id:
                self.reply_error(msg_id, INVALID_REQUEST, "method must be a string")
            return
        if has_id and not _usable_id(msg_id):
            if "method" in data or msg_id is not None:
                self.reply_error(None, INVALID_REQUEST, "id must be a string or an integer")
                return
        if "method" not in data and not has_id:
            self.reply_error(None, INVALID_REQUEST, "a message needs a method (or an id, for a response)")
            return
        if is_request and self._shutdown and method != "exit":
            self.reply_error(msg_id, INVALID_REQUEST, "the server is shutting down")
            return
        if "method" in data and "params" not in data:
            data = {**data, "params": None}
        bad = _unusable_text(data.get("params"), nul_anywhere=is_request) if "method" in data else None
        if bad is not None:
            why = f"{bad} holds a NUL character or a lone surrogate (ill-formed Unicode)"
            if is_request:
                self.reply_error(msg_id, INVALID_PARAMS, f"invalid params for {method}: {why}")
            else:
                log.warning("dropped %s: %s", method, why)
            return
        try:
            message = self._structure(data, method)
        except Exception as exc:  # noqa: BLE001 - pygls raises its own errors; the cause is below
            cause = exc.__cause__ if isinstance(exc, JsonRpcException) and exc.__cause__ else exc
            if is_request:
                self.reply_error(msg_id, INVALID_PARAMS, f"invalid params for {method}: {_structuring_error(cause)}")
            else:
                log.warning("dropped a malformed %s: %s", method or "response", _structuring_error(cause))
            return
        try:
            self.handle_message(message)
        except Exception:  # noqa: BLE001 - a handler's synchronous failure must not end the loop
            log.exception("failed to handle %s", method or "a response")
            if is_request:
                self.reply_error(msg_id, -32603, f"internal error handling {method}")

    def handle_message(self, message: Any) -> Any:
        heap = getattr(self._server, "heap", None)
        if heap is not None:
            heap.touch()  # the server is busy: no full garbage collection now (``server.heap``)
        return super().handle_message(message)

    def _serialize_message(self, data: Any) -> Any:
        if _is_response(type(data)):
            return {"id": data.id, "jsonrpc": data.jsonrpc, "result": data.result}
        return super()._serialize_message(data)
