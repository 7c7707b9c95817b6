"""numba's cache is keyed by the package's sources: a kernel cached against an older version
of a kernel it calls is never loaded (haloflow/kernel_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from haloflow import kernel_cache as kc

CALLER = """
import numba as nb
from .callee import value

@nb.njit(cache=True)
def total():
    return value() + 10
"""
CALLEE = """
import numba as nb

@nb.njit(cache=True)
def value():
    return {}
"""


def _package(tmp_path, value: int):
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(CALLER)
    (pkg / "callee.py").write_text(CALLEE.format(value))
    return pkg


def _total(tmp_path, cache, keyed: bool) -> int:
    key = ("from pathlib import Path\nfrom haloflow import kernel_cache\n"
           f"kernel_cache.key_numba_cache(Path({str(tmp_path / 'pkg')!r}))\n" if keyed else "")
    script = key + "import pkg.caller\nprint(pkg.caller.total())\n"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_a_changed_callee_is_compiled_again_into_its_caller(tmp_path):
    """numba keeps a caller's cache when only its callee's module changes: the caller goes
    on computing with the old callee.  Keyed by the sources, it sees the new one."""
    _package(tmp_path, 1)
    assert _total(tmp_path, tmp_path / "plain", keyed=False) == 11
    assert _total(tmp_path, tmp_path / "keyed", keyed=True) == 11
    _package(tmp_path, 222)
    assert _total(tmp_path, tmp_path / "plain", keyed=False) == 11  # numba's own cache: stale
    assert _total(tmp_path, tmp_path / "keyed", keyed=True) == 232
    assert len(list((tmp_path / "keyed").glob("src-*"))) == 2


def test_the_digest_follows_names_and_contents(tmp_path):
    pkg = _package(tmp_path, 1)
    first = kc.sources_digest(pkg)
    assert kc.sources_digest(pkg) == first
    (pkg / "callee.py").write_text(CALLEE.format(2))
    second = kc.sources_digest(pkg)
    assert second != first
    (pkg / "callee.py").rename(pkg / "other.py")
    assert kc.sources_digest(pkg) not in (first, second)
    (pkg / "notes.txt").write_text("not code")
    assert kc.sources_digest(pkg) == kc.sources_digest(pkg)


def test_the_key_goes_under_the_base_once(tmp_path):
    pkg = _package(tmp_path, 1)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    path = kc.key_numba_cache(pkg, env)
    assert path == tmp_path / "cache" / f"src-{kc.sources_digest(pkg)}"
    assert env["NUMBA_CACHE_DIR"] == str(path)
    assert kc.key_numba_cache(pkg, env) == path  # a rank of the run: the same directory
    (pkg / "callee.py").write_text(CALLEE.format(3))
    moved = kc.key_numba_cache(pkg, env)  # other sources: a sibling, not a subdirectory
    assert moved.parent == path.parent and moved != path
    assert kc.base_dir({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) in (
        kc.PACKAGE / "__pycache__" / "kernels", tmp_path / "xdg" / "haloflow" / "kernels")


def test_this_process_runs_keyed():
    """The package keyed numba's cache when it was imported, and numba reads that."""
    from numba.core import config

    want = f"src-{kc.sources_digest()}"
    assert os.path.basename(os.environ["NUMBA_CACHE_DIR"]) == want
    assert os.path.basename(config.CACHE_DIR) == want


def test_prune_removes_only_the_other_sources(tmp_path):
    current = tmp_path / "src-aaaa"
    for d in (current, tmp_path / "src-bbbb", tmp_path / "theirs"):
        (d / "sub").mkdir(parents=True)
    (tmp_path / "src-file").write_text("a file, not a cache")
    assert kc.prune(current) == [tmp_path / "src-bbbb"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src-aaaa", "src-file", "theirs"]


def test_warmup_prunes_other_sources(tmp_path):
    """``python -m haloflow.warmup`` (with no case to warm) removes what older sources left."""
    stale = tmp_path / "src-0123456789abcdef"
    (stale / "linalg").mkdir(parents=True)
    script = textwrap.dedent("""
        import sys
        from haloflow import warmup
        warmup.PARTS = [[], []]
        warmup.warm = lambda *a, **k: None
        sys.exit(warmup.main(["--jobs", "1"]))
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not stale.exists()
