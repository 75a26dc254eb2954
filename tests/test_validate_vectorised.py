"""The vectorised rules of :mod:`drawopt.validate` against plain per-draw references (issue 13).

``index-range`` and ``table-undefined`` used to loop per multi-draw and per (pipeline,
parameter); the flush pass's re-bind guard used to re-run :func:`drawopt.validate.findings`
on a spliced stream per candidate. Each reference below is the old semantics written as the
simplest loop (one draw, one record at a time); random streams must give the same findings
(same rule, command, line and message) and the same re-binds.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import streams
from test_state import COMMANDS, add, builder

from drawopt.analysis.access import gpu_writes
from drawopt.analysis.state import IB, OBS_DISPATCH, OBS_DRAW, scan
from drawopt.errors import InputError
from drawopt.ir.decls import Buffer, Pipeline, RootSig
from drawopt.ir.ops import BY_NAME
from drawopt.ir.stream import Stream, StreamBuilder
from drawopt.passes.flush import _copy, _rebinds_in_range, index_rebinds, splice
from drawopt.validate import Finding, _at, _table_reason, findings, index_range_violations

_RANGE_OPS = ("IASetIndexBuffer", "DrawIndexedInstanced", "DrawIndexedInstancedIndirect",
              "MultiDrawIndexedInstancedIndirect", "DrawIndexedX", "Opaque", "CopyBufferRegion", "Dispatch",
              "SetPipelineState", "SetDescriptorHeaps", "SetComputeRootSignature", "SetComputeRootDescriptorTable",
              "DrawInstanced")
_TABLE_OPS = ("SetPipelineState", "SetDescriptorHeaps", "SetGraphicsRootSignature", "SetComputeRootSignature",
              "SetGraphicsRootDescriptorTable", "SetComputeRootDescriptorTable", "DrawInstanced", "Dispatch",
              "Opaque", "SetGraphicsRoot32BitConstants")


def _scanned(s: Stream) -> bool:
    try:
        scan(s)
    except InputError:
        return False
    return True


def _index_range_reference(s: Stream) -> list[Finding]:
    """The ``index-range`` rule one draw and one record at a time."""
    sc = scan(s)
    decls = s.decls.items
    gw = gpu_writes(s, sc)
    first_write: dict[int, int] = {}
    for c, r in zip(gw.cmd.tolist(), gw.res.tolist()):
        first_write[r] = min(first_write.get(r, c), c)
    for c in np.flatnonzero(s.op == BY_NAME["CopyBufferRegion"].code).tolist():
        r = int(s.args[c, 0])
        first_write[r] = min(first_write.get(r, c), c)
    opq = np.flatnonzero(s.op == BY_NAME["Opaque"].code)
    first_opaque = int(opq[0]) if opq.size else len(s)
    out = []
    for o in range(sc.obs.size):
        if sc.obs_kind[o] != OBS_DRAW:
            continue
        i = int(sc.obs[o])
        name = s.spec(i).name
        a = [int(x) for x in s.args[i]]
        st_ = int(sc.setter[o, IB])
        if st_ < 0 or (int(sc.unknown[o]) >> IB) & 1:
            continue
        if name == "DrawIndexedInstanced":
            records = [(-1, a[0], a[2], a[1])]
        elif name in ("DrawIndexedInstancedIndirect", "MultiDrawIndexedInstancedIndirect"):
            multi = name.startswith("Multi")
            b = a[1] if multi else a[0]
            d = decls[b]
            if not (isinstance(d, Buffer) and d.cpu and d.data is not None):
                continue
            if first_write.get(b, len(s) + 1) <= i or first_opaque <= i:
                continue
            words = [int(x) for x in d.data]
            count, off, stride = (a[0], a[2], a[3]) if multi else (1, a[1], 0)
            records = []
            for k in range(count):
                byte = off + k * stride
                if byte >= 4 * len(words):
                    break                      # records past the data read zeros: nothing drawn
                w = words[byte // 4:byte // 4 + 3] + [0, 0, 0]   # (the words past the data: zeros)
                records.append((k, w[0], w[2], w[1]))
                if not stride:
                    break                      # a zero stride repeats one record
        else:
            continue
        ib, fmt, ib_off = (int(x) for x in s.args[st_, :3])
        size = decls[ib].size
        for k, count, start, instances in records:
            end = ib_off + (start + count) * (2 if fmt == 0 else 4)
            if count > 0 and instances != 0 and end > size:   # (no instance drawn: no index read)
                what = (f"{name} (its CPU-written args)" if name == "DrawIndexedInstancedIndirect"
                        else name if k < 0 else f"{name} (draw {k} of its CPU-written args)")
                out.append(Finding("index-range", i, int(s.line[i]),
                                   f"{what} reads indices up to byte {end} of index buffer '{decls[ib].name}' "
                                   f"({size} bytes, bound at {_at(s, st_)})"))
    return sorted(out, key=lambda f: (f.cmd, f.message))


def _table_undefined_reference(s: Stream) -> list[Finding]:
    """The ``table-undefined`` rule one observer and one read parameter at a time."""
    sc = scan(s)
    decls = s.decls.items
    changed = {}
    for nm in ("SetDescriptorHeaps", "SetGraphicsRootSignature", "SetComputeRootSignature"):
        cm = np.flatnonzero(s.op == BY_NAME[nm].code)
        before = sc.value_before(cm) if cm.size else np.zeros(0, np.int64)
        changed[nm] = cm[(before != sc.cval[cm]) & (before != -3)] if cm.size else cm
    out = []
    for o in range(sc.obs.size):
        if sc.obs_kind[o] not in (OBS_DRAW, OBS_DISPATCH):
            continue
        compute = sc.obs_kind[o] == OBS_DISPATCH
        p = int(sc.pipe[o])
        d = decls[p] if p >= 0 else None
        if not isinstance(d, Pipeline) or d.is_compute != compute or d.root is None:
            continue
        rs = s.decls[d.root]
        assert isinstance(rs, RootSig)
        base = 29 if compute else 12   # croot0, root0
        i = int(sc.obs[o])
        for q in (range(len(rs.params)) if d.params is None else d.params):
            slot = base + q
            if rs.params[q].kind != "table" or sc.setter[o, slot] != -1 or (int(sc.unknown[o]) >> slot) & 1:
                continue
            rs_chg = changed["SetComputeRootSignature" if compute else "SetGraphicsRootSignature"]
            out.append(Finding("table-undefined", i, int(s.line[i]),
                               f"{s.spec(i).name} reads descriptor table root parameter {q} of pipeline "
                               f"'{d.name}', which is undefined: "
                               + _table_reason(s, i, np.flatnonzero(sc.slot == slot), changed["SetDescriptorHeaps"],
                                               rs_chg)))
    return sorted(out, key=lambda f: (f.cmd, f.message))


def _rule(s: Stream, rule: str) -> list[Finding]:
    return [f for f in findings(s) if f.rule == rule]


_ANY = streams(max_commands=40)
_SMALL = st.integers(1, 40) | st.just(0)
_INDEX_COMMANDS = st.one_of(
    st.tuples(st.just("IASetIndexBuffer"), st.tuples(st.sampled_from(["ib", "ibig"]),
                                                     st.sampled_from(["R16_UINT", "R32_UINT"]),
                                                     st.sampled_from([0, 16]))),
    st.tuples(st.just("DrawIndexedInstanced"), st.tuples(_SMALL, st.just(1), _SMALL, st.just(0), st.just(0))),
    st.tuples(st.just("DrawIndexedInstancedIndirect"), st.tuples(st.sampled_from(["args", "gargs"]),
                                                                 st.integers(0, 45).map(lambda k: 4 * k))),
    st.tuples(st.just("MultiDrawIndexedInstancedIndirect"),
              st.tuples(st.integers(2, 6), st.sampled_from(["args", "gargs"]), st.integers(0, 10).map(lambda k: 4 * k),
                        st.sampled_from([20, 24, 28]))),
    st.tuples(st.just("MultiDrawIndexedInstancedIndirect"),
              st.tuples(st.integers(0, 1), st.just("args"), st.integers(0, 45).map(lambda k: 4 * k),
                        st.sampled_from([0, 4, 20, 1 << 20]))),
    st.tuples(st.just("DrawIndexedX"), st.just(("ibig", 0, "R16_UINT", 6, 0))),
    st.sampled_from([("SetPipelineState", ("p",)), ("SetPipelineState", ("w",)), ("Dispatch", (1, 1, 1)),
                     ("CopyBufferRegion", ("args", 0, "ibig", 0, 16)), ("Opaque", ("ClearState",))]),
)


@st.composite
def _index_streams(draw: st.DrawFn) -> Stream:
    """A small world for the index reads: two index buffers, CPU args with data (shared by the draws,
    as mdi writes them), GPU-written args, a compute writer of the args, copies and Opaque commands."""
    b = StreamBuilder(kind=draw(st.sampled_from(["list", "list", "bundle"])))
    b.buffer("ib", size=draw(st.sampled_from([40, 64, 256])))
    b.buffer("ibig", size=1 << 16)
    words = draw(st.lists(_SMALL, min_size=10, max_size=50))
    b.buffer("args", size=200, cpu=True, data=np.array(words, np.uint32))
    b.buffer("gargs", size=200, cpu=draw(st.booleans()))
    b.pipeline("p", vs="v", ps="p")
    b.pipeline("w", cs="c", writes=["args"])
    b.cmd("IASetIndexBuffer", "ib", "R16_UINT", 0)
    for name, a in draw(st.lists(_INDEX_COMMANDS, min_size=8, max_size=40)):
        b.cmd(name, *a)
    return b.build()


@st.composite
def _state_streams(draw: st.DrawFn) -> Stream:
    """:func:`test_state.semantic_streams`'s small world, longer (tables set, reset and read often)."""
    b = builder(context=draw(st.sampled_from(["graphics", "graphics", "compute"])),
                kind=draw(st.sampled_from(["list", "list", "bundle"])))
    for name, a in draw(st.lists(COMMANDS, min_size=10, max_size=60)):
        add(b, name, a)
    return b.build()


