"""The HTML report of an optimize run: one self-contained page that works offline.

``drawopt optimize IN -o OUT --report R.html`` writes it directly;
``drawopt report R.json -o R.html`` renders it from a JSON report. The page has
the before/after table, each pass's effect, four plots (calls and state changes
after each pass, same-state run lengths, reasons draws were left unmerged), the
explain list with a filter, and the dependency graph of a range of the output
as an arc diagram.

The page is built with jinja2 (autoescaped); the plots are matplotlib figures
inlined as SVG (text kept as text, no fonts embedded), so the page needs no
network and no JavaScript library: a few lines of inline script filter the
explain list.

>>> from drawopt.gen import generate
>>> import drawopt
>>> res = drawopt.optimize(generate("quads", 16), passes="merge-instances")
>>> report = {"input": "q.dstream", "output": "q.opt.dstream", **res.report.to_json()}
>>> add_details(report, res)
>>> page = render_html(report, res.stream)
>>> page.startswith("<!DOCTYPE html>") and page.count("<svg") >= 4
True
"""

from __future__ import annotations

__all__ = ["add_details", "render_html", "run_lengths", "EXPLAIN_ITEMS"]

import io
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from drawopt.ir.stream import Stream
from drawopt.result import ROWS, SMALLER_IS_BETTER, state_run_lengths

if TYPE_CHECKING:
    from drawopt.analysis.state import StateTable
    from drawopt.result import OptimizeResult

EXPLAIN_ITEMS = 500
"""At most this many explain items are kept in a report (every pair is still counted)."""

DEFAULT_GRAPH_COMMANDS = 200


def run_lengths(stream: Stream, table: StateTable | None = None) -> list[int]:
    """Lengths of the runs of consecutive draw calls with one normalised state (only state commands between).

    ``table``: the stream's state table, if already tracked.

    >>> from drawopt.gen import generate
    >>> run_lengths(generate("quads", 4))
    [1, 1, 1, 1]
    """
    from drawopt.analysis.state import track

    return state_run_lengths(stream, table if table is not None else track(stream))


def add_details(report: dict[str, Any], res: OptimizeResult) -> None:
    """Add what the page shows beyond the figures: the explain list and run lengths (in place).

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> res = drawopt.optimize(generate("quads", 4), passes="dedupe-state")
    >>> report = res.report.to_json()
    >>> add_details(report, res)
    >>> report["explain"]["pairs"], report["run_lengths"]["after"]
    (3, {'1': 4})
    """
    ex = res.explain(limit=EXPLAIN_ITEMS)
    report["explain"] = ex.to_json()
    report["run_lengths"] = {"before": _hist(res.analyses(res.input).run_lengths),
                             "after": _hist(res.analyses(res.stream).run_lengths)}


def _hist(lengths: list[int]) -> dict[str, int]:
    vals, counts = np.unique(np.asarray(lengths, np.int64), return_counts=True)
    return {str(int(v)): int(k) for v, k in zip(vals, counts)}


# ------------------------------------------------------------------ plots (matplotlib -> inline SVG)
def _figure(w: float = 6.4, h: float = 3.0) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    return fig


