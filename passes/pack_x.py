"""``pack-x``: DrawIndexedX wave-packed runs.

drawindexedx.txt: consecutive ``DrawIndexedX`` calls run wave-packed on the GPU
when nothing but the index buffer and format changes between them. The pipeline
must pull its vertices (``layout=none``) and declare the draw-id contract
``x(vertex_bits=K,perdraw=P[,lift=ITEMS][,max_index=M][,base=none|vertex])``
(docs/architecture.md, "Rewrite contracts"): the vertex shader splits
``id = SV_VertexID`` (index + IndexOffset) into ``slot = id >> K`` and
``v = id & (2^K - 1)`` and reads the record ``perdraw[slot]`` =
``[base_vertex, start_instance, lifted...]`` (little-endian 32-bit words) from the
buffer bound at root parameter P.

What the pass does
------------------
1. **Eligible draws.** ``DrawIndexedInstanced`` and ``DrawIndexedX`` of a
   vertex-pulling pipeline with a usable ``x`` contract (P a root CBV or SRV,
   every lift item a word of a root parameter), not ``@nomerge`` and not
   ``never_merge``, with a defined index buffer, defined lifted values, no state
   left unknown by an ``Opaque`` command, at most ``max_instances`` instances,
   and vertices that fit the K low bits: R16 indices need ``K >= 16`` (or
   ``max_index < 2^K``), R32 indices need a declared ``max_index < 2^K``; under
   ``base=vertex`` the base vertex goes into the low bits too, so
   ``0 <= base_vertex`` and ``base_vertex + max index < 2^K``. An input
   ``DrawIndexedX`` is eligible when its record can be read (P binds a
   CPU-written buffer with data that no GPU command writes): it is re-packed
   with a copy of its record and its IndexOffset low bits.
2. **Runs.** Consecutive eligible draws form a run when only state commands lie
   between them (no ``CSEnableAutomaticGpuFlush``, no change of root signature or
   descriptor heaps) and their normalised states (:func:`drawopt.analysis.state.track`)
   are equal except the index buffer, root parameter P and the lifted words
   (a partly lifted parameter must agree on its other words; a lifted descriptor
   table on its heap; a lifted root view on its buffer). A run is cut where its
   calls would overflow the ``32 - K`` draw-id bits, or the 64 KiB a root CBV can
   address. Runs of one draw, and runs that already are consecutive
   ``DrawIndexedX`` calls, are left alone.
3. **Rewrite.** A run becomes ``SetGraphicsRootShaderResourceView P packx_perdraw
   OFF`` (``...ConstantBufferView`` when P is a root CBV) and one ``DrawIndexedX``
   per instance: IndexBufferLocation = bound index buffer + its offset +
   StartIndexLocation x index size, the draw's format and count, IndexOffset =
   ``slot << K`` (``| base_vertex`` under ``base=vertex``); slot ``i`` of the run
   reads record ``i`` at ``OFF + i * 4 * (2 + len(lift))``. The records of every
   run go into one generated CPU-written buffer, ``packx_perdraw`` (or the first
   free ``packx_perdrawN``), each run 16-byte (SRV) or 256-byte (CBV) aligned.
   The state commands between the first and the last draw of a run are not
   needed by the run's calls: the per-draw sets of the index buffer, of P and of
   the lifted parameters are dropped, and the others are replayed after the run
   (compacted to the last full set of each slot).
4. **State after the run.** ``DrawIndexedX`` leaves the index buffer undefined,
   the run rebinds P, and the lifted parameters hold the run's first values.
   For each of these slots the pass finds the next command that reads or
   replaces it; when it is a reader (a draw that observes the slot, an
   ``Opaque`` command, a partial root-constant update, the end of a bundle) the
   value the original had after the run is set again right after the run
   (``IASetIndexBuffer`` re-issued before any later draw that reads the index
   buffer). A run whose P or lifted value was undefined in the original and is
   read later cannot be restored and is left alone.

Targets: only where the cost model (:func:`drawopt.analysis.costmodel.pack_x_pays_off`)
says packing pays: ``xbox-one``; ``xbox-series`` with ``force``; never on
targets without ``DrawIndexedX``. The hot loops (run cutting, call and record
generation) are Cython kernels in ``cext/_packx.pyx`` with pure-Python twins here.
:func:`why_not_packed` and :func:`pack_links` say, for adjacent draws, why they
are not in one packed run (``drawopt explain``).
"""

from __future__ import annotations

__all__ = [
    "PackXPass", "XContract", "x_contract", "PackXPlan", "plan_pack_x", "apply_plan", "pack_x",
    "pack_links", "why_not_packed", "PERDRAW_BUFFER", "CBV_BYTES",
]

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from drawopt._accel import load_cext
from drawopt.analysis.access import may_gpu_write
from drawopt.analysis.costmodel import get_target, pack_x_pays_off
from drawopt.analysis.state import (
    CROOT0,
    IB,
    MASKED,
    NSLOTS,
    OBS_DRAW,
    PIPELINE,
    ROOT0,
    SLOTS,
    UNKNOWN,
    StateTable,
    intern_rows,
    track,
)
from drawopt.errors import UsageError
from drawopt.ir.decls import Buffer, Decls, Pipeline, RootSig
from drawopt.ir.ops import BY_NAME, COL_PIPELINE, INDEX_FORMATS, INDEXED_DRAW_OPS, NARGS, Cat, Op, shared_col
from drawopt.ir.stream import FLAG_NOMERGE, Stream, concat
from drawopt.passmanager import AnalysisManager, Pass, PassResult, option

PERDRAW_BUFFER = "packx_perdraw"
"""Name of the generated per-draw array (``packx_perdrawN`` when taken)."""
CBV_BYTES = 65536
"""Bytes a root constant buffer view can address (4096 x 16)."""
_ALIGN = {"srv": 16, "cbv": 256}

_OP = {n: BY_NAME[n].code for n in BY_NAME}
_DII, _DX = _OP["DrawIndexedInstanced"], _OP["DrawIndexedX"]
_CONSTS, _TABLE = _OP["SetGraphicsRoot32BitConstants"], _OP["SetGraphicsRootDescriptorTable"]
_CBV, _SRV = _OP["SetGraphicsRootConstantBufferView"], _OP["SetGraphicsRootShaderResourceView"]
_IBSET, _VBSET = _OP["IASetIndexBuffer"], _OP["IASetVertexBuffers"]
_GRS, _CRS, _HEAPS = _OP["SetGraphicsRootSignature"], _OP["SetComputeRootSignature"], _OP["SetDescriptorHeaps"]
_AUTOFLUSH, _OPAQUE = _OP["CSEnableAutomaticGpuFlush"], _OP["Opaque"]
_CCONSTS = _OP["SetComputeRoot32BitConstants"]
_ROOT_SET_OPS = (_CONSTS, _TABLE, _CBV, _SRV)
_VIEW_OP = {"srv": _SRV, "cbv": _CBV}
_INDEXED = np.zeros(max(_OP.values()) + 1, bool)
_INDEXED[list(INDEXED_DRAW_OPS)] = True

# argument columns (drawopt.ir.ops), looked up once
_DX_BUF, _DX_OFF, _DX_FMT, _DX_COUNT, _DX_IOFF = (
    Op.DrawIndexedX.col(a) for a in ("buffer", "offset", "format", "index_count", "index_offset"))
