"""docs/gs-plan.md is the test: every ```dstream block with a ``# RUN:`` line is run.

A block is an input stream in ``.dstream`` text; ``# RUN: PIPELINE`` names the
passes, ``# PLAN: key=value ...`` the expected entries of the gs-plan report's
``pipelines`` (in order; ``_`` stands for a space in a value) and ``# OUT:`` the
complete output command list (as xDSL's filecheck tests do, the example is the test).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from drawopt.ir import codec
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passmanager import PassManager, parse_pipeline

DOC = Path(__file__).resolve().parent.parent / "docs" / "gs-plan.md"
_BLOCK = re.compile(r"^```dstream\n(.*?)^```", re.S | re.M)


def _examples() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    out = []
    for m in _BLOCK.finditer(text):
        if "# RUN:" in m.group(1):
            heading = [h for h in re.findall(r"^### (.+)$", text[:m.start()], re.M)][-1]
            out.append((heading, m.group(1)))
    return out


EXAMPLES = _examples()


def _directives(block: str, key: str) -> list[str]:
    return [ln.split(key, 1)[1].strip() for ln in block.splitlines() if ln.startswith(key)]


def _parse_fallback(text: str) -> Stream:
    """A reader for the subset of ``.dstream`` the doc uses (header, target, pipeline,
    commands), used only when the real reader is not built."""
    b: StreamBuilder | None = None
    for raw in text.splitlines():
        toks = raw.split("#", 1)[0].split()
        if not toks:
            continue
        if toks[0] == "drawopt":
            kv = dict(t.split("=", 1) for t in toks[2:])
            b = StreamBuilder(context=kv.get("context", "graphics"), kind=kv.get("kind", "list"),
                              fast_semantics=kv.get("fast_semantics", "off") == "on")
            continue
        assert b is not None, "the header comes first"
        if toks[0] == "target":
            w, h = toks[2].split("x")
            b.target(toks[1], int(w), int(h), toks[3])
        elif toks[0] == "pipeline":
            kw: dict[str, Any] = {}
            for t in toks[2:]:
                k, _, v = t.partition("=")
                kw[k] = float(v) if k == "gs_ratio" else int(v) if k.startswith("gs_") else v
            b.pipeline(toks[1], **kw)
        else:
            pos = [t for t in toks[1:] if "=" not in t]
            kws = dict(t.split("=", 1) for t in toks[1:] if "=" in t)
            b.cmd(toks[0], *pos, **kws)
    assert b is not None
    return b.build()


def parse(text: str) -> Stream:
    """The example's stream, read by the real ``.dstream`` reader when it is built."""
    try:
        from drawopt.ir.formats.text import loads_text
    except ImportError:
        return _parse_fallback(text)
    return loads_text(text, "docs/gs-plan.md")


def format_command(s: Stream, i: int) -> str:
    """Canonical text of command ``i``: positionals, variadic values, non-default keywords."""
    sp = s.spec(i)
    parts = [sp.name]
    parts += [codec.format_token(a, s.args[i, j], s.decls, s.strings) for j, a in enumerate(sp.args)
              if not a.keyword]
    if sp.var is not None:
        parts += [codec.format_token(sp.var, v, s.decls, s.strings) for v in s.var(i)]
    parts += [f"{a.name}={codec.format_token(a, s.args[i, j], s.decls, s.strings)}"
              for j, a in enumerate(sp.args) if a.keyword and s.args[i, j] != (a.default or 0)]
    return " ".join(parts)


def test_doc_has_the_required_examples() -> None:
    names = " | ".join(h.lower() for h, _ in EXAMPLES)
    assert len(EXAMPLES) >= 6
    for needed in ("it fits", "budget exceeded: a smaller subgroup", "budget exceeded: offchip",
                   "tessellation active", "overridden ratio and lds limit"):
        assert needed in names, needed
    reasons = " ".join(" ".join(_directives(b, "# PLAN:")) for _, b in EXAMPLES)
    for reason in ("fits", "small-subgroup", "no-fit", "tessellation", "kept"):
        assert f"reason={reason}" in reasons


@pytest.mark.parametrize("block", [b for _, b in EXAMPLES], ids=[h for h, _ in EXAMPLES])
def test_doc_example(block: str) -> None:
    (run,) = _directives(block, "# RUN:")
    plan_lines = _directives(block, "# PLAN:")
    out_lines = _directives(block, "# OUT:")
    assert plan_lines and out_lines, "an example states its plan and its output"
    stream = parse(block)
    pm = PassManager(parse_pipeline(run))
    out = pm.run(stream)
    got = [format_command(out, i) for i in range(len(out))]
    assert got == out_lines
    report = next(r.report for r in pm.records if r.name == "gs-plan")
    entries = report["pipelines"]
    assert len(entries) == len(plan_lines)
    for entry, line in zip(entries, plan_lines):
        for item in line.split():
            key, _, want = item.partition("=")
            assert key in entry, f"report has no field {key!r}"
            assert str(entry[key]) == want.replace("_", " "), (key, entry)
    # the plan is a fixed point: planning the output again changes nothing
    again = PassManager(parse_pipeline(run))
    assert again.run(out) == out
    assert not again.records[-1].modified


def test_doc_explain_line_matches_the_model() -> None:
    text = DOC.read_text(encoding="utf-8")
    shown = re.search(r"```text\n(cube: .*?)\n```", text, re.S)
    assert shown is not None
    block = next(b for h, b in EXAMPLES if h.lower().startswith("budget exceeded: a smaller"))
    pm = PassManager(parse_pipeline("gs-plan"))
    pm.run(parse(block))
    assert pm.records[-1].report["pipelines"][0]["explain"] == shown.group(1)
