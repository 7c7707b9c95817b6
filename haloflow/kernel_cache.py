"""numba's kernel cache, one directory per version of haloflow's sources.

numba checks a cached kernel against its own source file only.  A kernel that calls a
kernel of another module compiles the callee into itself, so after that module changes the
caller's cache still holds the old callee: it computes what the old code did, and where the
callee's arrays changed shape it reads them out of bounds (after the coarsest AMG level's
factors lost their U, a cached compiled pressure solve crashed the run).  An upgrade, a
``git pull`` or a branch switch is enough, whatever the user's ``NUMBA_CACHE_DIR``.

So the cache lives in ``<base>/src-<digest>``, the digest taken over every ``.py`` file of
the package (about 10 ms): other sources, another directory, filled afresh.  ``base`` is
``NUMBA_CACHE_DIR`` (the Makefile sets ``.numba_cache/``), else the package's own
``__pycache__`` where it can be written, else ``~/.cache/haloflow/kernels``.  It is set in
the environment when the package is imported, before any kernel module loads numba, so the
ranks and the helper processes of a run inherit it; a second import keeps it.
``python -m haloflow.warmup`` removes the directories of other sources under the same base.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

PREFIX = "src-"
PACKAGE = Path(__file__).resolve().parent


def sources_digest(root: Path = PACKAGE) -> str:
    """A digest of the names and contents of the ``.py`` files under ``root``."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def base_dir(environ=os.environ) -> Path:
    """Where the keyed directories go: ``NUMBA_CACHE_DIR`` (without a key it already has),
    else the package's ``__pycache__`` if writable, else the user's cache directory."""
    given = environ.get("NUMBA_CACHE_DIR")
    if given:
        path = Path(given)
        return path.parent if path.name.startswith(PREFIX) else path
    own = PACKAGE / "__pycache__"
    if os.access(own if own.is_dir() else PACKAGE, os.W_OK):
        return own / "kernels"
    home = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(home) / "haloflow" / "kernels"


def key_numba_cache(root: Path = PACKAGE, environ=os.environ) -> Path:
    """Point numba's cache at ``base/src-<digest of root's sources>`` (in ``environ``, and in
    numba's configuration if numba is loaded already) and return that directory."""
    path = base_dir(environ) / f"{PREFIX}{sources_digest(root)}"
    environ["NUMBA_CACHE_DIR"] = str(path)
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is os.environ:
        config.CACHE_DIR = str(path)
    return path


def prune(current: Path) -> list[Path]:
    """Remove the keyed directories of other sources beside ``current``; returns them."""
    gone = []
    for other in current.parent.glob(f"{PREFIX}*"):
        if other != current and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
            gone.append(other)
    return gone
