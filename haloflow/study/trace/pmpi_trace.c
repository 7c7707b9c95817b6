/* pmpi_trace.c: an MPI profiling-interface (PMPI) library that writes each rank's SimGrid
 * time-independent trace, the input of `smpirun -replay` (SimGrid 3.32's smpi_replay grammar).
 *
 * Preloaded into every rank (LD_PRELOAD), it wraps the MPI calls below, passes them on to the
 * library's PMPI_ entry points and writes one line per event to HALOFLOW_TRACE_DIR/rank-R.txt.gz:
 *
 *   R init                         R compute FLOPS
 *   R send|isend|recv|irecv PEER TAG BYTES
 *   R wait SRC DST TAG             R waitall
 *   R barrier                      R bcast BYTES ROOT
 *   R reduce BYTES 0 ROOT          R allreduce BYTES 0         R scan|exscan BYTES 0
 *   R allgather SBYTES RBYTES      R allgatherv SBYTES RBYTES_0 .. RBYTES_n-1
 *   R gather SBYTES RBYTES ROOT    R gatherv SBYTES RBYTES_0 .. RBYTES_n-1 ROOT
 *   R scatter SBYTES RBYTES ROOT   R scatterv SBYTES_0 .. SBYTES_n-1 RBYTES ROOT
 *   R alltoall SBYTES RBYTES       R alltoallv SSUM SBYTES_0.. RSUM RBYTES_0..
 *   R reducescatter RBYTES_0 .. RBYTES_n-1 0
 *   R finalize
 *
 * Sizes are bytes ("R init" without a datatype makes the replay's default type MPI_BYTE); peers
 * and roots are MPI_COMM_WORLD ranks.  The compute burst between two MPI calls is the calling
 * thread's CPU time (HALOFLOW_TRACE_CLOCK=thread, the default; process or wall on request) times
 * a nominal speed of HALOFLOW_TRACE_FLOPS flop/s (default 1e9): a replay on hosts of that speed
 * gives the measured time, so an oversubscribed run still records honest compute.
 *
 * Mapping onto the replay's grammar: a wait of a subset of the outstanding requests becomes one
 * "wait" per request (the replay's "waitall" completes all of them); a receive from
 * MPI_ANY_SOURCE or MPI_ANY_TAG is written when it completes, with the status's source and
 * tag; persistent requests write their isend/irecv at each MPI_Start; MPI_Sendrecv is an
 * irecv, an isend and two waits; neighbourhood collectives are point-to-point messages to and
 * from each graph neighbour (tag NEIGHBOR_TAG); non-blocking collectives are written as the
 * blocking collective at the call (their wait writes nothing); completed tests are waits.
 * Collectives on communicators smaller than MPI_COMM_WORLD and intercommunicators cannot be
 * replayed (the replay knows only MPI_COMM_WORLD): they are counted as skipped, not written.
 *
 * Window: MPI_Pcontrol(0) pauses, MPI_Pcontrol(1) resumes; HALOFLOW_TRACE_AFTER=S starts at the
 * first collective on a communicator of all ranks where every rank has run S seconds since
 * MPI_Init (agreed with one extra PMPI_Allreduce per such collective until then), and
 * HALOFLOW_TRACE_FOR=S stops the same way S seconds later.  At MPI_Finalize each rank writes
 * rank-R.json: its calls and bytes per kind, compute seconds, lines and skipped calls.
 * One thread per rank may call MPI (the wrappers keep no locks).
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define NEIGHBOR_TAG 1073741000

enum kind {
    K_SEND, K_ISEND, K_RECV, K_IRECV, K_WAIT, K_WAITALL, K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE,
    K_ALLGATHER, K_ALLGATHERV, K_GATHER, K_GATHERV, K_SCATTER, K_SCATTERV, K_ALLTOALL,
    K_ALLTOALLV, K_REDUCESCATTER, K_SCAN, K_EXSCAN, K_NEIGHBOR, K_NKINDS
};
static const char *KIND_NAMES[K_NKINDS] = {
    "send", "isend", "recv", "irecv", "wait", "waitall", "barrier", "bcast", "reduce", "allreduce",
    "allgather", "allgatherv", "gather", "gatherv", "scatter", "scatterv", "alltoall",
    "alltoallv", "reducescatter", "scan", "exscan", "neighbor"
};

static gzFile out;
static int me = -1, nworld = 0, depth = 0;
static int recording = 0, stopped = 0, paused = 0, waiting_start = 0;
static double after_s = 0.0, for_s = 0.0, t_init = 0.0, t_start = 0.0, flops_per_s = 1e9;
static clockid_t burst_clock = CLOCK_THREAD_CPUTIME_ID;
static double burst_from = 0.0, burst_s = 0.0, compute_s = 0.0;
static long long calls[K_NKINDS], bytes[K_NKINDS], lines = 0, skipped = 0, pending = 0;
static char dir[4096];

static double now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the compute since the last line, written before the next one (MPI calls that write no
   line, such as MPI_Send_init or a probe, do not split a burst) */
static void flush_compute(void)
{
    if (burst_s > 0.0 && out != NULL) {
        gzprintf(out, "%d compute %.0f\n", me, burst_s * flops_per_s);
        compute_s += burst_s;
        lines++;
    }
    burst_s = 0.0;
}

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (out == NULL)
        return;
    flush_compute();
    gzprintf(out, "%d ", me);
    gzwrite(out, buf, (unsigned)(n < (int)sizeof buf ? n : (int)sizeof buf - 1));
    gzputc(out, '\n');
    lines++;
}

/* ---- entering and leaving MPI: the compute burst in between ------------------------------ */

static int enter(void)
{
    if (depth++ > 0 || out == NULL)
        return 0;
    double t = now(burst_clock);
    if (recording && !paused) {
        double dt = t - burst_from;
        if (dt > 0.0)
            burst_s += dt;
    }
    return 1;
}

static void leave(int outer)
{
    depth--;
    if (outer)
        burst_from = now(burst_clock);
}

#define ON (recording && !paused)
#define COUNT(k, b) do { calls[k]++; bytes[k] += (long long)(b); } while (0)

/* ---- communicators: ranks in MPI_COMM_WORLD ---------------------------------------------- */

struct commmap { MPI_Comm comm; int size; int *world; };
static struct commmap maps[32];
static int nmaps = 0;

static const struct commmap *comm_of(MPI_Comm comm)
{
    for (int i = 0; i < nmaps; i++)
        if (maps[i].comm == comm)
            return &maps[i];
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    struct commmap m = {comm, 0, NULL};
    if (!inter) {
        MPI_Group g, w;
        PMPI_Comm_size(comm, &m.size);
        m.world = malloc(sizeof(int) * (size_t)m.size * 2);
        int *ids = m.world + m.size;
        for (int i = 0; i < m.size; i++)
            ids[i] = i;
        PMPI_Comm_group(comm, &g);
        PMPI_Comm_group(MPI_COMM_WORLD, &w);
        PMPI_Group_translate_ranks(g, m.size, ids, w, m.world);
        PMPI_Group_free(&g);
        PMPI_Group_free(&w);
    }
    if (nmaps == 32) {  /* full: forget the oldest */
        free(maps[0].world);
        memmove(maps, maps + 1, sizeof maps[0] * 31);
        nmaps = 31;
    }
    maps[nmaps] = m;
    return &maps[nmaps++];
}

