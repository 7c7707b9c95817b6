"""Node-aware placement: what crosses the network between nodes, per placement (issue 21).

The 3D cavity (all walls) cut into ``nodes x ranks-per-node`` parts by METIS with block
placement, by the two-level split (``placement = "nodes"``) and by the permutation of the
METIS parts (``"permute"``); for each, the faces and the halo cells that cross nodes (the
ghosts a run sends over the network per field exchanged: bytes over 8 per field), counted
from the partitions (``parallel/topology.py``).  For two nodes it also counts the halo
cells of the body-diagonal half split (``x + y + z`` below its median on one node), per
node as if each node were one rank, a floor for any ranks inside the halves: on a
grid the sets of least vertex boundary for their size are corner simplices (Bollobás and
Leader's vertex-isoperimetric inequality in the grid), so no cut into two equal node halves
sends much fewer ghosts than that one, whatever its faces.

    .venv/bin/python benchmarks/placement.py [--cells 32] [--layouts 2x4,2x8,4x4,4x2]

Writes benchmarks/results/placement.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _common import REPO

from haloflow.case import load_case
from haloflow.mesh import from_case
from haloflow.mesh.core import cell_adjacency
from haloflow.parallel import topology as topo


def diagonal_halves(mesh) -> np.ndarray:
    """Node 0 or 1 for every cell: the cells below the median of ``x + y + z`` (ties by y,
    then x) on node 0, exactly half of them."""
    c = mesh.geom().cell_centres
    order = np.lexsort((c[:, 0], c[:, 1], c.sum(axis=1)))
    half = np.zeros(mesh.n_cells, dtype=np.int64)
    half[order[mesh.n_cells // 2:]] = 1
    return half


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=32)
    ap.add_argument("--layouts", default="2x4,2x8,4x4,4x2", help="nodes x ranks per node")
    ap.add_argument("-o", "--output", type=Path,
                    default=REPO / "benchmarks" / "results" / "placement.json")
    a = ap.parse_args()
    n = a.cells
    case = load_case("cavity", [f"mesh.cells=[{n},{n},{n}]", "boundary.front.type=wall",
                                "boundary.back.type=wall"])
    mesh = from_case(case.mesh)
    xadj, adj = cell_adjacency(mesh)
    rows = []
    print(f"3D cavity {n}^3: faces / halo cells crossing nodes (ratio of halo cells to METIS "
          "block placement's)")
    for layout in a.layouts.split(","):
        n_nodes, per_node = (int(v) for v in layout.split("x"))
        nodes = np.arange(n_nodes * per_node) // per_node
        row = {"layout": layout}
        for placement in ("block", "nodes", "permute"):
            parts = topo.place(mesh, len(nodes), "metis", placement, nodes)
            row[placement] = {"faces": topo.cross_node_faces(xadj, adj, parts, nodes),
                              "halo_cells": topo.cross_node_halo_cells(xadj, adj, parts,
                                                                       nodes)}
        if n_nodes == 2:
            half = diagonal_halves(mesh)
            row["diagonal"] = {"faces": topo.cross_node_faces(xadj, adj, half, [0, 1]),
                               "halo_cells": topo.cross_node_halo_cells(xadj, adj, half,
                                                                        [0, 1])}
        base = row["block"]["halo_cells"]
        cells = "  ".join(f"{k} {v['faces']} / {v['halo_cells']} ({v['halo_cells'] / base:.2f})"
                          for k, v in row.items() if k != "layout")
        print(f"  {layout:5s} {cells}")
        rows.append(row)
    a.output.parent.mkdir(exist_ok=True)
    a.output.write_text(json.dumps({"cells": n, "rows": rows}, indent=2))
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
