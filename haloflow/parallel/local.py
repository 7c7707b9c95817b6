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

from ..mesh.core import Geometry, Mesh, Patch


@dataclass
class LocalMesh:
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

    @property
    def n_cells(self) -> int:
        """Owned plus ghost cells: the length of every cell field."""
        return self.n_owned + self.n_ghost

    @property
    def n_faces(self) -> int:
        return len(self.owner)

    @property
    def n_internal(self) -> int:
        return len(self.neighbour)

    def patch(self, name: str) -> Patch:
        for p in self.patches:
            if p.name == name:
                return p
        raise KeyError(name)


def build_local(mesh: Mesh, parts: np.ndarray, rank: int) -> LocalMesh:
    """Cut rank ``rank``'s LocalMesh out of the global mesh (runs on rank 0 for every rank)."""
    g = mesh.geom()
    ni = mesh.n_internal
    own_g, nbr_g = mesh.owner[:ni], mesh.neighbour
    po, pn = parts[own_g], parts[nbr_g]
    mine_o, mine_n = po == rank, pn == rank

    owned = np.flatnonzero(parts == rank)
    interior = np.flatnonzero(mine_o & mine_n)
    interface = np.flatnonzero(mine_o ^ mine_n)
    other = np.where(mine_o[interface], nbr_g[interface], own_g[interface])
    ghosts = np.unique(other)
    ghosts = ghosts[np.lexsort((ghosts, parts[ghosts]))]
    cells = np.concatenate([owned, ghosts])

    to_local = np.full(mesh.n_cells, -1, dtype=np.int64)
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
    if periodic:  # the neighbour side's points too: a ghost's own faces are not local
        gshadow = mesh.shadow_nodes[take]
        used, inv = np.unique(np.concatenate([gnodes, gshadow]), return_inverse=True)
        face_nodes, shadow_nodes = inv[: len(gnodes)], inv[len(gnodes):]
    else:
        used, face_nodes = np.unique(gnodes, return_inverse=True)

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
        face_ptr=face_ptr,
        face_nodes=face_nodes.astype(np.int64),
        owner=to_local[mesh.owner[faces]],
        neighbour=to_local[mesh.neighbour[faces[:n_int_local]]],
        n_interior=len(interior),
        global_faces=faces,
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
        shadow_nodes=shadow_nodes.astype(np.int64) if periodic else None,
    )


def distribute(mesh: Mesh | None, parts: np.ndarray | None, comm) -> LocalMesh:
    """Rank 0 cuts every rank's LocalMesh and sends it; every rank returns its own."""
    if comm.size == 1:
        return build_local(mesh, parts, 0)
    if comm.rank == 0:
        for r in range(1, comm.size):
            comm.send(build_local(mesh, parts, r), dest=r, tag=11)
        return build_local(mesh, parts, 0)
    return comm.recv(source=0, tag=11)
