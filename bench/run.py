"""The optimizer's own speed and memory: ``python bench/run.py`` prints a table and writes JSON.

Each case runs the real CLI in a child process, so wall time and peak RSS are the user's
(``resource.getrusage(RUSAGE_CHILDREN)`` after each child). Cases:

- ``drawopt optimize IN.npz -o OUT.npz --report R.json --time-passes --json`` (the default d3d12 pipeline,
  report and final verify included) on frames of 10k, 100k and 1M draws, quads and gpu-driven at 1M;
  the per-pass seconds and the stage seconds (load, passes, post-condition finding counts, verify,
  report, save, other; ``drawopt.cli.timing``) come from the run's own ``--time-passes`` figures
  (each the median of the runs), printed as a stage table and kept as ``passes_s`` / ``stages_s``;
- the same with ``--no-verify`` (what the final check costs);
- ``drawopt verify IN OUT``;
- the text and JSON reader and writer in lines per second (the 100k frame);
- compiled vs pure path (``DRAWOPT_PURE=1``) on the 10k and 100k frames.

Targets (issue 13): 1M frame optimize <= 4 s and <= 1.5 GB; 100k <= 0.5 s; 10k CLI <= 0.6 s;
1M/100k <= 11; verify of the 1M frame <= 6 s and <= 2 GB; text reader and writer >= 1M lines/s.
The machine is shared: run it when ``uptime`` shows little load, and compare runs on one machine.
Each figure is the median of ``--repeat`` runs (3 by default; sizes of 1M and more run once
unless ``--repeat-large`` says otherwise). The package is byte-compiled first (``compileall``), as
an installed package is: a child run under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile
every module again (0.3 s on this machine).

    python bench/run.py                      # everything (the 1M cases take minutes today)
    python bench/run.py --sizes 10000,100000 --json out.json
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS = {"optimize 1M s": 4.0, "optimize 1M GB": 1.5, "optimize 100k s": 0.5, "optimize 10k s": 0.6,
           "1M/100k": 11.0, "verify 1M s": 6.0, "verify 1M GB": 2.0, "text read lines/s": 1e6,
           "text write lines/s": 1e6}


def measured(cmd: list[str], env: dict[str, str] | None = None, repeat: int = 1) -> tuple[float, float, list[str]]:
    """Median wall seconds, median peak RSS in GB and the stdout of each of ``repeat`` runs of ``cmd``."""
    runs = [measured_once(cmd, env) for _ in range(repeat)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), [r[2] for r in runs])


def median_times(outs: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """The median seconds of each stage and of each pass over the ``--time-passes --json`` outputs ``outs``.

    A pass that runs twice (``dedupe-state`` at both ends of the pipeline) is named ``dedupe-state #2``.

    >>> o = '{"time_passes": {"stages": {"load": %s}, "passes": [{"name": "weld", "seconds": %s}]}}'
    >>> median_times([o % (1, 2), o % (3, 4), o % (2, 9)])
    ({'load': 2}, {'weld': 4})
    """
    from drawopt.cli.timing import STAGES

    runs = [json.loads(o).get("time_passes", {}) for o in outs]
    stages = {k: statistics.median(r["stages"][k] for r in runs) for k in STAGES if k in runs[0].get("stages", {})}
    names = _numbered([p["name"] for p in runs[0].get("passes", [])])
    passes = {n: statistics.median(r["passes"][i]["seconds"] for r in runs) for i, n in enumerate(names)}
    return stages, passes


def _numbered(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def stage_table(rows: list[dict[str, Any]]) -> str:
    """Seconds per stage of each optimize case (the medians of its ``--time-passes`` figures); ``total``
    is the command's own time, ``wall`` the whole process's (the interpreter's start and imports too).

    >>> print(stage_table([{"kind": "frame", "draws": 10, "optimize_s": 1.5,
    ...                     "stages_s": {"load": 0.5, "total": 1.25}}]))
    stage seconds            load   passes findings   verify   report     save    other    total     wall
         frame       10     0.500        -        -        -        -        -        -    1.250    1.500
    """
    from drawopt.cli.timing import STAGES  # the columns: --time-passes's stages ("findings": the post-condition)

    head = f"{'stage seconds':<20}" + "".join(f"{c:>9}" for c in STAGES) + f"{'wall':>9}"
    lines = [head]
    for r in rows:
        st = r.get("stages_s") or {}
        cells = "".join(f"{st[c]:>9.3f}" if c in st else f"{'-':>9}" for c in STAGES)
        lines.append(f"{r['kind']:>10} {r['draws']:>8,} {cells}{r['optimize_s']:>9.3f}")
    return "\n".join(lines)


def measured_once(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in GB and stdout of ``cmd``, run under a wrapper process that reports the
    peak RSS of that one command (``RUSAGE_CHILDREN`` is a maximum over all children so far)."""
    wrapper = ("import resource, subprocess, sys, json, time; t=time.perf_counter(); "
               "r=subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "w=time.perf_counter()-t; "
               "print(json.dumps({'rc': r.returncode, 'wall': w, "
               "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
               "'out': r.stdout, 'err': r.stderr[-2000:]}))")
    r = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    res = json.loads(r.stdout)
    if res["rc"] not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({res['rc']}):\n{res['err']}")
    return res["wall"], res["rss"] / 2**20, res["out"]


def cpu_model() -> str:
    """The processor's name (``/proc/cpuinfo``), or ``unknown``: figures from two machines differ."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def drawopt(*args: str) -> list[str]:
    return [sys.executable, "-m", "drawopt", *args]


def lines_per_second(path: Path, fmt: str) -> dict[str, float]:
    """Reader and writer throughput of ``fmt`` on the stream at ``path``."""
    import drawopt
    from drawopt.ir.formats import dumps, loads

    s = drawopt.load(str(path))
    t0 = time.perf_counter()
    text = dumps(s, fmt)
    write = time.perf_counter() - t0
    n = text.count("\n")
    t0 = time.perf_counter()
    loads(text, fmt)
    read = time.perf_counter() - t0
    return {f"{fmt} lines": n, f"{fmt} write lines/s": n / write, f"{fmt} read lines/s": n / read}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="frame sizes (draws)")
    ap.add_argument("--kinds-1m", default="quads,gpu-driven", help="other kinds at the largest size")
    ap.add_argument("--target", default="d3d12")
    ap.add_argument("--json", default="bench/results/run.json", help="where to write the figures")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure below 1M draws (the median is kept)")
    ap.add_argument("--repeat-large", type=int, default=1, help="runs per figure at 1M draws and more")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    for pkg in ("drawopt", "passes"):
        compileall.compile_dir(str(root / pkg), quiet=1)
    sizes = [int(x) for x in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    summary: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("frame", n) for n in sizes] + [(k, max(sizes)) for k in args.kinds_1m.split(",") if k]
        for kind, n in cases:
            rep_n = args.repeat if n < 1_000_000 else args.repeat_large
            src, out, rep = (Path(tmp) / f"{kind}{n}.{x}" for x in ("npz", "opt.npz", "json"))
            subprocess.run(drawopt("gen", "--kind", kind, "--draws", str(n), "--seed", "1", "-o", str(src)),
                           check=True)
            wall, gb, outs = measured(drawopt("optimize", str(src), "-o", str(out), "--target", args.target,
                                              "--report", str(rep), "--time-passes", "--json"),
                                       repeat=rep_n)
            figures = json.loads(outs[-1])
            stages, passes = median_times(outs)
            wall_nv, gb_nv, _ = measured(drawopt("optimize", str(src), "-o", str(out) + ".nv.npz",
                                                 "--target", args.target, "--no-verify", "-q"), repeat=rep_n)
            vwall, vgb, _ = measured(drawopt("verify", str(src), str(out)), repeat=rep_n)
            row = {"kind": kind, "draws": n, "optimize_s": wall, "optimize_gb": gb, "no_verify_s": wall_nv,
                   "no_verify_gb": gb_nv, "verify_s": vwall, "verify_gb": vgb,
                   "draw_calls": figures.get("after", {}).get("draw_calls"), "passes_s": passes,
                   "stages_s": stages}
            if kind == "frame" and n <= 100_000:
                pw, pgb, _ = measured(drawopt("optimize", str(src), "-o", str(out) + ".pure.npz",
                                              "--target", args.target, "-q"), env={"DRAWOPT_PURE": "1"},
                                              repeat=rep_n)
                row.update(pure_s=pw, pure_gb=pgb)
            if kind == "frame" and n == 100_000:
                for fmt in ("text", "json"):
                    row.update(lines_per_second(src, fmt))
            rows.append(row)
            print(f"{kind:>10} {n:>8,}: optimize {wall:7.2f} s {gb:5.2f} GB (no verify {wall_nv:6.2f} s), "
                  f"verify {vwall:6.2f} s {vgb:5.2f} GB" + (f", pure {row['pure_s']:.2f} s" if "pure_s" in row else ""),
                  flush=True)
            print("           stages: " + ", ".join(f"{k} {v:.3f}" for k, v in stages.items())
                  + " s; passes: " + ", ".join(f"{k} {v:.3f}" for k, v in passes.items()) + " s", flush=True)
    by = {(r["kind"], r["draws"]): r for r in rows}
    for n, label in ((10_000, "10k"), (100_000, "100k"), (1_000_000, "1M")):
        if ("frame", n) in by:
            summary[f"optimize {label} s"] = by["frame", n]["optimize_s"]
            summary[f"optimize {label} GB"] = by["frame", n]["optimize_gb"]
            summary[f"verify {label} s"] = by["frame", n]["verify_s"]
            summary[f"verify {label} GB"] = by["frame", n]["verify_gb"]
    if ("frame", 1_000_000) in by and ("frame", 100_000) in by:
        summary["1M/100k"] = by["frame", 1_000_000]["optimize_s"] / by["frame", 100_000]["optimize_s"]
    if ("frame", 100_000) in by:
        for k in ("text read lines/s", "text write lines/s", "json read lines/s", "json write lines/s"):
            summary[k] = by["frame", 100_000][k]
    print("\n" + stage_table(rows))
    print("\nfigure                      measured      target")
    for k, v in summary.items():
        t = TARGETS.get(k)
        mark = "" if t is None else ("  ok" if (v >= t if "lines/s" in k else v <= t) else "  MISSED")
        print(f"{k:<24} {v:>12,.2f} {'' if t is None else f'{t:>11,.2f}'}{mark}")
    load = os.getloadavg()
    out = {"rows": rows, "summary": summary, "targets": TARGETS, "loadavg": load, "cpus": os.cpu_count(),
           "cores_used": len(os.sched_getaffinity(0)), "cpu_model": cpu_model(),
           "repeat": args.repeat, "repeat_large": args.repeat_large,
           "date": time.strftime("%Y-%m-%d %H:%M")}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nload average {load[0]:.1f} on {os.cpu_count()} cores ({out['cores_used']} used: {out['cpu_model']}); "
          f"figures in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
