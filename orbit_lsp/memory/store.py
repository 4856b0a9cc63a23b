"""The memory graph (``orbit_memory`` by default, setting ``memory_graph``) in orbit's FalkorDB.

Schema::

    (:Memory {id, text, confirmed, created, source, redactions, anchor_*})-[:MENTIONS]->(:Concept {name})
    (:Memory)-[:ABOUT]->(:Project {id, root})
    (:Conversation {id})-[:HAS_TURN]->(:Turn {id, conversation_id, question, created})-[:RECALLED]->(:Memory)
    (:Sequence {name: "memory", last})     the last memory id handed out

- ``id``: a positive integer, never reused (also after ``forget``); ``created``: Unix seconds;
  ``source``: ``"user"`` (saved by the user: confirmed) or ``"agent"`` (proposed from a question:
  unconfirmed until confirmed); ``redactions``: secrets hidden from the text before it was stored.
- ``Project.id`` is the hex id of the workspace's code graph (``orbit_code_<id>``), ``root`` its
  absolute path. ``Turn.id``/``Conversation.id`` are the ids of the SQLite history
  (``orbit_lsp.agent.history``), so "which answers used memory 3" is
  ``MATCH (t:Turn)-[:RECALLED]->(:Memory {id: 3}) RETURN t.id``.
- Concepts are ``orbit_lsp.memory.concepts.concepts`` of the text.

Recall: the concepts of a question lead to confirmed memories. A memory's concept score is the
sum, over the question's concepts it mentions, of the concept's weight in the question
(``concepts.question_concepts``: 1, or ½ for a part of an identifier such as ``app`` in
``wsgi_app``) times its rarity across the confirmed memories, an IDF normalised to 1 for a
concept only one memory has::

    rarity(c) = ln(1 + N / df(c)) / ln(1 + N)     N: confirmed memories, df(c): those mentioning c

A memory is recalled only when its concept score reaches ``MIN_RECALL_SCORE`` (one distinctive
word of the question, or several common ones); its ``score`` is the concept score plus
``PROJECT_BOOST`` when it is about the active project (ranking only: the boost never lets a
memory through). Memories about another project, or about none, are recalled too, just
without the boost.

Every query is parameterised; the range indexes (``INDEXES``) exist before the first write.
Secrets never enter the graph: the text is redacted (``orbit_lsp.agent.redact``) first.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orbit_lsp.agent.redact import redact, text_problem
from orbit_lsp.graph.connection import CODE_GRAPH_PREFIX, MEMORY_GRAPH, Graph, GraphStore
from orbit_lsp.graph.errors import QueryRejected
from orbit_lsp.graph.keys import root_graph_name
from orbit_lsp.graph.schema import existing_indexes
from orbit_lsp.memory.anchors import Anchor, staleness
from orbit_lsp.memory.concepts import concepts, question_concepts

PROJECT_BOOST = 0.5   # added to a memory's score when it is about the active project
RECALL_LIMIT = 5      # most memories recalled for one question
MIN_RECALL_SCORE = 0.75  # least concept score of a recalled memory (see the module doc)
RECALL_CANDIDATES = 500  # most memories sharing a concept that are scored for one question
MAX_TEXT = 2000       # longest memory text, characters
MAX_QUESTION = 300    # question text kept on a Turn node, characters

INDEXES: tuple[tuple[str, str], ...] = (
    ("Memory", "id"), ("Concept", "name"), ("Project", "id"), ("Conversation", "id"), ("Turn", "id"),
    ("Sequence", "name"),
)


class InvalidMemory(ValueError):
    """A memory text that cannot be saved (empty, too long, no words to recall it by)."""


class UnknownMemory(LookupError):
    """No memory has that id."""


def project_id(root: Path | str) -> str:
    """The id of a workspace as a ``Project``: the hex part of the name its code graph has outside
    git (``graph.keys.root_graph_name``: one project per folder, whatever branch is checked out)."""
    return root_graph_name(root)[len(CODE_GRAPH_PREFIX):]


@dataclass
class Memory:
    """One memory as listed or recalled.

    ``projects``: [{"id", "root"}] it is about; ``anchor``: where it is anchored, or None;
    ``stale``: the anchored file or symbol changed since (``stale_reason`` says how); ``uses``:
    [{"turn", "conversation", "question", "created"}], the answers that recalled it (listings
    only); ``score`` and ``matched`` (the question's concepts it has): recall only."""

    id: int
    text: str
    confirmed: bool
    created: float
    source: str
    concepts: list[str] = field(default_factory=list)
    projects: list[dict] = field(default_factory=list)
    anchor: Anchor | None = None
    redactions: int = 0
    stale: bool = False
    stale_reason: str | None = None
    uses: list[dict] = field(default_factory=list)
    score: float | None = None
    matched: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = {"id": self.id, "text": self.text, "confirmed": self.confirmed, "created": self.created,
               "source": self.source, "concepts": self.concepts, "projects": self.projects,
               "anchor": self.anchor.to_dict() if self.anchor else None, "redactions": self.redactions,
               "stale": self.stale, "staleReason": self.stale_reason, "uses": self.uses}
        if self.score is not None:
            out["score"] = self.score
            out["matched"] = self.matched
        return out

    def label(self) -> str:
        """``memory #3 “text”`` plus its state, for answers and listings."""
        tags = []
        if not self.confirmed:
            tags.append("unconfirmed")
        if self.stale:
            tags.append(f"possibly stale: {self.stale_reason}")
        return f"memory #{self.id} “{self.text}”" + (f" ({'; '.join(tags)})" if tags else "")


@dataclass
class Recall:
    """Memories recalled for a question (best first) and the Cypher that found them."""

    memories: list[Memory]
    concepts: list[str]
    cypher: list[dict]


# The pattern comprehensions' variables have names no query around _FIELDS uses: FalkorDB (4.16)
# mixes up comprehensions of one RETURN that share a variable name (RECALL's "here" test on
# (p:Project {id: $project}) left every memory's project list empty).
_FIELDS = ("m.id, m.text, m.confirmed, m.created, m.source, properties(m), "
           "[(m)-[:MENTIONS]->(m_concept:Concept) | m_concept.name], "
           "[(m)-[:ABOUT]->(m_project:Project) | [m_project.id, m_project.root]]")

CREATE = (
    "MERGE (s:Sequence {name: 'memory'}) ON CREATE SET s.last = 0 "
    "SET s.last = s.last + 1 "
    "WITH s.last AS id "
    "CREATE (m:Memory {id: id, text: $text, confirmed: $confirmed, created: $created, source: $source, "
    "redactions: $redactions}) "
    "SET m += $anchor "
    "WITH m "
    "FOREACH (c IN $concepts | MERGE (k:Concept {name: c}) MERGE (m)-[:MENTIONS]->(k)) "
    "FOREACH (x IN CASE WHEN $project IS NULL THEN [] ELSE [1] END | "
    "MERGE (p:Project {id: $project}) ON CREATE SET p.root = $root MERGE (m)-[:ABOUT]->(p)) "
    "RETURN " + _FIELDS)

# how many confirmed memories there are, and how many mention each concept of the question
RARITY = (
    "MATCH (all:Memory {confirmed: true}) WITH count(all) AS n\n"
    "UNWIND $concepts AS c\n"
    "OPTIONAL MATCH (:Concept {name: c})<-[:MENTIONS]-(m:Memory {confirmed: true})\n"
    "RETURN n, c, count(m)")

# the confirmed memories sharing a concept with the question (scored in Python with RARITY)
RECALL = (
    "UNWIND $concepts AS c\n"
    "MATCH (k:Concept {name: c})<-[:MENTIONS]-(m:Memory {confirmed: true})\n"
    "WITH m, collect(k.name) AS matched\n"
    "RETURN size([(m)-[:ABOUT]->(here_project:Project {id: $project}) | here_project]) > 0 AS here, "
    "matched, " + _FIELDS
    + "\nORDER BY size(matched) DESC, m.created DESC, m.id DESC LIMIT $candidates")

USES = ("MATCH (t:Turn)-[:RECALLED]->(m:Memory) WHERE m.id IN $ids "
        "RETURN m.id, t.id, t.conversation_id, t.question, t.created ORDER BY t.id")

LINK = ("MERGE (c:Conversation {id: $conversation}) "
        "MERGE (t:Turn {id: $turn}) ON CREATE SET t.conversation_id = $conversation, t.question = $question, "
        "t.created = $created "
        "MERGE (c)-[:HAS_TURN]->(t) "
        "WITH t UNWIND $ids AS mid MATCH (m:Memory {id: mid}) MERGE (t)-[:RECALLED]->(m) RETURN m.id")


class MemoryStore:
    """The memory graph. ``store``: the ``GraphStore`` (the same FalkorDB as the code graphs);
    ``graph_name``: ``orbit_memory`` unless set; ``history``: an
    ``orbit_lsp.agent.history.History`` that receives an audit record per save, confirmation and
    forget (optional). Thread-safe. Every method raises ``FalkorDBOffline`` when the store is
    unreachable."""

    def __init__(self, store: GraphStore, graph_name: str = MEMORY_GRAPH, history=None):
        """Raises ``ValueError`` when ``graph_name`` is a workspace's code graph name
        (``orbit_code_…``): memories must never be written into a code graph."""
        if graph_name.startswith(CODE_GRAPH_PREFIX):
            raise ValueError(f"the memory graph cannot be {graph_name!r}: {CODE_GRAPH_PREFIX}* names are "
                             "workspaces' code graphs")
        self.store = store
        self.graph_name = graph_name
        self.history = history
        self._ready = False
        self._lock = threading.Lock()

    @property
    def graph(self) -> Graph:
        return self.store.graph(self.graph_name)

    def ensure_schema(self) -> list[str]:
        """Create the missing range indexes (once per instance). Returns the statements run."""
        with self._lock:
            if self._ready:
                return []
            g = self.graph
            have = existing_indexes(g)
            ran = []
            for label, prop in INDEXES:
                if (label, prop) not in have:
                    cypher = f"CREATE INDEX FOR (n:{label}) ON (n.{prop})"
                    try:
                        g.query(cypher)
                    except QueryRejected as exc:  # another orbit process created it meanwhile
                        if "already indexed" not in str(exc):
                            raise
                    ran.append(cypher)
            self._ready = True
            return ran

    def _audit(self, kind: str, **details: Any) -> None:
        if self.history is not None:
            self.history.audit(kind, **details)

    @staticmethod
    def _memory(row: list, offset: int = 0) -> Memory:
        mid, text, confirmed, created, source, props, names, projects = row[offset:offset + 8]
        return Memory(id=mid, text=text, confirmed=bool(confirmed), created=created, source=source or "user",
                      concepts=sorted(names or []), projects=[{"id": p, "root": r} for p, r in (projects or [])],
                      anchor=Anchor.from_props(dict(props or {})), redactions=(props or {}).get("redactions", 0))

    def _mark_stale(self, memories: list[Memory]) -> None:
        anchored = {m.id: m.anchor for m in memories if m.anchor is not None}
        if not anchored:
            return
        reasons = staleness(self.store, anchored)
        for m in memories:
            if m.id in reasons:
                m.stale, m.stale_reason = True, reasons[m.id]

    # -- writing ---------------------------------------------------------------------------------
    def remember(self, text: str, *, confirmed: bool = True, source: str = "user",
                 project: Path | str | None = None, anchor: Anchor | None = None,
                 conversation_id: int | None = None) -> Memory:
        """Save a memory: ``text`` is redacted, its concepts extracted, and it is linked to the
        ``project`` (a workspace root) when given, and anchored when ``anchor`` is given.
        Returns the new memory. Raises ``InvalidMemory`` (empty, longer than ``MAX_TEXT``, no
        concepts, a NUL character or an unpaired surrogate)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidMemory("the memory text is empty")
        problem = text_problem(text)
        if problem:
            raise InvalidMemory(f"the memory text {problem}")
        text = " ".join(text.split())
        if len(text) > MAX_TEXT:
            raise InvalidMemory(f"the memory text is longer than {MAX_TEXT} characters")
        text, hidden = redact(text)
        names = concepts(text.replace("[REDACTED]", " "))
        if not names:
            raise InvalidMemory("the memory text has no words to recall it by (only stop words)")
        self.ensure_schema()
        root = os.path.realpath(os.fspath(project)) if project is not None else None
        rows = self.graph.query(CREATE, {
            "text": text, "confirmed": bool(confirmed), "created": time.time(), "source": source,
            "redactions": hidden, "anchor": anchor.to_props() if anchor else {}, "concepts": names,
            "project": project_id(root) if root else None, "root": root}).rows
        mem = self._memory(rows[0])
        self._audit("memory_saved", conversation_id=conversation_id, id=mem.id, text=mem.text,
                    confirmed=mem.confirmed, source=source, project=root,
                    anchor=anchor.to_dict() if anchor else None, redactions=hidden)
        return mem

    def confirm(self, memory_id: int) -> Memory:
        """Confirm a memory (it becomes recallable). Confirming a confirmed one changes nothing.
        Raises ``UnknownMemory``."""
        self.ensure_schema()
        rows = self.graph.query("MATCH (m:Memory {id: $id}) SET m.confirmed = true RETURN " + _FIELDS,
                                {"id": memory_id}).rows
        if not rows:
            raise UnknownMemory(f"no memory #{memory_id}")
        mem = self._memory(rows[0])
        self._audit("memory_confirmed", id=memory_id, text=mem.text)
        return mem

    def forget(self, memory_id: int) -> Memory:
        """Delete a memory with its MENTIONS, ABOUT and RECALLED edges (and concepts no other
        memory mentions). The audit log keeps a record (``memory_forgotten``: id, text, the turns
        that had used it). Returns the memory as it was. Raises ``UnknownMemory``."""
        mem = self.get(memory_id)
        g = self.graph
        g.query("MATCH (m:Memory {id: $id}) DETACH DELETE m", {"id": memory_id})
        g.query("UNWIND $names AS n MATCH (k:Concept {name: n}) WHERE NOT (k)<-[:MENTIONS]-() DELETE k",
                {"names": mem.concepts})
        self._audit("memory_forgotten", id=memory_id, text=mem.text, confirmed=mem.confirmed,
                    turns=[u["turn"] for u in mem.uses])
        return mem

    def link_turn(self, conversation_id: int, turn_id: int, memory_ids: list[int], question: str = "") -> list[int]:
        """Record that history turn ``turn_id`` of ``conversation_id`` recalled ``memory_ids``:
        ``(:Conversation)-[:HAS_TURN]->(:Turn)-[:RECALLED]->(:Memory)``. Returns the ids linked
        (memories forgotten meanwhile are skipped)."""
        if not memory_ids:
            return []
        self.ensure_schema()
        q = redact(" ".join(question.split()))[0][:MAX_QUESTION]
        rows = self.graph.query(LINK, {"conversation": conversation_id, "turn": turn_id, "question": q,
                                       "created": time.time(), "ids": list(memory_ids)}).rows
        return [r[0] for r in rows]

    # -- reading ---------------------------------------------------------------------------------
    def get(self, memory_id: int) -> Memory:
        """One memory with its uses and stale flag. Raises ``UnknownMemory``."""
        self.ensure_schema()
        rows = self.graph.query("MATCH (m:Memory {id: $id}) RETURN " + _FIELDS, {"id": memory_id}).rows
        if not rows:
            raise UnknownMemory(f"no memory #{memory_id}")
        mem = self._memory(rows[0])
        self._add_uses([mem])
        self._mark_stale([mem])
        return mem

    def list(self, project: Path | str | None = None, confirmed: bool | None = None) -> list[Memory]:
        """Every memory, newest first, with its uses and stale flag; ``project``: only those
        about that workspace; ``confirmed``: only confirmed (True) or unconfirmed (False) ones."""
        self.ensure_schema()
        where, params = [], {}
        if project is not None:
            where.append("(m)-[:ABOUT]->(:Project {id: $project})")
            params["project"] = project_id(project)
        if confirmed is not None:
            where.append("m.confirmed = $confirmed")
            params["confirmed"] = confirmed
        cypher = ("MATCH (m:Memory) " + ("WHERE " + " AND ".join(where) + " " if where else "")
                  + "RETURN " + _FIELDS + " ORDER BY m.id DESC")
        mems = [self._memory(r) for r in self.graph.query(cypher, params).rows]
        self._add_uses(mems)
        self._mark_stale(mems)
        return mems

    def _add_uses(self, mems: list[Memory]) -> None:
        if not mems:
            return
        by_id = {m.id: m for m in mems}
        for mid, turn, conv, question, created in self.graph.query(USES, {"ids": list(by_id)}).rows:
            by_id[mid].uses.append({"turn": turn, "conversation": conv, "question": question, "created": created})

    def uses(self, memory_id: int) -> list[dict]:
        """The answers (history turns) that recalled a memory: [{"turn", "conversation",
        "question", "created"}], oldest first."""
        return self.get(memory_id).uses

    def recall(self, text: str, project: Path | str | None = None, limit: int = RECALL_LIMIT) -> Recall:
        """Confirmed memories about ``text`` (a question), best first, at most ``limit``: those
        whose concept score (weight in the question × rarity across memories, summed over the
        concepts shared; see the module doc) is at least ``MIN_RECALL_SCORE``. ``score``: the
        concept score plus ``PROJECT_BOOST`` when about ``project`` (the active workspace
        root), rounded to 3 decimals. Anchored ones carry their stale flag."""
        weights = question_concepts(text)
        names = list(weights)
        if not names:
            return Recall([], [], [])
        self.ensure_schema()
        g = self.graph
        stats_params = {"concepts": names}
        stats = g.ro_query(RARITY, stats_params).rows
        n = int(stats[0][0]) if stats else 0
        df = {c: int(k) for _, c, k in stats}
        rarity = {c: math.log(1 + n / k) / math.log(1 + n) for c, k in df.items() if k and n}
        params = {"concepts": names, "project": project_id(project) if project is not None else "",
                  "candidates": RECALL_CANDIDATES}
        mems = []
        for row in g.ro_query(RECALL, params).rows:
            matched = sorted(row[1])
            concept_score = sum(weights[c] * rarity.get(c, 0.0) for c in matched)
            if concept_score < MIN_RECALL_SCORE - 1e-9:
                continue
            m = self._memory(row, 2)
            m.score = round(concept_score + (PROJECT_BOOST if row[0] else 0.0), 3)
            m.matched = matched
            mems.append(m)
        mems.sort(key=lambda m: (-m.score, -(m.created or 0), -m.id))
        mems = mems[:max(0, int(limit))]
        self._mark_stale(mems)
        return Recall(mems, names, [{"query": RARITY, "params": stats_params}, {"query": RECALL, "params": params}])
