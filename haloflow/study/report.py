"""A scaling sweep's ``scale.csv`` -> ``report.md`` with PNG plots in ``plots/``.

Everything here works from the CSV alone, so a report can be re-made (or made from rows
written by another tool) without running anything: ``python -m haloflow.study.report DIR``.
The plotting helpers take plain curves (label -> cores, values) so that ``haloflow predict``
can draw measured and modelled lines with the same look.  Figures come from
haloflow.io.figure, matplotlib loaded only when a plot is drawn.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import numpy as np

# Loop phases reported per step (mean over ranks); see docs/profile.md.  "fluxes" was split
# off "assemble" in profile schema 2 and is empty for runs that do not time it separately.
PHASES = ("assemble", "fluxes", "solve_U", "solve_p", "halo")
COLUMNS = (
    "config", "case", "nodes", "ranks_per_node", "ranks", "threads", "cores", "halo", "cells",
    "cells_per_core", "steps", "s_per_step", "speedup", "efficiency", "comm_fraction",
    "imbalance", *(f"{p}_s_per_step" for p in PHASES), "halo_wait_s_per_step",
    "allreduce_s_per_step", "p_iters_per_step", "status", "error",
)
INTS = {"nodes", "ranks_per_node", "ranks", "threads", "cores", "cells", "steps"}
TEXT = {"config", "case", "halo", "status", "error"}


# -- scale.csv ---------------------------------------------------------------------------------

def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def write_csv(rows: list[dict], path: Path) -> None:
    """One row per configuration, columns in ``COLUMNS`` order (missing values empty)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([_fmt(r.get(c)) for c in COLUMNS])


def _value(key: str, text: str | None):
    if key in TEXT:
        return text or ""
    if text is None or text.strip() == "":
        return None
    try:
        return int(text) if key in INTS else float(text)
    except ValueError:
        return float(text) if key in INTS else None


