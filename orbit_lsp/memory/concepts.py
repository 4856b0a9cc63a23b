"""Concepts of a text: the words that let a question meet a memory.

``concepts(text) -> list[str]``: the text is normalised (Unicode NFKC, case-folded, accents
removed), split into words (letters and digits; ``docker-compose`` gives ``docker`` and
``compose``, ``don't`` gives ``don``+``t`` which are then dropped), English stop words and
one-letter words are removed, and each word is stemmed with the Snowball English stemmer
(``snowballstemmer`` from PyPI), so "deploy", "deploying" and "deployment" all give ``deploy``
and "project"/"projects" give ``project``. Order of first appearance, no duplicates.

``question_concepts(text) -> {concept: weight}``: the same concepts, each weighted by how it was
said: 1 for a word, ``IDENTIFIER_PART_WEIGHT`` when it occurs only as a part of a compound
identifier (``wsgi_app`` says ``wsgi`` and ``app`` only half each: a question about
``wsgi_app`` is not a question about apps).
"""

from __future__ import annotations

import re
import threading
import unicodedata

import snowballstemmer

# English stop words (the usual function words, plus the words of a request that say nothing
# about its subject: "how should I ...", "please tell me ...", "remember that ...").
STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before
being below between both but by can cannot could couldn did didn do does doesn doing don down
during each either else etc ever every few for from further get gets got had hadn has hasn have
haven having he her here hers herself him himself his how however i if in into is isn it its
itself just let ll me might mine more most must mustn my myself need no nor not now of off often
on once only or other ought our ours ourselves out over own per please quite rather re really
remember same shall shan she should shouldn since so some such tell than that the their theirs
them themselves then there these they this those though through thus to too under until up upon
us use used using ve very via was wasn way we were weren what whatever when where whether which
while who whom whose why will with within without won would wouldn yes yet you your yours
yourself yourselves thing things want wants like know
""".split())

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_local = threading.local()  # snowball stemmers keep state: one per thread


def _stemmer():
    st = getattr(_local, "stemmer", None)
    if st is None:
        st = _local.stemmer = snowballstemmer.stemmer("english")
    return st


def normalise(text: str) -> str:
    """NFKC, case-folded, without accents (``Déploiement`` → ``deploiement``)."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in text if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The normalised words of ``text`` that are not stop words (nor single characters)."""
    return [w for w in _WORD.findall(normalise(text)) if len(w) > 1 and w not in STOP_WORDS]


def stem(word: str) -> str:
    """The Snowball English stem of one normalised word."""
    return _stemmer().stemWord(word)


def concepts(text: str) -> list[str]:
    """Stemmed concepts of ``text`` in order of first appearance, without duplicates. Empty for
    a text of stop words only."""
    out: dict[str, None] = {}
    for w in words(text):
        s = stem(w)
        if len(s) > 1 and s not in STOP_WORDS:
            out.setdefault(s, None)
    return list(out)


IDENTIFIER_PART_WEIGHT = 0.5
_TOKEN = re.compile(r"\w+", re.UNICODE)
_PARTS = re.compile(r"_+")


def question_concepts(text: str) -> dict[str, float]:
    """Concepts of ``text`` (as ``concepts``, same order) with their weight: 1.0 when the
    concept is said as a word at least once, ``IDENTIFIER_PART_WEIGHT`` when every occurrence is
    a part of a compound identifier (``snake_case`` with two or more parts)."""
    out: dict[str, float] = {}
    for token in _TOKEN.findall(text):
        parts = [x for x in _PARTS.split(token) if x]
        weight = 1.0 if len(parts) <= 1 else IDENTIFIER_PART_WEIGHT
        for c in concepts(token):
            out[c] = max(out.get(c, 0.0), weight)
    return out
