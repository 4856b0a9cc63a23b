"""Corpora obtained at run time for the benchmarks, cached outside the repository.

A corpus spec (the ``--corpus`` option of ``python -m bench.run``) is one of:

- ``stdlib``: the running Python's standard library (copied by ``bench.run.prepare_corpus``);
- ``django`` (= ``django==5.1``) or ``pypi:NAME==VERSION``: the project's source distribution,
  fetched once with ``pip download --no-binary :all: --no-deps NAME==VERSION`` into
  ``<cache dir>/sdists`` and unpacked under ``<cache dir>/sources/<sdist dir>`` (the whole
  unpacked tree is the workspace: the package, its tests, docs and scripts);
- any directory (a TypeScript project unpacked from ``npm pack``, a checkout, a test case).

``resolve_spec`` turns a spec into what ``prepare_corpus`` accepts (``stdlib`` or a directory).
Errors: ``SystemExit`` with a message when pip fails or the archive has no single top directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ALIASES = {"django": "django==5.1"}
_PYPI = re.compile(r"^(?:pypi:)?([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)$")
PIP_TIMEOUT_S = 600


def _log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def is_sdist_spec(spec: str) -> bool:
    spec = ALIASES.get(spec.lower(), spec)
    return spec.startswith("pypi:") or (bool(_PYPI.match(spec)) and not Path(spec).exists())


def resolve_spec(spec: str, cache_dir: Path) -> str:
    """``stdlib`` and directories unchanged; an sdist spec -> the unpacked source directory."""
    if spec == "stdlib" or not is_sdist_spec(spec):
        return spec
    m = _PYPI.match(ALIASES.get(spec.lower(), spec))
    if not m:
        raise SystemExit(f"bench: corpus {spec!r}: expected 'stdlib', a directory, 'django' or 'pypi:NAME==VERSION'")
    return str(fetch_sdist(m.group(1), m.group(2), Path(cache_dir).expanduser()))


def fetch_sdist(name: str, version: str, cache_dir: Path) -> Path:
    """Download (once) and unpack (once) ``name==version``'s sdist; return the unpacked tree."""
    sdists = cache_dir / "sdists" / f"{name.lower()}-{version}"
    archive = _find_archive(sdists)
    if archive is None:
        sdists.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               "--disable-pip-version-check", "-q", f"{name}=={version}", "-d", str(sdists)]
        _log("fetching the corpus: " + " ".join(cmd[2:]))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"bench: pip download of {name}=={version} took over {PIP_TIMEOUT_S} s") from None
        archive = _find_archive(sdists)
        if proc.returncode != 0 or archive is None:
            raise SystemExit(f"bench: pip download of {name}=={version} failed:\n{proc.stderr.strip()[-2000:]}")
    dest = cache_dir / "sources" / archive.name.removesuffix(".tar.gz").removesuffix(".zip")
    if (dest / ".unpacked").exists():
        return _top(dest)
    _log(f"unpacking {archive} -> {dest}")
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(archive) as t:
            t.extractall(tmp, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    (dest / ".unpacked").write_text(f"{archive.name}\n")
    return _top(dest)


def _find_archive(d: Path) -> Path | None:
    if not d.is_dir():
        return None
    found = sorted(p for p in d.iterdir() if p.name.endswith((".tar.gz", ".zip")))
    return found[0] if found else None


def _top(dest: Path) -> Path:
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise SystemExit(f"bench: {dest} does not hold exactly one top directory")
    return tops[0]