static void forget_comm(MPI_Comm comm)
{
    for (int i = 0; i < nmaps; i++)
        if (maps[i].comm == comm) {
            free(maps[i].world);
            maps[i] = maps[--nmaps];
            return;
        }
}

/* world rank of rank r of comm; -1 for MPI_ANY_SOURCE, -2 for MPI_PROC_NULL or unknown */
static int world_of(MPI_Comm comm, int r)
{
    if (r == MPI_ANY_SOURCE)
        return -1;
    if (r == MPI_PROC_NULL || r < 0)
        return -2;
    if (comm == MPI_COMM_WORLD)
        return r;
    const struct commmap *m = comm_of(comm);
    return m->world != NULL && r < m->size ? m->world[r] : -2;
}

/* a collective the replay can play: on a communicator of all ranks */
static const struct commmap *whole(MPI_Comm comm)
{
    const struct commmap *m = comm_of(comm);
    if (m->world == NULL || m->size != nworld) {
        skipped++;
        return NULL;
    }
    return m;
}

static long long type_bytes(MPI_Datatype t, MPI_Count n)
{
    int sz = 0;
    if (t != MPI_DATATYPE_NULL)
        PMPI_Type_size(t, &sz);
    return (long long)sz * (long long)n;
}

/* ---- the window: start and stop agreed at collectives of all ranks ----------------------- */

static void window(MPI_Comm comm)
{
    if (depth != 1 || stopped || paused || !(waiting_start || (recording && for_s > 0.0)))
        return;
    int size = 0, inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        return;
    PMPI_Comm_size(comm, &size);
    if (size != nworld)
        return;
    double t = now(CLOCK_MONOTONIC);
    int mine = waiting_start ? t - t_init >= after_s : t - t_start >= for_s, all = 0;
    PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    if (!all)
        return;
    if (waiting_start) {
        waiting_start = 0;
        recording = 1;
        t_start = t;
        burst_from = now(burst_clock);
    } else {
        recording = 0;
        stopped = 1;
    }
}

/* ---- requests ---------------------------------------------------------------------------- */

enum rkind { R_FREE, R_DEAD, R_SEND, R_RECV, R_COLL, R_NEIGHBOR };
struct req {
    uint64_t key;
    int kind, peer, tag, persistent, active, emitted;
    long long nbytes, seq, claimed;
    MPI_Comm comm;
    int nwaits, *waits;  /* R_NEIGHBOR: (src, dst) pairs written at its wait */
};
/* open addressing with tombstones (R_DEAD), so that an entry never moves while it is in use;
   the table is rebuilt, live entries only, when live and dead fill half of it */
static struct req *reqs;
static size_t nreqs_cap = 0, nreqs_used = 0;

static uint64_t key_of(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static size_t slot_of(uint64_t k) { return (size_t)((k * 11400714819323198485ull) >> 20) & (nreqs_cap - 1); }

static void rebuild(void)
{
    struct req *old = reqs;
    size_t oldcap = nreqs_cap, live = 0;
    for (size_t i = 0; i < oldcap; i++)
        live += old[i].kind > R_DEAD;
    nreqs_cap = 1024;
    while (nreqs_cap < 4 * (live + 1))
        nreqs_cap *= 2;
    reqs = calloc(nreqs_cap, sizeof *reqs);
    nreqs_used = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].kind > R_DEAD) {
            size_t j = slot_of(old[i].key);
            while (reqs[j].kind != R_FREE)
                j = (j + 1) & (nreqs_cap - 1);
            reqs[j] = old[i];
            nreqs_used++;
        }
    free(old);
}

/* MPICH hands out one lightweight handle for sends that completed at once, so several live
   requests may share a handle: every start gets its own entry, and a completion takes the
   oldest active entry of its handle that this call has not taken yet (``claim``) */
static long long seq_next = 0, stamp_next = 0;

static struct req *insert(MPI_Request r)
{
    if (r == MPI_REQUEST_NULL)
        return NULL;
    if (2 * (nreqs_used + 1) > nreqs_cap)
        rebuild();
    uint64_t k = key_of(r);
    size_t j = slot_of(k);
    while (reqs[j].kind > R_DEAD)
        j = (j + 1) & (nreqs_cap - 1);
    if (reqs[j].kind == R_FREE)
        nreqs_used++;
    memset(&reqs[j], 0, sizeof reqs[j]);
    reqs[j].key = k;
    reqs[j].kind = R_COLL;
    reqs[j].seq = seq_next++;
    return &reqs[j];
}

/* the oldest entry of handle r (active only, and not taken by call ``stamp``, if stamp > 0) */
static struct req *claim(MPI_Request r, long long stamp)
{
    if (r == MPI_REQUEST_NULL || nreqs_cap == 0)
        return NULL;
    uint64_t k = key_of(r);
    struct req *best = NULL;
    for (size_t j = slot_of(k); reqs[j].kind != R_FREE; j = (j + 1) & (nreqs_cap - 1)) {
        struct req *e = &reqs[j];
        if (e->kind == R_DEAD || e->key != k || (stamp > 0 && (!e->active || e->claimed == stamp)))
            continue;
        if (best == NULL || e->seq < best->seq)
            best = e;
    }
    if (best != NULL && stamp > 0)
        best->claimed = stamp;
    return best;
}

static struct req *find(MPI_Request r) { return claim(r, 0); }

static void drop(struct req *e)
{
    free(e->waits);
    e->waits = NULL;
    e->kind = R_DEAD;
}

static struct req *note(MPI_Request r, int kind, int peer, int tag, long long nb,
                        MPI_Comm comm, int persistent)
{
    struct req *e;
    if (persistent)  /* a persistent request's handle is its own: forget a stale entry */
        while ((e = find(r)) != NULL)
            drop(e);
    e = insert(r);
    if (e == NULL)
        return NULL;
    e->kind = kind;
    e->peer = peer;
    e->tag = tag;
    e->nbytes = nb;
    e->comm = comm;
    e->persistent = persistent;
    e->active = !persistent;
    e->emitted = 0;
    e->nwaits = 0;
    e->waits = NULL;
    return e;
}

/* the isend/irecv line of a started request (a receive from anyone waits for its status) */
static void post(struct req *e)
{
    e->active = 1;
    e->emitted = 0;
    if (!ON || e->peer == -2)
        return;
    if (e->kind == R_SEND) {
        COUNT(K_ISEND, e->nbytes);
        line("isend %d %d %lld", e->peer, e->tag, e->nbytes);
        e->emitted = 1;
        pending++;
    } else if (e->kind == R_RECV && e->peer >= 0 && e->tag != MPI_ANY_TAG) {
        COUNT(K_IRECV, e->nbytes);
        line("irecv %d %d %lld", e->peer, e->tag, e->nbytes);
        e->emitted = 1;
        pending++;
    } else if (e->kind == R_RECV) {
        e->emitted = 2;  /* written at completion */
    }
}

