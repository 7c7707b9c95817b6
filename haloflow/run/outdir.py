"""Where a run writes: a new or empty folder, or with ``--force`` a folder haloflow itself
marked as one of its runs; never a user's folder of other things.

A run takes its folder with a lock file created atomically (``O_CREAT | O_EXCL``): a second
run started into the same folder is refused while the first is alive, and a lock left by a
process that died (killed, ``MPI_Abort``) is recognised by its pid and taken over.  The
marker file says "haloflow wrote this" and lists what the run wrote (its manifest, updated
after every checkpoint and at the end of the run): ``--force`` empties only a folder whose
every entry the manifest lists, and otherwise names the first one it does not, so a file a
user put there is never removed.  Links are unlinked, never followed, so nothing outside
the folder is touched.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import socket
from pathlib import Path

from . import RunError

MARKER = ".haloflow-run"  # written into every run folder: what --force may replace
LOCK = ".haloflow-lock"  # held while a run writes into the folder
MAX_MARKER = 1 << 26  # bytes: a manifest of a million files is well under this


def next_free(base: Path, taken, suffix: str = "") -> Path:
    """``base`` + ``suffix``, or ``<base>-N`` + ``suffix`` with the first N from 2 for which
    ``taken(path)`` is false: a default output name that never overwrites anything."""
    out, k = base.with_name(base.name + suffix), 1
    while taken(out):
        k += 1
        out = base.with_name(f"{base.name}-{k}{suffix}")
    return out


def default_outdir(name: str) -> Path:
    """``runs/<name>``, or ``runs/<name>-N`` with the first N not taken by a non-empty folder."""
    return next_free(Path("runs") / name,
                     lambda p: p.exists() and (not p.is_dir() or any(p.iterdir())))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _take_lock(outdir: Path) -> Path:
    """Create the lock atomically; a stale one (its process gone, on this host) is replaced."""
    lock = outdir / LOCK
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                held = json.loads(lock.read_text(encoding="utf-8"))
                pid, host = int(held["pid"]), str(held["host"])
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                pid, host = None, None
            if pid is not None and host == me["host"] and not _alive(pid):
                lock.unlink(missing_ok=True)  # its run died without releasing it
                continue
            who = f"pid {pid} on {host}" if pid is not None else "another process"
            raise RunError(f"output directory {outdir} is in use by another haloflow run "
                           f"({who}; remove {lock} if that run is gone)") from None
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(me, f)
        return lock
    raise RunError(f"output directory {outdir}: cannot take its lock {lock}")


def release(outdir: Path) -> None:
    """Drop the lock if this process holds it (the end of a run, or its failure)."""
    lock = outdir / LOCK
    try:
        if int(json.loads(lock.read_text(encoding="utf-8"))["pid"]) == os.getpid():
            lock.unlink()
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        pass


def _entries(outdir: Path) -> list[str]:
    """Every entry under ``outdir`` but the lock and the marker, as paths relative to it
    (``/``-separated), a folder before what it holds; links are listed, never followed."""
    out = []
    for top, dirs, files in os.walk(outdir):
        rel = Path(top).relative_to(outdir)
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = (rel / name).as_posix()
            if path not in (LOCK, MARKER, MARKER + ".tmp"):
                out.append(path)
    return out


def _write_marker(outdir: Path, files: list[str]) -> None:
    tmp = outdir / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"tool": "haloflow run", "files": files}) + "\n",
                   encoding="utf-8")
    os.replace(tmp, outdir / MARKER)


def record(outdir: Path) -> None:
    """Rank 0: list what is in the run folder now in its marker, the manifest ``--force``
    checks (everything there was written by this run: the folder was empty when it began).
    A manifest that cannot be written is left as it was: ``--force`` then refuses more."""
    try:
        _write_marker(outdir, _entries(outdir))
    except OSError:
        pass


def _manifest(outdir: Path) -> set[str] | None:
    """What the marker says the previous run wrote; None if it holds no list of files."""
    try:
        with open(outdir / MARKER, "rb") as f:
            files = json.loads(f.read(MAX_MARKER + 1))["files"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def _clear(outdir: Path) -> None:
    """Remove what the previous run wrote, the lock excepted, after checking that its
    manifest lists every entry; links are unlinked, never followed (``shutil.rmtree`` does
    not follow links either)."""
    listed = _manifest(outdir)
    if listed is None:
        raise RunError(f"--force refused: {outdir / MARKER} lists no files the run wrote (a "
                       "run of an older haloflow?); remove the folder yourself or choose "
                       "another -o")
    for entry in _entries(outdir):
        if entry not in listed:
            raise RunError(f"--force refused: {outdir / entry} was not written by the haloflow "
                           f"run in {outdir} (its {MARKER} does not list it); move it away or "
                           "choose another -o")
    for entry in outdir.iterdir():
        if entry.name == LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (None: ``path`` does)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            break
        missing = p
    return missing


def prepare_outdir(outdir: Path, force: bool) -> Path | None:
    """Create and lock ``outdir``; never write into a non-empty folder unless ``force`` is
    given and the folder holds haloflow's marker (so ``--force`` cannot wipe other data).
    Returns the outermost folder it created (None where ``outdir`` was there)."""
    made = _first_missing(outdir)
    try:
        if (outdir.exists() or outdir.is_symlink()) and not outdir.is_dir():
            raise RunError(f"output path {outdir} exists and is not a directory")
        outdir.mkdir(parents=True, exist_ok=True)
        _take_lock(outdir)
    except OSError as e:
        raise RunError(f"output directory {e.filename or outdir}: cannot create it "
                       f"({e.strerror})") from None
    try:
        others = [p for p in outdir.iterdir() if p.name != LOCK]
        if others:
            if not force:
                raise RunError(f"output directory {outdir} is not empty; pass another -o or "
                               "--force to overwrite a previous run there")
            if not (outdir / MARKER).is_file() or (outdir / MARKER).is_symlink():
                raise RunError(f"--force refused: {outdir} is not a folder haloflow made for "
                               f"a run (no {MARKER} file); choose another -o")
            _clear(outdir)
        (outdir / "plots").mkdir()
        _write_marker(outdir, ["plots"])
        return made
    except OSError as e:
        release(outdir)
        raise RunError(f"output directory {e.filename or outdir}: cannot write ({e.strerror})"
                       ) from None
    except RunError:
        release(outdir)
        raise


def open_outdir(outdir: Path, force: bool, comm) -> Path | None:
    """Collective: rank 0 prepares ``outdir``; if it cannot, every rank raises its RunError.
    Returns on rank 0 the outermost folder it created (:func:`prepare_outdir`)."""
    err, made = None, None
    if comm.rank == 0:
        try:
            made = prepare_outdir(outdir, force)
        except RunError as e:
            err = str(e)
    err = comm.bcast(err, root=0)
    if err:
        raise RunError(err)
    return made


def discard(outdir: Path, made: Path | None) -> None:
    """Rank 0: remove what a run refused before its first step (a restart from a checkpoint
    of another case) wrote: the folders it created (``made``, the outermost), or else
    everything in ``outdir``, which was empty, or emptied by ``--force``, when it began."""
    try:
        if made is not None:
            shutil.rmtree(made)
            return
        for entry in outdir.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    except OSError:
        pass


def _open_for_writing(f) -> str | None:
    """The name of ``f`` if it is a file opened for writing."""
    if not isinstance(f, io.IOBase):
        return None
    try:
        name, mode = getattr(f, "name", None), getattr(f, "mode", "")
    except (ValueError, OSError):  # a wrapper whose file is closed
        return None
    if isinstance(name, (str, bytes)) and isinstance(mode, str) and set(mode) & set("wax+"):
        return os.fsdecode(name)
    return None


def _written_file(e: OSError) -> str | None:
    """The file a failed write was writing, where the error names none (``write()`` or
    ``close()`` on a full disk or a file system remounted read-only): the innermost frame of
    its traceback holding a file open for writing, as a local or an attribute of one (a
    writer, a log)."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        values = list(frame.f_locals.values())
        for value in values:  # a frame's own files before those of its objects
            name = _open_for_writing(value)
            if name:
                return name
        for value in values:
            try:
                inner = list(vars(value).values()) if hasattr(value, "__dict__") else []
            except Exception:  # noqa: BLE001 - an object that will not say: not the file
                continue
            for f in inner:
                name = _open_for_writing(f)
                if name:
                    return name
    return None


def write_error(e: OSError, outdir: Path) -> RunError:
    """An output file that cannot be written (full disk, read-only folder), in one line; a
    file left half-written in ``outdir`` is removed.  The error may be this rank's alone
    (every rank writes its own field files): it is marked not collective, so the whole job
    is ended instead of waiting for ranks that did not fail."""
    why = e.strerror or (errno.errorcode.get(e.errno, "") if e.errno else "") or str(e)
    name = e.filename or _written_file(e)
    if name:
        try:
            p = Path(os.fsdecode(name))
            if p.resolve().parent.is_relative_to(outdir.resolve()) and p.is_file() \
                    and not p.is_symlink():
                p.unlink()
        except (OSError, ValueError, TypeError):
            pass
    err = RunError(f"{name or outdir}: cannot write ({why})")
    err.collective = False
    return err
