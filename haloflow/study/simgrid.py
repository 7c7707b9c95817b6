"""SimGrid's SMPI as a second judge: the platform of a cluster as SimGrid's XML, and the
replay of time-independent traces on it (``smpirun -replay``, SimGrid 3.32).

The platform is one SimGrid cluster: ``nodes`` hosts of ``cores`` cores at ``speed`` flop/s,
each with a private full-duplex link (its NIC, SPLITDUPLEX: sending and receiving do not share
bandwidth, but all of a node's messages out share its one link) to a backbone, and a loopback
link for the messages between ranks of one node.  A message from node a to node b crosses
a's link, the backbone and b's link: each private link has half the network's one-way latency
and its whole bandwidth, so one message alone takes ``latency + bytes / bandwidth``.  The
backbone is a non-blocking switch, which is no link at all (a FATPIPE link at the NIC's
bandwidth with no latency would bound no flow that its NICs do not, and would tie every flow
of the cluster into one max-min system: a 96-rank replay took twice as long) or,
with ``backbone_Bps``, a shared link of that bandwidth (contention); ``fat_tree`` makes it a
fat tree instead (SimGrid's FAT_TREE topology, every link of the tree as a NIC's).

The network model is SimGrid's CM02 with TCP's window bound off (``network/TCP-gamma:0``) and
no acknowledgement traffic against the flow (``network/crosstraffic:0``): a flow takes exactly
the links' latency plus its size over the bandwidth max-min sharing gives it, the size being
the message's plus SMPI's 16-byte envelope (``ENVELOPE``).  SMPI's default model multiplies
latency and bandwidth by factors fitted to one Ethernet cluster (a 1-byte message there costs
twice the link latency); here the networks come from presets and NetPIPE curves that already
are what an MPI message costs, so CM02 keeps them as they are, and the analytic check
``latency + (size + 16) / bandwidth`` is exact.  A network's host
CPU overhead per message (LogGP's o and its per-byte part) becomes computation in the traces
around each message between nodes (:mod:`.message_overhead`), not SMPI's ``smpi/os`` and
``smpi/or``, which would charge the messages within a node too.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .message_overhead import rewrite
from .trace import TraceError

SIMULATED = re.compile(r"Simulated time: ([0-9.eE+-]+) seconds")
# the small-message collectives of MPICH and Open MPI, not SMPI's defaults (which price an
# allreduce on 2 ranks as a reduce and a broadcast, and send P^2 messages an allgather):
# recursive doubling's allreduce, Bruck's allgather
COLLECTIVES = ("--cfg=smpi/allreduce:rdb", "--cfg=smpi/allgather:bruck")
CONFIG = ("--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
          "--cfg=network/crosstraffic:0", "--cfg=smpi/display-timing:yes", *COLLECTIVES)
ENVELOPE = 16  # bytes SMPI adds to every message (tag, source, communicator)


@dataclass
class Platform:
    """A cluster: nodes, cores each, their speed, the network and the node's own link."""

    nodes: int
    cores: int
    speed: float  # flop/s of one core
    latency: float  # one-way seconds of a message between nodes
    bandwidth: float  # bytes/s of a node's link
    loop_latency: float  # within a node
    loop_bandwidth: float
    backbone_Bps: float | None = None  # shared backbone (None: non-blocking switch)
    fat_tree: str | None = None  # SimGrid's topo_parameters, e.g. "2;4,4;1,2;1,2"
    o: float = 0.0  # host CPU seconds per message on each side
    o_byte: float = 0.0  # and per byte

    def check(self) -> None:
        for name in ("speed", "latency", "bandwidth", "loop_latency", "loop_bandwidth"):
            v = getattr(self, name)
            if not (v >= 0 and v < 1e30) or (v == 0 and "latency" not in name):
                raise TraceError(f"platform {name} {v!r}: expected a positive finite number")
        if self.nodes < 1 or self.cores < 1:
            raise TraceError(f"platform of {self.nodes} nodes of {self.cores} cores: expected "
                             "at least one of each")
        if self.backbone_Bps is not None and not 0 < self.backbone_Bps < 1e30:
            raise TraceError(f"backbone {self.backbone_Bps!r} B/s: expected a positive number")
        if self.fat_tree is not None and fat_tree_hosts(self.fat_tree) < self.nodes:
            raise TraceError(f"fat tree {self.fat_tree!r} has {fat_tree_hosts(self.fat_tree)} "
                             f"hosts, fewer than the {self.nodes} nodes the ranks need")


