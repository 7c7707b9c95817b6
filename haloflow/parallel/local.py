"""LocalMesh: one rank's owned cells plus one layer of ghost cells.

Owned cells are numbered ``0..n_owned-1`` (ascending global id), ghosts follow, grouped by the
rank that owns them and ascending global id within a group, so the values received from one
neighbour land in one contiguous slice.  A face between an owned and a ghost cell is an ordinary
internal face, oriented by global cell id, so every kernel runs unchanged in serial and parallel
and both ranks compute bit-identical face values.  Local internal faces are ordered interior
first (both cells owned), then interface faces, which is what overlapped exchange needs.
Geometry is cut from the global mesh's, so it is identical on every decomposition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..mesh.core import FaceLists, Geometry, Mesh, Patch, index_dtype


@dataclass
class LocalMesh(FaceLists):
    rank: int
    n_owned: int
    n_ghost: int
    n_cells_global: int
    global_cells: np.ndarray  # (n_owned + n_ghost,) global ids
    points: np.ndarray
    face_ptr: np.ndarray
    face_nodes: np.ndarray
    owner: np.ndarray  # local cell of each face (either side may be a ghost on interface faces)
    neighbour: np.ndarray  # (n_internal,)
    n_interior: int  # internal faces with both cells owned: faces[:n_interior]
    global_faces: np.ndarray
    patches: list[Patch]
    geometry: Geometry = field(repr=False)
    # communication pattern
    neighbours: np.ndarray  # ranks we exchange with, ascending
    send_ptr: np.ndarray  # (len(neighbours) + 1,) offsets into send_cells
    send_cells: np.ndarray  # owned local cells each neighbour needs, ascending global id
    recv_ptr: np.ndarray  # ghosts from neighbours[k]: n_owned + recv_ptr[k] .. recv_ptr[k+1]
    # periodic meshes only (see haloflow.mesh.core.Mesh): per local internal face
    face_shift: np.ndarray | None = field(default=None, repr=False)
    shadow_nodes: np.ndarray | None = field(default=None, repr=False)
    n_faces_global: int = 0  # of the whole mesh: checkpoints store faces in global order
    nodes: np.ndarray | None = None  # the node of every rank (parallel.topology), once known

    @property
    def n_cells(self) -> int:
        """Owned plus ghost cells: the length of every cell field."""
        return self.n_owned + self.n_ghost

    def release_topology(self) -> None:
        """Drop the points and the face-node lists: the geometry is computed from them and
        boundary set-up reads them, but after set-up only the field writer does, so a run
        that writes no fields frees them.  Reading them afterwards fails loudly (None).  The
        global face ids stay: a checkpoint stores the face fluxes in global order."""
        self.points = self.face_ptr = self.face_nodes = self.shadow_nodes = None

    def release_centres(self, faces: bool, cells: bool) -> None:
        """Drop the face centres (72 bytes per face, about 220 per cell on a hex mesh) and/or
        the cell centres (24 bytes per cell): set-up reads them (boundary values, gradient
        weights, initial fields), after it only linear-upwind convection, the gathered
        velocity and post-processors do, so a run without them frees them.  Reading them
        afterwards fails loudly (None)."""
        if faces:
            self.geometry.face_centres = None
        if cells:
            self.geometry.cell_centres = None


def build_local(mesh: Mesh, parts: np.ndarray, rank: int) -> LocalMesh:
    """Cut rank ``rank``'s LocalMesh out of the global mesh (runs on rank 0 for every rank)."""
    g = mesh.geom()
    owned = np.flatnonzero(parts == rank)
    if len(owned) == mesh.n_cells and _plain(mesh):
        return _whole(mesh, rank)
    ni = mesh.n_internal
    own_g, nbr_g = mesh.owner[:ni], mesh.neighbour
    mine_o, mine_n = parts[own_g] == rank, parts[nbr_g] == rank
    interior = np.flatnonzero(mine_o & mine_n)
    interface = np.flatnonzero(mine_o ^ mine_n)
    other = np.where(mine_o[interface], nbr_g[interface], own_g[interface])
    ghosts = np.unique(other)
    ghosts = ghosts[np.lexsort((ghosts, parts[ghosts]))]
    cells = np.concatenate([owned, ghosts])

    to_local = np.full(mesh.n_cells, -1, dtype=index_dtype(len(cells)))
    to_local[cells] = np.arange(len(cells))

    bfaces, patches, start = [], [], len(interior) + len(interface)
    for p in mesh.patches:
        f = p.start + np.flatnonzero(parts[mesh.owner[p.start:p.start + p.size]] == rank)
        bfaces.append(f)
        patches.append(Patch(p.name, start, len(f), p.kind))
        start += len(f)
    faces = np.concatenate([interior, interface] + bfaces).astype(np.int64)
    n_int_local = len(interior) + len(interface)

    # local points and face lists
    counts = np.diff(mesh.face_ptr)[faces]
    face_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    take = np.repeat(mesh.face_ptr[faces] - face_ptr[:-1], counts) + np.arange(face_ptr[-1])
    gnodes = mesh.face_nodes[take]
    periodic = mesh.face_shift is not None
    gshadow = mesh.shadow_nodes[take] if periodic else None
    del take
    # the points used, ascending, and the faces' nodes renumbered among them: a mark per
    # point (np.unique would sort a copy of the face lists, rank 0's peak on big meshes)
    mark = np.zeros(len(mesh.points), dtype=bool)
    mark[gnodes] = True
    if periodic:  # the neighbour side's points too: a ghost's own faces are not local
        mark[gshadow] = True
    used = np.flatnonzero(mark)
    del mark
    node_t = index_dtype(len(used))
    renumber = np.empty(len(mesh.points), dtype=node_t)
    renumber[used] = np.arange(len(used), dtype=node_t)
    face_nodes = renumber[gnodes]
    shadow_nodes = renumber[gshadow] if periodic else None
    del renumber, gnodes, gshadow

    # who needs what: send lists and receive slices per neighbour rank
    ghost_rank = parts[ghosts]
    neighbours = np.unique(ghost_rank)
    recv_ptr = np.searchsorted(ghost_rank, np.concatenate([neighbours, [np.iinfo(np.int64).max]]))
    mine = np.where(mine_o[interface], own_g[interface], nbr_g[interface])
    send_ptr, send_cells = [0], []
    for q in neighbours:
        s = np.unique(mine[parts[other] == q])
        send_cells.append(to_local[s])
        send_ptr.append(send_ptr[-1] + len(s))

    return LocalMesh(
        rank=rank,
        n_owned=len(owned),
        n_ghost=len(ghosts),
        n_cells_global=mesh.n_cells,
        global_cells=cells.astype(np.int64),
        points=mesh.points[used],
        face_ptr=face_ptr.astype(index_dtype(face_ptr[-1] + 1)),
        face_nodes=face_nodes,
        owner=to_local[mesh.owner[faces]],
        neighbour=to_local[mesh.neighbour[faces[:n_int_local]]],
        n_interior=len(interior),
        global_faces=faces.astype(index_dtype(mesh.n_faces)),
        n_faces_global=mesh.n_faces,
        patches=patches,
        geometry=Geometry(
            face_centres=g.face_centres[faces],
            face_areas=g.face_areas[faces],
            cell_centres=g.cell_centres[cells],
            cell_volumes=g.cell_volumes[cells],
        ),
        neighbours=neighbours.astype(np.int64),
        send_ptr=np.asarray(send_ptr, dtype=np.int64),
        send_cells=(np.concatenate(send_cells) if send_cells else np.zeros(0)).astype(np.int64),
        recv_ptr=recv_ptr.astype(np.int64),
        face_shift=mesh.face_shift[faces[:n_int_local]] if periodic else None,
        shadow_nodes=shadow_nodes,
    )


