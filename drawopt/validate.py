"""Findings: the seed rules one stream can show.

Every rule is vectorised over the observers of :func:`drawopt.analysis.state.scan`
(draws, dispatches), so that validating 10^6 draws stays fast. State that is
*unknown* (after an ``Opaque`` command, or inherited by a bundle) never gives a
finding. Rules (ids are stable; :data:`RULES` describes them in one line):

``no-pipeline``
    A draw or dispatch with no pipeline state set, or with a pipeline of the wrong
    kind (a draw with a compute pipeline, a dispatch with a graphics pipeline).
``table-undefined``
    A draw or dispatch reads (per its pipeline's ``params``, default: every root
    parameter of its root signature) a descriptor-table root parameter that is
    undefined: never set in this command list, or not set again after the
    descriptor heaps or the root signature changed
    (d3d12-descriptor-tables-ru.txt). Setting the *same* heaps or root signature
    again keeps the tables.
``bundle-heaps``
    In a bundle (``kind=bundle``), a second ``SetDescriptorHeaps`` with different
    heaps (a bundle may set its heaps only once; setting the same heaps again is
    legal).
``index-buffer-undefined``
    An indexed draw (DrawIndexedInstanced, indexed indirect, indexed multi-draw)
    with no index buffer bound, or after a ``DrawIndexedX`` with no new
    ``IASetIndexBuffer`` (drawindexedx.txt: DrawIndexedX leaves the index buffer
    undefined).
``index-range``
    A ``DrawIndexedInstanced`` reading indices past the end of the bound index
    buffer; also each draw record of a ``DrawIndexedInstancedIndirect`` or
    ``MultiDrawIndexedInstancedIndirect`` whose args are CPU-known (a ``cpu``
    buffer with ``data`` that no GPU command, copy or ``Opaque`` command writes
    before the draw), so a draw folded into a multi-draw stays checked.
``missing-flush``
    The GPU front end reads data the GPU wrote without the flush sequence the
    writer needs (multidraw-indirect-and-flushes.txt). Readers: indirect draws
    read their args (and, for ``Auto`` variants, count) buffer; indexed draws read
    index data (the bound index buffer, or DrawIndexedX's own). Writers: THE
    resource-access rule of :mod:`drawopt.analysis.access` -- a ``Dispatch`` (stage cs) or a
    draw (its pipeline's ``uav_stage``) writes what its pipeline declares in
    ``writes=`` plus every UAV reachable through the descriptor tables and root UAVs
    bound when it runs. Required between the write
    and the read, on the graphics context: after a CS writer
    ``GpuSendPipelinedEvent CS_PARTIAL_FLUSH`` (only with fast semantics or while
    ``CSEnableAutomaticGpuFlush(FALSE)`` is in force at the Dispatch) then
    ``FlushGpuCacheRange DEFAULT_PFP``; after a VS/GS/HS/DS writer
    ``VS_PARTIAL_FLUSH`` then ``FlushGpuCacheRange DEFAULT_PFP``; after a PS writer
    ``PS_PARTIAL_FLUSH`` then ``FlushGpuCacheRange DEFAULT_PFP``. On the async
    compute context: ``FlushGpuCachesBottomOfPipe DEFAULT`` after the writing
    Dispatch. A ``ResourceBarrier`` of that buffer to ``INDIRECT_ARGUMENT`` or
    ``INDEX_BUFFER`` between them also satisfies the read (D3D12 semantics: the
    transition makes the write visible to the front end). A GPU write of a buffer
    declared ``frontend`` that no front-end read of this stream follows must be
    followed, before the stream ends, by the sequence its writer needs (its reader
    is in another list; a read in this stream is checked, and reported, itself): on async compute
    ``FlushGpuCachesBottomOfPipe DEFAULT``, on the graphics context the sequence
    above. ``CopyBufferRegion`` is front-end coherent: it neither
    needs nor provides a flush. The message says exactly what is missing.
    The rule is THE flush model's (:mod:`drawopt.analysis.flushrules`, the one the
    ``flush`` pass inserts by), read with
    :attr:`~drawopt.analysis.flushrules.Doubt.LENIENT`: what the model cannot know
    gives no finding. After an ``Opaque`` command (it may do anything) a write
    pending before it may have been flushed (not reported), the automatic-flush
    setting is unknown until the next ``CSEnableAutomaticGpuFlush`` (a Dispatch
    there needs only the L2 flush for certain: only that is reported) and so is the
    index buffer (an indexed draw reads nothing known); a draw on async compute
    (``draw-on-compute``) writes nothing here.
``gs-onchip-tessellation``
    A draw with a tessellation pipeline (hs/ds) while ``GSSetParameters onchip``
    is in force: onchip GS mode forces tessellation to always-offchip
    (gssetparameters.txt).
``draw-on-compute``
    A draw in a stream whose header says ``context=compute``: the async compute
    context runs dispatches only. Such draws are not treated as GPU writers by
    ``missing-flush``.
"""