def _svg(fig: Any, ident: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": ident, "font.size": 9}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and doctype: inline SVG
    return re.sub(r"<svg ", f'<svg id="{ident}" class="plot" role="img" ', text, count=1)


def _plot_passes(report: dict[str, Any]) -> str:
    labels = ["input"] + [p["name"] for p in report["passes"]]
    calls = [report["before"]["draw_calls"]] + [p["draw_calls"] for p in report["passes"]]
    states = [report["before"]["state_changes"]] + [p["state_changes"] for p in report["passes"]]
    fig = _figure()
    ax = fig.subplots()
    x = np.arange(len(labels))
    ax.plot(x, calls, marker="o", label="draw calls")
    ax.plot(x, states, marker="s", label="state changes")
    ax.axhline(report["lower_bound"], color="gray", linestyle=":", label=f"call bound ({report['lower_bound']})")
    ax.set_xticks(x, [lab[:18] for lab in labels], rotation=30, ha="right")
    ax.set_ylabel("count after the pass")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.set_title("calls and state changes after each pass")
    return _svg(fig, "plot-passes")


def _plot_runs(report: dict[str, Any]) -> str:
    fig = _figure()
    ax = fig.subplots()
    rl = report.get("run_lengths", {})
    for key, off, lab in (("before", -0.2, "input"), ("after", 0.2, "output")):
        h = rl.get(key, {})
        xs = np.array([int(k) for k in h], float)
        ax.bar(xs + off, [h[k] for k in h], width=0.4, label=lab)
    ax.set_xlabel("consecutive draw calls with one state (run length)")
    ax.set_ylabel("runs")
    ax.legend()
    ax.set_title("same-state run lengths")
    return _svg(fig, "plot-runs")


def _plot_reasons(report: dict[str, Any]) -> str:
    by = report.get("explain", {}).get("by_category", {})
    fig = _figure(6.4, 0.6 + 0.35 * max(len(by), 1))
    ax = fig.subplots()
    names = list(by) or ["(none)"]
    ax.barh(np.arange(len(names)), [by.get(n, 0) for n in names], color="#c66")
    ax.set_yticks(np.arange(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("adjacent pairs of draw calls left unmerged")
    ax.set_title("why draws were left unmerged (output)")
    return _svg(fig, "plot-reasons")


_EDGE_COLORS = {"raw": "#d62728", "war": "#ff7f0e", "waw": "#8c564b", "order": "#1f77b4", "flush": "#9467bd",
                "barrier": "#e377c2", "opaque": "#7f7f7f", "state": "#2ca02c"}


def _plot_graph(stream: Stream | None, graph_range: str | None) -> tuple[str, str]:
    """The dependency graph of commands A..B-1 as an arc diagram, and the range's caption."""
    from drawopt.analysis.graph import build_graph

    if stream is None:
        return "", "the output stream is not available: no graph"
    start, stop = _parse_range(graph_range, len(stream))
    G = build_graph(stream, start=start, stop=stop)
    nodes = sorted(G.nodes(data=True), key=lambda n: n[1]["first"])
    pos = {n: i for i, (n, _) in enumerate(nodes)}
    fig = _figure(max(6.4, 0.35 * len(nodes)), 3.2)
    ax = fig.subplots()
    ax.scatter(range(len(nodes)), [0] * len(nodes), s=18, color="black", zorder=3)
    from matplotlib.patches import Arc

    used: set[str] = set()
    for u, v, d in G.edges(data=True):
        a, b = sorted((pos[u], pos[v]))
        reason = d.get("reason", "")
        ax.add_patch(Arc(((a + b) / 2, 0), b - a, b - a, theta1=0, theta2=180, lw=0.8,
                         color=_EDGE_COLORS.get(reason, "black"), label=None if reason in used else reason))
        used.add(reason)
    ax.set_xticks(range(len(nodes)), [f"{d['first']}-{d['last']} {d['kind']}" for _, d in nodes],
                  rotation=90, fontsize=7)
    ax.set_yticks([])
    span = max((abs(pos[u] - pos[v]) for u, v in G.edges()), default=1)
    ax.set_ylim(-0.5, span / 2 + 1)
    ax.set_xlim(-1, max(len(nodes), 1))
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    if used:
        ax.legend(loc="upper right", fontsize=7)
    ax.set_title(f"dependency graph of output commands {start}..{stop - 1} (arcs: edges, by reason)")
    caption = f"commands {start}..{stop - 1}: {G.number_of_nodes()} nodes, {G.number_of_edges()} edges"
    return _svg(fig, "plot-graph"), caption


def _parse_range(text: str | None, n: int) -> tuple[int, int]:
    from drawopt.errors import UsageError

    if not text:
        return 0, min(n, DEFAULT_GRAPH_COMMANDS)
    a, sep, b = text.partition(":")
    try:
        start, stop = int(a or 0), int(b) if b else n
    except ValueError:
        raise UsageError(f"--range expects A:B (command indices), got '{text}'") from None
    if not sep or not 0 <= start < stop:
        raise UsageError(f"--range expects A:B with 0 <= A < B, got '{text}'")
    if start >= n:
        raise UsageError(f"--range starts at {start}, but the output has {n} commands")
    return start, min(stop, n)


# ------------------------------------------------------------------ the page
def _rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    from drawopt.result import _change

    out = []
    for k in ROWS:
        b, a = report["before"].get(k), report["after"].get(k)
        if b is None or a is None:
            continue
        fmt = (lambda x: f"{x:.3f}") if isinstance(b, float) or isinstance(a, float) else (lambda x: f"{x:,}")
        change = _change(k, b, a)
        good = k in SMALLER_IS_BETTER and a < b
        out.append({"name": k, "before": fmt(b), "after": fmt(a), "change": change, "good": good})
    return out


def _pass_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows, prev_calls, prev_states = [], report["before"]["draw_calls"], report["before"]["state_changes"]
    for p in report["passes"]:
        rows.append({**p, "d_calls": p["draw_calls"] - prev_calls, "d_states": p["state_changes"] - prev_states,
                     "ms": f"{p['seconds'] * 1000:.1f}"})
        prev_calls, prev_states = p["draw_calls"], p["state_changes"]
    return rows


def render_html(report: dict[str, Any], stream: Stream | None = None, graph_range: str | None = None) -> str:
    """The page for ``report`` (a JSON report with :func:`add_details`); ``stream``: the output, for the graph.

    >>> import drawopt
    >>> from drawopt.gen import generate
    >>> res = drawopt.optimize(generate("quads", 4), passes="merge-instances")
    >>> report = res.report.to_json()
    >>> add_details(report, res)
    >>> "why draws were left unmerged" in render_html(report)      # no stream given: no graph
    True
    """
    try:
        import jinja2
        import matplotlib  # noqa: F401
    except ImportError as e:
        from drawopt.errors import UsageError
        raise UsageError(f"the HTML report needs {e.name}: pip install 'drawopt[report]'") from None

    from drawopt.result import verdict_line

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    graph_svg, graph_caption = _plot_graph(stream, graph_range)

    ex = report.get("explain", {"items": [], "by_category": {}, "pairs": 0})
    verdict = verdict_line(report["before"], report["after"], report.get("verified"), report.get("input", ""))
    return env.from_string(_TEMPLATE).render(
        r=report, verdict=verdict, source=report.get("input", "(stream)"), dest=report.get("output", "(stream)"),
        rows=_rows(report), passes=_pass_rows(report), ex=ex,
        plots=[jinja2.utils.markupsafe.Markup(s) for s in (_plot_passes(report), _plot_runs(report),
                                                            _plot_reasons(report))],
        graph=jinja2.utils.markupsafe.Markup(graph_svg), graph_caption=graph_caption)


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>drawopt report: {{ source }}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:70em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}.good{color:#196c19}.verdict{font:15px monospace;background:#f4f4f4;
padding:.5em}svg.plot{max-width:100%;height:auto;display:block;margin:.5em 0}#explain td{text-align:left}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(30em,1fr));gap:1em}
</style></head><body>
<h1>drawopt report</h1>
<p class="verdict">{{ verdict }}</p>
<p>input <code>{{ source }}</code> &rarr; output <code>{{ dest }}</code>; target <b>{{ r.target }}</b>,
reorder policy <b>{{ r.reorder }}</b>; pipeline <code>{{ r.pipeline | join(",") }}</code>;
passes took {{ "%.3f" | format(r.total_seconds) }} s;
verified: {{ "yes" if r.verified else ("NO" if r.verified is false else "not checked") }}.</p>
<h2>Before and after</h2>
<table id="figures"><tr><th></th><th>before</th><th>after</th><th>change</th></tr>
{% for row in rows %}<tr><td>{{ row.name }}</td><td>{{ row.before }}</td><td>{{ row.after }}</td>
<td{% if row.good %} class="good"{% endif %}>{{ row.change }}</td></tr>
{% endfor %}</table>
<h2>Each pass</h2>
<table id="passes"><tr><th>pass</th><th>draw calls</th><th>&Delta;</th><th>state changes</th><th>&Delta;</th>
<th>commands</th><th>ms</th><th>verified</th></tr>
{% for p in passes %}<tr><td><code>{{ p.name }}</code></td><td>{{ "{:,}".format(p.draw_calls) }}</td>
<td>{{ "%+d" | format(p.d_calls) }}</td><td>{{ "{:,}".format(p.state_changes) }}</td>
<td>{{ "%+d" | format(p.d_states) }}</td><td>{{ "{:,}".format(p.commands) }}</td><td>{{ p.ms }}</td>
<td>{{ "yes" if p.verified else ("-" if p.verified is none else "NO") }}</td></tr>
{% endfor %}</table>
<h2>Plots</h2>
<div class="plots">{% for svg in plots %}<figure>{{ svg }}</figure>{% endfor %}</div>
<h2>Why draws were left unmerged</h2>
<p>{{ ex.pairs }} adjacent pairs of draw calls in the output are separate calls{% if ex["items"] | length < ex.pairs %}
({{ ex["items"] | length }} listed){% endif %}.
<label>filter <input id="filter" type="search" placeholder="text in the reason"></label>
<label>category <select id="category"><option value="">all</option>
{% for c in ex.by_category %}<option>{{ c }}</option>{% endfor %}</select></label>
<span id="shown"></span></p>
<table id="explain"><thead><tr><th>commands</th><th>lines</th><th>category</th><th>reason</th></tr></thead><tbody>
{% for it in ex["items"] %}<tr data-category="{{ it.category }}"><td>{{ it.a }} / {{ it.b }}</td>
<td>{{ it.line_a }} / {{ it.line_b }}</td><td>{{ it.category }}</td><td>{{ it.reason }}</td></tr>
{% endfor %}</tbody></table>
<h2>Dependency graph</h2>
<p>{{ graph_caption }}</p>
{{ graph }}
<script>
(function () {
  var f = document.getElementById("filter"), c = document.getElementById("category");
  var rows = document.querySelectorAll("#explain tbody tr"), shown = document.getElementById("shown");
  function apply() {
    var q = f.value.toLowerCase(), cat = c.value, n = 0;
    rows.forEach(function (tr) {
      var ok = (!cat || tr.dataset.category === cat) && tr.textContent.toLowerCase().indexOf(q) >= 0;
      tr.hidden = !ok; if (ok) { n++; }
    });
    shown.textContent = n + " shown";
  }
  f.addEventListener("input", apply); c.addEventListener("change", apply); apply();
})();
</script>
</body></html>
"""