def read_csv(path: Path) -> list[dict]:
    """The rows of a scale.csv, numbers as numbers, empty cells as None; columns it lacks
    are None too, so hand-written or older files still plot."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [{k: _value(k, r.get(k)) for k in dict.fromkeys((*COLUMNS, *r))} for r in rows]


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("status") == "ok" and (r.get("s_per_step") or 0) > 0]


def add_speedup(rows: list[dict]) -> None:
    """Speedup and parallel efficiency of every successful row against the configuration with
    the fewest cores of the same halo strategy (the fastest of them if several tie)."""
    good = ok_rows(rows)
    for halo in {r["halo"] for r in good}:
        mine = [r for r in good if r["halo"] == halo]
        ref = min(mine, key=lambda r: (r["cores"], r["s_per_step"]))
        for r in mine:
            r["speedup"] = ref["s_per_step"] / r["s_per_step"]
            r["efficiency"] = r["speedup"] * ref["cores"] / r["cores"]


# -- plots -------------------------------------------------------------------------------------

def _plain(v, _pos=None) -> str:
    return f"{v:g}"


def _cells(v: float) -> str:
    return f"{v / 1e6:.3g}M" if v >= 1e6 else f"{v / 1e3:.3g}k" if v >= 1e4 else f"{v:.0f}"


def curves(rows: list[dict], key: str, scale: float = 1.0) -> dict[str, tuple[list, list]]:
    """``{"<halo>, <T> thread(s)": (cores, values)}`` from the successful rows, sorted by
    cores: one line per (halo strategy, threads)."""
    out: dict[str, tuple[list, list]] = {}
    good = sorted(ok_rows(rows), key=lambda r: (r["halo"], r["threads"], r["cores"]))
    for r in good:
        if r.get(key) is None:
            continue
        t = r["threads"]
        xs, ys = out.setdefault(f"{r['halo']}, {t} thread{'s' * (t != 1)}", ([], []))
        xs.append(r["cores"])
        ys.append(r[key] * scale)
    return out


def scaling_png(path: Path, lines: dict, ylabel: str, title: str, cells: int | None = None,
                ideal=None, logy: bool = False, ylim=None, hline: float | None = None) -> None:
    """Values against cores (log2 axis, ticks at the measured core counts), one line per
    label; ``ideal`` is a (cores, values) reference drawn dashed; with ``cells`` the top axis
    shows cells per core."""
    from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

    from ..io.figure import figure, save

    fig = figure()
    ax = fig.add_subplot()
    for label, (x, y) in lines.items():
        ax.plot(x, y, "o-", ms=4, lw=1.2, label=label)
    if ideal is not None:
        ax.plot(*ideal, "k--", lw=1, label="ideal")
    if hline is not None:
        ax.axhline(hline, color="k", ls=":", lw=1)
    cores = sorted({c for x, _ in lines.values() for c in x})
    ax.set_xscale("log", base=2)
    if cores:
        ax.set_xticks(cores)
        lo, hi = cores[0], cores[-1]
        ax.set_xlim(lo / 2 ** 0.3, hi * 2 ** 0.3)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.xaxis.set_minor_locator(NullLocator())
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(_plain))
        ax.yaxis.set_minor_formatter(NullFormatter())
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(xlabel="cores (ranks x threads)", ylabel=ylabel)
    if cells and cores:
        top = ax.secondary_xaxis("top", functions=(lambda c: cells / np.maximum(c, 1e-9),
                                                   lambda n: cells / np.maximum(n, 1e-9)))
        top.set_xticks([cells / c for c in cores])
        top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _cells(v)))
        top.xaxis.set_minor_locator(NullLocator())
        top.set_xlabel(f"cells per core ({_cells(cells)} cells)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    if lines:
        ax.legend(fontsize="small")
    save(fig, path)


def phases_png(path: Path, rows: list[dict], title: str) -> None:
    """Seconds per step of each configuration, stacked by phase; 'other' is the rest of the
    slowest rank's step (monitoring, bookkeeping, waiting for slower ranks)."""
    from ..io.figure import figure, save

    good = sorted(ok_rows(rows), key=lambda r: (r["halo"], r["cores"], r["threads"]))
    fig = figure(max(6.4, 0.55 * len(good) + 2.5), 4.8)
    ax = fig.add_subplot()
    x = np.arange(len(good))
    bottom = np.zeros(len(good))
    for p in PHASES:
        v = np.array([(r.get(f"{p}_s_per_step") or 0.0) * 1e3 for r in good])
        ax.bar(x, v, 0.7, bottom=bottom, label=p)
        bottom += v
    rest = np.array([r["s_per_step"] * 1e3 for r in good]) - bottom
    ax.bar(x, np.maximum(rest, 0.0), 0.7, bottom=bottom, label="other", color="0.75")
    ax.set_xticks(x, [r["config"] for r in good], rotation=35, ha="right")
    ax.set(xlabel="configuration (nodes x ranks per node x threads, halo)",
           ylabel="ms per step\n(phases: mean over ranks; total: slowest rank)", title=title)
    ax.grid(axis="y", alpha=0.3)
    if good:
        ax.legend(fontsize="small")
    save(fig, path)


def _single(rows: list[dict], key: str):
    vals = {r.get(key) for r in ok_rows(rows)} - {None}
    return vals.pop() if len(vals) == 1 else None


def make_plots(rows: list[dict], plots: Path) -> list[tuple[str, str]]:
    """Every plot of the report into ``plots``; returns (caption, file name) pairs."""
    plots.mkdir(parents=True, exist_ok=True)
    cells, case = _single(rows, "cells"), _single(rows, "case") or "sweep"
    what = f"{case}, {_cells(cells)} cells" if cells else case
    good = ok_rows(rows)
    c0 = min((r["cores"] for r in good), default=1)
    cmax = max((r["cores"] for r in good), default=1)
    xs = np.geomspace(c0, cmax, 64)  # a straight line only on linear axes: sample it
    ideal = (xs, xs / c0)
    out = [("time per step", "time_per_step.png"), ("speedup", "speedup.png"),
           ("parallel efficiency", "efficiency.png"),
           ("communication fraction", "comm_fraction.png"), ("phases", "phases.png")]
    scaling_png(plots / out[0][1], curves(rows, "s_per_step", 1e3),
                "time per step [ms] (slowest rank)", f"time per step: {what}", cells, logy=True)
    scaling_png(plots / out[1][1], curves(rows, "speedup"),
                "speedup (vs fewest cores, same halo)", f"speedup: {what}", cells, ideal=ideal)
    eff = curves(rows, "efficiency")
    top = max([1.1] + [v for _, y in eff.values() for v in y])
    scaling_png(plots / out[2][1], eff, "parallel efficiency", f"parallel efficiency: {what}",
                cells, ylim=(0.0, top * 1.05), hline=1.0)
    comm = curves(rows, "comm_fraction", 100.0)
    top = max([10.0] + [v for _, y in comm.values() for v in y])
    scaling_png(plots / out[3][1], comm, "communication [% of loop time]",
                f"halo + allreduce share: {what}", cells, ylim=(0.0, min(100.0, top * 1.15)))
    phases_png(plots / out[4][1], rows, f"where a step goes: {what}")
    return out