from __future__ import annotations

__all__ = ["Finding", "FlushNeed", "IndexReads", "RULES", "finding_counts", "findings", "index_range_violations",
           "missing_flushes"]

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from drawopt.analysis.access import GpuWrites, gpu_writes
from drawopt.analysis.flushrules import Doubt, FlushNeed, flush_access, flush_needs
from drawopt.analysis.state import (
    CROOT0,
    GS,
    IB,
    NROOT,
    OBS_DISPATCH,
    OBS_DRAW,
    ROOT0,
    Scan,
    StateTable,
    scan,
)
from drawopt.ir.decls import Buffer, Pipeline, RootSig
from drawopt.ir.ops import GS_MODES, INDEX_SIZE, INDEXED_DRAW_OPS, MAX_OPCODE, Cat, Op
from drawopt.ir.stream import Stream

RULES: dict[str, str] = {
    "no-pipeline": "a draw or dispatch with no pipeline, or a pipeline of the wrong kind",
    "table-undefined": "a draw or dispatch reads a descriptor table that is undefined "
                       "(start of list, heaps or root signature changed)",
    "bundle-heaps": "a bundle sets its descriptor heaps a second time, to different heaps",
    "index-buffer-undefined": "an indexed draw with no index buffer, or after DrawIndexedX without IASetIndexBuffer",
    "index-range": "an indexed draw (or a CPU-known record of an indexed multi-draw) reads past the end of the "
                   "bound index buffer",
    "missing-flush": "the front end reads GPU-written args, count or index data without the flush the writer needs",
    "gs-onchip-tessellation": "a tessellation draw while onchip GS mode is in force (forces tessellation offchip)",
    "draw-on-compute": "a draw in an async compute stream (that context runs only dispatches)",
}
"""Rule id -> one-line description."""

_RULE_ORDER = {r: i for i, r in enumerate(RULES)}


@dataclass(frozen=True)
class Finding:
    """One finding: ``rule`` id, command index ``cmd``, its source ``line`` (0 if
    unknown) and a one-line ``message``."""

    rule: str
    cmd: int
    line: int
    message: str


def _at(s: Stream, i: int) -> str:
    ln = int(s.line[i]) if 0 <= i < len(s) else 0
    return f"line {ln}" if ln > 0 else f"command {i}"


class _Ctx:
    """What the rules share: the scan and a few per-observer arrays."""

    def __init__(self, s: Stream, sc: Scan) -> None:
        self.s = s
        self.sc = sc
        obs = sc.obs
        k = sc.obs_kind
        self.dsel = np.flatnonzero(k == OBS_DRAW)
        self.xsel = np.flatnonzero(k == OBS_DISPATCH)
        self.pipes = {i: d for i, d in enumerate(s.decls.items) if isinstance(d, Pipeline)}
        self.names = [d.name for d in s.decls.items]
        self.obs = obs
        self._writes: GpuWrites | None = None

    def writes(self) -> GpuWrites:
        """The stream's GPU writes (:func:`drawopt.analysis.access.gpu_writes`), computed once."""
        if self._writes is None:
            self._writes = gpu_writes(self.s, self.sc)
        return self._writes

    def undefined(self, sel: np.ndarray, slot: int) -> np.ndarray:
        """Slot ``slot`` undefined (not unknown) at observers ``sel``."""
        sc = self.sc
        return (sc.setter[sel, slot] == -1) & (((sc.unknown[sel] >> slot) & 1) == 0)

    def valid_pipe(self, sel: np.ndarray, compute: bool) -> np.ndarray:
        p = self.sc.pipe[sel]
        ok = np.zeros(sel.shape[0], bool)
        for i, d in self.pipes.items():
            if d.is_compute == compute:
                ok |= p == i
        return ok


