"""CPU seconds of ``drawopt.validate.findings`` on a generated frame and on what each pass makes of it.

The pass manager checks ``findings`` after every pass that changed the stream (no pass may add
one), so on the default pipeline it runs 6-8 times per optimize. This script generates a frame,
runs a pipeline (default: the d3d12 default, without the final verify), keeps every stream a
pass changed, and times ``findings(stream, state)`` on each with the state table computed
beforehand (the pass manager has it cached). Prints a table; ``--json`` writes the figures.

    PYTHONPATH=. python3 bench/validate_findings.py --draws 100000
    PYTHONPATH=. python3 bench/validate_findings.py --draws 1000000 --passes mdi   # once: heavy
"""

from __future__ import annotations

import argparse
import json
import time

import drawopt
from drawopt.analysis.state import track
from drawopt.gen import generate
from drawopt.validate import findings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kind", default="frame")
    ap.add_argument("--passes", default=None, help="pipeline string (default: the target's default pipeline)")
    ap.add_argument("--repeat", type=int, default=3, help="calls per stream; the minimum is reported")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args()

    s0 = generate(a.kind, a.draws, seed=a.seed)
    streams = [("input", s0)]
    drawopt.optimize(s0, passes=a.passes, verify=False,
                     on_pass=lambda p, r: streams.append((str(p), r.stream)) if r.modified else None)
    rows = []
    for name, s in streams:
        state = track(s)
        best = float("inf")
        for _ in range(a.repeat):
            t = time.process_time()
            n = len(findings(s, state))
            best = min(best, time.process_time() - t)
        rows.append({"stream": name, "commands": len(s), "findings": n, "cpu_s": round(best, 4)})
        print(f"{name:20s} {len(s):9d} commands {n:6d} findings {best:8.3f} s CPU")
    total = sum(r["cpu_s"] for r in rows)
    print(f"{'total':20s} {total:.3f} s CPU over {len(rows)} calls (max {max(r['cpu_s'] for r in rows):.3f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"draws": a.draws, "kind": a.kind, "seed": a.seed, "passes": a.passes, "rows": rows,
                       "total_cpu_s": total}, f, indent=1)


if __name__ == "__main__":
    main()
