"""``orbit_lsp.lru.LRU``: bounded by entries and, with ``max_weight``, by the sum of weights
(the tests lens keeps lists of tests within a number of tests, not of lists)."""

from orbit_lsp.lru import LRU


def test_entries_bound_drops_the_least_recently_used():
    c = LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.lookup("a") == (True, 1)  # "a" used: "b" is now the oldest
    c.put("c", 3)
    assert [c.lookup(k)[0] for k in "abc"] == [True, False, True]


def test_weight_bound_drops_the_oldest_until_it_fits():
    c = LRU(100, max_weight=10)
    c.put("a", [0] * 4, 4)
    c.put("b", [0] * 4, 4)
    assert c.weight == 8
    c.put("c", [0] * 5, 5)  # 13 > 10: "a" goes
    assert [c.lookup(k)[0] for k in "abc"] == [False, True, True] and c.weight == 9
    c.put("b", [0], 1)  # replaced: its old weight is given back
    assert c.weight == 6
    c.put("huge", [0] * 11, 11)  # heavier than the bound alone: not kept, nothing dropped
    assert c.lookup("huge") == (False, None) and c.weight == 6
    c.clear()
    assert c.weight == 0 and c.lookup("c") == (False, None)
