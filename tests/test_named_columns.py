"""Command arguments are read by name (``Op.X.col("name")``, ``shared_col``, the ``COL_*`` of
drawopt.ir.ops), never by column number, in the modules moved to named columns (issue 13)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAMED = (
    "bench/run.py",
    "drawopt/analysis/access.py",
    "drawopt/analysis/flushrules.py",
    "drawopt/analysis/graph.py",
    "drawopt/analysis/mergeclass.py",
    "drawopt/analysis/state.py",
    "drawopt/cli/commands/optimize.py",
    "drawopt/cli/commands/verify.py",
    "drawopt/cli/timing.py",
    "drawopt/explain.py",
    "drawopt/ir/formats/npz.py",
    "drawopt/ir/stream.py",
    "drawopt/stats.py",
    "drawopt/validate.py",
    "drawopt/verify/__init__.py",
    "drawopt/verify/compare.py",
    "drawopt/verify/model.py",
    "drawopt/verify/records.py",
    "drawopt/verify/rules.py",
    "drawopt/verify/slots.py",
    "passes/dedupe_state.py",
    "passes/flush.py",
    "passes/mdi.py",
    "passes/merge_instances.py",
    "passes/pack_x.py",
    "passes/schedule.py",
    "passes/weld.py",
)
"""Modules whose argument reads are all named (the rest of the tree follows module by module)."""
_ARG_ROWS = {"args", "dargs", "cargs", "bargs", "a"}


def numbered_reads(source: str) -> list[int]:
    """Lines of ``ROWS[i, K]`` subscripts (``ROWS`` an argument-rows array, ``K`` an integer literal).

    >>> numbered_reads("x = s.args[i, 0]\\ny = s.args[i, COL_PIPELINE]\\nz = rows[:, 3]")
    [1]
    """
    out = []
    for n in ast.walk(ast.parse(source)):
        if not isinstance(n, ast.Subscript) or not isinstance(n.slice, ast.Tuple) or len(n.slice.elts) != 2:
            continue
        v = n.value
        name = v.attr if isinstance(v, ast.Attribute) else v.id if isinstance(v, ast.Name) else None
        col = n.slice.elts[1]
        if name in _ARG_ROWS and isinstance(col, ast.Constant) and isinstance(col.value, int):
            out.append(n.lineno)
    return sorted(out)


@pytest.mark.parametrize("path", NAMED)
def test_arguments_are_read_by_name(path: str) -> None:
    lines = numbered_reads((ROOT / path).read_text(encoding="utf-8"))
    assert not lines, f"{path}: argument columns by number at lines {lines} (use Op.X.col / shared_col / COL_*)"


def test_the_check_sees_a_numbered_read() -> None:
    assert numbered_reads("def f(stream, c):\n    return stream.args[c, 2] + a[:, 1]\n") == [2, 2]
    assert numbered_reads("b = stream.args[c, _COPY_DST]\nw = words[:, 0]\n") == []


def test_mdi_record_layout_follows_the_argument_table() -> None:
    """mdi writes indirect-args records straight from its draws' argument rows: the D3D12 record
    fields must be the leading argument columns, in order (checked when the module loads)."""
    from drawopt.ir.ops import Op
    from drawopt.passes import mdi

    assert mdi._DI_RECORD == tuple(range(4)) and mdi._DII_RECORD == tuple(range(5))
    assert mdi._SI_FIELD == {False: Op.DrawInstanced.col("start_instance"),
                             True: Op.DrawIndexedInstanced.col("start_instance")}
