"""The JSON the server writes (``protocol.encode_message``): orjson, falling back to the
standard encoder for what orjson refuses, decodes to the same JSON value as pygls's own
``json.dumps`` of the same message, for any JSON data, lsprotocol objects included."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from lsprotocol.converters import get_converter

from orbit_lsp.server.protocol import encode_message

_CONVERTER = get_converter()


def _default(obj):
    """What pygls's ``_serialize_message`` does with an attrs object."""
    return _CONVERTER.unstructure(obj)


_positions = st.builds(types.Position, line=st.integers(0, 2**31 - 1), character=st.integers(0, 2**31 - 1))
_lenses = st.builds(lambda a, b, t: types.CodeLens(range=types.Range(a, b),
                                                   command=types.Command(title=t, command="orbit.showImpact")),
                    _positions, _positions, st.text())
_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text())  # text: lone surrogates too
_keys = st.text() | st.integers(-(2**40), 2**40)
_values = st.recursive(_scalars | _positions | _lenses,
                       lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_keys, inner, max_size=5),
                       max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_encoded_messages_decode_to_what_the_standard_encoder_writes(value):
    message = {"jsonrpc": "2.0", "id": 7, "result": value}
    body = encode_message(message, _default)
    assert json.loads(body.decode("utf-8", "surrogatepass")) == json.loads(json.dumps(message, default=_default))


def test_the_usual_message_is_compact_utf8_and_the_rest_falls_back():
    lens = types.CodeLens(range=types.Range(types.Position(1, 2), types.Position(1, 5)),
                          command=types.Command(title="3 dependents · é", command="orbit.showImpact"))
    body = encode_message({"id": 1, "result": [lens], "n": {2: "模块"}}, _default)
    assert body == ('{"id":1,"result":[{"range":{"start":{"line":1,"character":2},"end":{"line":1,"character":5}},'
                    '"command":{"title":"3 dependents · é","command":"orbit.showImpact"}}],"n":{"2":"模块"}}'
                    ).encode("utf-8")
    # a lone surrogate (no UTF-8 spelling) and an integer past 64 bits: the standard encoder
    assert encode_message({"a": "\ud800", "b": 2**70}, _default) == b'{"a": "\\ud800", "b": 1180591620717411303424}'
