"""Writing and reading checkpoints collectively with MPI-IO, on any rank count.

A field lives on the ranks in pieces at scattered global ids (METIS parts); in the file it
is one array in global order.  Between the two sits a block distribution of the global
index space (rank ``r`` holds ids ``[r N / P, (r + 1) N / P)``): writing, every rank sends
its values to the blocks' owners (one alltoallv) and each rank writes its contiguous block
with ``MPI_File_write_at_all``; reading, each rank reads its block and answers the other
ranks' requests for the ids they hold, owned and ghost (two alltoallvs).  Interface faces
are sent by both their ranks with bit-identical values, so either copy may land.

A checkpoint is written to a temporary name, synced, and renamed by rank 0 once every rank
has closed it, so a crash never leaves a partial file under a checkpoint's name; the last
``keep`` checkpoints are kept.  The format is :mod:`haloflow.io.checkpoint`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..io import checkpoint as fmt
from ..io.checkpoint import CheckpointError, FieldSpec
from . import RunError
from .outdir import record

FOLDER = "checkpoint"


class Blocks:
    """The block owner of every global id, and the alltoallv plan for one set of ids."""

    def __init__(self, comm, n_global: int, ids: np.ndarray):
        self.comm, self.n = comm, n_global
        p = comm.size
        self.bounds = np.array([n_global * r // p for r in range(p + 1)], dtype=np.int64)
        self.start, self.stop = int(self.bounds[comm.rank]), int(self.bounds[comm.rank + 1])
        ids = np.asarray(ids, dtype=np.int64)
        dest = np.searchsorted(self.bounds, ids, side="right") - 1
        self.order = np.argsort(dest, kind="stable")
        self.counts = np.bincount(dest, minlength=p).astype(np.int64)
        self.sent_ids = ids[self.order]
        if p == 1:
            self.rcounts, self.recv_ids = self.counts, self.sent_ids
            return
        self.rcounts = np.empty(p, dtype=np.int64)
        comm.Alltoall(self.counts, self.rcounts)
        self.recv_ids = np.empty(int(self.rcounts.sum()), dtype=np.int64)
        self._alltoallv(self.sent_ids, self.counts, self.recv_ids, self.rcounts, 1)

    def _alltoallv(self, send, scounts, recv, rcounts, comps):
        if self.comm.size == 1:
            recv[...] = send
            return
        from mpi4py import MPI

        kind = MPI.INT64_T if send.dtype == np.int64 else MPI.DOUBLE
        sc, rc = scounts * comps, rcounts * comps
        sd = np.concatenate([[0], np.cumsum(sc)[:-1]])
        rd = np.concatenate([[0], np.cumsum(rc)[:-1]])
        self.comm.Alltoallv([send, (sc, sd), kind], [recv, (rc, rd), kind])

    def to_block(self, values: np.ndarray) -> np.ndarray:
        """``(comps, n_block)``: this rank's block of the field whose local ``values``
        ``(comps, len(ids))`` sit at the plan's ids."""
        comps = values.shape[0]
        send = np.ascontiguousarray(values[:, self.order].T)
        recv = np.empty((len(self.recv_ids), comps))
        self._alltoallv(send, self.counts, recv, self.rcounts, comps)
        block = np.empty((comps, self.stop - self.start))
        seen = np.zeros(self.stop - self.start, dtype=bool)
        block[:, self.recv_ids - self.start] = recv.T
        seen[self.recv_ids - self.start] = True
        if not seen.all():
            raise RuntimeError("checkpoint: some global ids have no rank's value")
        return block

    def from_block(self, block: np.ndarray) -> np.ndarray:
        """The inverse: ``(comps, len(ids))`` values at the plan's ids from every rank's
        block (the requests travel one way, the values back)."""
        comps = block.shape[0]
        answer = np.ascontiguousarray(block[:, self.recv_ids - self.start].T)
        got = np.empty((len(self.sent_ids), comps))
        self._alltoallv(answer, self.rcounts, got, self.counts, comps)
        out = np.empty((comps, len(self.sent_ids)))
        out[:, self.order] = got.T
        return out