_DII_COUNT, _DII_INST, _DII_START, _DII_BV, _DII_SI = (
    Op.DrawIndexedInstanced.col(a) for a in ("index_count", "instance_count", "start_index", "base_vertex",
                                             "start_instance"))
_IB_BUF, _IB_FMT, _IB_OFF = (Op.IASetIndexBuffer.col(a) for a in ("buffer", "format", "offset"))
_VB_SLOT = Op.IASetVertexBuffers.col("slot")
_TABLE_REF = Op.SetGraphicsRootDescriptorTable.col("table")
_VIEW_INDEX, _VIEW_BUF, _VIEW_OFF = (
    shared_col(("SetGraphicsRootConstantBufferView", a), ("SetGraphicsRootShaderResourceView", a))
    for a in ("index", "buffer", "offset"))
_CONST_INDEX, _CONST_COUNT, _CONST_DEST = (
    shared_col(("SetGraphicsRoot32BitConstants", a), ("SetComputeRoot32BitConstants", a))
    for a in ("index", "count", "dest"))

# per-draw reasons (0: eligible)
(R_OK, R_OP, R_NOMERGE, R_NEVER, R_NOPIPE, R_LAYOUT, R_NOCONTRACT, R_CONTRACT, R_EMPTY,
 R_INSTANCES, R_NOIB, R_RANGE, R_R32, R_FIT, R_LIFT, R_XREC) = range(16)


