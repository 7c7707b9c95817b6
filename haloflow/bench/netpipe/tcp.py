"""``haloflow netpipe --tcp``: the same sweep over a raw TCP socket, no MPI (as NPtcp).

Comparing it with the MPI run over the same network separates what the TCP stack costs from
what the MPI layer adds.  One side listens, the other connects and leads: it sends its
settings, chooses repetitions and writes the results.  The loops are Python over blocking
sockets with TCP_NODELAY: a loopback round trip costs tens of microseconds in the kernel, so
the interpreter's share (about a microsecond per call) is small here, unlike shared-memory MPI.
"""

from __future__ import annotations

import errno
import json
import socket
import struct
import time

from ...mpiutil import UserError
from . import check as pattern
from .pool import Pool, allocate, pool_bytes
from .sizes import format_size

HELLO = "haloflow-netpipe-tcp"
VERSION = 2  # 2: CPU time per message (--cpu)
_LEN = struct.Struct("!I")


class TcpError(UserError):
    """The connection failed or was lost (not bad input: exit code 1)."""

    exit_code = 1


def _recv_exact(sock, view, n: int) -> None:
    got = sock.recv_into(view, n)
    while got < n:
        if got == 0 or (k := sock.recv_into(view[got:], n - got)) == 0:
            raise TcpError("the other side closed the connection")
        got += k


class TcpLink:
    """Control messages (length-prefixed JSON, never pickle: the peer is not trusted)."""

    def __init__(self, sock, first: bool):
        self.sock, self.first = sock, first
        self._hdr = bytearray(_LEN.size)

    def send(self, obj) -> None:
        data = json.dumps(obj).encode()
        self.sock.sendall(_LEN.pack(len(data)) + data)

    def recv(self):
        _recv_exact(self.sock, memoryview(self._hdr), _LEN.size)
        (n,) = _LEN.unpack(self._hdr)
        if n > 1 << 24:
            raise TcpError("the other side sent a malformed control message")
        buf = bytearray(n)
        _recv_exact(self.sock, memoryview(buf), n)
        try:
            return json.loads(buf)
        except RecursionError:  # bad input from the peer: exit 2, not a traceback
            raise UserError("the other side sent a control message nested too deeply "
                            "(not haloflow netpipe --tcp?)") from None

    def swap(self, obj):
        self.send(obj)
        return self.recv()

    def agree(self, obj):
        other = self.swap(obj)
        return obj if self.first else other

    def sync(self) -> None:
        self.swap(0)


class TcpTransport:
    """pingpong or stream of ``n``-byte messages over the socket, from a buffer pool."""

    def __init__(self, sock, first: bool, mode: str, pool: Pool):
        self.sock, self.first, self.mode, self.pool = sock, first, mode, pool
        self.engine = "python"

    def messages_per_rep(self) -> int:
        return 2 if self.mode == "pingpong" else 1

    def out_bytes(self, n: int) -> int:
        return n

    def one_way(self, e_first: float, e_other: float, reps: int) -> float:
        return e_first / (2 * reps) if self.mode == "pingpong" else e_other / reps

    def warm(self) -> None:
        pass

    def timed(self, n: int, reps: int) -> float:
        p, sock = self.pool, self.sock
        stride, nslots, pos = p.layout(n)
        mv = memoryview(p.array)
        send, first = sock.sendall, self.first
        per = self.messages_per_rep()
        t0 = time.perf_counter()
        for j in range(reps):
            a = ((pos + per * j) % nslots) * stride
            b = ((pos + per * j + per - 1) % nslots) * stride
            if self.mode == "pingpong":
                if first:
                    send(mv[a:a + n])
                    _recv_exact(sock, mv[b:b + n], n)
                else:
                    _recv_exact(sock, mv[a:a + n], n)
                    send(mv[b:b + n])
            elif first:
                send(mv[a:a + n])
            else:
                _recv_exact(sock, mv[a:a + n], n)
        e = time.perf_counter() - t0
        p.advance(n, reps * per)
        return e

    def checked(self, n: int, rep: int, corrupt=None) -> list:
        p, sock, bad = self.pool, self.sock, []
        a, b = p.slot(n, 0), p.slot(n, 1)
        s0, s1 = pattern.seed(n, rep, 0), pattern.seed(n, rep, 1)
        me, peer = (0, 1) if self.first else (1, 0)

        def check(buf, s):
            m = pattern.verify(buf, s, n, rep, peer, me)
            if m is not None:
                bad.append(m)

        if self.first:
            pattern.send_pattern(a, s0, n, rep, corrupt)
            sock.sendall(memoryview(a))
            if self.mode == "pingpong":
                _recv_exact(sock, memoryview(b), n)
                check(b, s1)
        else:
            _recv_exact(sock, memoryview(a), n)
            check(a, s0)
            if self.mode == "pingpong":
                pattern.send_pattern(b, s1, n, rep, None)
                sock.sendall(memoryview(b))
        p.advance(n, 2)
        return bad


