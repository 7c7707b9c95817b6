"""How much memory an input may ask for, checked before anything that large is allocated.

A few bytes of input can claim billions of items (an OpenFOAM ``N{value}`` list, a Gmsh
element count, ``mesh.cells``); the readers and mesh generators compare such claims with
what this process may still allocate and refuse with a one-line message instead of
starting an allocation that ends in a MemoryError, the OOM killer or swap.
"""

from __future__ import annotations

import math
import os
import resource

GIB = 1 << 30
# what a run costs per cell, all ranks of a node together, a floor (measured: about 1.4 KB
# per cell at 10^5 cells on one rank, the global mesh on rank 0 included): a run that
# cannot have this much is refused before its mesh is built
RUN_BYTES_PER_CELL = 1000
# input files read whole into memory: a file above its ceiling is refused before it is read
# (a compressed one, while it is decompressed, so a small .gz cannot expand without limit)
MAX_TABLE_BYTES = 16 << 20  # a CSV profile table: 10^5 rows are about 4 MB
MAX_MESH_FILE_BYTES = 1 << 36  # one polyMesh file (points, faces, ...), plain or gzipped
MESH_PARSE_COST = 4  # bytes of memory per byte of a mesh file while it is parsed, at most


def available_bytes() -> int:
    """What this process may still allocate: the kernel's MemAvailable, and no more than
    the address-space limit (``ulimit -v``) leaves."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            avail = 1 << 62
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            used = 0
        avail = min(avail, max(soft - used, 0))
    return avail


def mesh_file_ceiling() -> tuple[int, str]:
    """The most bytes one mesh file may hold (decompressed), and what sets it: the fixed
    ceiling, or the memory parsing it would take."""
    by_memory = available_bytes() // MESH_PARSE_COST
    if MAX_MESH_FILE_BYTES <= by_memory:
        return MAX_MESH_FILE_BYTES, "the ceiling for a mesh file"
    return by_memory, f"parsing more would take more than the {_size(available_bytes())} " \
                      "of memory available"


def too_big(nbytes: float) -> str | None:
    """None if ``nbytes`` fit in what is available; otherwise why not, for a message."""
    avail = available_bytes()
    if nbytes <= avail:
        return None
    return f"needs about {_size(nbytes)}, but only {_size(avail)} of memory is available"


def _size(n: float) -> str:
    return f"{n / GIB:.3g} GiB" if n >= GIB / 10 else f"{n / (1 << 20):.3g} MiB"


def generated_cells(mesh) -> int:
    """The cells of a case's generated mesh (``case.mesh``), known before it is built: exact
    for a box or a step, an upper bound (``2 wake_refinement cells_around**2``) for the
    cylinder channel, 0 for a mesh file."""
    if mesh.type == "box":
        return math.prod(mesh.cells)
    if mesh.type == "step":
        return sum(mesh.cells_x) * mesh.cells_y[1] + mesh.cells_x[1] * mesh.cells_y[0]
    if mesh.type == "cylinder":
        return 2 * mesh.wake_refinement * mesh.cells_around**2
    return 0