def fat_tree_hosts(params: str) -> int:
    """Hosts of a SimGrid fat tree ``LEVELS;DOWN,..;UP,..;COUNT,..``: the product of the
    down-links of every level."""
    try:
        levels, down, up, count = params.split(";")
        downs = [int(x) for x in down.split(",")]
        if int(levels) != len(downs) or any(
                len(x.split(",")) != len(downs) for x in (up, count)) or min(downs) < 1:
            raise ValueError
        for x in (up + "," + count).split(","):
            if int(x) < 1:
                raise ValueError
    except ValueError:
        raise TraceError(f"--fat-tree {params!r}: expected SimGrid's LEVELS;DOWN,..;UP,..;"
                         "COUNT,.. with one number per level, e.g. 2;4,4;1,2;1,2") from None
    n = 1
    for d in downs:
        n *= d
    return n


def platform_xml(p: Platform) -> str:
    """The platform as SimGrid's XML (version 4.1): hosts ``node-0`` to ``node-N-1``."""
    p.check()
    half = 0.5 * p.latency
    if p.fat_tree is not None:
        hosts = fat_tree_hosts(p.fat_tree)
        shape = (f'topology="FAT_TREE" topo_parameters="{p.fat_tree}" '
                 f'bw="{p.bandwidth!r}Bps" lat="{half!r}s"')
    else:
        hosts = p.nodes
        bb = ("" if p.backbone_Bps is None else
              f' bb_bw="{p.backbone_Bps!r}Bps" bb_sharing_policy="SHARED" bb_lat="0s"')
        shape = f'bw="{p.bandwidth!r}Bps" lat="{half!r}s" sharing_policy="SPLITDUPLEX"{bb}'
    return (
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1">\n'
        '<zone id="world" routing="Full">\n'
        f'  <cluster id="cluster" prefix="node-" suffix="" radical="0-{hosts - 1}" '
        f'speed="{p.speed!r}f" core="{p.cores}" {shape} '
        f'loopback_bw="{p.loop_bandwidth!r}Bps" loopback_lat="{p.loop_latency!r}s"/>\n'
        "</zone>\n</platform>\n")


def hostfile(ranks: int, cores: int) -> str:
    """Ranks fill the nodes in order, ``cores`` to a node: one line per rank."""
    return "".join(f"node-{r // cores}\n" for r in range(ranks))


def find_smpirun() -> str:
    path = shutil.which("smpirun")
    if path is None:
        raise TraceError("SimGrid is not installed: no smpirun on PATH (Debian: apt-get "
                         "install libsimgrid-dev, which has smpirun and smpireplaymain)")
    return path


def _run(cmd: list, workdir: Path, timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` in its own process group: past ``timeout`` the whole group is killed
    (``smpirun`` is a shell script; its simulator would outlive a kill of the script)."""
    with subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def replay(listing: Path, ranks: int, p: Platform, workdir: Path, extra: tuple = (),
           timeout: float = 3600) -> float:
    """Simulated seconds of the traces listed in ``listing`` (one file per rank) on ``p``
    (its o as computation around the messages between nodes: rewritten copies in
    ``workdir``)."""
    smpirun = find_smpirun()
    workdir.mkdir(parents=True, exist_ok=True)
    plat, hosts = workdir / "platform.xml", workdir / "hostfile.txt"
    plat.write_text(platform_xml(p), encoding="utf-8")
    hosts.write_text(hostfile(ranks, p.cores), encoding="utf-8")
    if (p.o > 0 or p.o_byte > 0) and p.nodes > 1:
        listing = rewrite(listing, ranks, p.cores, p.o, p.o_byte, p.speed,
                          workdir / "traces-with-o")
    cmd = [smpirun, "-np", str(ranks), "-platform", str(plat), "-hostfile", str(hosts),
           "-replay", str(listing), *CONFIG, *extra]
    try:
        r = _run(cmd, workdir, timeout)
    except subprocess.TimeoutExpired:
        raise TraceError(f"the SimGrid replay ran past {timeout:g} s: {' '.join(cmd)}") from None
    except OSError as e:
        raise TraceError(f"cannot run {smpirun} ({e.strerror})") from None
    found = SIMULATED.findall(r.stdout + r.stderr)
    if r.returncode != 0 or not found:
        last = [ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in last if "rror" in ln or "die" in ln.lower()),
                   last[-1] if last else "no output")
        raise TraceError(f"the SimGrid replay failed (exit code {r.returncode}: {why.strip()}); "
                         f"the command: {' '.join(cmd)}")
    return float(found[-1])
