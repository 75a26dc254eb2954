"""What the optimize report and the dependency graph cost: ``python bench/report_parts.py`` prints a
table and writes JSON.

For generated frames (default 10k and 100k draws, ``gen --kind frame --seed 1``) the default d3d12
pipeline runs once (no final verify); then, in this process, CPU seconds (user + sys, best of
``--repeat``) of:

- ``report+details``: ``OptimizeResult.report`` plus ``htmlreport.add_details`` (what ``--report R.json``
  adds), from scratch;
- ``report+details (handed)``: the same with the state tables and findings per rule handed over
  (``state_of=`` / ``findings_of=``, what the pass manager already computed);
- the parts: ``track`` and ``findings`` of the input and the output, ``hazard_graph`` of each,
  ``lower_bound`` of each (its graph included), ``explain`` of the output, ``build_graph`` of each
  (the networkx graph of ``drawopt graph``).

    python bench/report_parts.py                         # 10k and 100k
    python bench/report_parts.py --sizes 10000,100000,1000000 --json out.json

The machine is shared: compare runs made minutes apart on one machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn: Callable[[], Any], repeat: int) -> float:
    out = float("inf")
    for _ in range(repeat):
        t = cpu()
        fn()
        out = min(out, cpu() - t)
    return out


def measure(draws: int, repeat: int) -> dict[str, float]:
    from drawopt.analysis.graph import build_graph, hazard_graph
    from drawopt.analysis.lowerbound import lower_bound
    from drawopt.analysis.state import track
    from drawopt.explain import explain
    from drawopt.gen import generate
    from drawopt.htmlreport import add_details
    from drawopt.result import OptimizeResult, optimize
    from drawopt.validate import findings

    src = generate("frame", draws, seed=1)
    res = optimize(src, verify=False)
    inp, out = res.input, res.stream

    def fresh(**kw: Any) -> OptimizeResult:
        return OptimizeResult(out, inp, target=res.target, reorder=res.reorder, pipeline=res.pipeline, passes=[],
                              **kw)

    def report(**kw: Any) -> None:
        r = fresh(**kw)
        add_details(r.report.to_json(), r)

    tables = {id(s): track(s) for s in (inp, out)}
    counts = {id(s): Counter(f.rule for f in findings(s, tables[id(s)])) for s in (inp, out)}
    row: dict[str, float] = {"report+details": best(report, repeat)}
    try:
        row["report+details (handed)"] = best(lambda: report(state_of=lambda s: tables.get(id(s)),
                                                             findings_of=lambda s: counts.get(id(s))), repeat)
    except TypeError:  # an OptimizeResult that takes no analyses (before the report shared them)
        row["report+details (handed)"] = float("nan")
    for tag, s in (("in", inp), ("out", out)):
        row[f"track {tag}"] = best(lambda s=s: track(s), repeat)
        row[f"findings {tag}"] = best(lambda s=s: findings(s, tables[id(s)]), repeat)
        row[f"hazard_graph {tag}"] = best(lambda s=s: hazard_graph(s), repeat)
        row[f"lower_bound {tag}"] = best(lambda s=s: lower_bound(s, res.target, table=tables[id(s)]), repeat)
    row["explain out"] = best(lambda: explain(out, res.target, limit=500, table=tables[id(out)]), repeat)
    for tag, s in (("in", inp), ("out", out)):
        row[f"build_graph {tag}"] = best(lambda s=s: build_graph(s), repeat)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated draw counts (default 10000,100000)")
    ap.add_argument("--repeat", type=int, default=2, help="best of N (default 2)")
    ap.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = {n: measure(n, args.repeat) for n in sizes}
    names = list(next(iter(rows.values())))
    print(f"{'CPU seconds':<26}" + "".join(f"{n:>12,}" for n in sizes))
    for k in names:
        print(f"{k:<26}" + "".join(f"{rows[n][k]:>12.3f}" for n in sizes))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(n): r for n, r in rows.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