# ---------------------------------------------------------------------- rules
# Each rule decides once, vectorised, and returns its :class:`_Hits`: how many findings it
# made and how to build them. :func:`findings` builds them; :func:`finding_counts` only counts
# (no Finding objects, no messages), so the two can never disagree on what a rule finds.
@dataclass(frozen=True)
class _Hits:
    """What one rule found: ``n`` findings, built (with their messages) by ``build()``."""

    n: int
    build: Callable[[], list[Finding]]


_NO_HITS = _Hits(0, list)


def _no_pipeline(c: _Ctx) -> _Hits:
    s = c.s
    hit = []
    for sel, compute in ((c.dsel, False), (c.xsel, True)):
        p = c.sc.pipe[sel]
        hit.append(sel[(p == -1) | ((p >= 0) & ~c.valid_pipe(sel, compute))])
    bad = np.concatenate(hit)

    def build() -> list[Finding]:
        out = []
        for o in bad.tolist():
            i = int(c.obs[o])
            pi = int(c.sc.pipe[o])
            nm = s.spec(i).name
            if pi == -1:
                msg = f"{nm} with no pipeline state set"
            else:
                kind = "compute" if c.pipes[pi].is_compute else "graphics"
                msg = f"{nm} with {kind} pipeline '{c.names[pi]}'"
            out.append(Finding("no-pipeline", i, int(s.line[i]), msg))
        return out
    return _Hits(int(bad.size), build)


def _table_undefined(c: _Ctx) -> _Hits:
    s, sc = c.s, c.sc
    hits: list[tuple[np.ndarray, np.ndarray, bool]] = []  # observers, root parameters, compute side
    nd = len(s.decls)
    for sel, compute in ((c.dsel, False), (c.xsel, True)):
        if not sel.size:
            continue
        # reads[p, q]: how many times pipeline p reads root parameter q as a descriptor table
        # (its params= may name one twice); the last row stands for no or an unknown pipeline
        reads = np.zeros((nd + 1, NROOT), np.int64)
        for pi, d in c.pipes.items():
            if d.is_compute != compute or d.root is None:
                continue
            rs = s.decls[d.root]
            assert isinstance(rs, RootSig)
            for q in (range(len(rs.params)) if d.params is None else d.params):
                if rs.params[q].kind == "table":
                    reads[pi, q] += 1
        cols = np.flatnonzero(reads.any(axis=0))  # the parameters some pipeline reads as a table
        if not cols.size:
            continue
        p = sc.pipe[sel]
        prow = np.where(p >= 0, p, nd)
        base = CROOT0 if compute else ROOT0
        # candidates: read, and no setter (undefined or unknown); one column gather per parameter
        cand = (reads[:, cols] > 0)[prow]
        for j, k in enumerate(cols.tolist()):
            cand[:, j] &= sc.setter[sel, base + k] == -1
        row, j = np.nonzero(cand)
        known = ((sc.unknown[sel[row]] >> (base + cols[j])) & 1) == 0
        row, j = row[known], j[known]
        if not row.size:
            continue
        rep = reads[prow[row], cols[j]]
        hits.append((np.repeat(sel[row], rep), np.repeat(cols[j], rep), compute))

    def build() -> list[Finding]:
        # reset events: heap changes (either side), root signature changes (per side)
        heaps_cmds = np.flatnonzero(s.op == Op.SetDescriptorHeaps)
        heaps_chg = heaps_cmds[_changed(sc, heaps_cmds)]
        rs_chg = {}
        for side, code in ((False, Op.SetGraphicsRootSignature), (True, Op.SetComputeRootSignature)):
            cm = np.flatnonzero(s.op == code)
            rs_chg[side] = cm[_changed(sc, cm)]
        out = []
        for obs, q, compute in hits:
            base = CROOT0 if compute else ROOT0
            sets = {int(k): np.flatnonzero(sc.slot == base + k) for k in np.unique(q).tolist()}
            for o, k in zip(obs.tolist(), q.tolist()):
                i = int(c.obs[o])
                out.append(Finding("table-undefined", i, int(s.line[i]),
                                   f"{s.spec(i).name} reads descriptor table root parameter {k} of pipeline "
                                   f"'{c.names[int(sc.pipe[o])]}', which is undefined: "
                                   + _table_reason(s, i, sets[k], heaps_chg, rs_chg[compute])))
        return out
    return _Hits(sum(int(obs.size) for obs, _, _ in hits), build)