/* a receive from anyone, written now that its status names the sender */
static void post_late(struct req *e, const MPI_Status *st)
{
    if (e->kind != R_RECV || e->emitted != 2)
        return;
    int n = 0;
    PMPI_Get_count(st, MPI_BYTE, &n);
    e->peer = world_of(e->comm, st->MPI_SOURCE);
    e->tag = st->MPI_TAG;
    e->nbytes = n;
    if (e->peer < 0) {
        e->emitted = 0;
        return;
    }
    COUNT(K_IRECV, n);
    line("irecv %d %d %lld", e->peer, e->tag, e->nbytes);
    e->emitted = 1;
    pending++;
}

static void wait_line(struct req *e)
{
    if (e->kind == R_NEIGHBOR) {
        for (int i = 0; i < e->nwaits; i++) {
            COUNT(K_WAIT, 0);
            line("wait %d %d %d", e->waits[2 * i], e->waits[2 * i + 1], NEIGHBOR_TAG);
            pending--;
        }
        return;
    }
    if (e->emitted != 1)
        return;
    COUNT(K_WAIT, 0);
    if (e->kind == R_SEND)
        line("wait %d %d %d", me, e->peer, e->tag);
    else
        line("wait %d %d %d", e->peer, me, e->tag);
    pending--;
}

static void completed(struct req *e)
{
    e->active = 0;
    e->emitted = 0;
    if (!e->persistent)
        drop(e);
}

/* the lines of completed requests: "waitall" when they are all the outstanding ones */
static void finish(int n, struct req **es, MPI_Status *st, int all_of_them)
{
    int waits = 0;
    for (int i = 0; i < n; i++)
        if (es[i] != NULL && ON) {
            post_late(es[i], &st[i]);
            waits += es[i]->kind == R_NEIGHBOR ? es[i]->nwaits : es[i]->emitted == 1;
        }
    if (ON && all_of_them && waits > 1 && waits == pending) {
        COUNT(K_WAITALL, 0);
        line("waitall");
        pending = 0;
    } else if (ON) {
        for (int i = 0; i < n; i++)
            if (es[i] != NULL)
                wait_line(es[i]);
    }
    for (int i = 0; i < n; i++)
        if (es[i] != NULL)
            completed(es[i]);
}

static struct req *active(MPI_Request r, long long stamp)
{
    return claim(r, stamp);
}

/* ---- init and finalize ------------------------------------------------------------------- */

static void open_trace(void)
{
    const char *d = getenv("HALOFLOW_TRACE_DIR");
    if (d == NULL || !*d)
        return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &me);
    PMPI_Comm_size(MPI_COMM_WORLD, &nworld);
    snprintf(dir, sizeof dir, "%s", d);
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%d.txt.gz", dir, me);
    out = gzopen(path, "wb6");
    if (out == NULL) {
        fprintf(stderr, "pmpi_trace: cannot write %s; rank %d is not traced\n", path, me);
        return;
    }
    const char *s;
    if ((s = getenv("HALOFLOW_TRACE_FLOPS")) && atof(s) > 0)
        flops_per_s = atof(s);
    if ((s = getenv("HALOFLOW_TRACE_CLOCK")) && !strcmp(s, "process"))
        burst_clock = CLOCK_PROCESS_CPUTIME_ID;
    else if (s && !strcmp(s, "wall"))
        burst_clock = CLOCK_MONOTONIC;
    if ((s = getenv("HALOFLOW_TRACE_AFTER")))
        after_s = atof(s);
    if ((s = getenv("HALOFLOW_TRACE_FOR")))
        for_s = atof(s);
    gzprintf(out, "# haloflow pmpi_trace: rank %d of %d, compute at %.6g flop/s of %s CPU time\n",
             me, nworld, flops_per_s, burst_clock == CLOCK_MONOTONIC ? "wall" :
             burst_clock == CLOCK_PROCESS_CPUTIME_ID ? "process" : "thread");
    line("init");
    t_init = t_start = now(CLOCK_MONOTONIC);
    waiting_start = after_s > 0.0;
    recording = !waiting_start;
    burst_from = now(burst_clock);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    open_trace();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    open_trace();
    return rc;
}

static void write_summary(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/rank-%d.json", dir, me);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    fprintf(f, "{\"rank\": %d, \"size\": %d, \"flops_per_s\": %.17g, \"clock\": \"%s\",\n"
            " \"compute_s\": %.9g, \"lines\": %lld, \"skipped\": %lld, \"started\": %s,\n"
            " \"calls\": {", me, nworld, flops_per_s,
            burst_clock == CLOCK_MONOTONIC ? "wall" :
            burst_clock == CLOCK_PROCESS_CPUTIME_ID ? "process" : "thread",
            compute_s, lines, skipped, (recording || stopped) ? "true" : "false");
    for (int k = 0; k < K_NKINDS; k++)
        fprintf(f, "%s\"%s\": %lld", k ? ", " : "", KIND_NAMES[k], calls[k]);
    fprintf(f, "},\n \"bytes\": {");
    for (int k = 0; k < K_NKINDS; k++)
        fprintf(f, "%s\"%s\": %lld", k ? ", " : "", KIND_NAMES[k], bytes[k]);
    fprintf(f, "}}\n");
    fclose(f);
}

int MPI_Finalize(void)
{
    int outer = enter();
    if (out != NULL) {
        line("finalize");
        gzclose(out);
        out = NULL;
        write_summary();
    }
    leave(outer);
    return PMPI_Finalize();
}

int MPI_Pcontrol(const int level, ...)
{
    if (depth == 0 && out != NULL) {
        if (level == 0 && !paused) {
            int outer = enter();
            paused = 1;
            leave(outer);
        } else if (level != 0 && paused) {
            paused = 0;
            burst_from = now(burst_clock);
        }
    }
    return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    forget_comm(*comm);
    return PMPI_Comm_free(comm);
}

/* ---- point to point ---------------------------------------------------------------------- */
/* Every call has an int-count and an MPI_Count (_c) form; mpi4py calls either. */

static void blocking_send(MPI_Count count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    int peer = world_of(comm, dest);
    if (ON && peer >= 0) {
        long long nb = type_bytes(t, count);
        COUNT(K_SEND, nb);
        line("send %d %d %lld", peer, tag, nb);
    }
}