_RANGE = st.one_of(_index_streams(), streams(max_commands=40, ops=_RANGE_OPS, min_decls=True), _ANY)
_TABLES = st.one_of(_state_streams(), streams(max_commands=40, ops=_TABLE_OPS, min_decls=True), _ANY)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_RANGE)
def test_index_range_matches_the_per_record_reference(s: Stream) -> None:
    assume(_scanned(s))
    assert _rule(s, "index-range") == _index_range_reference(s)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_TABLES)
def test_table_undefined_matches_the_per_observer_reference(s: Stream) -> None:
    assume(_scanned(s))
    assert _rule(s, "table-undefined") == _table_undefined_reference(s)


def test_index_range_of_a_multi_draw_over_shared_args() -> None:
    """Several multi-draws over one CPU args buffer (what mdi writes), one record with a zero stride,
    records past the data."""
    from drawopt.ir import formats

    s = formats.loads("""drawopt 1
buffer ib size=64
buffer args size=120 cpu
data args 40 1 0 0 0 3 1 40 0 0 3 1 0 0 0
IASetIndexBuffer ib R16_UINT 0
MultiDrawIndexedInstancedIndirect 3 args 0 20
MultiDrawIndexedInstancedIndirect 4 args 20 20
MultiDrawIndexedInstancedIndirect 1 args 20 0
DrawIndexedInstancedIndirect args 0
MultiDrawIndexedInstancedIndirect 2 args 40 40
MultiDrawIndexedInstancedIndirect 2 args 60 20
""")
    f = _rule(s, "index-range")
    assert [(x.cmd, x.message.split(" reads")[0]) for x in f] == [
        (1, "MultiDrawIndexedInstancedIndirect (draw 0 of its CPU-written args)"),
        (1, "MultiDrawIndexedInstancedIndirect (draw 1 of its CPU-written args)"),
        (2, "MultiDrawIndexedInstancedIndirect (draw 0 of its CPU-written args)"),
        (3, "MultiDrawIndexedInstancedIndirect (draw 0 of its CPU-written args)"),
        (4, "DrawIndexedInstancedIndirect (its CPU-written args)"),
    ]
    assert f == _index_range_reference(s)
    v = index_range_violations(s, np.arange(len(s)), np.zeros(len(s), np.int64))
    assert v.cmd.tolist() == [1, 1, 2, 3, 4] and v.record.tolist() == [0, 1, 0, 0, 0]
    assert v.end.tolist() == [80, 86, 86, 86, 80] and set(v.size.tolist()) == {64}