def _changed(sc: Scan, cmds: np.ndarray) -> np.ndarray:
    """Which of the set commands ``cmds`` change their slot from a known value (or undefined)."""
    if not cmds.size:
        return np.zeros(0, bool)
    before = sc.value_before(cmds)
    return (before != sc.cval[cmds]) & (before != -3)


def _last_before(arr: np.ndarray, i: int) -> int:
    k = int(np.searchsorted(arr, i)) - 1
    return int(arr[k]) if k >= 0 else -1


def _table_reason(s: Stream, i: int, sets: np.ndarray, heaps_chg: np.ndarray, rs_chg: np.ndarray) -> str:
    last_set = _last_before(sets, i)
    if last_set < 0:
        return "it is never set (descriptor tables are undefined at the start of a command list)"
    h = _last_before(heaps_chg, i)
    r = _last_before(rs_chg, i)
    ev = max(h, r)
    if ev > last_set:
        what = "the descriptor heaps" if ev == h else "the root signature"
        return f"{s.spec(ev).name} at {_at(s, ev)} changed {what} after it was set at {_at(s, last_set)}"
    return f"it was set at {_at(s, last_set)} but later reset"  # pragma: no cover - a reset follows every set


def _bundle_heaps(c: _Ctx) -> _Hits:
    s, sc = c.s, c.sc
    if s.header.kind != "bundle":
        return _NO_HITS
    hc = np.flatnonzero(s.op == Op.SetDescriptorHeaps)
    if hc.size < 2:
        return _NO_HITS
    v0 = sc.cval[hc[0]]
    bad = hc[1:][sc.cval[hc[1:]] != v0]

    def build() -> list[Finding]:
        first = sc.values.decode(int(v0))
        return [Finding("bundle-heaps", i, int(s.line[i]),
                        f"a bundle may set its descriptor heaps only once: SetDescriptorHeaps "
                        f"{' '.join(sc.values.decode(int(sc.cval[i])))} differs from "
                        f"SetDescriptorHeaps {' '.join(first)} at {_at(s, int(hc[0]))}") for i in bad.tolist()]
    return _Hits(int(bad.size), build)


_INDEXED = np.zeros(MAX_OPCODE + 1, bool)
_INDEXED[list(INDEXED_DRAW_OPS)] = True


def _index_buffer_undefined(c: _Ctx) -> _Hits:
    s = c.s
    sel = c.dsel[_INDEXED[s.op[c.obs[c.dsel]]]]
    bad = sel[c.undefined(sel, IB)]

    def build() -> list[Finding]:
        dx = np.flatnonzero(s.op == Op.DrawIndexedX)
        ibs = np.flatnonzero(s.op == Op.IASetIndexBuffer)
        out = []
        for o in bad.tolist():
            i = int(c.obs[o])
            x = _last_before(dx, i)
            nm = s.spec(i).name
            if x >= 0 and x > _last_before(ibs, i):
                msg = (f"{nm} after DrawIndexedX at {_at(s, x)}, which left the index buffer undefined: "
                       f"IASetIndexBuffer must be issued again before it")
            else:
                msg = f"{nm} with no index buffer set (IASetIndexBuffer)"
            out.append(Finding("index-buffer-undefined", i, int(s.line[i]), msg))
        return out
    return _Hits(int(bad.size), build)