def _plain(mesh: Mesh) -> bool:
    """Whether the face lists start at 0, hold no unused entries and reach every point (or
    a periodic face's other side does): then a whole-mesh cut renumbers nothing."""
    if mesh.face_ptr[0] != 0 or mesh.face_ptr[-1] != len(mesh.face_nodes):
        return False
    used = np.zeros(len(mesh.points), dtype=bool)
    used[mesh.face_nodes] = True
    if mesh.shadow_nodes is not None:
        used[mesh.shadow_nodes] = True
    return bool(used.all())


def _whole(mesh: Mesh, rank: int) -> LocalMesh:
    """The LocalMesh of a rank that owns every cell: what :func:`build_local` cuts, without
    copying the global mesh's points and geometry (the run drops the global mesh after)."""
    g = mesh.geometry
    node_t = index_dtype(len(mesh.points))
    cell_t = index_dtype(mesh.n_cells)
    return LocalMesh(
        rank=rank,
        n_owned=mesh.n_cells,
        n_ghost=0,
        n_cells_global=mesh.n_cells,
        global_cells=np.arange(mesh.n_cells, dtype=np.int64),
        points=mesh.points,
        face_ptr=mesh.face_ptr.astype(index_dtype(mesh.face_ptr[-1] + 1), copy=False),
        face_nodes=mesh.face_nodes.astype(node_t, copy=False),
        owner=mesh.owner.astype(cell_t, copy=False),
        neighbour=mesh.neighbour.astype(cell_t, copy=False),
        n_interior=mesh.n_internal,
        global_faces=np.arange(mesh.n_faces, dtype=index_dtype(mesh.n_faces)),
        n_faces_global=mesh.n_faces,
        patches=[Patch(p.name, p.start, p.size, p.kind) for p in mesh.patches],
        geometry=Geometry(g.face_centres, g.face_areas, g.cell_centres, g.cell_volumes),
        neighbours=np.zeros(0, dtype=np.int64),
        send_ptr=np.zeros(1, dtype=np.int64),
        send_cells=np.zeros(0, dtype=np.int64),
        recv_ptr=np.zeros(1, dtype=np.int64),
        face_shift=mesh.face_shift,
        shadow_nodes=None if mesh.shadow_nodes is None else mesh.shadow_nodes.astype(
            node_t, copy=False),
    )


def distribute(mesh: Mesh | None, parts: np.ndarray | None, comm) -> LocalMesh:
    """Rank 0 cuts every rank's LocalMesh and sends it; every rank returns its own.  The
    arrays travel as they are, out of the pickle (protocol 5): a pickled copy of a part
    beside the part itself was rank 0's peak memory on big meshes."""
    from mpi4py.util import pkl5

    if comm.size == 1:
        return build_local(mesh, parts, 0)
    comm = pkl5.Intracomm(comm)
    if comm.rank == 0:
        for r in range(1, comm.size):
            comm.send(build_local(mesh, parts, r), dest=r, tag=11)
        return build_local(mesh, parts, 0)
    return comm.recv(source=0, tag=11)
