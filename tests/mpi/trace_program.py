"""An MPI program making every call type the tracing library writes (``test_trace_mpi.py``
checks the trace line by line): point to point blocking, non-blocking, from anyone,
persistent, sendrecv; every collective, blocking and not; neighbourhood collectives; a
collective on a sub-communicator (skipped) and a paused stretch (MPI_Pcontrol)."""

import numpy as np
from mpi4py import MPI

c = MPI.COMM_WORLD
r, n = c.rank, c.size
nxt, prv = (r + 1) % n, (r - 1) % n
f8 = np.zeros(64)

if r == 0:
    c.Send([np.zeros(10), MPI.DOUBLE], 1, tag=5)
    c.Recv([np.zeros(3, np.int32), MPI.INT], 1, tag=6)
elif r == 1:
    c.Recv([np.zeros(10), MPI.DOUBLE], MPI.ANY_SOURCE, MPI.ANY_TAG)
    c.Ssend([np.zeros(3, np.int32), MPI.INT], 0, tag=6)

a, b = np.zeros(8 * (r + 1)), np.zeros(8 * (prv + 1))  # 64(r+1) bytes from r to nxt
MPI.Request.Waitall([c.Irecv(b, prv, 7), c.Isend(a, nxt, 7)])

b2 = b.copy()  # a wait of some outstanding requests, then of the rest
q, q2 = [c.Irecv(b, prv, 12), c.Isend(a, nxt, 12)], [c.Irecv(b2, prv, 13), c.Isend(a, nxt, 13)]
MPI.Request.Waitall(q)
MPI.Request.Waitall(q2)

rr, rs = c.Irecv(b, MPI.ANY_SOURCE, 8), c.Isend(a, nxt, 8)
rs.Wait()
rr.Wait()

pers = [c.Recv_init(b, prv, 9), c.Send_init(a, nxt, 9)]
for _ in range(3):
    MPI.Prequest.Startall(pers)
    MPI.Request.Waitall(pers)
for q in pers:
    q.Start()
MPI.Request.Waitany(pers)
MPI.Request.Waitany(pers)
for q in pers:
    q.Free()

c.Sendrecv(a, nxt, 11, b, prv, 11)

c.Barrier()
c.Bcast(f8[:16], root=n - 1)
c.Reduce(f8[:4], f8[4:8], root=0)
c.Allreduce(f8[:3], f8[3:6])
c.Allgather(f8[:2], f8[2:2 + 2 * n])
counts = [k + 1 for k in range(n)]
c.Allgatherv(f8[:r + 1], [f8[10:], counts])
c.Gather(f8[:2], f8[2:2 + 2 * n], root=1)
c.Gatherv(f8[:r + 1], [f8[10:], counts] if r == 0 else None, root=0)
c.Scatter(f8[:2 * n], f8[40:42], root=1)
c.Scatterv([f8[:sum(counts)], counts] if r == 0 else None, f8[40:41 + r], root=0)
c.Alltoall(f8[:n], f8[10:10 + n])
c.Alltoallv([f8[:n * (r + 1)], [r + 1] * n], [f8[10:10 + sum(counts)], counts])
c.Reduce_scatter(f8[:sum(counts)], f8[40:41 + r], counts)
c.Scan(f8[:5], f8[5:10])
c.Exscan(f8[:5], f8[5:10])
c.Iallreduce(f8[:2], f8[2:4]).Wait()
c.Ibarrier().Wait()
c.Ibcast(f8[:7], root=0).Wait()

g = c.Create_dist_graph_adjacent([prv], [nxt])
g.Neighbor_alltoallv([f8[:5], [5]], [f8[5:10], [5]])
g.Ineighbor_alltoallv([f8[:6], [6]], [f8[6:12], [6]]).Wait()
g.Free()

half = c.Split(r % 2)
half.Allreduce(f8[:1], f8[1:2])  # not on every rank: skipped
half.Free()

MPI.Pcontrol(0)
c.Allreduce(f8[:9], f8[9:18])  # paused: not traced
MPI.Pcontrol(1)
c.Barrier()