def _cpu_known_args(s: Stream, cmds: np.ndarray, bufs: np.ndarray, writes: GpuWrites | Scan | None) -> np.ndarray:
    """bool per command: its args buffer's contents are known on the CPU there -- a ``cpu``
    buffer with ``data`` that no GPU command (:func:`drawopt.analysis.access.gpu_writes`, a copy, an
    ``Opaque`` command) writes before it. ``writes``: the stream's GPU writes, or its scan."""
    decls = s.decls.items
    known_d = np.array([isinstance(d, Buffer) and d.cpu and d.data is not None for d in decls] + [False], bool)
    known = known_d[bufs]
    if not known.any():
        return known
    first = np.full(len(decls) + 1, np.iinfo(np.int64).max, np.int64)
    gw = writes if isinstance(writes, GpuWrites) else gpu_writes(s, writes)
    np.minimum.at(first, gw.res, gw.cmd)
    cp = np.flatnonzero(s.op == Op.CopyBufferRegion)
    np.minimum.at(first, s.args[cp, Op.CopyBufferRegion.col("dst")], cp)
    opq = np.flatnonzero(s.op == Op.Opaque)
    return known & (first[bufs] > cmds) & ((opq[0] if opq.size else np.iinfo(np.int64).max) > cmds)


@dataclass(frozen=True)
class IndexReads:
    """Index data read by indexed draws: one row per draw record, columns of int64.

    ``cmd``: the draw; ``setter``: the ``IASetIndexBuffer`` whose binding it reads;
    ``record``: -1 for a ``DrawIndexedInstanced``, else which record of its CPU-known args
    (0 for a ``DrawIndexedInstancedIndirect``); ``count``, ``start``: the record's index
    count and start index; ``buffer``: the index buffer (declaration index); ``end``: the
    byte one past the last index read (uint64: it may pass 2^63); ``size``: the buffer's size in bytes.
    """

    cmd: np.ndarray
    setter: np.ndarray
    record: np.ndarray
    count: np.ndarray
    start: np.ndarray
    buffer: np.ndarray
    end: np.ndarray
    size: np.ndarray

    def __len__(self) -> int:
        return int(self.cmd.size)


_RANGE_OPS = np.zeros(MAX_OPCODE + 1, np.int8)  # 1 direct, 2 single indirect, 3 multi-draw
_RANGE_OPS[[Op.DrawIndexedInstanced, Op.DrawIndexedInstancedIndirect, Op.MultiDrawIndexedInstancedIndirect]] = (1, 2, 3)
# the argument columns the index-range rule reads
_DII, _DIII, _MDII, _SET_IB = (Op.DrawIndexedInstanced, Op.DrawIndexedInstancedIndirect,
                          Op.MultiDrawIndexedInstancedIndirect, Op.IASetIndexBuffer)
_COL_GS_MODE = Op.GSSetParameters.col("mode")


