"""Extra-P beside `haloflow predict`: a model fitted to measurements against ours, on the same
measurements of benchmarks/model_check.py.

Extra-P (https://github.com/extra-p/extrap) fits performance-model normal forms (sums of
p^i log2(p)^j terms) to measured times; it knows nothing about the code.  Here it is fitted
to every rank count of a network but the largest, and asked for the largest: the held-out
point shows how each model extrapolates (ours saw only the 1-rank profile).  Extra-P is not
a dependency of haloflow: install it in a separate environment (`python -m venv /tmp/extrap
&& /tmp/extrap/bin/pip install extrap`) and give its `extrap` command with --extrap-cmd or
on PATH; without it the comparison is skipped.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from pathlib import Path


def find(cmd: str | None) -> str | None:
    """The extrap command: given, or on PATH; None where there is none."""
    if cmd:
        return cmd if Path(cmd).exists() else None
    return shutil.which("extrap")


def _text_input(points: dict[int, list[float]]) -> str:
    """Extra-P's text format: one parameter p, one region and metric, repetitions as DATA."""
    ranks = sorted(points)
    lines = ["PARAMETER p", "", "POINTS " + " ".join(f"( {p} )" for p in ranks), "",
             "REGION step", "METRIC time"]
    lines += ["DATA " + " ".join(repr(v) for v in points[p]) for p in ranks]
    return "\n".join(lines) + "\n"


def fit_function(exe: str, points: dict[int, list[float]]) -> str:
    """Extra-P's model of time per step against p, as a Python expression."""
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "step.txt"
        f.write_text(_text_input(points))
        r = subprocess.run([exe, "--text", str(f), "--print", "functions-python",
                            "--disable-progress"], capture_output=True, text=True, timeout=300)
    lines = [x.strip() for x in r.stdout.splitlines() if x.strip()]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"extrap failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return lines[-1]


def evaluate(expr: str, p: float) -> float:
    """The fitted expression at ``p`` (only arithmetic, p and log2 are allowed in it)."""
    allowed = {"p": float(p), "log2": math.log2, "sqrt": math.sqrt}
    code = compile(expr, "<extrap>", "eval")
    if set(code.co_names) - set(allowed):
        raise RuntimeError(f"unexpected names in Extra-P's model {expr!r}")
    return float(eval(code, {"__builtins__": {}}, allowed))


def compare(exe: str, rows: list[dict]) -> list[dict]:
    """Per network with at least three rank counts: Extra-P fitted to all but the largest,
    against our prediction, at the largest."""
    out = []
    nets = sorted({r["network"] for r in rows})
    ones = [r for r in rows if r["ranks"] == 1]
    for net in nets:
        mine = sorted((r for r in rows if r["network"] == net and r["ranks"] > 1),
                      key=lambda r: r["ranks"])
        pts = ones + mine
        if len(pts) < 3:
            continue
        held = pts[-1]
        fn = fit_function(exe, {r["ranks"]: r["measured_s"] for r in pts[:-1]})
        got = evaluate(fn, held["ranks"])
        meas = held["measured_median_s"]
        out.append({"network": net, "fit_ranks": [r["ranks"] for r in pts[:-1]],
                    "function": fn, "held_out_ranks": held["ranks"], "measured_s": meas,
                    "extrap_s": got, "extrap_error_percent": 100 * (got / meas - 1),
                    "model_s": held["predicted_s"], "model_error_percent": held["error_percent"]})
        print(f"{net}: Extra-P fitted to ranks {out[-1]['fit_ranks']}: {fn}; at "
              f"{held['ranks']} ranks {got:.4f} s/step ({out[-1]['extrap_error_percent']:+.1f} "
              f"%), our model {held['predicted_s']:.4f} ({held['error_percent']:+.1f} %), "
              f"measured {meas:.4f}")
    return out
