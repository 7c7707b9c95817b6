"""Where a run writes: a new or empty folder, or a previous haloflow run with ``--force``;
never a user's folder of other things."""

from __future__ import annotations

from pathlib import Path

from . import RunError


def default_outdir(name: str) -> Path:
    """``runs/<name>``, or ``runs/<name>-N`` with the first N not taken by a non-empty folder."""
    base = Path("runs") / name
    k = 1
    out = base
    while out.exists() and (not out.is_dir() or any(out.iterdir())):
        k += 1
        out = base.with_name(f"{name}-{k}")
    return out


def prepare_outdir(outdir: Path, force: bool) -> None:
    """Create ``outdir``; never write into a non-empty folder unless ``force`` is given and
    the folder is a previous haloflow run (so ``--force`` cannot wipe unrelated data)."""
    if outdir.exists() and not outdir.is_dir():
        raise RunError(f"output path {outdir} exists and is not a directory")
    if outdir.is_dir() and any(outdir.iterdir()):
        if not force:
            raise RunError(f"output directory {outdir} is not empty; pass another -o or --force "
                           "to overwrite a previous run there")
        if not (outdir / "summary.json").exists() and not (outdir / "case.toml").exists():
            raise RunError(f"--force refused: {outdir} does not look like a haloflow run "
                           "(no case.toml or summary.json)")
    (outdir / "plots").mkdir(parents=True, exist_ok=True)


def open_outdir(outdir: Path, force: bool, comm) -> None:
    """Collective: rank 0 prepares ``outdir``; if it cannot, every rank raises its RunError."""
    err = None
    if comm.rank == 0:
        try:
            prepare_outdir(outdir, force)
        except RunError as e:
            err = str(e)
    err = comm.bcast(err, root=0)
    if err:
        raise RunError(err)