def _host_port(spec: str, flag: str, need_host: bool) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    if need_host and not (sep and host):
        raise UserError(f"{flag} {spec}: expected HOST:PORT")
    try:
        p = int(port)
    except ValueError:
        p = -1
    if not 0 <= p <= 65535 or (need_host and p == 0):
        raise UserError(f"{flag} {spec}: expected a port number 1-65535"
                        f"{' (or 0: any free port)' if not need_host else ''}")
    return host.strip("[]"), p


def _pool_for(cfg) -> Pool:
    nbytes = pool_bytes(cfg["max"], cfg["nocache"], 2, cfg.get("pool"))
    return Pool(allocate(nbytes), cfg["nocache"], 2)


def _nodelay(sock, timeout: float) -> None:
    """No Nagle delay; and a kernel deadline on every receive and send (SO_RCVTIMEO,
    SO_SNDTIMEO), so a peer that stops answering ends the run with an error instead of a
    hang, while the socket stays in blocking mode: no poll before each call in the timed
    loops, as a Python-level socket timeout would add."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sec = int(timeout)
    tv = struct.pack("ll", sec, int((timeout - sec) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def _lost(who: str, e: OSError, timeout: float) -> TcpError:
    """A lost connection, or a peer silent past the deadline, in one line."""
    if isinstance(e, TimeoutError | BlockingIOError) or e.errno in (errno.EAGAIN,
                                                                   errno.ETIMEDOUT):
        return TcpError(f"{who}: no answer within {timeout:g} s (--timeout)")
    return TcpError(f"connection to {who} lost: {e.strerror or e}")


# what a connecting side may ask the listener for (it allocates the buffers)
_CFG_KINDS = {"mode": str, "sizes": list, "max": int, "trial_time": float | int,
              "trials": int, "integrity": bool, "nocache": bool, "cpu": bool}


def _checked_cfg(cfg: dict, addr: str, opts) -> dict:
    """The peer's settings, refused unless they are what a haloflow netpipe sends and ask
    for no larger buffers than this side's own --max (and --pool) allow: the peer must not
    choose how much memory the listener allocates."""
    from ...limits import too_big
    from .pool import MAX_POOL

    bad = [k for k, t in _CFG_KINDS.items() if not isinstance(cfg.get(k), t)]
    if not bad:
        pool = cfg.get("pool")
        checks = {"mode": cfg["mode"] in ("pingpong", "stream"),
                  "trials": 1 <= cfg["trials"] <= 1000,
                  "trial_time": 0 < cfg["trial_time"] <= 60,
                  "sizes": 0 < len(cfg["sizes"]) <= 10000 and all(
                      type(n) is int and 1 <= n <= cfg["max"] for n in cfg["sizes"]),
                  "pool": pool is None or type(pool) is int and pool >= 1}
        bad = [k for k, ok in checks.items() if not ok]
    if bad:
        raise TcpError(f"{addr} sent a {bad[0]} haloflow netpipe does not send")
    if cfg["max"] > opts.hi or (cfg.get("pool") or 0) > (opts.pool or MAX_POOL):
        raise TcpError(f"{addr} asks for messages of up to {format_size(cfg['max'])} (pool "
                       f"{format_size(cfg.get('pool') or 0)}); this side allows --max "
                       f"{format_size(opts.hi)}: start it with a larger --max (--pool)")
    why = too_big(pool_bytes(cfg["max"], cfg["nocache"], 2, cfg.get("pool")))
    if why:
        raise TcpError(f"{addr} asks for messages of {format_size(cfg['max'])}: the buffers "
                       f"{why}")
    return cfg


def listen(opts) -> int:
    """Wait for one connecting side, then follow its sweep."""
    from .sweep import integrity_sweep, sweep

    host, port = _host_port(opts.listen, "--listen", need_host=False)
    try:
        srv = socket.create_server((host, port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"--listen {opts.listen}: port {port} is already in use") from None
        raise UserError(f"--listen {opts.listen}: {e.strerror or e}") from None
    with srv:
        bound = srv.getsockname()
        print(f"haloflow netpipe: listening on {host or '*'}:{bound[1]}", flush=True)
        srv.settimeout(opts.timeout)
        try:
            sock, addr = srv.accept()
        except TimeoutError:
            raise UserError(f"--listen {opts.listen}: nobody connected within "
                            f"{opts.timeout:g} s (--timeout)") from None
    with sock:
        sock.settimeout(None)
        _nodelay(sock, opts.timeout)
        link = TcpLink(sock, first=False)
        try:
            cfg = link.recv()
        except (ValueError, UnicodeDecodeError, TcpError):
            cfg = None
        except OSError as e:
            raise _lost(f"{addr[0]} (connected)", e, opts.timeout) from None
        if not isinstance(cfg, dict) or cfg.get("hello") != HELLO:
            raise TcpError(f"{addr[0]} connected, but it is not haloflow netpipe --tcp")
        if cfg.get("version") != VERSION:
            link.send({"error": f"protocol version {VERSION} here, {cfg.get('version')} there"})
            raise TcpError(f"{addr[0]}: different haloflow netpipe protocol version")
        try:
            cfg = _checked_cfg(cfg, addr[0], opts)
        except TcpError as e:
            link.send({"error": str(e)})
            raise
        tr = TcpTransport(sock, False, cfg["mode"], _pool_for(cfg))
        link.send({"ok": True, "host": socket.gethostname()})
        if not opts.quiet:
            print(f"connection from {addr[0]}: {cfg['mode']}, {len(cfg['sizes'])} sizes",
                  flush=True)
        try:
            if cfg["integrity"]:
                integrity_sweep(link, tr, cfg["sizes"], cfg["trials"])
            else:
                sweep(link, tr, cfg["sizes"], cfg["trial_time"], cfg["trials"],
                      cpu=cfg["cpu"])
        except OSError as e:
            raise _lost(addr[0], e, opts.timeout) from None
    if not opts.quiet:
        print("haloflow netpipe: done", flush=True)
    return 0


def connect(opts, corrupt=None) -> int:
    """Lead the sweep against a listening side; write the results."""
    from .report import integrity_report, progress_line, say, write_integrity, write_results
    from .sweep import integrity_sweep, sweep

    host, port = _host_port(opts.connect, "--connect", need_host=True)
    try:
        sock = socket.create_connection((host, port), timeout=opts.timeout)
    except ConnectionRefusedError:
        raise TcpError(f"--connect {opts.connect}: connection refused (is `haloflow netpipe "
                       f"--tcp --listen {port}` running there?)") from None
    except socket.gaierror as e:
        raise UserError(f"--connect {opts.connect}: unknown host ({e.strerror})") from None
    except TimeoutError:
        raise TcpError(f"--connect {opts.connect}: no answer within {opts.timeout:g} s "
                       "(--timeout)") from None
    except OSError as e:
        raise TcpError(f"--connect {opts.connect}: {e.strerror or e}") from None
    sizes = opts.sizes()
    cfg = {"hello": HELLO, "version": VERSION, "mode": opts.mode, "sizes": sizes,
           "max": opts.hi, "trial_time": opts.trial_time, "trials": opts.trials,
           "integrity": opts.integrity, "nocache": opts.nocache, "pool": opts.pool,
           "cpu": opts.cpu}
    with sock:
        sock.settimeout(None)
        _nodelay(sock, opts.timeout)
        link = TcpLink(sock, first=True)
        pool = _pool_for(cfg)
        tr = TcpTransport(sock, True, opts.mode, pool)
        try:
            link.send(cfg)
            reply = link.recv()
        except OSError as e:
            raise _lost(f"--connect {opts.connect}", e, opts.timeout) from None
        except (ValueError, TcpError) as e:
            raise TcpError(f"--connect {opts.connect}: no haloflow netpipe there ({e})") from None
        if not isinstance(reply, dict):
            raise TcpError(f"--connect {opts.connect}: no haloflow netpipe there")
        if not reply.get("ok"):
            raise TcpError(f"--connect {opts.connect}: {reply.get('error', 'refused')}")
        meta = {"tool": "haloflow netpipe", "transport": "tcp", "mode": opts.mode,
                "engine": "python", "integrity": opts.integrity, "nocache": opts.nocache,
                "pool_bytes": len(pool.array), "trial_time_s": opts.trial_time,
                "trials": opts.trials, "perturb": opts.perturb, "min_bytes": opts.lo,
                "max_bytes": opts.hi, "hosts": [socket.gethostname(), reply.get("host")],
                "peer": f"{host}:{port}", "label": f"haloflow netpipe tcp {opts.mode}"}
        quiet = opts.quiet
        say(quiet, f"haloflow netpipe: tcp {opts.mode} to {host}:{port}, {len(sizes)} "
                    f"sizes {format_size(sizes[0])} .. {format_size(sizes[-1])}")
        paths = opts.paths("np.out")
        try:
            if opts.integrity:
                results, failures = integrity_sweep(link, tr, sizes, opts.trials, corrupt,
                                                    integrity_report(quiet))
                write_integrity(paths, meta, results, failures)
                return _integrity_done(opts, sizes, results, failures, paths)
            count = iter(range(len(sizes)))
            points = sweep(link, tr, sizes, opts.trial_time, opts.trials,
                           lambda pt: say(quiet, progress_line(next(count), pt)),
                           cpu=opts.cpu)
        except OSError as e:
            raise _lost(f"{host}:{port}", e, opts.timeout) from None
    doc = write_results(paths, meta, points, f"haloflow netpipe tcp {opts.mode}, "
                                             f"{meta['hosts'][0]} -> {host}")
    print(doc["summary_line"], flush=True)
    if opts.cpu:
        print(doc["cpu"]["line"], flush=True)
    say(opts.quiet, f"wrote {paths['out']}, {paths['json']}, {paths['png']}")
    return 0


def _integrity_done(opts, sizes, results, failures, paths) -> int:
    from .report import integrity_failure, integrity_ok_line

    if failures:
        raise integrity_failure(failures, len(sizes))
    print(integrity_ok_line(opts, sizes, results, paths), flush=True)
    return 0


def run_tcp(opts, corrupt=None) -> int:
    return listen(opts) if opts.listen is not None else connect(opts, corrupt)