def _rebinds_by_findings(s: Stream, rebinds: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The re-bind guard's old semantics: splice the re-binds in and count ``index-range`` findings.

    A buffer that anything writes, before or after the re-bind point, is never re-bound (the flush
    pass's rule since the regression in tests/test_rewrite_regressions.py)."""
    w = gpu_writes(s)
    written: dict[int, int] = {}
    copies = np.flatnonzero(s.op == BY_NAME["CopyBufferRegion"].code)
    for c, r in zip(np.r_[w.cmd, copies].tolist(), np.r_[w.res, s.args[copies, 0]].tolist()):
        written[int(r)] = min(written.get(int(r), c), c)
    rebinds = [(a, src) for a, src in rebinds if int(s.args[src, 0]) not in written]
    if not rebinds:
        return rebinds

    def count(t: Stream) -> int:
        return len(_rule(t, "index-range"))

    def spliced(pairs: list[tuple[int, int]]) -> Stream:
        return splice(s, {a + 1: [_copy(s, src)] for a, src in pairs})

    base = count(s)
    if count(spliced(rebinds)) <= base:
        return rebinds
    return [p for p in rebinds if count(spliced([p])) <= base]


_REBIND_OPS = ("IASetIndexBuffer", "DrawIndexedInstanced", "DrawIndexedInstancedIndirect",
               "MultiDrawIndexedInstancedIndirect", "DrawIndexedX", "Opaque", "CopyBufferRegion", "Dispatch",
               "SetPipelineState", "DrawInstanced")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_index_streams(), _state_streams(), streams(max_commands=40, ops=_REBIND_OPS, min_decls=True)))
def test_rebind_guard_matches_splicing_and_validating(s: Stream) -> None:
    assume(_scanned(s))
    rebinds = index_rebinds(s)
    assume(rebinds)
    assert _rebinds_in_range(s, rebinds) == _rebinds_by_findings(s, rebinds)