#define SEND_WRAPPER(NAME, CNT)                                                               \
    int NAME(const void *buf, CNT count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)    \
    {                                                                                         \
        int outer = enter();                                                                  \
        if (outer)                                                                            \
            blocking_send(count, t, dest, tag, comm);                                         \
        int rc = P##NAME(buf, count, t, dest, tag, comm);                                     \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
SEND_WRAPPER(MPI_Send, int)
SEND_WRAPPER(MPI_Ssend, int)
SEND_WRAPPER(MPI_Rsend, int)
SEND_WRAPPER(MPI_Bsend, int)
SEND_WRAPPER(MPI_Send_c, MPI_Count)
SEND_WRAPPER(MPI_Ssend_c, MPI_Count)
SEND_WRAPPER(MPI_Rsend_c, MPI_Count)
SEND_WRAPPER(MPI_Bsend_c, MPI_Count)

static void started(MPI_Request r, int kind, int peer, int tag, long long nb, MPI_Comm comm)
{
    struct req *e = note(r, kind, peer, tag, nb, comm, 0);
    if (e != NULL)
        post(e);
}

#define ISEND_WRAPPER(NAME, CNT)                                                              \
    int NAME(const void *buf, CNT count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,    \
             MPI_Request *r)                                                                  \
    {                                                                                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(buf, count, t, dest, tag, comm, r);                                  \
        if (outer && rc == MPI_SUCCESS)                                                       \
            started(*r, R_SEND, world_of(comm, dest), tag, type_bytes(t, count), comm);       \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
ISEND_WRAPPER(MPI_Isend, int)
ISEND_WRAPPER(MPI_Issend, int)
ISEND_WRAPPER(MPI_Irsend, int)
ISEND_WRAPPER(MPI_Ibsend, int)
ISEND_WRAPPER(MPI_Isend_c, MPI_Count)
ISEND_WRAPPER(MPI_Issend_c, MPI_Count)
ISEND_WRAPPER(MPI_Irsend_c, MPI_Count)
ISEND_WRAPPER(MPI_Ibsend_c, MPI_Count)

#define IRECV_WRAPPER(NAME, CNT)                                                              \
    int NAME(void *buf, CNT count, MPI_Datatype t, int src, int tag, MPI_Comm comm,           \
             MPI_Request *r)                                                                  \
    {                                                                                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(buf, count, t, src, tag, comm, r);                                   \
        if (outer && rc == MPI_SUCCESS)                                                       \
            started(*r, R_RECV, world_of(comm, src), tag, type_bytes(t, count), comm);        \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
IRECV_WRAPPER(MPI_Irecv, int)
IRECV_WRAPPER(MPI_Irecv_c, MPI_Count)

static void blocking_recv(MPI_Comm comm, const MPI_Status *st)
{
    int n = 0, peer = world_of(comm, st->MPI_SOURCE);
    if (!ON || peer < 0)
        return;
    PMPI_Get_count(st, MPI_BYTE, &n);
    COUNT(K_RECV, n);
    line("recv %d %d %d", peer, st->MPI_TAG, n);
}

#define RECV_WRAPPER(NAME, CNT)                                                               \
    int NAME(void *buf, CNT count, MPI_Datatype t, int src, int tag, MPI_Comm comm,           \
             MPI_Status *status)                                                              \
    {                                                                                         \
        MPI_Status own;                                                                       \
        MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(buf, count, t, src, tag, comm, st);                                  \
        if (outer && rc == MPI_SUCCESS)                                                       \
            blocking_recv(comm, st);                                                          \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
RECV_WRAPPER(MPI_Recv, int)
RECV_WRAPPER(MPI_Recv_c, MPI_Count)

/* a matched receive (after MPI_Mprobe): its message handle does not name the communicator,
   so the status's source is taken as a rank of MPI_COMM_WORLD */
#define MRECV_WRAPPER(NAME, CNT)                                                              \
    int NAME(void *buf, CNT count, MPI_Datatype t, MPI_Message *msg, MPI_Status *status)      \
    {                                                                                         \
        MPI_Status own;                                                                       \
        MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(buf, count, t, msg, st);                                             \
        if (outer && rc == MPI_SUCCESS)                                                       \
            blocking_recv(MPI_COMM_WORLD, st);                                                \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
MRECV_WRAPPER(MPI_Mrecv, int)
MRECV_WRAPPER(MPI_Mrecv_c, MPI_Count)

/* a send and a receive at once: irecv, isend and the two waits */
static void sendrecv(MPI_Count sc, MPI_Datatype st_, int dest, int stag, MPI_Comm comm,
                     const MPI_Status *s)
{
    int to = world_of(comm, dest), from = world_of(comm, s->MPI_SOURCE);
    if (!ON)
        return;
    int n = 0;
    PMPI_Get_count(s, MPI_BYTE, &n);
    if (from >= 0) {
        COUNT(K_IRECV, n);
        line("irecv %d %d %d", from, s->MPI_TAG, n);
    }
    if (to >= 0) {
        long long nb = type_bytes(st_, sc);
        COUNT(K_ISEND, nb);
        line("isend %d %d %lld", to, stag, nb);
        COUNT(K_WAIT, 0);
        line("wait %d %d %d", me, to, stag);
    }
    if (from >= 0) {
        COUNT(K_WAIT, 0);
        line("wait %d %d %d", from, me, s->MPI_TAG);
    }
}

#define SENDRECV_WRAPPER(NAME, CNT)                                                           \
    int NAME(const void *sb, CNT sc, MPI_Datatype stype, int dest, int stag, void *rb,        \
             CNT rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm,                \
             MPI_Status *status)                                                              \
    {                                                                                         \
        MPI_Status own;                                                                       \
        MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(sb, sc, stype, dest, stag, rb, rcount, rtype, src, rtag, comm, st);  \
        if (outer && rc == MPI_SUCCESS)                                                       \
            sendrecv(sc, stype, dest, stag, comm, st);                                        \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
SENDRECV_WRAPPER(MPI_Sendrecv, int)
SENDRECV_WRAPPER(MPI_Sendrecv_c, MPI_Count)

#define SENDRECV_REPLACE_WRAPPER(NAME, CNT)                                                   \
    int NAME(void *b, CNT count, MPI_Datatype t, int dest, int stag, int src, int rtag,       \
             MPI_Comm comm, MPI_Status *status)                                               \
    {                                                                                         \
        MPI_Status own;                                                                       \
        MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(b, count, t, dest, stag, src, rtag, comm, st);                       \
        if (outer && rc == MPI_SUCCESS)                                                       \
            sendrecv(count, t, dest, stag, comm, st);                                         \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
SENDRECV_REPLACE_WRAPPER(MPI_Sendrecv_replace, int)
SENDRECV_REPLACE_WRAPPER(MPI_Sendrecv_replace_c, MPI_Count)

/* ---- persistent requests ----------------------------------------------------------------- */

#define INIT_WRAPPER(NAME, CNT, CONST, KIND)                                                  \
    int NAME(CONST void *buf, CNT count, MPI_Datatype t, int peer, int tag, MPI_Comm comm,    \
             MPI_Request *r)                                                                  \
    {                                                                                         \
        int outer = enter();                                                                  \
        int rc = P##NAME(buf, count, t, peer, tag, comm, r);                                  \
        if (outer && rc == MPI_SUCCESS)                                                       \
            note(*r, KIND, world_of(comm, peer), tag, type_bytes(t, count), comm, 1);         \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
INIT_WRAPPER(MPI_Send_init, int, const, R_SEND)
INIT_WRAPPER(MPI_Ssend_init, int, const, R_SEND)
INIT_WRAPPER(MPI_Rsend_init, int, const, R_SEND)
INIT_WRAPPER(MPI_Bsend_init, int, const, R_SEND)
INIT_WRAPPER(MPI_Recv_init, int, , R_RECV)
INIT_WRAPPER(MPI_Send_init_c, MPI_Count, const, R_SEND)
INIT_WRAPPER(MPI_Ssend_init_c, MPI_Count, const, R_SEND)
INIT_WRAPPER(MPI_Rsend_init_c, MPI_Count, const, R_SEND)
INIT_WRAPPER(MPI_Bsend_init_c, MPI_Count, const, R_SEND)
INIT_WRAPPER(MPI_Recv_init_c, MPI_Count, , R_RECV)

int MPI_Start(MPI_Request *r)
{
    int outer = enter();
    int rc = PMPI_Start(r);
    if (outer && rc == MPI_SUCCESS) {
        struct req *e = find(*r);
        if (e != NULL && e->persistent)
            post(e);
    }
    leave(outer);
    return rc;
}

int MPI_Startall(int n, MPI_Request r[])
{
    int outer = enter();
    int rc = PMPI_Startall(n, r);
    if (outer && rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++) {
            struct req *e = find(r[i]);
            if (e != NULL && e->persistent)
                post(e);
        }
    leave(outer);
    return rc;
}

int MPI_Request_free(MPI_Request *r)
{
    int outer = enter();
    struct req *e = outer ? find(*r) : NULL;
    if (e != NULL)
        drop(e);
    int rc = PMPI_Request_free(r);
    leave(outer);
    return rc;
}

/* ---- completion -------------------------------------------------------------------------- */

int MPI_Wait(MPI_Request *r, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int outer = enter();
    struct req *e = outer ? active(*r, ++stamp_next) : NULL;
    int rc = PMPI_Wait(r, st);
    if (e != NULL && rc == MPI_SUCCESS)
        finish(1, &e, st, 0);
    leave(outer);
    return rc;
}

/* the traced requests among r[0..n) (before the call frees them) and a status array */
static struct req **gather_reqs(int n, MPI_Request r[], MPI_Status **st, MPI_Status *given)
{
    struct req **es = calloc((size_t)(n > 0 ? n : 1), sizeof *es);
    long long stamp = ++stamp_next;
    for (int i = 0; i < n; i++)
        es[i] = active(r[i], stamp);
    *st = given == MPI_STATUSES_IGNORE ? calloc((size_t)(n > 0 ? n : 1), sizeof **st) : given;
    return es;
}

int MPI_Waitall(int n, MPI_Request r[], MPI_Status statuses[])
{
    int outer = enter();
    if (!outer) {
        int rc = PMPI_Waitall(n, r, statuses);
        leave(outer);
        return rc;
    }
    MPI_Status *st;
    struct req **es = gather_reqs(n, r, &st, statuses);
    int rc = PMPI_Waitall(n, r, st);
    if (rc == MPI_SUCCESS)
        finish(n, es, st, 1);
    if (st != statuses)
        free(st);
    free(es);
    leave(outer);
    return rc;
}

int MPI_Waitany(int n, MPI_Request r[], int *index, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int outer = enter();
    struct req **es = NULL;
    MPI_Status *unused;
    if (outer)
        es = gather_reqs(n, r, &unused, st);
    int rc = PMPI_Waitany(n, r, index, st);
    if (outer && rc == MPI_SUCCESS && *index != MPI_UNDEFINED && es[*index] != NULL)
        finish(1, &es[*index], st, 0);
    free(es);
    leave(outer);
    return rc;
}

static int some(int (*fn)(int, MPI_Request *, int *, int *, MPI_Status *), int n,
                MPI_Request r[], int *outcount, int idx[], MPI_Status statuses[])
{
    int outer = enter();
    if (!outer) {
        int rc = fn(n, r, outcount, idx, statuses);
        leave(outer);
        return rc;
    }
    MPI_Status *st;
    struct req **es = gather_reqs(n, r, &st, statuses);
    int rc = fn(n, r, outcount, idx, st);
    if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
        for (int i = 0; i < *outcount; i++)
            if (es[idx[i]] != NULL)
                finish(1, &es[idx[i]], &st[i], 0);
    if (st != statuses)
        free(st);
    free(es);
    leave(outer);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request r[], int *outcount, int idx[], MPI_Status st[])
{
    return some(PMPI_Waitsome, n, r, outcount, idx, st);
}

int MPI_Testsome(int n, MPI_Request r[], int *outcount, int idx[], MPI_Status st[])
{
    return some(PMPI_Testsome, n, r, outcount, idx, st);
}

int MPI_Test(MPI_Request *r, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int outer = enter();
    struct req *e = outer ? active(*r, ++stamp_next) : NULL;
    int rc = PMPI_Test(r, flag, st);
    if (e != NULL && rc == MPI_SUCCESS && *flag)
        finish(1, &e, st, 0);
    leave(outer);
    return rc;
}

int MPI_Testany(int n, MPI_Request r[], int *index, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int outer = enter();
    struct req **es = NULL;
    MPI_Status *unused;
    if (outer)
        es = gather_reqs(n, r, &unused, st);
    int rc = PMPI_Testany(n, r, index, flag, st);
    if (outer && rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED && es[*index] != NULL)
        finish(1, &es[*index], st, 0);
    free(es);
    leave(outer);
    return rc;
}

int MPI_Testall(int n, MPI_Request r[], int *flag, MPI_Status statuses[])
{
    int outer = enter();
    if (!outer) {
        int rc = PMPI_Testall(n, r, flag, statuses);
        leave(outer);
        return rc;
    }
    MPI_Status *st;
    struct req **es = gather_reqs(n, r, &st, statuses);
    int rc = PMPI_Testall(n, r, flag, st);
    if (rc == MPI_SUCCESS && *flag)
        finish(n, es, st, 1);
    if (st != statuses)
        free(st);
    free(es);
    leave(outer);
    return rc;
}

/* ---- collectives ------------------------------------------------------------------------- */

static long long count_at(const void *counts, int is_c, int i)
{
    return is_c ? (long long)((const MPI_Count *)counts)[i] : (long long)((const int *)counts)[i];
}

/* "HEAD c_0 .. c_n-1 TAIL": per-rank byte counts in world order (zeros where counts is NULL) */
static void counts_line(const struct commmap *m, const char *head, const void *counts,
                        int is_c, MPI_Datatype t, const char *tail)
{
    long long *w = calloc((size_t)nworld, sizeof *w);
    int sz = 0;
    PMPI_Type_size(t, &sz);
    for (int i = 0; counts != NULL && i < m->size; i++)
        w[m->world[i]] = (long long)sz * count_at(counts, is_c, i);
    if (out != NULL) {  /* longer than line()'s buffer: written directly */
        flush_compute();
        gzprintf(out, "%d %s", me, head);
        for (int i = 0; i < nworld; i++)
            gzprintf(out, " %lld", w[i]);
        gzprintf(out, "%s\n", tail);
        lines++;
    }
    free(w);
}

static long long sum_counts(const struct commmap *m, const void *counts, int is_c,
                            MPI_Datatype t)
{
    long long s = 0;
    for (int i = 0; i < m->size; i++)
        s += count_at(counts, is_c, i);
    return type_bytes(t, s);
}

static int rank_in(MPI_Comm comm)
{
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

#define COLL_BEGIN(comm)                                                                      \
    int outer = enter();                                                                      \
    if (outer)                                                                                \
        window(comm);                                                                         \
    const struct commmap *m = (outer && ON) ? whole(comm) : NULL;
#define COLL_END(call)                                                                        \
    int rc_ = call;                                                                           \
    leave(outer);                                                                             \
    return rc_;

int MPI_Barrier(MPI_Comm comm)
{
    COLL_BEGIN(comm)
    if (m) { COUNT(K_BARRIER, 0); line("barrier"); }
    COLL_END(PMPI_Barrier(comm))
}

static void bcast_line(const struct commmap *m, MPI_Count n, MPI_Datatype t, int root)
{
    long long nb = type_bytes(t, n);
    COUNT(K_BCAST, nb);
    line("bcast %lld %d", nb, m->world[root]);
}

#define BCAST_WRAPPER(NAME, CNT)                                                              \
    int NAME(void *b, CNT n, MPI_Datatype t, int root, MPI_Comm comm)                         \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) bcast_line(m, n, t, root);                                                     \
        COLL_END(P##NAME(b, n, t, root, comm))                                                \
    }
BCAST_WRAPPER(MPI_Bcast, int)
BCAST_WRAPPER(MPI_Bcast_c, MPI_Count)

static void reduce_line(int kind, const char *name, const struct commmap *m, MPI_Count n,
                        MPI_Datatype t, int root)
{
    long long nb = type_bytes(t, n);
    COUNT(kind, nb);
    if (root >= 0)
        line("%s %lld 0 %d", name, nb, m->world[root]);
    else
        line("%s %lld 0", name, nb);
}

#define REDUCE_WRAPPER(NAME, CNT)                                                             \
    int NAME(const void *s, void *r, CNT n, MPI_Datatype t, MPI_Op op, int root,              \
             MPI_Comm comm)                                                                   \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) reduce_line(K_REDUCE, "reduce", m, n, t, root);                                \
        COLL_END(P##NAME(s, r, n, t, op, root, comm))                                         \
    }
REDUCE_WRAPPER(MPI_Reduce, int)
REDUCE_WRAPPER(MPI_Reduce_c, MPI_Count)

#define ALLREDUCE_WRAPPER(NAME, CNT, KIND, LABEL)                                             \
    int NAME(const void *s, void *r, CNT n, MPI_Datatype t, MPI_Op op, MPI_Comm comm)         \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) reduce_line(KIND, LABEL, m, n, t, -1);                                         \
        COLL_END(P##NAME(s, r, n, t, op, comm))                                               \
    }
ALLREDUCE_WRAPPER(MPI_Allreduce, int, K_ALLREDUCE, "allreduce")
ALLREDUCE_WRAPPER(MPI_Allreduce_c, MPI_Count, K_ALLREDUCE, "allreduce")
ALLREDUCE_WRAPPER(MPI_Scan, int, K_SCAN, "scan")
ALLREDUCE_WRAPPER(MPI_Scan_c, MPI_Count, K_SCAN, "scan")
ALLREDUCE_WRAPPER(MPI_Exscan, int, K_EXSCAN, "exscan")
ALLREDUCE_WRAPPER(MPI_Exscan_c, MPI_Count, K_EXSCAN, "exscan")

#define REDUCE_SCATTER_WRAPPER(NAME, CARR, IS_C)                                              \
    int NAME(const void *s, void *r, const CARR counts[], MPI_Datatype t, MPI_Op op,          \
             MPI_Comm comm)                                                                   \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) {                                                                              \
            COUNT(K_REDUCESCATTER, sum_counts(m, counts, IS_C, t));                           \
            counts_line(m, "reducescatter", counts, IS_C, t, " 0");                           \
        }                                                                                     \
        COLL_END(P##NAME(s, r, counts, t, op, comm))                                          \
    }
REDUCE_SCATTER_WRAPPER(MPI_Reduce_scatter, int, 0)
REDUCE_SCATTER_WRAPPER(MPI_Reduce_scatter_c, MPI_Count, 1)

static void two_sizes(int kind, const char *name, MPI_Count sc, MPI_Datatype st, MPI_Count rc,
                      MPI_Datatype rt, int root, const struct commmap *m)
{
    long long sb = type_bytes(st, sc), rb = type_bytes(rt, rc);
    COUNT(kind, sb);
    if (root >= 0)
        line("%s %lld %lld %d", name, sb, rb, m->world[root]);
    else
        line("%s %lld %lld", name, sb, rb);
}

/* MPI_IN_PLACE in the send buffer: this rank's part is its part of the receive buffer */
#define TWO_SIZES_WRAPPER(NAME, CNT, KIND, LABEL)                                             \
    int NAME(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc, MPI_Datatype rt,      \
             MPI_Comm comm)                                                                   \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) two_sizes(KIND, LABEL, sb == MPI_IN_PLACE ? rc : sc,                           \
                         sb == MPI_IN_PLACE ? rt : st, rc, rt, -1, m);                        \
        COLL_END(P##NAME(sb, sc, st, rb, rc, rt, comm))                                       \
    }
TWO_SIZES_WRAPPER(MPI_Allgather, int, K_ALLGATHER, "allgather")
TWO_SIZES_WRAPPER(MPI_Allgather_c, MPI_Count, K_ALLGATHER, "allgather")
TWO_SIZES_WRAPPER(MPI_Alltoall, int, K_ALLTOALL, "alltoall")
TWO_SIZES_WRAPPER(MPI_Alltoall_c, MPI_Count, K_ALLTOALL, "alltoall")

#define ROOTED_WRAPPER(NAME, CNT, KIND, LABEL)                                                \
    int NAME(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc, MPI_Datatype rt,      \
             int root, MPI_Comm comm)                                                         \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) two_sizes(KIND, LABEL, sb == MPI_IN_PLACE ? rc : sc,                           \
                         sb == MPI_IN_PLACE ? rt : st, rb == MPI_IN_PLACE ? sc : rc,          \
                         rb == MPI_IN_PLACE ? st : rt, root, m);                              \
        COLL_END(P##NAME(sb, sc, st, rb, rc, rt, root, comm))                                 \
    }
ROOTED_WRAPPER(MPI_Gather, int, K_GATHER, "gather")
ROOTED_WRAPPER(MPI_Gather_c, MPI_Count, K_GATHER, "gather")
ROOTED_WRAPPER(MPI_Scatter, int, K_SCATTER, "scatter")
ROOTED_WRAPPER(MPI_Scatter_c, MPI_Count, K_SCATTER, "scatter")

/* "allgatherv S R_0 .. R_n-1" and "gatherv S R_0 .. R_n-1 ROOT" (the counts mean something at
   the root only: zeros elsewhere) */
static void gatherv_line(const struct commmap *m, MPI_Comm comm, const void *sb, MPI_Count sc,
                         MPI_Datatype st, const void *rcounts, int is_c, MPI_Datatype rt,
                         int root)
{
    int r = rank_in(comm);
    int at_root = root < 0 || r == root;
    long long mine = sb == MPI_IN_PLACE ? type_bytes(rt, count_at(rcounts, is_c, r))
                                        : type_bytes(st, sc);
    char head[64], tail[32] = "";
    snprintf(head, sizeof head, "%s %lld", root >= 0 ? "gatherv" : "allgatherv", mine);
    if (root >= 0)
        snprintf(tail, sizeof tail, " %d", m->world[root]);
    COUNT(root >= 0 ? K_GATHERV : K_ALLGATHERV, mine);
    counts_line(m, head, at_root ? rcounts : NULL, is_c, rt, tail);
}

#define ALLGATHERV_WRAPPER(NAME, CNT, CARR, DARR, IS_C)                                       \
    int NAME(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CARR rc[],              \
             const DARR displs[], MPI_Datatype rt, MPI_Comm comm)                             \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) gatherv_line(m, comm, sb, sc, st, rc, IS_C, rt, -1);                           \
        COLL_END(P##NAME(sb, sc, st, rb, rc, displs, rt, comm))                               \
    }
ALLGATHERV_WRAPPER(MPI_Allgatherv, int, int, int, 0)
ALLGATHERV_WRAPPER(MPI_Allgatherv_c, MPI_Count, MPI_Count, MPI_Aint, 1)

#define GATHERV_WRAPPER(NAME, CNT, CARR, DARR, IS_C)                                          \
    int NAME(const void *sb, CNT sc, MPI_Datatype st, void *rb, const CARR rc[],              \
             const DARR displs[], MPI_Datatype rt, int root, MPI_Comm comm)                   \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) gatherv_line(m, comm, sb, sc, st, rc, IS_C, rt, root);                         \
        COLL_END(P##NAME(sb, sc, st, rb, rc, displs, rt, root, comm))                         \
    }
GATHERV_WRAPPER(MPI_Gatherv, int, int, int, 0)
GATHERV_WRAPPER(MPI_Gatherv_c, MPI_Count, MPI_Count, MPI_Aint, 1)

/* "scatterv S_0 .. S_n-1 R ROOT" (the send counts at the root only) */
static void scatterv_line(const struct commmap *m, MPI_Comm comm, const void *scounts,
                          int is_c, MPI_Datatype st, const void *rb, MPI_Count rc,
                          MPI_Datatype rt, int root)
{
    int r = rank_in(comm);
    long long mine = rb == MPI_IN_PLACE ? type_bytes(st, count_at(scounts, is_c, r))
                                        : type_bytes(rt, rc);
    char tail[64];
    snprintf(tail, sizeof tail, " %lld %d", mine, m->world[root]);
    COUNT(K_SCATTERV, mine);
    counts_line(m, "scatterv", r == root ? scounts : NULL, is_c, st, tail);
}

#define SCATTERV_WRAPPER(NAME, CNT, CARR, DARR, IS_C)                                         \
    int NAME(const void *sb, const CARR sc[], const DARR displs[], MPI_Datatype st,           \
             void *rb, CNT rc, MPI_Datatype rt, int root, MPI_Comm comm)                      \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) scatterv_line(m, comm, sc, IS_C, st, rb, rc, rt, root);                        \
        COLL_END(P##NAME(sb, sc, displs, st, rb, rc, rt, root, comm))                         \
    }