# -- report.md ---------------------------------------------------------------------------------

def _cell(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def table(rows: list[dict]) -> list[str]:
    """The markdown table of every configuration, failed ones included."""
    head = ("config | halo | cores | cells/core | ms/step | speedup | efficiency | comm % | "
            "imbalance | p it/step | status")
    out = [f"| {head} |", "|" + "---|" * (head.count("|") + 1)]
    for r in rows:
        status = "ok" if r.get("status") == "ok" else f"FAILED: {r.get('error') or '?'}"
        ms = None if r.get("s_per_step") is None else r["s_per_step"] * 1e3
        comm = None if r.get("comm_fraction") is None else r["comm_fraction"] * 100
        vals = (r.get("config"), r.get("halo"), _cell(r.get("cores"), "d"),
                _cell(r.get("cells_per_core"), ".0f"), _cell(ms, ".2f"),
                _cell(r.get("speedup"), ".2f"), _cell(r.get("efficiency"), ".2f"),
                _cell(comm, ".1f"), _cell(r.get("imbalance"), ".3f"),
                _cell(r.get("p_iters_per_step"), ".1f"), status.replace("|", "/"))
        out.append("| " + " | ".join(str(v) for v in vals) + " |")
    return out


def write_report(scale_dir: Path | str) -> Path:
    """``scale_dir/scale.csv`` -> ``scale_dir/report.md`` and ``scale_dir/plots/*.png``."""
    scale_dir = Path(scale_dir)
    rows = read_csv(scale_dir / "scale.csv")
    if any(r.get("speedup") is None for r in ok_rows(rows)):
        add_speedup(rows)
    good = ok_rows(rows)
    case, cells, steps = (_single(rows, k) for k in ("case", "cells", "steps"))
    lines = [f"# Scaling sweep{f': {case}' if case else ''}", ""]
    facts = [f"{cells} cells" if cells else "",
             f"{steps} profiled steps per run (the first, with its one-time set-up, left out)"
             if steps else "",
             f"{len(rows)} configurations, {len(rows) - len(good)} failed"]
    lines += [", ".join(f for f in facts if f) + ".", "",
              "Configurations are named nodes x ranks per node x threads, then the halo "
              "strategy. Time per step is the slowest rank's time loop divided by the steps; "
              "speedup and efficiency are relative to the configuration with the fewest cores "
              "of the same halo strategy; communication is halo pack/wait/unpack plus "
              "allreduce time as a share of the loop (`docs/profile.md`).", ""]
    if (scale_dir / "commands.txt").exists():
        lines += ["The exact commands are in `commands.txt`, each run's output in "
                  "`runs/<config>/` and its launcher output in `logs/<config>.log`.", ""]
    lines += table(rows) + [""]
    if good:
        for caption, name in make_plots(rows, scale_dir / "plots"):
            lines += [f"## {caption[0].upper()}{caption[1:]}", "", f"![{caption}](plots/{name})",
                      ""]
    else:
        lines += ["No configuration succeeded, so there is nothing to plot.", ""]
    out = scale_dir / "report.md"
    out.write_text("\n".join(lines), encoding="utf-8")
    return out


def main(argv=None) -> int:
    """``python -m haloflow.study.report DIR``: re-make report.md from DIR/scale.csv."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.stderr.write("usage: python -m haloflow.study.report DIR  (DIR holds scale.csv; "
                         "writes DIR/report.md and DIR/plots/*.png)\n")
        return 2
    scale_dir = Path(argv[0])
    if not (scale_dir / "scale.csv").is_file():
        sys.stderr.write(f"haloflow: error: {scale_dir / 'scale.csv'}: no such file\n")
        return 2
    print(f"report in {write_report(scale_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