def index_range_violations(stream: Stream, cmds: np.ndarray, setters: np.ndarray,
                           writes: GpuWrites | Scan | None = None) -> IndexReads:
    """The draw records of ``cmds`` that read past the end of the index buffer bound by ``setters``.

    THE ``index-range`` rule (module docstring), for any binding: ``setters[k]`` is the
    ``IASetIndexBuffer`` command whose buffer, format and offset draw ``cmds[k]`` reads
    with (the one in force, or, for a pass, one it would put in force). Checked: each
    ``DrawIndexedInstanced``, and each record of a ``DrawIndexedInstancedIndirect`` or
    ``MultiDrawIndexedInstancedIndirect`` whose args are CPU-known at the draw (records
    past the args data read zeros); a draw or record of no instance reads no index; other commands
    are ignored.
    ``writes``: the stream's :func:`~drawopt.analysis.access.gpu_writes` or its scan, if
    known. Vectorised: no Python loop per draw or record.

    >>> import drawopt
    >>> s = drawopt.loads('''drawopt 1
    ... buffer ib size=64
    ... IASetIndexBuffer ib R16_UINT 0
    ... DrawIndexedInstanced 30 1 0 0 0
    ... DrawIndexedInstanced 30 1 4 0 0''')
    >>> v = index_range_violations(s, np.array([1, 2]), np.array([0, 0]))
    >>> v.cmd.tolist(), v.end.tolist(), v.size.tolist()
    ([2], [68], [64])
    """
    s = stream
    args = s.args
    cmds = np.asarray(cmds, np.int64).reshape(-1)
    setters = np.asarray(setters, np.int64).reshape(-1)
    kind = _RANGE_OPS[s.op[cmds]] if cmds.size else np.zeros(0, np.int8)
    d = kind == 1
    rcmd, rset, rrec = [cmds[d]], [setters[d]], [np.full(int(d.sum()), -1, np.int64)]
    rcount, rstart = [args[cmds[d], _DII.col("index_count")]], [args[cmds[d], _DII.col("start_index")]]
    rinst = [args[cmds[d], _DII.col("instance_count")]]
    ind = kind >= 2
    ic, ist, multi = cmds[ind], setters[ind], kind[ind] == 3
    abuf = np.where(multi, args[ic, _MDII.col("args_buffer")], args[ic, _DIII.col("args_buffer")])
    ok = _cpu_known_args(s, ic, abuf, writes) if ic.size else np.zeros(0, bool)
    if ok.any():
        ic, ist, multi, abuf = ic[ok], ist[ok], multi[ok], abuf[ok]
        # a single indirect draw is a multi-draw of one record at its offset
        count = np.where(multi, args[ic, _MDII.col("count")], 1)
        off = np.where(multi, args[ic, _MDII.col("offset")], args[ic, _DIII.col("offset")])
        stride = np.where(multi, args[ic, _MDII.col("stride")], 0)
        # the args data of the buffers read, as one pool of words
        ub, ui = np.unique(abuf, return_inverse=True)
        data = [s.decls.items[b].data for b in ub.tolist()]
        words = np.array([x.size for x in data], np.int64)
        base = np.cumsum(words) - words
        pool = data[0] if len(data) == 1 else np.concatenate(data)
        nw = words[ui]
        # records past the data read zeros (nothing drawn); a zero stride repeats one record
        fit = np.where(stride != 0, np.maximum(0, (nw * 4 - off - 1) // np.where(stride != 0, stride, 1) + 1), 1)
        nrec = np.minimum(count, fit)
        row = np.repeat(np.arange(ic.size), nrec)
        k = np.arange(row.size, dtype=np.int64) - np.repeat(np.cumsum(nrec) - nrec, nrec)
        w0 = (off[row] + k * stride[row]) // 4
        inside = w0 < nw[row]   # (a record's words past the data read zeros)
        row, k, w0 = row[inside], k[inside], w0[inside]
        g, have = base[ui[row]] + w0, nw[row] - w0

        def word(j: int) -> np.ndarray:
            return np.where(have > j, pool[np.where(have > j, g + j, g)].astype(np.int64), 0)
        rcmd.append(ic[row])
        rset.append(ist[row])
        rrec.append(k)
        rcount.append(word(0))
        rinst.append(word(1))
        rstart.append(word(2))
    rc, rs, rec = np.concatenate(rcmd), np.concatenate(rset), np.concatenate(rrec)
    count, start = np.concatenate(rcount).astype(np.int64), np.concatenate(rstart).astype(np.int64)
    inst = np.concatenate(rinst).astype(np.int64)
    sizes = np.array([d.size if isinstance(d, Buffer) else 0 for d in s.decls.items] + [0], np.int64)
    isz = np.where(args[rs, _SET_IB.col("format")] == 0, INDEX_SIZE[0], INDEX_SIZE[1])
    buf = args[rs, _SET_IB.col("buffer")]
    off = args[rs, _SET_IB.col("offset")]
    span = (start + count) * isz
    # compared as the room left after the offset: offset + span may pass 2^63 (a buffer that large)
    bad = (count > 0) & (inst != 0) & (span > sizes[buf] - off)   # (no instance: no index read)
    end = off[bad].astype(np.uint64) + span[bad].astype(np.uint64)
    return IndexReads(rc[bad], rs[bad], rec[bad], count[bad], start[bad], buf[bad], end, sizes[buf[bad]])


def _index_range(c: _Ctx) -> _Hits:
    """Direct indexed draws, and the records of indexed indirect / multi-draw calls whose
    args are CPU-known (``mdi`` folds direct draws into those), reading past the end of
    the bound index buffer (:func:`index_range_violations` with the bindings in force)."""
    s, sc = c.s, c.sc
    sel = c.dsel[_RANGE_OPS[s.op[c.obs[c.dsel]]] > 0]
    st = sc.setter[sel, IB]
    known = (st >= 0) & (((sc.unknown[sel] >> IB) & 1) == 0)
    sel, st = sel[known], st[known]
    if not sel.size:
        return _NO_HITS
    v = index_range_violations(s, c.obs[sel], st, c.writes())

    def build() -> list[Finding]:
        out = []
        for i, rec, end, b, size, rset in zip(v.cmd.tolist(), v.record.tolist(), v.end.tolist(),
                                             v.buffer.tolist(), v.size.tolist(), v.setter.tolist()):
            name = s.spec(i).name
            if name == "DrawIndexedInstancedIndirect":
                what = f"{name} (its CPU-written args)"
            else:
                what = name if rec < 0 else f"{name} (draw {rec} of its CPU-written args)"
            out.append(Finding("index-range", i, int(s.line[i]),
                               f"{what} reads indices up to byte {end} of index buffer "
                               f"'{c.names[b]}' ({size} bytes, bound at {_at(s, rset)})"))
        return out
    return _Hits(len(v), build)


_GS_ONCHIP = GS_MODES.index("onchip")


def _gs_onchip_tessellation(c: _Ctx) -> _Hits:
    s, sc = c.s, c.sc
    tess = [i for i, d in c.pipes.items() if d.tessellation and not d.is_compute]
    if not tess or not c.dsel.size:
        return _NO_HITS
    sel = c.dsel[np.isin(sc.pipe[c.dsel], tess)]
    st = sc.setter[sel, GS]
    on = ((st >= 0) & (s.args[np.maximum(st, 0), _COL_GS_MODE] == _GS_ONCHIP)
          & (((sc.unknown[sel] >> GS) & 1) == 0))
    obs, gs = sel[on], st[on]

    def build() -> list[Finding]:
        out = []
        for o, g in zip(obs.tolist(), gs.tolist()):
            i = int(c.obs[o])
            out.append(Finding("gs-onchip-tessellation", i, int(s.line[i]),
                               f"{s.spec(i).name} with tessellation pipeline '{c.names[int(sc.pipe[o])]}' while "
                               f"GSSetParameters onchip (at {_at(s, g)}) is in force: onchip GS mode forces "
                               f"tessellation to always-offchip"))
        return out
    return _Hits(int(obs.size), build)


def _draw_on_compute(c: _Ctx) -> _Hits:
    s = c.s
    if s.header.context != "compute":
        return _NO_HITS
    draws = np.flatnonzero(s.cats() == int(Cat.DRAW))

    def build() -> list[Finding]:
        return [Finding("draw-on-compute", i, int(s.line[i]),
                        f"{s.spec(i).name} in an async compute stream: that context runs only dispatches")
                for i in draws.tolist()]
    return _Hits(int(draws.size), build)


# ---------------------------------------------------------------------- flushes
def missing_flushes(stream: Stream, sc: Scan | None = None) -> list[FlushNeed]:
    """Every front-end read of GPU-written data that lacks the flushes its writer needs.

    See the ``missing-flush`` rule in the module docstring: the flush model's
    :func:`drawopt.analysis.flushrules.flush_needs` under :attr:`~drawopt.analysis.flushrules.Doubt.LENIENT`
    (what an ``Opaque`` command may have done gives no finding).

    Returns
    -------
    list of FlushNeed
        In reader order.
    """
    return _flush_needs(_Ctx(stream, sc if sc is not None else scan(stream)))


def _flush_needs(c: _Ctx) -> list[FlushNeed]:
    if not len(c.writes()):
        return []
    return flush_needs(c.s, flush_access(c.s, c.sc, c.writes()), Doubt.LENIENT)


def _missing_flush(c: _Ctx) -> _Hits:
    needs = _flush_needs(c)
    return _Hits(len(needs), lambda: _flush_findings(c.s, needs))


def _flush_findings(s: Stream, needs: list[FlushNeed]) -> list[Finding]:
    out = []
    for need in needs:
        w = need.writer
        wname = s.spec(w).name
        if need.stage == "cs+partial":
            why = ("fast semantics is on" if s.header.fast_semantics
                   else "CSEnableAutomaticGpuFlush(FALSE) is in force")
            stage = f"compute shader; {why}"
        else:
            stage = {"cs": "compute shader", "ps": "pixel shader", "async": "async compute"}.get(
                need.stage, f"{need.stage} shader")
        items = " then ".join(f"{a} {b}" for a, b in need.missing)
        if need.reader < 0:
            where = "async compute stream" if s.header.context == "compute" else "command list"
            msg = (f"{wname} writes '{need.buffer}', which the GPU front end reads (declared frontend), "
                   f"without {items} after it before the end of this {where}")
            cmd = w
        else:
            cmd = need.reader
            msg = (f"{s.spec(cmd).name} reads {need.what} from '{need.buffer}' written by {wname} at "
                   f"{_at(s, w)} ({stage}) without the flush it needs: missing {items}")
        out.append(Finding("missing-flush", cmd, int(s.line[cmd]), msg))
    return out


_RULE_FUNCS: tuple[tuple[str, Callable[[_Ctx], _Hits]], ...] = (
    ("no-pipeline", _no_pipeline), ("table-undefined", _table_undefined), ("bundle-heaps", _bundle_heaps),
    ("index-buffer-undefined", _index_buffer_undefined), ("index-range", _index_range),
    ("missing-flush", _missing_flush), ("gs-onchip-tessellation", _gs_onchip_tessellation),
    ("draw-on-compute", _draw_on_compute))
"""Each rule's id and function, in :data:`RULES` order."""


def findings(stream: Stream, state: StateTable | Scan | None = None) -> list[Finding]:
    """All findings of ``stream``, ordered by command then rule.

    Parameters
    ----------
    stream : Stream
    state : StateTable or Scan, optional
        The stream's scan, or its state table (reused if it carries its scan).

    Returns
    -------
    list of Finding
    """
    c = _ctx(stream, state)
    out: list[Finding] = []
    for _, rule in _RULE_FUNCS:
        out.extend(rule(c).build())
    out.sort(key=lambda f: (f.cmd, _RULE_ORDER[f.rule], f.message))
    return out


def finding_counts(stream: Stream, state: StateTable | Scan | None = None) -> Counter[str]:
    """Findings per rule of ``stream``: ``Counter(f.rule for f in findings(stream, state))``, without
    building the findings (no :class:`Finding` objects, no messages; the rules decide as for
    :func:`findings`). Rules with no finding are absent. The pass manager's post-condition.

    >>> import drawopt
    >>> finding_counts(drawopt.loads('drawopt 1\\nDrawInstanced 3 1 0 0'))
    Counter({'no-pipeline': 1})
    """
    c = _ctx(stream, state)
    counts: Counter[str] = Counter()
    for rule, fn in _RULE_FUNCS:
        n = fn(c).n
        if n:
            counts[rule] = n
    return counts


def _ctx(stream: Stream, state: StateTable | Scan | None) -> _Ctx:
    if isinstance(state, Scan):
        return _Ctx(stream, state)
    return _Ctx(stream, state.scan if state is not None and state.scan is not None else scan(stream))