SCATTERV_WRAPPER(MPI_Scatterv, int, int, int, 0)
SCATTERV_WRAPPER(MPI_Scatterv_c, MPI_Count, MPI_Count, MPI_Aint, 1)

/* "alltoallv SSUM S_0 .. S_n-1 RSUM R_0 .. R_n-1" */
static void alltoallv_line(const struct commmap *m, const void *sc, MPI_Datatype st,
                           const void *rc, MPI_Datatype rt, int is_c)
{
    long long ssum = sum_counts(m, sc, is_c, st), rsum = sum_counts(m, rc, is_c, rt);
    int ss = 0, rs = 0;
    PMPI_Type_size(st, &ss);
    PMPI_Type_size(rt, &rs);
    long long *w = calloc((size_t)(2 * nworld), sizeof *w);
    for (int i = 0; i < m->size; i++) {
        w[m->world[i]] = (long long)ss * count_at(sc, is_c, i);
        w[nworld + m->world[i]] = (long long)rs * count_at(rc, is_c, i);
    }
    COUNT(K_ALLTOALLV, ssum);
    if (out != NULL) {
        flush_compute();
        gzprintf(out, "%d alltoallv %lld", me, ssum);
        for (int i = 0; i < nworld; i++)
            gzprintf(out, " %lld", w[i]);
        gzprintf(out, " %lld", rsum);
        for (int i = 0; i < nworld; i++)
            gzprintf(out, " %lld", w[nworld + i]);
        gzputc(out, '\n');
        lines++;
    }
    free(w);
}