# --------------------------------------------------------------------------- the contract
@dataclass(frozen=True)
class XContract:
    """A pipeline's usable ``x(...)`` contract, resolved against its root signature.

    Attributes
    ----------
    k : int
        ``vertex_bits``: the IndexOffset bits that address vertices.
    perdraw : int
        Root parameter P of the per-draw array.
    view : str
        ``"srv"`` or ``"cbv"``: how P is bound.
    lift : tuple of (int, int)
        The lifted words ``(parameter, word)`` in record order.
    lift_kinds : tuple of str
        Root parameter kind of each lifted parameter (``constants``, ``table``, ``cbv``, ``srv``).
    max_index : int or None
        ``max_index``: every index read is ``<= max_index``.
    base : str
        ``"none"`` (base vertex in the record) or ``"vertex"`` (in IndexOffset's low bits).
    """

    k: int
    perdraw: int
    view: str
    lift: tuple[tuple[int, int], ...]
    lift_kinds: tuple[str, ...]
    max_index: int | None
    base: str

    @property
    def words(self) -> int:
        """32-bit words of one record: base vertex, start instance, lifted words."""
        return 2 + len(self.lift)

    @property
    def lifted_params(self) -> tuple[int, ...]:
        """Root parameters with at least one lifted word (sorted)."""
        return tuple(sorted({q for q, _ in self.lift}))

    @property
    def max_calls(self) -> int:
        """Most DrawIndexedX calls one run (one binding of P) can address."""
        n = 1 << (32 - self.k)
        if self.view == "cbv":
            n = min(n, CBV_BYTES // (4 * self.words))
        return n


def x_contract(p: Pipeline | None, decls: Decls) -> tuple[XContract | None, str]:
    """The usable x contract of pipeline ``p``, or None and the reason.

    Parameters
    ----------
    p : Pipeline or None
    decls : Decls
        The declarations ``p`` belongs to (for its root signature).

    Returns
    -------
    (XContract or None, str)
        The contract, and ``""`` or why pack-x cannot use it.
    """
    if p is None:
        return None, "no graphics pipeline is set"
    if p.is_compute:
        return None, f"pipeline '{p.name}' is a compute pipeline"
    if p.never_merge:
        return None, f"pipeline '{p.name}' is never_merge"
    if not p.vertex_pulling:
        return None, f"pipeline '{p.name}' has an input layout (layout={p.layout}); DrawIndexedX needs vertex pulling"
    c = p.contract.x
    if c is None:
        return None, f"pipeline '{p.name}' declares no x(...) contract"
    where = f"x contract of pipeline '{p.name}'"
    pd = c.perdraw
    if pd is None:
        return None, f"{where} names no perdraw parameter (the per-draw array)"
    rs = decls[p.root] if p.root is not None and p.root in decls else None
    if not isinstance(rs, RootSig):
        return None, f"pipeline '{p.name}' has no root signature"
    if not 0 <= pd < len(rs.params) or rs.params[pd].kind not in _ALIGN:
        kind = rs.params[pd].kind if 0 <= pd < len(rs.params) else "missing"
        return None, f"{where}: perdraw={pd} is a {kind} parameter; pack-x binds the array as a root CBV or SRV"
    try:
        lift, kinds = c.resolve(rs)
    except ValueError as e:
        return None, f"{where}: {e}"
    return XContract(c.vertex_bits, pd, rs.params[pd].kind, lift, kinds, c.max_index, c.base), ""


# --------------------------------------------------------------------------- kernels (pure twins)
def _runs_py(link: np.ndarray, ncalls: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python twin of ``drawopt._packx.runs`` (identical results)."""
    lk = np.asarray(link, np.uint8).tolist()
    nc = np.asarray(ncalls, np.int64).tolist()
    cp = np.asarray(cap, np.int64).tolist()
    d = len(nc)
    if len(lk) != max(d - 1, 0) or len(cp) != d:
        raise ValueError("runs: link must have D-1 entries and cap D")
    run = [0] * d
    split = [0] * max(d - 1, 0)
    r, used = -1, 0
    for i in range(d):
        if i > 0 and lk[i - 1] and used + nc[i] <= cp[i]:
            used += nc[i]
        else:
            if i > 0 and lk[i - 1]:
                split[i - 1] = 1
            r += 1
            used = nc[i]
        run[i] = r
    return np.array(run, np.int64), np.array(split, np.uint8)


def _records_py(first: np.ndarray, ncalls: np.ndarray, low: np.ndarray, kbits: np.ndarray,
                words: np.ndarray, nwords: np.ndarray,
                align_words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pure-Python twin of ``drawopt._packx.records`` (identical results)."""
    fv = np.asarray(first, np.uint8).tolist()
    nc = np.asarray(ncalls, np.int64).tolist()
    lo = np.asarray(low, np.int64).tolist()
    kb = np.asarray(kbits, np.int64).tolist()
    wv = np.asarray(words, np.int64)
    wl = wv.tolist()
    nw = np.asarray(nwords, np.int64).tolist()
    al = np.asarray(align_words, np.int64).tolist()
    m = len(nc)
    if not len(fv) == len(lo) == len(kb) == wv.shape[0] == len(nw) == len(al) == m:
        raise ValueError("records: inputs must have one row per draw")
    width = wv.shape[1] if wv.ndim == 2 else 0
    for i in range(m):
        if nc[i] < 0 or nw[i] < 0 or nw[i] > width or al[i] < 1:
            raise ValueError("records: bad call count, record width or alignment")
        if i == 0 and not fv[i]:
            raise ValueError("records: the first draw must start a run")
    io: list[int] = []
    src: list[int] = []
    data: list[int] = []
    run_offset: list[int] = []
    slot = 0
    for i in range(m):
        if fv[i]:
            data.extend([0] * ((al[i] - len(data) % al[i]) % al[i]))
            run_offset.append(len(data))
            slot = 0
        rec = wl[i][:nw[i]]
        for inst in range(nc[i]):
            io.append((slot << kb[i]) | lo[i])
            src.append(i)
            data.extend((w + inst if j == 1 else w) & 0xFFFFFFFF for j, w in enumerate(rec))
            slot += 1
    return (np.array(io, np.int64), np.array(src, np.int64), np.array(data, np.uint32),
            np.array(run_offset, np.int64))


def _kernels(pure: bool | None) -> Any:
    mod = load_cext("_packx", pure)
    return mod if mod is not None else SimpleNamespace(runs=_runs_py, records=_records_py)


# --------------------------------------------------------------------------- per-draw analysis
@dataclass(eq=False)
class _Analysis:
    """Columnar facts about every draw (D draws, in stream order)."""

    stream: Stream
    table: StateTable
    cmd: np.ndarray            # int64[D] command index
    op: np.ndarray             # int64[D]
    pipe: np.ndarray           # int64[D] pipeline decl index (-1 none)
    xc: dict[int, XContract]   # pipeline decl index -> usable contract
    xc_why: dict[int, str]     # pipeline decl index -> why its contract is unusable
    reason: np.ndarray         # int8[D] (R_OK: eligible)
    detail: np.ndarray         # int64[D] a number for the message (slot, count, ...)
    ncalls: np.ndarray         # int64[D]
    low: np.ndarray            # int64[D] IndexOffset low bits
    kbits: np.ndarray          # int64[D]
    cap: np.ndarray            # int64[D] most calls per run
    words: np.ndarray          # int64[D, W] record of the first instance
    nwords: np.ndarray         # int64[D]
    src_buf: np.ndarray        # int64[D] index buffer decl index
    src_off: np.ndarray        # int64[D] byte offset of the first index
    fmt: np.ndarray            # int64[D]
    count: np.ndarray          # int64[D] index count
    key: np.ndarray            # int64[D] pack key (-1: not eligible)
    mrows: np.ndarray          # int64[D, NSLOTS + 16] masked rows + residues (for messages)
    between: np.ndarray        # int64[D-1] command that breaks the pair (-1 none)
    link: np.ndarray           # bool[D-1]
    setter: np.ndarray         # int64[D, NSLOTS]
    unknown: np.ndarray        # int64[D] unknown-slot bits


def _constants_words(sc: Any, slot: int, setter: np.ndarray, cache: dict[int, Any]) -> np.ndarray:
    """Resolved root-constant words of slot ``slot`` after each command of ``setter``.

    Returns ``int64[len(setter), W]`` (W: the widest update of the slot); -1 where a
    word is undefined or unknown, or the setter is not a root-constants command.
    """
    ch = sc.chains.get(slot)
    if ch is None:
        return np.full((setter.shape[0], 1), -1, np.int64)
    if slot not in cache:
        cache[slot] = np.maximum(ch.matrices()[2], -1)  # unknown words read as undefined
    filled = cache[slot]
    out = np.full((setter.shape[0], filled.shape[1]), -1, np.int64)
    ok = setter >= 0
    pos = np.minimum(np.searchsorted(ch.cmds, setter[ok]), ch.cmds.shape[0] - 1)
    hit = ch.cmds[pos] == setter[ok]
    out[np.flatnonzero(ok)[hit]] = filled[pos[hit]]
    return out


def _word(words: np.ndarray, w: int) -> np.ndarray:
    """Column ``w`` of a constants-word matrix (-1 past its width)."""
    return words[:, w] if w < words.shape[1] else np.full(words.shape[0], -1, np.int64)


def _analyse(stream: Stream, table: StateTable, max_instances: int) -> _Analysis:
    s, sc = stream, table.scan
    assert sc is not None
    decls = s.decls
    args = s.args
    cmd = table.draws.astype(np.int64)
    d = cmd.shape[0]
    dsel = np.flatnonzero(sc.obs_kind == OBS_DRAW)
    setter = table.setter if table.setter.shape[0] == d else sc.setter[dsel]
    unknown = sc.unknown[dsel].astype(np.int64)
    op = s.op[cmd].astype(np.int64)

    def unk(slot: int) -> np.ndarray:
        return ((unknown >> slot) & 1).astype(bool)

    ps = setter[:, PIPELINE] if d else np.zeros(0, np.int64)
    pipe = np.where((ps >= 0) & ~unk(PIPELINE), args[np.maximum(ps, 0), COL_PIPELINE], -1) if d else ps
    xc: dict[int, XContract] = {}
    xc_why: dict[int, str] = {}
    for p in np.unique(pipe):
        dd = decls[int(p)] if p >= 0 else None
        c, why = x_contract(dd if isinstance(dd, Pipeline) else None, decls)
        if c is not None:
            xc[int(p)] = c
        else:
            xc_why[int(p)] = why

    reason = np.zeros(d, np.int8)
    detail = np.zeros(d, np.int64)

    def fail(mask: np.ndarray, code: int, det: np.ndarray | int = 0) -> None:
        m = mask & (reason == R_OK)
        reason[m] = code
        if isinstance(det, np.ndarray):
            detail[m] = det[m]
        else:
            detail[m] = det

    pidx = np.where(pipe >= 0, pipe, len(decls))
    items = [*decls.items, None]
    never = np.array([isinstance(x, Pipeline) and x.never_merge for x in items], bool)
    layout = np.array([isinstance(x, Pipeline) and not x.vertex_pulling for x in items], bool)
    nox = np.array([isinstance(x, Pipeline) and x.contract.x is None for x in items], bool)
    has_x = np.zeros(len(items), bool)
    has_x[list(xc)] = True
    fail(~np.isin(op, (_DII, _DX)), R_OP)
    fail((s.flags[cmd] & FLAG_NOMERGE) != 0, R_NOMERGE)
    fail(never[pidx], R_NEVER)
    fail(pipe < 0, R_NOPIPE)
    fail(layout[pidx], R_LAYOUT)
    fail(nox[pidx], R_NOCONTRACT)
    fail(~has_x[pidx], R_CONTRACT)

    # per-draw geometry: index source, count, calls
    isx = op == _DX
    isi = op == _DII
    count = np.where(isx, args[cmd, _DX_COUNT], args[cmd, _DII_COUNT])
    ninst = np.where(isx, 1, args[cmd, _DII_INST])
    fail((count == 0) | (ninst == 0), R_EMPTY)
    fail(ninst > max_instances, R_INSTANCES, ninst)
    ibs = setter[:, IB] if d else np.zeros(0, np.int64)
    ib_ok = (ibs >= 0) & ~unk(IB)
    fail(isi & ~ib_ok, R_NOIB)
    ibc = np.maximum(ibs, 0)
    fmt = np.where(isx, args[cmd, _DX_FMT], np.where(ib_ok, args[ibc, _IB_FMT], 0))
    isz = np.where(fmt == 1, 4, 2)
    src_buf = np.where(isx, args[cmd, _DX_BUF], np.where(ib_ok, args[ibc, _IB_BUF], -1))
    src_off = np.where(isx, args[cmd, _DX_OFF], args[ibc, _IB_OFF] + args[cmd, _DII_START] * isz)
    sizes = np.array([x.size if isinstance(x, Buffer) else 0 for x in decls.items] + [0], np.int64)
    fail(src_off + count * isz > sizes[src_buf], R_RANGE)

    kbits = np.zeros(d, np.int64)
    cap = np.ones(d, np.int64)
    wmax = 2 + max((len(c.lift) for c in xc.values()), default=0)
    words = np.zeros((d, wmax), np.int64)
    nwords = np.full(d, 2, np.int64)
    low = np.zeros(d, np.int64)
    gpu_written = set(np.flatnonzero(may_gpu_write(s, sc)).tolist())  # access: static over-approximation
    chain_cache: dict[int, Any] = {}
    const_cache: dict[int, np.ndarray] = {}
    for p, c in xc.items():
        sel = np.flatnonzero(pipe == p)
        k = c.k
        kbits[sel] = k
        cap[sel] = c.max_calls
        nwords[sel] = c.words
        sx, si = sel[isx[sel]], sel[isi[sel]]
        # vertices must fit the K low bits: low bits + the largest index < 2^K
        r16 = fmt[sel] == 0
        if c.max_index is None:
            maxidx = np.where(r16, 65535, -1)
        else:
            maxidx = np.where(r16, min(c.max_index, 65535), c.max_index)
        lowv = np.where(isi[sel], args[cmd[sel], _DII_BV], 0) if c.base == "vertex" else np.zeros(sel.size, np.int64)
        lowv = np.where(isx[sel], args[cmd[sel], _DX_IOFF] & ((1 << k) - 1), lowv)
        low[sel] = lowv
        bad = np.zeros(d, bool)
        bad[sel] = maxidx < 0
        fail(bad, R_R32)
        bad[sel] = (lowv < 0) | (lowv + maxidx >= (1 << k))
        det = np.zeros(d, np.int64)
        det[sel] = maxidx
        fail(bad, R_FIT, det)
        # records of DrawIndexedInstanced: base vertex, start instance, lifted words
        words[si, 0] = args[cmd[si], _DII_BV]
        words[si, 1] = args[cmd[si], _DII_SI]
        for j, (q, w) in enumerate(c.lift):
            slot = ROOT0 + q
            st = setter[si, slot]
            ok = (st >= 0) & ~unk(slot)[si]
            sop = np.where(ok, s.op[np.maximum(st, 0)].astype(np.int64), -1)
            v = np.full(si.size, -1, np.int64)
            m = sop == _CONSTS
            if m.any():
                if slot not in const_cache:
                    const_cache[slot] = _constants_words(sc, slot, setter[:, slot], chain_cache)
                v[m] = _word(const_cache[slot][si[m]], w)
            m = sop == _TABLE
            if w == 0:
                v[m] = args[st[m], _TABLE_REF] & 0xFFFFFFFF
            m = (sop == _CBV) | (sop == _SRV)
            v[m] = (args[st[m], _VIEW_OFF] >> (32 * w)) & 0xFFFFFFFF
            words[si, 2 + j] = v
            bad = np.zeros(d, bool)
            bad[si] = v < 0
            fail(bad, R_LIFT, np.full(d, j))
        # records of input DrawIndexedX: read from the array bound at P
        if sx.size:
            slot = ROOT0 + c.perdraw
            st = setter[sx, slot]
            ok = (st >= 0) & ~unk(slot)[sx]
            st0 = np.maximum(st, 0)
            ok &= np.isin(s.op[st0], (_CBV, _SRV))
            buf = np.where(ok, args[st0, _VIEW_BUF], -1)
            off = np.where(ok, args[st0, _VIEW_OFF], 0)
            idx = args[cmd[sx], _DX_IOFF] >> k
            recs = np.zeros((sx.size, c.words), np.int64)
            for b in np.unique(buf[ok]):
                bd = decls[int(b)]
                m = np.flatnonzero(ok & (buf == b))
                if not (isinstance(bd, Buffer) and bd.cpu and bd.data is not None) or int(b) in gpu_written:
                    ok[m] = False
                    continue
                byte = off[m] + idx[m] * 4 * c.words
                inside = (byte % 4 == 0) & (byte + 4 * c.words <= bd.size)
                ok[m[~inside]] = False
                mi = m[inside]
                data = np.concatenate([bd.data.astype(np.int64), [0]])  # words past the data read 0
                for j in range(c.words):
                    at = byte[inside] // 4 + j
                    recs[mi, j] = data[np.minimum(at, data.size - 1)]
            bad = np.zeros(d, bool)
            bad[sx] = ~ok
            fail(bad, R_XREC)
            good = sx[ok]
            words[good, :c.words] = recs[ok]
    ncalls = np.where(reason == R_OK, ninst, 0).astype(np.int64)

    # pack keys: the normalised state with the index buffer, P and the lifted parameters masked,
    # plus the part of each lifted parameter that is not lifted (its residue)
    nst = table.rows.shape[0]
    srows = table.rows.copy() if nst else np.zeros((0, NSLOTS), np.int64)
    if d:
        srows[:, IB] = MASKED
        _, first_of_state = np.unique(table.state, return_index=True)
        state_pipe = np.full(nst, -1, np.int64)
        state_pipe[table.state[first_of_state]] = pipe[first_of_state]
        for p, c in xc.items():
            m = state_pipe == p
            srows[np.ix_(m, [ROOT0 + c.perdraw, *(ROOT0 + q for q in c.lifted_params)])] = MASKED
    residue = np.zeros((d, 16), np.int64)
    for p, c in xc.items():
        sel = np.flatnonzero((pipe == p) & (reason == R_OK))
        for q in c.lifted_params:
            slot = ROOT0 + q
            kind = c.lift_kinds[[qq for qq, _ in c.lift].index(q)]
            lifted = [w for (qq, w) in c.lift if qq == q]
            st = setter[sel, slot]
            sop = np.where((st >= 0) & ~unk(slot)[sel], s.op[np.maximum(st, 0)].astype(np.int64), -1)
            rr = np.full((sel.size, 65), -9, np.int64)
            if kind == "constants":  # the words not lifted (-1: undefined)
                m = sop == _CONSTS
                rr[~m, 1:] = -1
                if m.any():
                    if slot not in const_cache:
                        const_cache[slot] = _constants_words(sc, slot, setter[:, slot], chain_cache)
                    cw = const_cache[slot][sel[m]]
                    rr[np.ix_(m, 1 + np.arange(cw.shape[1]))] = cw
                rr[:, [1 + w for w in lifted]] = -9
            else:  # a table's heap; a root view's buffer and the offset word not lifted
                rr[:, 0] = sop
                m = sop == _TABLE
                rr[m, 1] = args[st[m], _TABLE_REF] >> 32
                m = (sop == _CBV) | (sop == _SRV)
                rr[m, 1] = args[st[m], _VIEW_BUF]
                for w in (0, 1):
                    if w not in lifted:
                        rr[m, 2 + w] = (args[st[m], _VIEW_OFF] >> (32 * w)) & 0xFFFFFFFF
            rid, _ = intern_rows(rr)
            residue[sel, q] = rid + 1
    sid, _ = intern_rows(srows) if nst else (np.zeros(0, np.int64), None)
    key = np.full(d, -1, np.int64)
    mrows = np.zeros((d, NSLOTS + 16), np.int64)
    if d:
        mrows[:, :NSLOTS] = srows[table.state]
        mrows[:, NSLOTS:] = residue
        kid, _ = intern_rows(np.concatenate([sid[table.state][:, None], residue], axis=1))
        key = np.where(reason == R_OK, kid, -1)

    # what lies between consecutive draws
    between = np.full(max(d - 1, 0), -1, np.int64)
    if d > 1:
        cats = s.cats()
        # a state command that leaves its slot unknown (a partial root-constant update of an
        # inherited value) changes the state without changing its recorded value
        breaker = (cats != int(Cat.STATE)) | (s.op == _AUTOFLUSH) | (sc.cval == UNKNOWN)
        cross = np.isin(s.op, (_GRS, _CRS, _HEAPS))
        if cross.any():
            ci = np.flatnonzero(cross)
            vb = sc.value_before(ci)
            changing = (vb < 0) | (vb != sc.cval[ci])
            breaker[ci[changing]] = True
        bi = np.flatnonzero(breaker)
        # first breaking command after each draw, if it comes before the next draw
        pos = np.searchsorted(bi, cmd[:-1], side="right")
        nxt = np.where(pos < bi.size, bi[np.minimum(pos, max(bi.size - 1, 0))] if bi.size else -1, -1)
        between = np.where((nxt >= 0) & (nxt < cmd[1:]), nxt, -1)
    link = (between < 0) & (key[:-1] >= 0) & (key[:-1] == key[1:]) if d > 1 else np.zeros(0, bool)
    return _Analysis(s, table, cmd, op, pipe, xc, xc_why, reason, detail, ncalls, low, kbits, cap, words,
                     nwords, src_buf, src_off, fmt, count, key, mrows, between, link, setter, unknown)


# --------------------------------------------------------------------------- the plan
@dataclass(eq=False)
class PackXPlan:
    """What :func:`apply_plan` does to a stream.

    Attributes
    ----------
    first, last : int64[R]
        Index (among the draws) of the first and last draw of each packed run.
    pipe : int64[R]
        Pipeline declaration index of each run.
    report : dict
        Figures for the pass report.
    """

    analysis: _Analysis = field(repr=False)
    first: np.ndarray
    last: np.ndarray
    pipe: np.ndarray
    split: np.ndarray = field(repr=False)
    run_of_draw: np.ndarray = field(repr=False)
    unrestorable: np.ndarray = field(repr=False)
    """Draws of runs left alone because their state could not be restored after them."""
    report: dict[str, Any] = field(default_factory=dict)
    restore: list[list[tuple[int, int]]] = field(default_factory=list, repr=False)
    """Per run: ``(kind, command)`` restores; kind 0 copies the command, kind 1 rebuilds root
    constants from its resolved words."""

    @property
    def runs(self) -> int:
        return int(self.first.shape[0])


def plan_pack_x(stream: Stream, table: StateTable | None = None, *, max_instances: int = 16,
                pure: bool | None = None) -> PackXPlan:
    """Find the packed runs of ``stream`` (see the module docstring).

    Parameters
    ----------
    stream : Stream
    table : StateTable, optional
        :func:`drawopt.analysis.state.track` of ``stream``, if already computed.
    max_instances : int
        Draws with more instances are left alone (each instance becomes one call).
    pure : bool, optional
        Force (True) or forbid (False) the pure-Python kernels.

    Returns
    -------
    PackXPlan
    """
    if max_instances < 1:
        raise UsageError("pack-x: max-instances must be at least 1")
    table = table if table is not None else track(stream)
    an = _analyse(stream, table, max_instances)
    d = an.cmd.shape[0]
    kern = _kernels(pure)
    run, split = kern.runs(an.link.astype(np.uint8), np.maximum(an.ncalls, 1), an.cap)
    nrun = int(run[-1]) + 1 if d else 0
    length = np.bincount(run, minlength=nrun) if d else np.zeros(0, np.int64)
    starts = np.zeros(nrun, np.int64)
    if nrun:
        starts[1:] = np.cumsum(length)[:-1]
    ends = starts + length - 1
    ok = (length >= 2) & (an.reason[starts] == R_OK) if nrun else np.zeros(0, bool)
    if nrun:
        # already packed: consecutive DrawIndexedX commands with nothing between them
        nx = np.add.reduceat((an.op == _DX).astype(np.int64), starts)
        tight = an.cmd[ends] - an.cmd[starts] == length - 1
        ok &= ~((nx == length) & tight)
    first, last = starts[ok], ends[ok]
    unrestorable = np.zeros(d, bool)
    while True:
        restore, bad = _restores(an, first, last, stream.header.kind == "bundle")
        if not bad.any():
            break
        for lo, hi in zip(first[bad], last[bad]):
            unrestorable[lo:hi + 1] = True
        first, last = first[~bad], last[~bad]
    run_of_draw = np.full(d, -1, np.int64)
    if first.size:
        member = np.zeros(d + 1, np.int64)
        np.add.at(member, first, 1)
        np.add.at(member, last + 1, -1)
        inside = np.cumsum(member)[:d] > 0
        run_of_draw[inside] = np.searchsorted(first, np.flatnonzero(inside), side="right") - 1
    eligible = int((an.reason == R_OK).sum())
    packed = int((run_of_draw >= 0).sum())
    plan = PackXPlan(an, first, last, an.pipe[first] if first.size else np.zeros(0, np.int64), split,
                     run_of_draw, unrestorable, restore=restore)
    plan.report = {
        "eligible_draws": eligible, "packed_draws": packed, "runs": int(first.size),
        "calls": int(an.ncalls[run_of_draw >= 0].sum()),
        "splits": int(split.sum()) if split.size else 0,
        "unrestorable_runs": int(np.count_nonzero(np.diff(np.r_[0, unrestorable.astype(np.int8)]) == 1)),
        "packed_of_eligible": round(packed / eligible, 4) if eligible else 0.0,
    }
    return plan


def _restores(an: _Analysis, first: np.ndarray, last: np.ndarray,
              bundle: bool) -> tuple[list[list[tuple[int, int]]], np.ndarray]:
    """The state each run must set again after itself, and the runs that cannot be restored.

    For every slot a run changes behind the original's back (the index buffer, its
    perdraw parameter P, its lifted parameters), find the next command after the run
    that reads or replaces the slot; when it reads it, the run re-sets the value the
    original had after its last draw (a copy of that value's setter).
    """
    s = an.stream
    sc = an.table.scan
    assert sc is not None
    r = first.shape[0]
    out: list[list[tuple[int, int]]] = [[] for _ in range(r)]
    bad = np.zeros(r, bool)
    if r == 0:
        return out, bad
    n = len(s)
    cmd, op = an.cmd, an.op
    f_cmd, l_cmd = cmd[first], cmd[last]
    handled: dict[int, np.ndarray] = {IB: np.ones(r, bool)}
    for j, p in enumerate(an.pipe[first]):
        c = an.xc[int(p)]
        for q in (c.perdraw, *c.lifted_params):
            handled.setdefault(ROOT0 + q, np.zeros(r, bool))[j] = True
    # run membership of commands: interior (strictly between first and last draw) and draws
    mark = np.zeros(n + 1, np.int64)
    np.add.at(mark, f_cmd, 1)
    np.add.at(mark, l_cmd + 1, -1)
    in_span = np.cumsum(mark)[:n] > 0
    span_run = np.where(in_span, np.searchsorted(f_cmd, np.arange(n), side="right") - 1, -1)
    draw_in_run = np.zeros(cmd.shape[0], bool)
    draw_in_run[in_span[cmd]] = True
    maxcount = _max_constants(s.decls)
    rows = an.table.rows[an.table.state] if cmd.size else np.zeros((0, NSLOTS), np.int64)
    outside = ~draw_in_run
    opaque = np.flatnonzero(s.op == _OPAQUE)
    grs = np.flatnonzero(s.op == _GRS)
    grs_change = grs[(sc.value_before(grs) < 0) | (sc.value_before(grs) != sc.cval[grs])] if grs.size else grs
    for slot, hmask in handled.items():
        ev_pos: list[np.ndarray] = []
        ev_need: list[np.ndarray] = []
        # state commands of the slot, except those a run that handles the slot drops
        sets = np.flatnonzero(sc.slot == slot)
        sr = span_run[sets]
        dropped = (sr >= 0) & hmask[np.maximum(sr, 0)]
        sets = sets[~dropped]
        full = np.ones(sets.size, bool)
        if slot != IB:
            cs = s.op[sets] == _CONSTS
            q = slot - ROOT0
            full[cs] = (s.args[sets[cs], _CONST_DEST] == 0) & (s.args[sets[cs], _CONST_COUNT] >= maxcount.get(q, 64))
        ev_pos.append(sets)
        ev_need.append(~full)
        # observers outside runs
        obs = np.flatnonzero(outside & (rows[:, slot] != MASKED))
        ev_pos.append(cmd[obs])
        ev_need.append(np.ones(obs.size, bool))
        ev_pos.append(opaque)
        ev_need.append(np.ones(opaque.size, bool))
        if slot == IB:
            xo = np.flatnonzero(outside & (op == _DX))
            ev_pos.append(cmd[xo])
            ev_need.append(np.zeros(xo.size, bool))
        else:
            ev_pos.append(grs_change)
            ev_need.append(np.zeros(grs_change.size, bool))
        # run starts: a run that handles the slot replaces it; another reads it if its draws do
        fr = rows[first, slot] != MASKED
        ev_pos.append(f_cmd[hmask | fr])
        ev_need.append(~hmask[hmask | fr])
        pos = np.concatenate(ev_pos)
        need = np.concatenate(ev_need)
        o = np.argsort(pos, kind="stable")
        pos, need = pos[o], need[o]
        runs_h = np.flatnonzero(hmask)
        k = np.searchsorted(pos, l_cmd[runs_h], side="right")
        needed = np.where(k < pos.size, need[np.minimum(k, max(pos.size - 1, 0))] if pos.size else bundle, bundle)
        for j in runs_h[needed].tolist():
            ld = int(last[j])
            st = int(an.setter[ld, slot])
            known = st >= 0 and not (int(an.unknown[ld]) >> slot) & 1
            if slot == IB:
                if op[ld] == _DII and known:
                    out[j].append((0, st))
                continue  # after an input DrawIndexedX the original has no index buffer either
            if not known:
                bad[j] = True
                continue
            out[j].append((1 if s.op[st] == _CONSTS else 0, st))
    for lst in out:
        lst.sort(key=lambda t: t[1])
    return out, bad


def _max_constants(decls: Decls) -> dict[int, int]:
    """Per root parameter index: the most constants any root signature gives it."""
    out: dict[int, int] = {}
    for d in decls.items:
        if isinstance(d, RootSig):
            for q, p in enumerate(d.params):
                if p.kind == "constants":
                    out[q] = max(out.get(q, 0), p.count)
    return out


# --------------------------------------------------------------------------- applying the plan
class _Gen:
    """Generated commands, columnar: key (major, phase, minor) and the command itself."""

    def __init__(self) -> None:
        self.key: list[np.ndarray] = []
        self.op: list[np.ndarray] = []
        self.args: list[np.ndarray] = []
        self.var: list[np.ndarray] = []
        self.var_len: list[np.ndarray] = []
        self.line: list[np.ndarray] = []

    def add(self, key: np.ndarray, op: np.ndarray, args: np.ndarray, line: np.ndarray,
            var_len: np.ndarray | None = None, var: np.ndarray | None = None) -> None:
        n = op.shape[0]
        self.key.append(np.asarray(key, np.int64).reshape(n, 3))
        self.op.append(np.asarray(op, np.uint16))
        a = np.zeros((n, NARGS), np.int64)
        a[:, :args.shape[1]] = args
        self.args.append(a)
        self.line.append(np.asarray(line, np.int32))
        self.var_len.append(np.zeros(n, np.int32) if var_len is None else np.asarray(var_len, np.int32))
        self.var.append(np.zeros(0, np.int64) if var is None else np.asarray(var, np.int64))

    def stream(self, like: Stream) -> tuple[Stream, np.ndarray]:
        if not self.op:
            return Stream(like.header, like.decls, strings=like.strings), np.zeros((0, 3), np.int64)
        lens = np.concatenate(self.var_len)
        off = np.zeros(lens.shape[0], np.int64)
        if lens.shape[0]:
            np.cumsum(lens[:-1].astype(np.int64), out=off[1:])
        st = Stream(like.header, like.decls, np.concatenate(self.op), np.concatenate(self.args), off, lens,
                    np.concatenate(self.var), np.zeros(lens.shape[0], np.uint8), np.concatenate(self.line),
                    like.strings)
        return st, np.concatenate(self.key)


def apply_plan(stream: Stream, plan: PackXPlan, pure: bool | None = None) -> tuple[Stream, dict[str, Any]]:
    """Rewrite ``stream`` as ``plan`` says; returns the new stream and report additions."""
    an = plan.analysis
    s = stream
    r = plan.runs
    if r == 0:
        return s, {}
    n = len(s)
    cmd = an.cmd
    sc = an.table.scan
    assert sc is not None
    # the draws of the runs, run after run
    member = np.flatnonzero(plan.run_of_draw >= 0)
    mrun = plan.run_of_draw[member]
    firstflag = np.zeros(member.size, np.uint8)
    firstflag[np.searchsorted(member, plan.first)] = 1
    views = np.array([an.xc[int(p)].view for p in plan.pipe])
    align = np.where(views == "cbv", _ALIGN["cbv"] // 4, _ALIGN["srv"] // 4)
    kern = _kernels(pure)
    io, src, data, run_off = kern.records(firstflag, an.ncalls[member], an.low[member], an.kbits[member],
                                         an.words[member], an.nwords[member], align[mrun])
    decls = s.decls.copy()
    name = decls.free_name(PERDRAW_BUFFER, bare_first=True)
    nbytes = max(int(data.size) * 4, 4)
    buf_index = decls.add(Buffer(name, nbytes, cpu=True, data=data))

    gen = _Gen()
    l_cmd = cmd[plan.last]
    f_cmd = cmd[plan.first]
    # 1. bind the per-draw array at P, at the position of the run
    perdraw = np.array([an.xc[int(p)].perdraw for p in plan.pipe], np.int64)
    bind_op = np.where(views == "cbv", _CBV, _SRV)
    bargs = np.zeros((r, NARGS), np.int64)
    bargs[:, _VIEW_INDEX], bargs[:, _VIEW_BUF], bargs[:, _VIEW_OFF] = perdraw, buf_index, run_off * 4
    gen.add(np.stack([l_cmd, np.full(r, 1), np.zeros(r, np.int64)], 1), bind_op, bargs, s.line[f_cmd])
    # 2. the calls
    dsrc = member[src]
    call_key = np.stack([l_cmd[plan.run_of_draw[dsrc]], np.full(io.size, 2), np.arange(io.size)], 1)
    cargs = np.zeros((io.size, NARGS), np.int64)
    cargs[:, _DX_BUF], cargs[:, _DX_OFF], cargs[:, _DX_FMT] = an.src_buf[dsrc], an.src_off[dsrc], an.fmt[dsrc]
    cargs[:, _DX_COUNT], cargs[:, _DX_IOFF] = an.count[dsrc], io
    gen.add(call_key, np.full(io.size, _DX), cargs, s.line[cmd[dsrc]])
    # 3. state commands inside the runs: dropped (handled slots) or replayed after the run
    mark = np.zeros(n + 1, np.int64)
    np.add.at(mark, f_cmd, 1)
    np.add.at(mark, l_cmd + 1, -1)
    in_span = np.cumsum(mark)[:n] > 0
    removed = in_span.copy()
    inner = np.flatnonzero(in_span & (s.cats() == int(Cat.STATE)))
    irun = np.searchsorted(f_cmd, inner, side="right") - 1
    islot = sc.slot[inner]
    hs = np.zeros((r, NSLOTS), bool)
    hs[:, IB] = True
    for j, p in enumerate(plan.pipe):
        c = an.xc[int(p)]
        hs[j, [ROOT0 + c.perdraw, *(ROOT0 + q for q in c.lifted_params)]] = True
    handled = (islot >= 0) & hs[irun, np.maximum(islot, 0)]
    rep = inner[~handled]
    if rep.size:
        rrun, rslot = irun[~handled], islot[~handled]
        partial = np.isin(s.op[rep], (_CONSTS, _CCONSTS)) & ~(
            (s.args[rep, _CONST_DEST] == 0) & (s.args[rep, _CONST_COUNT] >= _slot_width(s.decls, rslot)))
        # keep, per (run, slot), the last full set and every partial set after it (vertex
        # buffers: per input slot)
        sub = np.where(s.op[rep] == _VBSET, s.args[rep, _VB_SLOT], -1)
        grp, _ = intern_rows(np.stack([rrun, rslot, sub], 1))
        last_full = np.full(int(grp.max()) + 1, -1, np.int64)
        np.maximum.at(last_full, grp[~partial], rep[~partial])
        keep = rep >= last_full[grp]
        rep = rep[keep]
        gen.add(np.stack([l_cmd[rrun[keep]], np.full(rep.size, 3), rep], 1), s.op[rep], s.args[rep],
                s.line[rep], s.var_len[rep], _var_values(s, rep))
    # 4. restores
    chain_cache: dict[int, Any] = {}
    for j, lst in enumerate(plan.restore):
        for seq, (kind, c) in enumerate(lst):
            key = np.array([[l_cmd[j], 4, seq * 64]])
            if kind == 0:
                gen.add(key, s.op[c:c + 1], s.args[c:c + 1], np.zeros(1, np.int32), s.var_len[c:c + 1],
                        s.var(c))
            else:
                slot = int(sc.slot[c])
                words = _constants_words(sc, slot, np.array([c]), chain_cache)[0]
                for lo, hi in _defined_ranges(words):
                    row = np.zeros((1, NARGS), np.int64)
                    row[0, _CONST_INDEX], row[0, _CONST_COUNT], row[0, _CONST_DEST] = slot - ROOT0, hi - lo, lo
                    gen.add(np.array([[l_cmd[j], 4, seq * 64 + lo]]), np.array([_CONSTS]), row,
                            np.zeros(1, np.int32), np.array([hi - lo]), words[lo:hi])
    gstream, gkey = gen.stream(s)
    kept = np.flatnonzero(~removed)
    okey = np.stack([kept, np.zeros(kept.size, np.int64), np.zeros(kept.size, np.int64)], 1)
    allkey = np.concatenate([okey, gkey])
    order = np.lexsort((allkey[:, 2], allkey[:, 1], allkey[:, 0]))
    ids = np.concatenate([kept, n + np.arange(len(gstream))])[order]
    both = concat([s, gstream], s.header, decls, s.strings)
    out = both.take(ids)
    return out, {"buffer": name, "buffer_bytes": nbytes}


def _var_values(s: Stream, idx: np.ndarray) -> np.ndarray:
    lens = s.var_len[idx].astype(np.int64)
    if not lens.sum():
        return np.zeros(0, np.int64)
    off = np.zeros(idx.size, np.int64)
    np.cumsum(lens[:-1], out=off[1:])
    g = np.repeat(s.var_off[idx] - off, lens) + np.arange(int(lens.sum()))
    return s.pool[g]


def _slot_width(decls: Decls, slot: np.ndarray) -> np.ndarray:
    """Constants a full set of each (graphics or compute) root slot must write (64 if unknown)."""
    mc = _max_constants(decls)
    out = np.full(slot.shape[0], 64, np.int64)
    for q, cnt in mc.items():
        out[(slot == ROOT0 + q) | (slot == CROOT0 + q)] = cnt
    return out


def _defined_ranges(words: np.ndarray) -> list[tuple[int, int]]:
    """Maximal ``[lo, hi)`` ranges of defined (>= 0) words."""
    out = []
    k = 0
    n = words.shape[0]
    while k < n:
        if words[k] < 0:
            k += 1
            continue
        lo = k
        while k < n and words[k] >= 0:
            k += 1
        out.append((lo, k))
    return out


# --------------------------------------------------------------------------- explain
def _draw_reason(an: _Analysis, i: int, max_instances: int) -> str:
    code = int(an.reason[i])
    s = an.stream
    p = int(an.pipe[i])
    pname = s.decls[p].name if p >= 0 else "?"
    c = an.xc.get(p)
    det = int(an.detail[i])
    fmt = INDEX_FORMATS[int(an.fmt[i])] if an.fmt[i] in (0, 1) else "?"
    if code == R_OP:
        return f"{s.spec(int(an.cmd[i])).name} is not DrawIndexedInstanced or DrawIndexedX"
    if code == R_NOMERGE:
        return "the draw is flagged @nomerge"
    if code == R_NEVER:
        return f"pipeline '{pname}' is never_merge"
    if code == R_NOPIPE:
        return "no usable pipeline is set (undefined or unknown)"
    if code in (R_LAYOUT, R_NOCONTRACT, R_CONTRACT):
        return an.xc_why.get(p, "the pipeline has no usable x contract")
    if code == R_EMPTY:
        return "the draw is empty (no indices or no instances)"
    if code == R_INSTANCES:
        return (f"instance_count {det} > max-instances={max_instances} (each instance would become one "
                f"DrawIndexedX call)")
    if code == R_NOIB:
        return "the index buffer is undefined"
    if code == R_RANGE:
        return "its indices run past the end of the index buffer"
    if code == R_R32:
        return (f"R32_UINT indices and no max_index in the x contract of '{pname}': a vertex index may not fit "
                f"vertex_bits={c.k if c else '?'}")
    if code == R_FIT:
        k = c.k if c else 0
        low = int(an.low[i])
        if low < 0:
            return f"IndexOffset low bits would hold a negative base vertex ({low}) under base=vertex"
        what = f"the largest {fmt} index ({det})" + (f" plus IndexOffset low bits {low}" if low else "")
        return f"{what} does not fit vertex_bits={k} of pipeline '{pname}' (declare a smaller max_index)"
    if code == R_LIFT:
        q, w = c.lift[det] if c else (-1, -1)
        return f"lifted value {q}.{w} (root parameter {q}, value {w}) is undefined or unknown"
    if code == R_XREC:
        return (f"DrawIndexedX whose per-draw record cannot be read (root parameter {c.perdraw if c else '?'} "
                f"does not bind CPU-written data no GPU command writes)")
    return "eligible"


def _field_name(an: _Analysis, col: int) -> str:
    if col < NSLOTS:
        name = SLOTS[col]
        if name.startswith("root"):
            return f"{name} (root parameter {col - ROOT0}, not lifted by the x contract)"
        return name
    q = col - NSLOTS
    return f"root{q} (the words of root parameter {q} the x contract does not lift)"


def _pair_reason(an: _Analysis, plan: PackXPlan | None, i: int, max_instances: int) -> str | None:
    """Why draws ``i`` and ``i+1`` (indices among the draws) are not in one packed run."""
    s = an.stream
    for k in (i, i + 1):
        if an.reason[k] != R_OK:
            which = "first" if k == i else "second"
            return f"{which} draw not packable: {_draw_reason(an, k, max_instances)}"
    b = int(an.between[i])
    if b >= 0:
        nm = s.spec(b).name
        if s.op[b] in (_GRS, _CRS, _HEAPS):
            return f"{nm} at command {b} changes the state between them"
        if s.spec(b).cat == Cat.STATE and s.op[b] != _AUTOFLUSH:
            return f"{nm} at command {b} updates an inherited (unknown) value between them"
        return f"{nm} at command {b} lies between them (only state may change between packed calls)"
    if an.key[i] != an.key[i + 1]:
        if an.pipe[i] != an.pipe[i + 1]:
            return (f"pipeline differs: '{s.decls[int(an.pipe[i])].name}' then "
                    f"'{s.decls[int(an.pipe[i + 1])].name}'")
        diff = np.flatnonzero(an.mrows[i] != an.mrows[i + 1])
        col = int(diff[0]) if diff.size else PIPELINE
        return f"state differs: {_field_name(an, col)}"
    if plan is not None:
        if plan.split.size > i and plan.split[i]:
            c = an.xc[int(an.pipe[i])]
            if c.view == "cbv" and c.max_calls < 1 << (32 - c.k):
                return f"limit: the run's records fill the {CBV_BYTES} bytes a root CBV addresses"
            return (f"limit: the run has {c.max_calls} DrawIndexedX calls, all the draw ids "
                    f"vertex_bits={c.k} leaves ({32 - c.k} bits)")
        if plan.unrestorable[i] and plan.unrestorable[i + 1]:
            return ("their run is left alone: a later command reads the perdraw binding or a lifted value, "
                    "which was undefined after the run in the original and cannot be restored")
        if plan.run_of_draw[i] < 0:
            return "already consecutive DrawIndexedX calls: left as they are"
    return None


def pack_links(stream: Stream, table: StateTable | None = None, *, target: str | None = None,
               force: bool = False, max_instances: int = 16) -> list[str | None]:
    """For every pair of consecutive draws, why pack-x leaves them in different runs.

    Parameters
    ----------
    stream : Stream
    table : StateTable, optional
    target : str, optional
        When given, a target whose cost model does not wave-pack is the reason for every pair.
    force, max_instances
        As the pass options.

    Returns
    -------
    list of (str or None)
        ``D - 1`` entries: None where the two draws end in one packed run.
    """
    if target is not None and not pack_x_pays_off(target, force):
        why = _target_reason(target)
        d = int(np.count_nonzero(stream.cats() == int(Cat.DRAW)))
        return [why] * max(d - 1, 0)
    plan = plan_pack_x(stream, table, max_instances=max_instances)
    an = plan.analysis
    return [_pair_reason(an, plan, i, max_instances) for i in range(max(an.cmd.shape[0] - 1, 0))]


def why_not_packed(stream: Stream, i: int, j: int, *, table: StateTable | None = None,
                   target: str | None = None, force: bool = False, max_instances: int = 16) -> str | None:
    """Why the draws at commands ``i`` and ``j`` are not in one packed DrawIndexedX run.

    Parameters
    ----------
    stream : Stream
    i, j : int
        Command indices of two draws, ``i < j``.
    table : StateTable, optional
    target : str, optional
        Also check the target's cost model.
    force, max_instances
        As the pass options.

    Returns
    -------
    str or None
        None when pack-x puts both in one run; else the reason, naming the field,
        hazard, contract, limit or cost-model rule.

    Raises
    ------
    UsageError
        If ``i`` or ``j`` is not a draw.
    """
    if target is not None and not pack_x_pays_off(target, force):
        return _target_reason(target)
    plan = plan_pack_x(stream, table, max_instances=max_instances)
    an = plan.analysis
    pos = np.searchsorted(an.cmd, [i, j])
    for c, p in zip((i, j), pos):
        if p >= an.cmd.shape[0] or an.cmd[p] != c:
            raise UsageError(f"command {c} is not a draw")
    a, b = int(pos[0]), int(pos[1])
    if b <= a:
        raise UsageError("the first draw must come before the second")
    for k in range(a, b):
        why = _pair_reason(an, plan, k, max_instances)
        if why is not None:
            return why if b == a + 1 else f"between draws at commands {int(an.cmd[k])} and {int(an.cmd[k + 1])}: {why}"
    return None


def _target_reason(target: str) -> str:
    m = get_target(target)
    if not m.has_x:
        return f"cost model: target '{m.name}' has no DrawIndexedX"
    return (f"cost model: target '{m.name}' runs DrawIndexedX like DrawIndexedInstanced (no wave packing; "
            f"pack-x{{force=1}} packs anyway)")


# --------------------------------------------------------------------------- the pass
def pack_x(stream: Stream, *, table: StateTable | None = None, max_instances: int = 16,
           pure: bool | None = None) -> tuple[Stream, dict[str, Any]]:
    """Pack ``stream``'s eligible draws into DrawIndexedX runs (no target check).

    Returns
    -------
    (Stream, dict)
        The rewritten stream (``stream`` itself when nothing was packed) and a report.
    """
    plan = plan_pack_x(stream, table, max_instances=max_instances, pure=pure)
    out, extra = apply_plan(stream, plan, pure=pure)
    return out, {**plan.report, **extra}


@dataclass(frozen=True)
class PackXPass(Pass):
    """Rewrite runs of compatible draws into wave-packed DrawIndexedX calls (module docstring).

    Packs only where the pipeline target's cost model (``am.target``) says it pays
    (xbox-one). Options: ``force`` (also on xbox-series), ``max_instances`` (draws with more instances
    are left alone).
    """

    name: ClassVar[str] = "pack-x"
    requires: ClassVar[tuple[str, ...]] = ("state",)
    preserves: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "rewrite runs of compatible draws into wave-packed DrawIndexedX calls"

    force: bool = False
    max_instances: int = option(16, min=1)

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        if not pack_x_pays_off(am.target, self.force):
            return PassResult.unchanged(stream, skipped=_target_reason(am.target))
        table = am.get("state", stream)
        out, report = pack_x(stream, table=table, max_instances=self.max_instances)
        if out is stream:
            return PassResult.unchanged(stream, **report)
        return PassResult(out, True, frozenset(), report)
