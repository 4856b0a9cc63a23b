"""The incremental path of the indexer: re-index one file (``reindex_file``), remove files
(``remove_file``), and bring the graph from one state to the next (``_update``), writing only
what changed in one MULTI/EXEC. See ``indexer``'s module docstring for how an incremental
graph stays equal to a full rebuild.

``Incremental`` is a part of ``indexer.WorkspaceIndexer`` (a mixin: it uses the indexer's
``state``, ``graph``, ``_resolver``, ``_full_build``, ``_new_state`` and row builders).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from orbit_lsp.graph.schema import ensure_indexes
from orbit_lsp.graph.writer import GraphWriter
from orbit_lsp.index.languages import changed_entities
from orbit_lsp.index.parsing import content_hash, gc_paused
from orbit_lsp.index.report import GENERATIONS, IndexReport, tally_change, unbound_tally
from orbit_lsp.index.py_edges import full_qual, package_info
from orbit_lsp.index.py_values import consulters_of, note_consulter
from orbit_lsp.index.state import FileState


def _import_edges(st) -> tuple:
    """A file's IMPORTS edges as written (targets with lines, which are type-only), for change
    detection."""
    e = st.edges if st is not None else None
    return (e.imports, e.type_only) if e is not None else ({}, set())




class Incremental:
    """Re-indexing files of a ``WorkspaceIndexer`` one at a time."""

    def _write_edges(self, w: GraphWriter, rels: list[str]) -> None:
        """Outgoing edges of ``rels``, endpoints by property (incremental updates)."""
        imports, pkgs, calls, inherits = [], [], [], []
        rp = self.root_package
        for rel in rels:
            e = self.state[rel].edges
            if e is None:
                continue
            for dst, line in sorted(e.imports.items()):
                if dst in self.state:
                    imports.append([rel, dst, line, dst in e.type_only])
            for name, line in sorted(e.packages.items()):
                n, stdlib, dist = package_info(name)
                pkgs.append([rel, n, stdlib, dist, line])
            for (src, dst_file, dst), c in sorted(e.calls.items()):
                if dst_file not in self.state:
                    continue
                calls.append([rel, full_qual(rel, src, rp), dst_file, full_qual(dst_file, dst, rp),
                              c.lines[0], c.lines, c.cols, c.end_cols, c.resolved])
            for src, dst_file, dst in sorted(e.inherits):
                inherits.append([rel, full_qual(rel, src, rp), dst_file, full_qual(dst_file, dst, rp)])
        w.create_imports(imports)
        w.create_package_uses(pkgs)
        w.create_calls(calls)
        w.create_inherits(inherits)

    # -- incremental ---------------------------------------------------------------------------
    def _update(self, old_state: dict[str, FileState], changed: set[str], removed: set[str],
                rep: IndexReport) -> None:
        """Bring the graph from ``old_state`` to ``self.state``; ``changed`` are files whose
        state object is new (content changed or added).

        Symbols of changed files are updated in place: only symbols that disappeared are
        deleted (with the edges into them) and new ones created, so CALLS/INHERITS edges from
        other files into surviving symbols stay. Files are re-resolved when the module table
        changed (all of them) or when they consulted a part of a changed file's interface that
        changed (``py_interface.changed_entities``); only those whose edges differ are rewritten.

        The resolver of the previous build or update is kept while the module table stays the
        same: the changed files' facts are swapped in and only the memoised values that
        consulted a file whose interface changed are forgotten, so re-resolving the dependents
        re-evaluates what the edit can affect, not everything they reach."""
        if self.root_package != self._written_root_package:
            # the root became (or stopped being) a package: every qualified name changes
            self._full_build(rep)
            return
        t = time.perf_counter()
        added = {r for r in changed if r not in old_state}
        iface_changed: set[tuple] = set()  # entities (see py_interface.interface_units) that changed
        moved: set[tuple] = set()  # entities whose scopes only moved
        for rel in changed - added:
            ob, nb = old_state[rel].facts_blob, self.state[rel].facts_blob
            if ob is nb or ob == nb:
                continue
            old, new = old_state[rel].facts, self.state[rel].facts
            if old is None or new is None or old.interface() != new.interface():
                c, m = changed_entities(rel, old, new)
                iface_changed |= c
                moved |= m
        # what changed of the module table, from the changed files alone (a workspace of 20,000
        # files pays for none of the others): files added or gone, ``sys.path`` additions
        gone = {r for r in removed if r in old_state and r not in self.state}
        files_moved = bool(added or gone) or len(old_state) != len(self.state)
        sys_moved = any((old_state[r].sys_path if r in old_state else ()) != (self.state[r].sys_path if r in self.state
                                                                              else ()) for r in changed | gone)
        table = self._module_table(None if files_moved or sys_moved else self._live)
        # the directories ``sys.path`` additions or pytest's ``pythonpath`` put on the path
        # changed: any absolute import may now resolve elsewhere (``py_modules``)
        roots_moved = sys_moved or table[4] != self._written_pythonpath
        if self._live is not None and self._live[0] == table:
            resolver = self._live[1]
            for rel in changed:
                resolver.set_facts(rel, self.state[rel].facts)
            resolver.invalidate(iface_changed | moved)
            iface_changed |= resolver.python.implied(iface_changed)  # the subclass relation
        else:
            resolver = self._resolver()
            # the value flows of the graph as it stands (see resolve.resolve_fixpoint)
            resolver.seed((r, st) for r, st in old_state.items() if r in self.state)
            for rel in changed:  # the seed holds their previous edges
                resolver.set_facts(rel, self.state[rel].facts)
            resolver.invalidate(iface_changed | moved)
            iface_changed |= resolver.python.implied(iface_changed)  # the subclass relation
        if files_moved or roots_moved:
            resolver.python.recompute_params()
        self._live = (table, resolver)
        if files_moved or roots_moved:
            candidates = set(self.state)
        else:
            candidates = set(changed)
            if iface_changed:  # the files that consulted a changed entity, through the index
                ic = frozenset(iface_changed)
                index = self._consulters()
                near = consulters_of(index, ic)
                candidates.update(rel for rel in near if (st := self.state.get(rel)) is not None
                                  and (e := st.edges) is not None and not e.deps.isdisjoint(ic))
        rebind: set[str] = set()
        redeps: set[str] = set()  # same edges, other files consulted: only the cache changes
        with_facts = self._with_facts(table, changed)
        resolved = resolver.resolve_many(
            [r for r in candidates if self.state[r].facts_blob is not None],
            lambda r: old_state[r].edges if r in old_state else None, with_facts, removed)
        candidates |= set(resolved)  # reached through value flows
        pval_files = {k[0] for k in resolver.python.pval_changed} | changed
        for rel in sorted(candidates):
            st = self.state[rel]
            new_edges = resolved.get(rel) if st.facts_blob is not None else None
            old_edges = old_state[rel].edges if rel in old_state else None
            if rel in changed or old_edges is None or new_edges is None or old_edges.key() != new_edges.key():
                rebind.add(rel)
            elif new_edges.deps != old_edges.deps or new_edges.flows != old_edges.flows:
                redeps.add(rel)
            else:
                continue
            if st is old_state.get(rel):  # a new object: old_state keeps the old edges
                st = self.state[rel] = dataclasses.replace(st, edges=new_edges)
            st.edges = new_edges
        self._note_edges(rebind | redeps)
        for rel in sorted(pval_files & set(self.state)):
            if self.state[rel] is old_state.get(rel):
                self.state[rel] = dataclasses.replace(self.state[rel])
        self._store_param_values(resolver, pval_files)
        redeps |= pval_files & set(self.state)  # the cache keeps parameter values per file
        rep.timings["resolve"] = time.perf_counter() - t
        t = time.perf_counter()
        token = self._begin_write()
        w = GraphWriter(self.graph)
        ensure_indexes(self.graph)
        # one MULTI/EXEC: readers in other processes see the graph before or after the update
        with w.transaction():
            if removed:
                w.delete_files(sorted(removed))
            # symbols of changed or re-bound files: delete vanished, create new, update those whose
            # properties differ (lines, unresolved calls)
            gone_rows, new_rows, keep_rows = [], [], []
            # the per-name counts of unbound calls (``UnboundName``) move by what the symbols of
            # the files written have now less what they had (a row ends with its unresolved
            # names and sites)
            tally_before: dict[str, list[int]] = {}
            tally_after: dict[str, list[int]] = {}
            for rel in sorted(removed):
                unbound_tally((row[-2:] for row in self._symbol_rows(rel, old_state[rel])), tally_before)
            added_rows = [row for r in sorted(added) for row in self._symbol_rows(r)]
            unbound_tally((row[-2:] for row in added_rows), tally_after)
            for rel in sorted((changed | rebind) - added):
                before = self._symbol_rows(rel, old_state[rel])
                old_rows = {row[1]: row for row in before}
                rows = self._symbol_rows(rel)
                unbound_tally((row[-2:] for row in before), tally_before)
                unbound_tally((row[-2:] for row in rows), tally_after)
                new_quals = {row[1] for row in rows}
                gone_rows.extend([rel, q] for q in sorted(old_rows.keys() - new_quals))
                for row in rows:
                    old_row = old_rows.get(row[1])
                    if old_row is None:
                        new_rows.append(row)
                    elif old_row != row:
                        keep_rows.append(row)
            w.delete_symbol_rows(gone_rows)
            w.delete_outgoing(sorted(r for r in rebind if r not in added))
            w.create_files([self._file_row(r) for r in sorted(added)])
            w.update_files([row for row in (self._file_row(r) for r in sorted((rebind | changed) - added))
                            if row != self._file_row(row[0], state=old_state[row[0]])])
            w.create_symbols(new_rows + added_rows)
            w.update_symbols(keep_rows)
            w.add_unbound_names(tally_change(tally_after, tally_before))
            self._write_edges(w, sorted(rebind))
            # packages that may have lost their last user
            dropped = {n for r in rebind | removed if r in old_state and old_state[r].edges is not None
                       for n in old_state[r].edges.packages}
            dropped -= {n for r in rebind if self.state[r].edges is not None for n in self.state[r].edges.packages}
            if dropped:
                w.delete_unused_packages(sorted(package_info(n)[0] for n in dropped))
        rep.written_files = len(rebind | changed)
        if self._written_pythonpath != table[4]:
            self._written_pythonpath, self._meta_dirty = table[4], True
        if removed or any(_import_edges(old_state[r] if r in old_state else None) != _import_edges(self.state[r])
                          for r in rebind | changed):
            self.imports_generation = next(GENERATIONS)
        rep.removed_files = len(removed)
        self._end_write(token)
        rep.timings["write"] = time.perf_counter() - t
        self._touched |= rebind | changed | removed | redeps

    def _consulters(self) -> dict[str, set[str]]:
        """File -> the files whose edges consulted an entity of it (``FileEdges.deps``; an
        entity's file is ``py_values.entity_file``): which files an interface change may affect, without
        a pass over every file. A superset: entries are added as edges change (``_note_edges``),
        never taken away, and the exact test is the caller's. Made again when ``self.state`` is
        another dict than the one it was made for (a walk, a full build)."""
        if self._consult is None or self._consult[0] is not self.state:
            index: dict[str, set[str]] = {}
            for rel, st in self.state.items():
                if st.edges is not None:
                    note_consulter(index, rel, st.edges.deps)
            self._consult = (self.state, index)
        return self._consult[1]

    def _note_edges(self, rels) -> None:
        """Add the entities the current edges of ``rels`` consulted to ``_consulters``."""
        if self._consult is None or self._consult[0] is not self.state:
            return  # made again from the state when next needed
        index = self._consult[1]
        for rel in rels:
            st = self.state.get(rel)
            if st is not None and st.edges is not None:
                note_consulter(index, rel, st.edges.deps)

    def prepare_edits(self) -> float:
        """Build now the resolver the next re-index would otherwise build first: seeded with the
        value flows, parameter values and subclass relation of the graph as it stands (see
        ``_update``), so the first edit after opening a folder costs what later ones do. For
        long-lived processes (the language server calls it after its first index); a one-shot
        command has no use for it. Returns the seconds it took (0.0 when already prepared)."""
        with self.lock, gc_paused():
            if self._live is not None:
                return 0.0
            t = time.perf_counter()
            table = self._module_table()
            resolver = self._resolver()
            resolver.seed(self.state.items())
            resolver.prepare(self._with_facts(table, set()))  # the list edits pass, kept with the table
            self._consulters()
            self._live = (table, resolver)
            return time.perf_counter() - t

    def reindex_file(self, path: Path | str) -> IndexReport:
        """Re-index one file after it changed on disk (saved, created, or deleted).

        A deleted or no-longer-indexable file leaves the graph. A content hash equal to the
        indexed one does nothing (so one save seen twice is indexed once). Returns an
        ``IndexReport`` whose ``parse_errors`` holds the syntax error, if any.
        """
        with self._writing():
            try:
                if not self.in_sync():
                    return self._resync("before re-indexing a file")
                return self._reindex_file(path)
            finally:
                self._persist()

    def _reindex_file(self, path: Path | str) -> IndexReport:
        with self.lock, gc_paused():
            t0 = time.perf_counter()
            rep = IndexReport(mode="incremental")
            rel = self.rel_of(path)
            if rel is None:
                rep.mode = "unchanged"
                return rep
            abs_path = self.root / rel
            accepted = self.filter.accepts(abs_path) and abs_path.is_file()
            data = self._read(rel) if accepted else None
            old = self.state.get(rel)
            if data is None:
                if old is None:
                    rep.mode = "unchanged"
                    return rep
                old_state = dict(self.state)
                del self.state[rel]
                self._update(old_state, set(), {rel}, rep)
            else:
                self.skipped.pop(rel, None)
                h = content_hash(data)
                if old is not None and old.seen_hash == h:
                    rep.mode = "unchanged"
                    return rep
                new = self._new_state(rel, data, h, old)
                if new.parse_error:
                    rep.parse_errors[rel] = new.parse_error
                if old is not None and new.parse_error and new.facts_blob is old.facts_blob:
                    # keep the last good graph; only record the error
                    new.edges, new.pvals = old.edges, old.pvals
                    self.state[rel] = new
                    self._touched.add(rel)
                    token = self._begin_write()
                    GraphWriter(self.graph).update_files([self._file_row(rel)])
                    self._end_write(token)
                    rep.seconds = time.perf_counter() - t0
                    self.last_index_time = time.time()
                    return rep
                old_state = dict(self.state)
                self.state[rel] = new
                self._update(old_state, {rel}, set(), rep)
            rep.files = len(self.state)
            rep.seconds = time.perf_counter() - t0
            self.last_index_time = time.time()
            return rep

    def remove_file(self, path: Path | str) -> IndexReport:
        """Remove a file (and, for a directory, every file under it) from the graph."""
        with self._writing():
            try:
                if not self.in_sync():
                    return self._resync("before removing a file")
                return self._remove_file(path)
            finally:
                self._persist()

    def _remove_file(self, path: Path | str) -> IndexReport:
        with self.lock:
            rep = IndexReport(mode="incremental")
            rel = self.rel_of(path)
            if rel is None:
                return rep
            gone = {r for r in self.state if r == rel or r.startswith(rel.rstrip("/") + "/")}
            if not gone:
                rep.mode = "unchanged"
                return rep
            old_state = dict(self.state)
            for r in gone:
                del self.state[r]
            self._update(old_state, set(), gone, rep)
            self.last_index_time = time.time()
            return rep