#define ALLTOALLV_WRAPPER(NAME, CARR, DARR, IS_C)                                             \
    int NAME(const void *sb, const CARR sc[], const DARR sd[], MPI_Datatype st, void *rb,     \
             const CARR rc[], const DARR rd[], MPI_Datatype rt, MPI_Comm comm)                \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) alltoallv_line(m, sb == MPI_IN_PLACE ? rc : sc, sb == MPI_IN_PLACE ? rt : st,  \
                              rc, rt, IS_C);                                                  \
        COLL_END(P##NAME(sb, sc, sd, st, rb, rc, rd, rt, comm))                               \
    }
ALLTOALLV_WRAPPER(MPI_Alltoallv, int, int, 0)
ALLTOALLV_WRAPPER(MPI_Alltoallv_c, MPI_Count, MPI_Aint, 1)

/* ---- non-blocking collectives: the blocking collective at the call ----------------------- */

static void coll_request(MPI_Request r)
{
    note(r, R_COLL, -2, 0, 0, MPI_COMM_NULL, 0);
}

#define IALLREDUCE_WRAPPER(NAME, CNT)                                                         \
    int NAME(const void *s, void *r, CNT n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,         \
             MPI_Request *req)                                                                \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) reduce_line(K_ALLREDUCE, "allreduce", m, n, t, -1);                            \
        int rc = P##NAME(s, r, n, t, op, comm, req);                                          \
        if (outer && rc == MPI_SUCCESS)                                                       \
            coll_request(*req);                                                               \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