def write_plans(comm, lm) -> dict:
    """Per kind, the plan of the values a rank gives: its owned cells, its faces."""
    return {"cell": Blocks(comm, lm.n_cells_global, lm.global_cells[: lm.n_owned]),
            "face": Blocks(comm, lm.n_faces_global, lm.global_faces)}


def read_plans(comm, lm) -> dict:
    """Per kind, the plan of the values a rank takes: its owned and ghost cells, its faces."""
    return {"cell": Blocks(comm, lm.n_cells_global, lm.global_cells),
            "face": Blocks(comm, lm.n_faces_global, lm.global_faces)}


def given(a: np.ndarray, kind: str, lm) -> np.ndarray:
    """``(k, m)``: the part of a state array (see ``PisoSolver.checkpoint_state``) a rank
    gives, its owned cells or all its faces."""
    rows = a.reshape(1, -1) if a.ndim == 1 else a
    return rows[:, : lm.n_owned] if kind == "cell" else rows


class Checkpointer:
    """Collective writer of a run's checkpoints into ``<outdir>/checkpoint``."""

    def __init__(self, run, outdir: Path, keep: int):
        self.run, self.keep = run, max(1, int(keep))
        self.folder = Path(outdir) / FOLDER
        self._plans = None  # write_plans, made on the first checkpoint
        self.written = 0
        self.seconds = 0.0

    def _plan(self, kind: str) -> Blocks:
        if self._plans is None:
            self._plans = write_plans(self.run.comm, self.run.lmesh)
        return self._plans[kind]

    def write(self, step: int, time: float) -> str:
        """Collective: the solver's state after ``step`` into a new checkpoint; returns its
        path.  A failure to write is a one-line :class:`RunError` naming the file."""
        import time as clock

        t0 = clock.perf_counter()
        run, comm = self.run, self.run.comm
        lm = run.lmesh
        arrays, extra = run.solver.checkpoint_state()
        blocks, specs = [], []
        for name, (a, kind) in arrays.items():
            plan = self._plan(kind)
            block = plan.to_block(given(a, kind, lm))
            n = lm.n_cells_global if kind == "cell" else lm.n_faces_global
            part = sum(fmt.field_checksum(block[c], c * n + plan.start)
                       for c in range(block.shape[0]))
            total = comm.allreduce(part) if comm.size > 1 else part
            specs.append(FieldSpec(name, kind, block.shape[0], checksum=total & fmt.MASK))
            blocks.append(block)
        specs = fmt.layout(specs, lm.n_cells_global, lm.n_faces_global)
        meta = fmt.metadata(run.case, step, time, lm.n_cells_global, lm.n_faces_global, specs,
                            extra)
        final = self.folder / fmt.checkpoint_name(step)
        tmp = self.folder / (final.name + ".tmp")
        self._write_file(tmp, specs, blocks, meta)
        failed = None
        if comm.rank == 0:  # renames; every rank learns whether it could
            try:
                os.replace(tmp, final)
                _fsync_dir(self.folder)
                for old in fmt.list_checkpoints(str(self.folder))[: -self.keep]:
                    os.remove(old)
                record(self.folder.parent)
            except OSError as e:
                _remove(tmp)
                failed = f"{final}: cannot write the checkpoint ({e.strerror})"
        failed = comm.bcast(failed, root=0)
        if failed:
            raise RunError(failed)
        self.written += 1
        self.seconds += clock.perf_counter() - t0
        return str(final)

    def _write_file(self, tmp: Path, specs, blocks, meta: bytes) -> None:
        from mpi4py import MPI

        comm, lm = self.run.comm, self.run.lmesh
        ok = True
        if comm.rank == 0:
            try:
                self.folder.mkdir(exist_ok=True)
                _remove(tmp)
            except OSError:
                ok = False
        if not comm.bcast(ok, root=0):
            raise RunError(f"{self.folder}: cannot create the checkpoint folder")
        try:
            fh = MPI.File.Open(comm, str(tmp), MPI.MODE_WRONLY | MPI.MODE_CREATE)
        except MPI.Exception as e:
            raise RunError(f"{tmp}: cannot write the checkpoint "
                           f"({e.Get_error_string().strip()})") from None
        try:
            if comm.rank == 0:
                fh.Write_at(0, np.frombuffer(fmt.MAGIC, dtype=np.uint8))
            for spec, block in zip(specs, blocks, strict=True):
                n = lm.n_cells_global if spec.kind == "cell" else lm.n_faces_global
                start = self._plan(spec.kind).start
                for c in range(spec.comps):
                    fh.Write_at_all(spec.offset + 8 * (c * n + start),
                                    np.ascontiguousarray(block[c]))
            if comm.rank == 0:
                end = fmt.payload_end(specs, lm.n_cells_global, lm.n_faces_global)
                fh.Write_at(end, np.frombuffer(fmt.trailer(meta), dtype=np.uint8))
            fh.Sync()
        except MPI.Exception as e:
            fh.Close()
            if comm.rank == 0:
                _remove(tmp)
            raise RunError(f"{tmp}: cannot write the checkpoint "
                           f"({e.Get_error_string().strip()})") from None
        fh.Close()
        comm.Barrier()  # every rank's data is in the file before rank 0 renames it


