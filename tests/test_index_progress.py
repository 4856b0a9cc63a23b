"""The whole index's share done and its time left, from the indexer's phase reports
(``orbit_lsp.index.progress``), and how the command line's bar says them. A fake clock: the
estimate is arithmetic on the reports, checked against what the reports imply."""

from __future__ import annotations

import io

import pytest

from orbit_lsp.cli import ProgressBar
from orbit_lsp.index.progress import PHASES, WEIGHTS, PhaseClock, eta_text, words


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_weights_cover_the_index_once():
    assert set(WEIGHTS) == set(PHASES) and sum(WEIGHTS.values()) == pytest.approx(1.0)


def test_fraction_follows_the_phases_and_never_goes_back():
    t = FakeClock()
    c = PhaseClock(t)
    c.update(0, 100, "read")
    assert c.fraction == 0
    c.update(100, 100, "read")
    assert c.fraction == pytest.approx(WEIGHTS["read"])
    c.update(50, 100, "parse")
    assert c.fraction == pytest.approx(WEIGHTS["read"] + WEIGHTS["parse"] / 2)
    c.update(0, 100, "resolve")  # a new phase at 0: the share of the finished ones stays
    assert c.fraction == pytest.approx(WEIGHTS["read"] + WEIGHTS["parse"])
    c.update(10, 10, "write")
    assert c.fraction == pytest.approx(1.0)


def test_no_estimate_before_enough_is_known():
    t = FakeClock()
    c = PhaseClock(t)
    c.update(0, 1000, "read")
    t.now += 1.0
    c.update(500, 1000, "read")
    assert c.eta() is None  # one second in: too early
    assert eta_text(None) == ""


def test_time_left_in_a_phase_at_its_own_rate_then_the_rest_by_weight():
    t = FakeClock()
    c = PhaseClock(t)
    c.update(1000, 1000, "read")   # reading took no time
    c.update(0, 1000, "parse")
    t.now += 10.0
    c.update(250, 1000, "parse")   # a quarter of parsing in 10 s: 30 s more for parsing
    done = WEIGHTS["read"] + WEIGHTS["parse"] / 4
    later = (1 - WEIGHTS["read"] - WEIGHTS["parse"]) * 10.0 / done  # resolve + write at the pace so far
    assert c.eta() == pytest.approx(30.0 + later)
    assert eta_text(c.eta()) == "about 1 min left"  # 60.8 s


def test_parse_time_left_follows_the_bytes_parsed_not_the_files():
    """This process parses the small files while workers take the large ones: half the files
    can be a tenth of the bytes. The reported ``work`` (bytes) sets the pace, not the count."""
    t = FakeClock()
    c = PhaseClock(t)
    c.update(1000, 1000, "read")
    c.update(0, 1000, "parse", work=0.0)
    t.now += 10.0
    c.update(500, 1000, "parse", work=0.1)  # half the files, a tenth of the bytes, in 10 s
    done = WEIGHTS["read"] + WEIGHTS["parse"] * 0.1
    assert c.fraction == pytest.approx(done)
    later = (1 - WEIGHTS["read"] - WEIGHTS["parse"]) * 10.0 / done
    assert c.eta() == pytest.approx(90.0 + later)  # 90 s more parsing, not the 10 s the count says
    c.update(1000, 1000, "parse")  # the phase's end, by its count
    assert c.phase_fraction == 1.0
    c.update(0, 1000, "resolve")  # the next phase's share is its count's again
    t.now += 1.0
    c.update(500, 1000, "resolve")
    assert c.phase_fraction == 0.5


def test_eta_words():
    assert eta_text(0.2) == "about 1 s left"
    assert eta_text(42) == "about 42 s left"
    assert eta_text(150) == "about 2 min left" or eta_text(150) == "about 3 min left"
    assert eta_text(3 * 3600 + 5 * 60) == "about 3 h 05 min left"


def test_the_bar_says_the_time_left_once_known():
    t = FakeClock()
    plain = io.StringIO()
    p = ProgressBar("indexing x", plain, clock=t)
    p(2000, 2000, "", "read")
    p(0, 2000, "", "parse")
    t.now += 10.0
    p(500, 2000, "a.py", "parse")   # 25 %: a quarter line with the time left
    t.now += 30.0
    p(2000, 2000, "", "parse")
    lines = plain.getvalue().splitlines()
    assert lines[0] == "indexing x: reading 2000 files"
    assert lines[2] == "indexing x: parsing 2000 files"  # the phase started before anything was known
    quarter = lines[3]
    assert quarter == "indexing x: parsing 500/2000 (25%, about 1 min left)"  # as in the test above
    assert lines[-1] == "indexing x: parsing 2000/2000 (100%)"  # done: no time left to say

    class Tty(io.StringIO):
        def isatty(self):
            return True

    s = Tty()
    t2 = FakeClock()
    p = ProgressBar("indexing x", s, clock=t2)
    p(0, 100, "", "resolve")
    t2.now += 5.0
    p(50, 100, "m.py", "resolve")
    assert "50/100 · about " in s.getvalue().split("\r")[-1]


def test_checking_a_reopened_folder_guesses_no_time_left_and_what_follows_has_its_own_pace():
    t = FakeClock()
    c = PhaseClock(t)
    c.update(0, 20000, "check")
    t.now += 60.0
    c.update(10000, 20000, "check")  # a minute in, half the files compared: no guess
    assert c.eta() is None and c.fraction == 0
    assert words("check") == ("checking", "files")
    c.update(20000, 20000, "check")
    c.update(0, 100, "parse")  # the files found changed
    assert c.fraction == pytest.approx(WEIGHTS["read"])
    t.now += 4.0
    c.update(50, 100, "parse")
    # from the parse's own pace (4 s for half): not from the minute the check took
    done = WEIGHTS["read"] + WEIGHTS["parse"] / 2
    later = (1 - WEIGHTS["read"] - WEIGHTS["parse"]) * 4.0 / done
    assert c.eta() == pytest.approx(4.0 + later)