IALLREDUCE_WRAPPER(MPI_Iallreduce, int)
IALLREDUCE_WRAPPER(MPI_Iallreduce_c, MPI_Count)

#define IBCAST_WRAPPER(NAME, CNT)                                                             \
    int NAME(void *b, CNT n, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req)       \
    {                                                                                         \
        COLL_BEGIN(comm)                                                                      \
        if (m) bcast_line(m, n, t, root);                                                     \
        int rc = P##NAME(b, n, t, root, comm, req);                                           \
        if (outer && rc == MPI_SUCCESS)                                                       \
            coll_request(*req);                                                               \
        leave(outer);                                                                         \
        return rc;                                                                            \
    }
IBCAST_WRAPPER(MPI_Ibcast, int)
IBCAST_WRAPPER(MPI_Ibcast_c, MPI_Count)

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm)
    if (m) { COUNT(K_BARRIER, 0); line("barrier"); }
    int rc = PMPI_Ibarrier(comm, req);
    if (outer && rc == MPI_SUCCESS)
        coll_request(*req);
    leave(outer);
    return rc;
}

/* ---- neighbourhood collectives: messages to and from each graph neighbour ---------------- */

static int neighbors(MPI_Comm comm, int **src, int *ns, int **dst, int *nd)
{
    int topo = MPI_UNDEFINED;
    PMPI_Topo_test(comm, &topo);
    *src = *dst = NULL;
    *ns = *nd = 0;
    if (topo == MPI_DIST_GRAPH) {
        int w = 0;
        PMPI_Dist_graph_neighbors_count(comm, ns, nd, &w);
        *src = malloc(sizeof(int) * (size_t)(*ns + 1));
        *dst = malloc(sizeof(int) * (size_t)(*nd + 1));
        PMPI_Dist_graph_neighbors(comm, *ns, *src, MPI_UNWEIGHTED, *nd, *dst, MPI_UNWEIGHTED);
    } else if (topo == MPI_GRAPH) {
        int r = 0;
        PMPI_Comm_rank(comm, &r);
        PMPI_Graph_neighbors_count(comm, r, ns);
        *nd = *ns;
        *src = malloc(sizeof(int) * (size_t)(*ns + 1));
        *dst = malloc(sizeof(int) * (size_t)(*nd + 1));
        PMPI_Graph_neighbors(comm, r, *ns, *src);
        memcpy(*dst, *src, sizeof(int) * (size_t)*ns);
    } else if (topo == MPI_CART) {
        int nd_ = 0;
        PMPI_Cartdim_get(comm, &nd_);
        *ns = *nd = 2 * nd_;
        *src = malloc(sizeof(int) * (size_t)(*ns + 1));
        *dst = malloc(sizeof(int) * (size_t)(*nd + 1));
        for (int d = 0; d < nd_; d++) {  /* MPI's order: -1 then +1 in each dimension */
            int lo, hi;
            PMPI_Cart_shift(comm, d, 1, &lo, &hi);
            (*src)[2 * d] = (*dst)[2 * d] = lo;
            (*src)[2 * d + 1] = (*dst)[2 * d + 1] = hi;
        }
    } else {
        return 0;
    }
    return 1;
}

