"""What the Python resolver keeps to resolve a workspace cheaply changes no edge.

- Evaluations that do not settle (a component of mutually dependent values that still moves
  after ``_MAX_SCC_PASSES`` passes, such as salt's ``decode_list``/``decode_tuple``, whose
  results nest one level deeper each pass) are not memoised; the resolver replays them
  (``Resolver._unsettled``) instead of evaluating them again at every call site. Each file's
  edges are those a fresh resolver gives it alone.
- The invalidation index of the memo (``Resolver._sets_with``) is built at the first
  ``invalidate``: it then forgets exactly the memoised values that consulted an entity.
"""

from __future__ import annotations

from orbit_lsp.index.parsing import parse_python
from orbit_lsp.index.resolve import Resolver

# salt/utils/data.py's shape: each function returns a container whose items are what the others
# return (a tuple of a list among them), of a parameter rebound to what an unknown function returns
DECODE = '''
def decode(data, preserve_tuples=False):
    data = clean(data)
    if isinstance(data, dict):
        return decode_dict(data, preserve_tuples)
    if isinstance(data, list):
        return decode_list(data, preserve_tuples)
    if isinstance(data, tuple):
        return decode_tuple(data) if preserve_tuples else decode_list(data, preserve_tuples)
    return data


def decode_dict(data, preserve_tuples=False):
    data = clean(data)
    ret = {}
    for key, value in data.items():
        if isinstance(value, list):
            value = decode_list(value, preserve_tuples)
        elif isinstance(value, tuple):
            value = decode_tuple(value) if preserve_tuples else decode_list(value, preserve_tuples)
        elif isinstance(value, dict):
            value = decode_dict(value, preserve_tuples)
        else:
            value = decode(value, preserve_tuples)
        ret[key] = value
    return ret


def decode_list(data, preserve_tuples=False):
    data = clean(data)
    ret = []
    for item in data:
        if isinstance(item, list):
            item = decode_list(item, preserve_tuples)
        elif isinstance(item, tuple):
            item = decode_tuple(item) if preserve_tuples else decode_list(item, preserve_tuples)
        elif isinstance(item, dict):
            item = decode_dict(item, preserve_tuples)
        else:
            item = decode(item, preserve_tuples)
        ret.append(item)
    return ret


def decode_tuple(data):
    return tuple(decode_list(data, True))
'''

USER = '''
from data import decode, decode_dict, decode_list, decode_tuple
from helpers import Helper


def use{n}(x):
    for item in decode(x):
        item.strip()
    for item in decode_list(x):
        item.strip()
    for k, v in decode_dict(x).items():
        v.strip()
    decode_tuple(x)[0].strip()
    Helper().step()
'''

FILES = {
    "data.py": DECODE,
    "helpers.py": "class Helper:\n    def step(self):\n        return decode_list([])\n\n\nfrom data import decode_list\n",
    **{f"user{n}.py": USER.format(n=n) for n in range(4)},
}


def _facts() -> dict:
    out = {}
    for rel, text in FILES.items():
        facts, err = parse_python(rel, text.encode())
        assert err is None, err
        out[rel] = facts
    return out


def _resolver(facts: dict) -> Resolver:
    return Resolver(dict(facts), set(facts), value_flow=False)


def _calls(edges) -> set[tuple]:
    return {(caller, dst_file, dst_qual) for (caller, dst_file, dst_qual) in edges.calls}


def test_evaluations_that_do_not_settle_are_replayed_with_the_edges_of_a_fresh_evaluation():
    facts = _facts()
    rels = sorted(facts)
    together = _resolver(facts).resolve_fixpoint(rels, lambda r: None, rels)
    shared = _resolver(facts)
    shared.resolve_fixpoint(rels, lambda r: None, rels)
    assert shared._unsettled, "the decode functions' values do not settle: the case this test is about"
    for rel in rels:
        alone = _resolver(facts).resolve_fixpoint([rel], lambda r: None, rels)[rel]
        assert together[rel] == alone, rel
    # what the calls bind to, as the code says: the four functions, Helper and Helper.step; the
    # items' ``strip`` is a method of what the unknown ``clean`` returns: counted unbound
    assert _calls(together["user0.py"]) == {("use0", "data.py", f) for f in (
        "decode", "decode_dict", "decode_list", "decode_tuple")} | {("use0", "helpers.py", "Helper"),
                                                                     ("use0", "helpers.py", "Helper.step")}
    assert together["user0.py"].unresolved == {"use0": ["strip"] * 4}
    assert ("decode_list", "data.py", "decode_tuple") in _calls(together["data.py"])
    assert ("decode_tuple", "data.py", "decode_list") in _calls(together["data.py"])


def test_the_invalidation_index_is_built_when_first_needed_and_forgets_exactly_what_consulted():
    facts = _facts()
    rels = sorted(facts)
    r = _resolver(facts)
    r.resolve_fixpoint(rels, lambda r_: None, rels)
    assert r._sets_with is None  # nothing was invalidated: no index
    entity = ("helpers.py", "Helper")
    consulted = {k for k, hit in r.memo.items() if entity in hit[1]}
    kept = {k for k, hit in r.memo.items() if entity not in hit[1]}
    assert consulted and kept
    assert r.invalidate([entity]) == len(consulted)
    assert set(r.memo) == kept
    # from now on the index follows new memo entries: evaluated again, then forgotten again
    r.resolve_fixpoint(["user1.py"], lambda r_: None, rels)
    again = {k for k, hit in r.memo.items() if entity in hit[1]}
    assert again
    assert r.invalidate([entity]) == len(again)
    assert not any(entity in hit[1] for hit in r.memo.values())
