"""pytest fixtures for the Python resolver: a parameter of a test or of a fixture holds what the
fixture of that name gives (pytest passes it by name), so ``app.test_client()`` in
``def test_x(app)`` binds through the ``app`` fixture of the module or of a ``conftest.py``."""

from __future__ import annotations

import posixpath
import re

from orbit_lsp.index.py_values import FIXTURES, _unit

PY_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")  # pytest's default ``python_files``


def is_python_test_file(path: str) -> bool:
    """A file pytest collects by its default conventions: ``test_*.py`` or ``*_test.py``."""
    return bool(PY_TEST_FILE.search(path))


def is_conftest(path: str) -> bool:
    return path == "conftest.py" or path.endswith("/conftest.py")


def pytest_file(rel: str) -> bool:
    """Whether pytest collects or loads ``rel`` (a test file or a ``conftest.py``): the files
    whose functions it calls with fixtures."""
    return is_python_test_file(rel) or is_conftest(rel)


class PytestFixtures:
    """Mixed into ``resolve.Resolver`` (whose state and evaluation, ``ev``, it uses)."""

    def _file_fixtures(self, rel: str) -> dict:
        """{fixture name: [scope index of its function]} of one file."""
        got = self._fixtures.get(rel)
        if got is None:
            facts = self.facts.get(rel)
            got = self._fixtures[rel] = {}
            for si, sc in enumerate(facts.scopes if facts is not None else ()):
                if sc.fixture:
                    got.setdefault(sc.fixture, []).append(si)
        return got

    def fixture_value(self, rel: str, si: int, name: str):
        """What pytest passes parameter ``name`` of the function of scope ``si`` of file ``rel``
        when that function is a test (``test*``, in a ``Test*`` class or at module level) or a
        fixture, in a file pytest collects: the value the nearest fixture of that name returns
        or yields (a fixture of the test's class, of its module, then of the ``conftest.py``
        of its directory and of each directory above, as pytest looks them up). None: no
        workspace fixture of that name (a pytest built-in such as ``tmp_path``, a plugin's),
        or not a function pytest calls."""
        if not pytest_file(rel):
            return None
        facts = self._facts(rel)
        sc = facts.scopes[si]
        if name == sc.self_name:
            return None
        short = sc.qual.rpartition(".")[2]
        if sc.fixture is None:
            if not short.startswith("test"):
                return None
            if sc.class_qual is not None and not sc.class_qual.rpartition(".")[2].startswith("Test"):
                return None
            if sc.class_qual is None and sc.parent != 0:
                return None  # a function nested in another is not collected
        here = posixpath.dirname(rel)
        files = [rel]
        d = here
        while True:
            conftest = f"{d}/conftest.py" if d else "conftest.py"
            if conftest != rel and conftest in self.files:
                files.append(conftest)
            if not d:
                break
            d = posixpath.dirname(d)
        for f in files:
            ff = self._facts(f)
            if ff is None:
                continue
            self._deps.add((f, FIXTURES))
            found = []
            for fsi in self._file_fixtures(f).get(name, ()):
                fsc = ff.scopes[fsi]
                if f == rel and fsi == si:
                    continue  # a fixture requesting the one it overrides: the next one out
                if fsc.class_qual is not None and (f != rel or fsc.class_qual != sc.class_qual):
                    continue  # a class's fixtures serve that class's tests only
                found.append(fsi)
            if not found:
                continue
            vals = []
            for fsi in found:
                fsc = ff.scopes[fsi]
                self._deps.add((f, _unit(fsc.qual)))
                if fsc.yields:
                    vals.append(self.items(("gen", f, fsi)))
                else:
                    vals.extend(self.ev(f, fsi, r) for r in fsc.returns)
            return self.combine(vals) if vals else None
        return None