/* irecv from every source, isend to every destination; returns the number of waits, which
   are (src, dst) pairs in *waits, or -1 on a communicator without a topology */
static int neighbor_lines(MPI_Comm comm, const void *sc, MPI_Datatype st, const void *rc,
                          MPI_Datatype rt, int is_c, int same_count, int **waits)
{
    int *src, *dst, ns, nd, nw = 0;
    *waits = NULL;
    if (!neighbors(comm, &src, &ns, &dst, &nd))
        return -1;
    *waits = malloc(sizeof(int) * 2 * (size_t)(ns + nd + 1));
    for (int i = 0; i < ns; i++) {
        int peer = world_of(comm, src[i]);
        long long nb = type_bytes(rt, count_at(rc, is_c, same_count ? 0 : i));
        if (peer < 0)
            continue;
        COUNT(K_IRECV, nb);
        COUNT(K_NEIGHBOR, 0);
        line("irecv %d %d %lld", peer, NEIGHBOR_TAG, nb);
        (*waits)[2 * nw] = peer;
        (*waits)[2 * nw++ + 1] = me;
        pending++;
    }
    for (int i = 0; i < nd; i++) {
        int peer = world_of(comm, dst[i]);
        long long nb = type_bytes(st, count_at(sc, is_c, same_count ? 0 : i));
        if (peer < 0)
            continue;
        COUNT(K_ISEND, nb);
        COUNT(K_NEIGHBOR, nb);
        line("isend %d %d %lld", peer, NEIGHBOR_TAG, nb);
        (*waits)[2 * nw] = me;
        (*waits)[2 * nw++ + 1] = peer;
        pending++;
    }
    free(src);
    free(dst);
    return nw;
}

static void neighbor_waits(int nw, int *waits)
{
    for (int i = 0; i < nw; i++) {
        COUNT(K_WAIT, 0);
        line("wait %d %d %d", waits[2 * i], waits[2 * i + 1], NEIGHBOR_TAG);
        pending--;
    }
}

/* a blocking neighbourhood collective: its messages and their waits at once */
static void neighbor_now(MPI_Comm comm, const void *sc, MPI_Datatype st, const void *rc,
                         MPI_Datatype rt, int is_c, int same_count)
{
    int *waits = NULL;
    int nw = neighbor_lines(comm, sc, st, rc, rt, is_c, same_count, &waits);
    if (nw < 0)
        skipped++;
    else
        neighbor_waits(nw, waits);
    free(waits);
}

#define NEIGHBOR_ALLTOALLV_WRAPPER(NAME, CARR, DARR, IS_C)                                    \
    int NAME(const void *sb, const CARR sc[], const DARR sd[], MPI_Datatype st, void *rb,     \
             const CARR rc[], const DARR rd[], MPI_Datatype rt, MPI_Comm comm)                \
    {                                                                                         \
        int outer = enter();                                                                  \
        if (outer && ON)                                                                      \
            neighbor_now(comm, sc, st, rc, rt, IS_C, 0);                                      \
        int rc_ = P##NAME(sb, sc, sd, st, rb, rc, rd, rt, comm);                              \
        leave(outer);                                                                         \
        return rc_;                                                                           \
    }
NEIGHBOR_ALLTOALLV_WRAPPER(MPI_Neighbor_alltoallv, int, int, 0)
NEIGHBOR_ALLTOALLV_WRAPPER(MPI_Neighbor_alltoallv_c, MPI_Count, MPI_Aint, 1)

#define NEIGHBOR_ALLTOALL_WRAPPER(NAME, CNT, IS_C)                                            \
    int NAME(const void *sb, CNT sc, MPI_Datatype st, void *rb, CNT rc, MPI_Datatype rt,      \
             MPI_Comm comm)                                                                   \
    {                                                                                         \
        int outer = enter();                                                                  \
        if (outer && ON)                                                                      \
            neighbor_now(comm, &sc, st, &rc, rt, IS_C, 1);                                    \
        int rc_ = P##NAME(sb, sc, st, rb, rc, rt, comm);                                      \
        leave(outer);                                                                         \
        return rc_;                                                                           \
    }
NEIGHBOR_ALLTOALL_WRAPPER(MPI_Neighbor_alltoall, int, 0)
NEIGHBOR_ALLTOALL_WRAPPER(MPI_Neighbor_alltoall_c, MPI_Count, 1)

/* the non-blocking form: the messages now, their waits at the request's completion */
#define INEIGHBOR_ALLTOALLV_WRAPPER(NAME, CARR, DARR, IS_C)                                   \
    int NAME(const void *sb, const CARR sc[], const DARR sd[], MPI_Datatype st, void *rb,     \
             const CARR rc[], const DARR rd[], MPI_Datatype rt, MPI_Comm comm,                \
             MPI_Request *req)                                                                \
    {                                                                                         \
        int outer = enter();                                                                  \
        int *waits = NULL, nw = -1;                                                           \
        if (outer && ON)                                                                      \
            nw = neighbor_lines(comm, sc, st, rc, rt, IS_C, 0, &waits);                       \
        int rc_ = P##NAME(sb, sc, sd, st, rb, rc, rd, rt, comm, req);                         \
        if (outer && rc_ == MPI_SUCCESS)                                                      \
            neighbor_request(*req, comm, nw, &waits);                                         \
        free(waits);                                                                          \
        leave(outer);                                                                         \
        return rc_;                                                                           \
    }

static void neighbor_request(MPI_Request r, MPI_Comm comm, int nw, int **waits)
{
    struct req *e = note(r, R_NEIGHBOR, -2, 0, 0, comm, 0);
    if (nw < 0 && ON)
        skipped++;
    if (e != NULL && nw >= 0) {
        e->nwaits = nw;
        e->waits = *waits;
        *waits = NULL;
    }
}
INEIGHBOR_ALLTOALLV_WRAPPER(MPI_Ineighbor_alltoallv, int, int, 0)
INEIGHBOR_ALLTOALLV_WRAPPER(MPI_Ineighbor_alltoallv_c, MPI_Count, MPI_Aint, 1)