def _remove(path: Path) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def latest(run_dir: Path) -> str:
    """The newest finished checkpoint of the run in ``run_dir`` (one-line error if none)."""
    found = fmt.list_checkpoints(str(Path(run_dir) / FOLDER))
    if not found:
        raise CheckpointError(f"{run_dir}: no checkpoint to restart from (expected "
                              f"{FOLDER}/step-*{fmt.SUFFIX}; set output.checkpoint_every)")
    return found[-1]


def read_checked(path: str, case, comm, n_cells: int, n_faces: int) -> fmt.Checkpoint:
    """Collective: the checkpoint's metadata, read by rank 0 and checked against ``case``;
    an error is raised on every rank alike."""
    got = None
    if comm.rank == 0:
        try:
            ck = fmt.read_metadata(path)
            fmt.check_matches(ck, case, n_cells, n_faces)
            got = ck
        except CheckpointError as e:
            got = str(e)
    got = comm.bcast(got, root=0)
    if isinstance(got, str):
        raise CheckpointError(got)
    return got


def restore(run, ck: fmt.Checkpoint) -> None:
    """Collective: read every field of ``ck`` and hand them to the solver, ghosts
    included; a checksum mismatch is an error on every rank."""
    from mpi4py import MPI

    comm, lm = run.comm, run.lmesh
    ns = {"cell": ck.n_cells, "face": ck.n_faces}  # the mesh's: read_checked saw to it
    plans = read_plans(comm, lm)
    fh = MPI.File.Open(comm, ck.path, MPI.MODE_RDONLY)
    values = {}
    try:
        for name, spec in ck.fields.items():
            plan, n = plans[spec.kind], ns[spec.kind]
            block = np.empty((spec.comps, plan.stop - plan.start))
            for c in range(spec.comps):
                fh.Read_at_all(spec.offset + 8 * (c * n + plan.start), block[c])
            part = sum(fmt.field_checksum(block[c], c * n + plan.start)
                       for c in range(spec.comps))
            total = (comm.allreduce(part) if comm.size > 1 else part) & fmt.MASK
            if total != spec.checksum:
                raise CheckpointError(f"{ck.path}: field {name!r} fails its checksum: the "
                                      "checkpoint is corrupted")
            values[name] = plan.from_block(block)
    finally:
        fh.Close()
    run.solver.restore_state(values, ck.extra)
