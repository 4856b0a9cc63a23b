"""``orbit_lsp.lru.LRU``: bounded by entries and, when asked, by the weights of its values."""

from orbit_lsp.lru import LRU


def test_the_least_recently_used_goes_first_past_max_entries():
    c = LRU(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.lookup("a") == (True, 1)  # "a" is now the most recently used
    c.put("c", 3)
    assert c.lookup("b") == (False, None) and c.lookup("a") == (True, 1) and c.lookup("c") == (True, 3)
    assert (c.hits, c.misses) == (3, 1)


def test_weights_bound_the_sum_and_the_last_value_put_always_stays():
    c = LRU(100, max_weight=10)
    c.put("a", "A", 4)
    c.put("b", "B", 4)
    assert c.weight == 8
    c.put("c", "C", 4)  # 12 > 10: "a", the least recently used, goes
    assert c.lookup("a") == (False, None) and c.weight == 8
    c.put("b", "B2", 6)  # replacing a value replaces its weight: 4 + 6 = 10
    assert c.weight == 10 and c.lookup("c") == (True, "C") and c.lookup("b") == (True, "B2")
    c.put("big", "X", 50)  # heavier than the bound alone: it stays, every other goes
    assert c.lookup("big") == (True, "X") and c.weight == 50
    assert c.lookup("b") == (False, None) and c.lookup("c") == (False, None)
    c.clear()
    assert c.weight == 0 and c.lookup("big") == (False, None)


def test_entries_without_weight_count_only_towards_max_entries():
    c = LRU(3, max_weight=1)
    for k in "abc":
        c.put(k, k)
    assert all(c.lookup(k)[0] for k in "abc") and c.weight == 0
