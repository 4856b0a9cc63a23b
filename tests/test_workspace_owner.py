"""Which served folder a document belongs to (``WorkspaceSet.owner``): the deepest folder
holding the path as the client names it, else (a link leading into a folder) holding its real
path; the real path is looked up only in that second case (a system call per component, paid
by every request otherwise)."""

from __future__ import annotations

from orbit_lsp.index import workspaces
from orbit_lsp.index.workspaces import WorkspaceSet


def test_owner_is_the_deepest_folder_and_follows_links_into_folders(tmp_path, store, settings, monkeypatch):
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    (outer / "a.py").write_text("x = 1\n")
    (inner / "b.py").write_text("y = 2\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.py").write_text("z = 3\n")
    (tmp_path / "link").symlink_to(inner, target_is_directory=True)
    wset = WorkspaceSet(store, settings)
    served_outer, served_inner = wset.add(outer), wset.add(inner)
    try:
        looked_up = []
        real = workspaces.real
        monkeypatch.setattr(workspaces, "real", lambda p: looked_up.append(p) or real(p))

        assert wset.owner(outer / "a.py") == (served_outer, "a.py")
        assert wset.owner(inner / "b.py") == (served_inner, "b.py")  # the deepest folder
        assert wset.owner(outer / "sub" / ".." / "a.py") == (served_outer, "a.py")
        assert looked_up == []  # in a folder as named: no realpath walk
        assert wset.owner(tmp_path / "link" / "b.py") == (served_inner, "b.py")  # through the link
        assert wset.owner(tmp_path / "elsewhere" / "c.py") is None
        assert len(looked_up) == 2  # only the two paths no folder holds as named
        # the files of the inner folder are its own, not the outer one's (diagnostics skip them)
        assert wset.nested_in(outer) == ["inner"] and wset.nested_in(inner) == []
    finally:
        for ix in (served_outer, served_inner):
            ix.graph.delete()
