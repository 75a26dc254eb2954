"""Hypothesis strategies for random *valid* drawopt streams (shared by the test suite).

Use::

    from hypothesis import given, settings
    from strategies import streams

    @settings(max_examples=200, deadline=None)
    @given(streams(max_commands=60))
    def test_something(s):
        ...

:func:`streams` draws a random header, declarations of every kind -- buffers with
and without ``data`` (including empty data), textures, render and depth targets,
CBV_SRV_UAV and SAMPLER heaps with views, root signatures with every parameter
kind, graphics / tessellation / geometry / compute pipelines with random keys and
rewrite contracts -- and commands of every opcode with in-range arguments: valid
references, buffer ranges that satisfy :meth:`Stream.check` (index, indirect,
multi-draw, copy), root-constant counts matching their values, render-target lists
with the depth target last, at most one heap of each type, ``@nomerge`` flags, and
``Opaque`` texts with arbitrary characters. Numbers favour edge values (0,
2**32-1, 2**31, 65535/65536, i32 extremes) and floats are raw bit patterns with
-0.0, NaNs (with payloads), infinities, subnormals and FLT_MAX over-represented.
Names include ones that look like keywords, enumerants or numbers (``TRUE``,
``R16_UINT``, ``inf``, ``buffer``, ``Opaque``...).

Every drawn stream passes ``Stream.check()`` (the strategy asserts it).

Parameters of :func:`streams`:

``max_commands`` / ``min_commands``
    bounds on the number of commands;
``ops``
    restrict commands to these names (default: all of ``drawopt.ir.ops.OPS``);
``min_decls``
    force at least one declaration of every kind, so every opcode is drawable.

Also exported: ``u32s``, ``i32s``, ``f32_bits``, ``names`` (identifier strategy),
``headers()``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from drawopt.ir.decls import (
    BLENDS,
    DEPTH_FUNCS,
    LIFT_VALUES,
    SHADER_STAGES,
    Buffer,
    Decls,
    Depth,
    Heap,
    Pipeline,
    RootParam,
    RootSig,
    Target,
    Texture,
    View,
)
from drawopt.ir.ops import (
    BARRIER_STATES,
    BY_NAME,
    FLUSH_MODES,
    GS_MODES,
    OPS,
    PIPELINED_EVENTS,
    TOPOLOGIES,
)
from drawopt.ir.stream import (
    ARGS_SIZE,
    CONTEXTS,
    FLAG_NOMERGE,
    KINDS,
    MAX_ROOT_PARAMS,
    REORDER_POLICIES,
    CommandBuffer,
    Header,
    Stream,
)

__all__ = ["streams", "headers", "u32s", "i32s", "f32_bits", "names", "F32_SPECIAL", "multi_draws",
           "VERIFIABLE_DRAWS"]

U32_MAX = 2**32 - 1
U32_EDGES = (0, 1, 2, 65535, 65536, 2**31 - 1, 2**31, U32_MAX)
I32_EDGES = (0, 1, -1, -(2**31), 2**31 - 1, 65536, -65536)
F32_SPECIAL = (
    0x00000000, 0x80000000,              # +0, -0
    0x3F800000, 0xBF800000,              # 1, -1
    0x7F800000, 0xFF800000,              # +inf, -inf
    0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001, 0xFFFFFFFF,  # NaNs with payloads
    0x00000001, 0x007FFFFF, 0x80000001,  # subnormals
    0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,  # FLT_MIN, FLT_MAX
    0x3DCCCCCD, 0x4B800000,              # 0.1, 2**24
)

u32s = st.one_of(st.sampled_from(U32_EDGES), st.integers(0, U32_MAX))
i32s = st.one_of(st.sampled_from(I32_EDGES), st.integers(-(2**31), 2**31 - 1))
f32_bits = st.one_of(st.sampled_from(F32_SPECIAL), st.integers(0, U32_MAX),
                     st.integers(0, 2048).map(lambda v: int(np.float32(v).view(np.uint32))))
small = st.integers(0, 64)

_TRICKY_NAMES = ("TRUE", "FALSE", "R16_UINT", "nan", "inf", "buffer", "data", "drawopt", "Opaque",
                 "DrawInstanced", "none", "all", "on", "off", "x", "_", "a.b-c", "view", "DEFAULT")
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,6}", fullmatch=True)
_SHADER_TOKENS = ("pull", "lit", "flat", "cull", "lit.hlsl:main", "ψ_main", "a=b", "x,y", "0", "main()")
_FORMATS = ("R8G8B8A8_UNORM", "BC7_UNORM", "R16G16B16A16_FLOAT", "D32_FLOAT", "D24_UNORM_S8_UINT")
_BUFFER_SIZES = st.one_of(
    st.sampled_from((4, 16, 20, 64, 100, 1024, 4096, 65536, 2**20, 2**32, 2**40, 2**63 - 1)),
    st.integers(1, 1 << 16),
)


def headers() -> st.SearchStrategy[Header]:
    """Random stream headers (with and without the target/policy an optimized stream records)."""
    return st.builds(lambda c, k, f, a, t, r: Header(1, c, k, f, a, t, r), st.sampled_from(CONTEXTS),
                     st.sampled_from(KINDS), st.booleans(), st.booleans(),
                     st.sampled_from(("", "d3d12", "xbox-one", "vulkan")), st.sampled_from(("", *REORDER_POLICIES)))


_SUFFIXES = ("", "_a", ".b", "-c", "X")
_NAME_PICK = st.integers(0, 4 * len(_TRICKY_NAMES) - 1)


class _Names:
    """Unique declaration names, some of them deliberately confusing (one draw each)."""

    def __init__(self, draw):
        self.draw, self.used, self.n = draw, set(), 0

    def __call__(self, prefix: str) -> str:
        i = self.draw(_NAME_PICK)
        if i >= 3 * len(_TRICKY_NAMES) and _TRICKY_NAMES[i % len(_TRICKY_NAMES)] not in self.used:
            cand = _TRICKY_NAMES[i % len(_TRICKY_NAMES)]
        else:
            while True:
                self.n += 1
                cand = f"{prefix}{self.n}{_SUFFIXES[i % len(_SUFFIXES)]}"
                if cand not in self.used:
                    break
        self.used.add(cand)
        return cand


def _pick(draw, xs):
    return xs[draw(_index(len(xs)))]


_RANGE_KINDS = ("srv", "uav", "cbv", "sampler")
_PARAM_KINDS = ("table", "constants", "cbv", "srv", "uav")


def _root_param(draw) -> RootParam:
    kind = _pick(draw, _PARAM_KINDS)
    if kind == "table":
        ranges = [(_pick(draw, _RANGE_KINDS), _pick(draw, (1, 2, 64, 1_000_000)))
                  for _ in range(draw(st.integers(1, 3)))]
        return RootParam("table", ranges=tuple(ranges))
    if kind == "constants":
        return RootParam("constants", count=draw(st.integers(1, 64)))
    return RootParam(kind)


_CLAUSES = ("x", "instance_data", "draw_data", "no_primitive_id", "order_independent", "never_merge")


def _lift(draw, rs: RootSig, perdraw: int) -> str | None:
    """A valid ``lift=`` list for root signature ``rs`` (None when nothing can be lifted):
    distinct items ``P`` / ``P.k`` naming values of parameters other than ``perdraw``."""
    vals = [(q, w) for q, rp in enumerate(rs.params) if q != perdraw
            for w in range(rp.count if rp.kind == "constants" else LIFT_VALUES.get(rp.kind, 0))]
    if not vals:
        return None
    items = draw(st.lists(st.sampled_from(vals), min_size=1, max_size=4, unique=True))
    return "+".join(str(q) if w == 0 and draw(st.booleans()) else f"{q}.{w}" for q, w in items)


def _contract(draw, rs: RootSig | None) -> str:
    """A random contract's text; ``perdraw`` and ``lift`` only where there is a root signature
    (every ``lift=`` list valid for it: a bad one is a load error)."""
    nparams = len(rs.params) if rs is not None else 0
    out: dict[str, dict[str, str]] = {}
    bits = draw(st.integers(0, (1 << len(_CLAUSES)) - 1))
    for k, clause in enumerate(_CLAUSES):
        if not bits >> k & 1:
            continue
        if clause == "x":
            opt = draw(st.integers(0, 15))
            p = {"vertex_bits": str(draw(st.integers(1, 31)))}
            if nparams and opt & 1:
                p["perdraw"] = str(draw(st.integers(0, nparams - 1)))
            if opt & 2 and rs is not None:
                lift = _lift(draw, rs, int(p.get("perdraw", -1)))
                if lift is not None:
                    p["lift"] = lift
            if opt & 4:
                p["max_index"] = str(draw(u32s))
            if opt & 8:
                p["base"] = _pick(draw, ("vertex", "none"))
            out["x"] = p
        elif clause in ("instance_data", "draw_data"):
            if nparams:
                out[clause] = {"perdraw": str(draw(st.integers(0, nparams - 1)))}
                if rs is not None and draw(st.booleans()):
                    lift = _lift(draw, rs, int(out[clause]["perdraw"]))
                    if lift is not None:
                        out[clause]["lift"] = lift
        else:
            out[clause] = {}
    return ",".join(c + ("(" + ",".join(f"{k}={v}" for k, v in kv.items()) + ")" if kv else "")
                    for c, kv in out.items())


_DEPTHS = ("off", *DEPTH_FUNCS, *(f + ",write" for f in DEPTH_FUNCS))
_GS_RATIO = st.one_of(st.just(0.0), st.floats(0, 64, allow_nan=False))


def _pipeline(draw, name: str, decls: Decls) -> Pipeline:
    """A random pipeline: a feature bit mask says which optional keys get values."""
    f = draw(st.integers(0, (1 << 13) - 1))
    tok = lambda: _pick(draw, _SHADER_TOKENS)  # noqa: E731
    kw: dict = {}
    if f & 1:
        kw["cs"] = tok()
    else:
        kw["vs"] = tok()
        if f & 2:
            kw["hs"], kw["ds"] = tok(), tok()
        if f & 4:
            kw["gs"] = tok()
        if f & 8:
            kw["ps"] = tok()
        if f & 16:
            kw["layout"] = _pick(draw, ("none", "pos_uv_color", "pos"))
        if f & 32:
            kw["blend"] = _pick(draw, BLENDS)
        if f & 64:
            kw["depth"] = _pick(draw, _DEPTHS)
        if f & 128:
            kw["topology"] = _pick(draw, ("point", "line", "triangle", "patch"))
        if f & 256:
            kw["gs_maxverts"] = draw(st.integers(0, 1 << 20))
            kw["gs_vertsize"] = draw(st.integers(0, 256))
            kw["gs_instances"] = draw(st.integers(1, 32))
            kw["gs_invertsize"] = draw(st.integers(0, 256))
            kw["gs_ratio"] = draw(_GS_RATIO)
    if f & 512:
        kw["uav_stage"] = _pick(draw, [s for s in SHADER_STAGES if kw.get(s) is not None])
    nparams = 0
    root = None
    rootsigs = decls.of_kind("rootsig")
    if f & 1024 and rootsigs:
        root = _pick(draw, rootsigs)
        kw["root"], nparams = root.name, len(root.params)
        mode = draw(st.integers(0, 2))
        if mode == 1:
            kw["params"] = ()
        elif mode == 2 and nparams:
            kw["params"] = tuple(draw(st.integers(0, nparams - 1)) for _ in range(draw(st.integers(1, 4))))
    resources = [d.name for d in decls.of_kind("buffer", "texture", "target", "depth")] + \
        [d.name for d in decls.of_kind("view") if d.resource is not None]
    if f & 2048 and resources:
        kw["reads"] = tuple(_pick(draw, resources) for _ in range(draw(st.integers(0, 3))))
        kw["writes"] = tuple(_pick(draw, resources) for _ in range(draw(st.integers(0, 2))))
    if f & 4096:
        kw["contract"] = _contract(draw, root)
    return Pipeline(name, **kw)


def _declarations(draw, min_decls: bool) -> Decls:
    decls = Decls()
    name = _Names(draw)
    lo = 1 if min_decls else 0
    for _ in range(draw(st.integers(max(lo, 1), 5))):
        size = draw(_BUFFER_SIZES)
        data = draw(_words(0, min(size // 4, 24))) if draw(st.booleans()) else None
        decls.add(Buffer(name("buf"), size, draw(st.booleans()), data, draw(st.booleans())))
    for cls in (Texture, Target, Depth):
        for _ in range(draw(st.integers(lo, 2))):
            decls.add(cls(name(cls.kind[:3]), draw(st.integers(1, 65536)), draw(st.integers(1, 65536)),
                          _pick(draw, _FORMATS)))
    for htype in ("CBV_SRV_UAV", "SAMPLER"):
        for _ in range(draw(st.integers(lo, 2 if htype == "CBV_SRV_UAV" else 1))):
            size = _pick(draw, (1, 2, 4, 16, 64, 1_000_000))
            h = Heap(name("heap"), htype, size)
            decls.add(h)
            resources = decls.of_kind("buffer", "texture", "target", "depth")
            for slot in sorted({draw(st.integers(0, min(size, 64) - 1)) for _ in range(draw(st.integers(0, 3)))}):
                if htype == "SAMPLER":
                    decls.add(View(h.name, slot, "sampler"))
                else:
                    kind = _pick(draw, ("srv", "uav", "cbv"))
                    pool = [r for r in resources if kind != "cbv" or r.kind == "buffer"]
                    decls.add(View(h.name, slot, kind, _pick(draw, pool).name))
    for _ in range(draw(st.integers(lo, 2))):
        params = tuple(_root_param(draw) for _ in range(draw(st.integers(0, 5))))
        decls.add(RootSig(name("rs"), params))
    for _ in range(draw(st.integers(lo, 4))):
        decls.add(_pipeline(draw, name("pso"), decls))
    return decls


# ------------------------------------------------------------------------ commands
def _words(lo: int, hi: int) -> st.SearchStrategy[np.ndarray]:
    """``uint32`` arrays of ``lo..hi`` words, drawn as bytes (one draw, not one per word)."""
    return st.binary(min_size=4 * lo, max_size=4 * hi).map(
        lambda b: np.frombuffer(b[:len(b) // 4 * 4], dtype="<u4").astype(np.uint32))


_ROOT_INDEX = st.integers(0, MAX_ROOT_PARAMS - 1)


def _index(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)  # cached by hypothesis, unlike sampled_from(list)


_EDGE_MODE = st.integers(0, 3)
_OPAQUE_TEXT = st.one_of(
    st.sampled_from(("ClearState", "ClearState(0,  1)", "a # b", '"quoted"', " lead", "trail ", "tab\there",
                     "@nomerge", "x=1", "ü\u2028", "\x00", "Opaque", "\\", '"')),
    st.text(min_size=1, max_size=16).filter(lambda t: "\n" not in t))


def _upto(draw, hi: int, lo: int = 0) -> int:
    """An integer in ``[lo, hi]``, the ends favoured."""
    mode = draw(_EDGE_MODE)
    return lo if mode == 0 else hi if mode == 1 else draw(st.integers(lo, hi))


def _aligned(draw, limit: int, align: int) -> int:
    """A multiple of ``align`` in ``[0, limit]``, edges favoured."""
    return align * _upto(draw, limit // align)


def _multi(draw, size: int, rec: int) -> tuple[int, int, int]:
    """``(count, offset, stride)`` of a multi-draw reading a buffer of ``size`` bytes."""
    offset = _aligned(draw, size - rec, 4)
    avail = size - offset - rec
    kind = draw(st.integers(0, 2))
    if kind < 2 or avail < rec:
        return kind if kind < 2 else 1, offset, draw(u32s)
    stride = 4 * draw(st.integers(-(-rec // 4), min(U32_MAX, avail) // 4))
    count = draw(st.integers(2, min(U32_MAX, avail // stride + 1)))
    return count, offset, stride


class _Ctx:
    def __init__(self, decls: Decls):
        self.decls = decls
        ix = {k: [i for i, d in enumerate(decls) if d.kind == k] for k in
              ("buffer", "texture", "target", "depth", "heap", "view", "rootsig", "pipeline")}
        self.ix = ix
        self.bufs = ix["buffer"]
        self.size = {i: decls[i].size for i in self.bufs}

    def bufs_at_least(self, n: int) -> list[int]:
        return [i for i in self.bufs if self.size[i] >= n]


def _feasible(name: str, c: _Ctx) -> bool:
    need = {
        "SetPipelineState": c.ix["pipeline"], "SetGraphicsRootSignature": c.ix["rootsig"],
        "SetComputeRootSignature": c.ix["rootsig"], "SetDescriptorHeaps": c.ix["heap"],
        "SetGraphicsRootDescriptorTable": c.ix["heap"], "SetComputeRootDescriptorTable": c.ix["heap"],
        "ResourceBarrier": c.bufs + c.ix["texture"] + c.ix["target"] + c.ix["depth"],
        "DrawInstancedIndirect": c.bufs_at_least(16), "DrawIndexedInstancedIndirect": c.bufs_at_least(20),
        "MultiDrawInstancedIndirect": c.bufs_at_least(16), "MultiDrawIndexedInstancedIndirect": c.bufs_at_least(20),
        "MultiDrawInstancedIndirectAuto": c.bufs_at_least(16),
        "MultiDrawIndexedInstancedIndirectAuto": c.bufs_at_least(20),
    }
    return bool(need.get(name, True))


def _command(draw, name: str, c: _Ctx, strings: list[str], string_ix: dict[str, int]) -> tuple[list[int], list[int]]:
    """Encoded ``(row, var)`` of a valid random command ``name``."""
    sp = BY_NAME[name]
    pick = lambda xs: xs[draw(_index(len(xs)))]  # noqa: E731
    if name == "SetPipelineState":
        return [pick(c.ix["pipeline"])], []
    if name in ("SetGraphicsRootSignature", "SetComputeRootSignature"):
        return [pick(c.ix["rootsig"])], []
    if name == "SetDescriptorHeaps":
        by_type: dict[str, list[int]] = {}
        for i in c.ix["heap"]:
            by_type.setdefault(c.decls[i].type, []).append(i)
        types = sorted(by_type)
        if len(types) == 2:
            types = _pick(draw, (types, types[:1], types[1:], types[::-1]))
        return [], [pick(by_type[t]) for t in types]
    if name in ("SetGraphicsRootDescriptorTable", "SetComputeRootDescriptorTable"):
        h = pick(c.ix["heap"])
        slot = _upto(draw, c.decls[h].size - 1)
        return [draw(_ROOT_INDEX), (h << 32) | slot], []
    if name in ("SetGraphicsRoot32BitConstants", "SetComputeRoot32BitConstants"):
        count = _upto(draw, 64, 1) if draw(st.booleans()) else draw(st.integers(1, 4))
        dest = draw(st.integers(0, 64 - count))
        return [draw(_ROOT_INDEX), count, dest], draw(_words(count, count)).tolist()
    if name in ("SetGraphicsRootConstantBufferView", "SetGraphicsRootShaderResourceView"):
        b = pick(c.bufs)
        return [draw(_ROOT_INDEX), b, _upto(draw, c.size[b])], []
    if name == "IASetIndexBuffer":
        b, f = pick(c.bufs), draw(st.integers(0, 1))
        return [b, f, _aligned(draw, c.size[b], 2 if f == 0 else 4)], []
    if name == "IASetVertexBuffers":
        b = pick(c.bufs)
        return [draw(st.integers(0, 31)), b, draw(st.integers(0, c.size[b])), draw(u32s)], []
    if name == "IASetPrimitiveTopology":
        return [draw(st.integers(0, len(TOPOLOGIES) - 1))], []
    if name == "OMSetRenderTargets":
        rts = [pick(c.ix["target"]) for _ in range(draw(st.integers(0, 8)))] if c.ix["target"] else []
        if c.ix["depth"] and draw(st.booleans()):
            rts.append(pick(c.ix["depth"]))
        return [], rts
    if name in ("RSSetViewports", "OMSetBlendFactor"):
        return [draw(f32_bits) for _ in sp.args], []
    if name == "RSSetScissorRects":
        return [draw(i32s) for _ in range(4)], []
    if name == "OMSetStencilRef":
        return [draw(u32s)], []
    if name == "GSSetParameters":
        over = draw(st.integers(0, 15))  # which fields are overridden
        return [draw(st.integers(0, len(GS_MODES) - 1)), draw(u32s) if over & 1 else 0,
                draw(u32s) if over & 2 else 0, draw(f32_bits) if over & 4 else 0,
                draw(u32s) if over & 8 else 0], []
    if name == "CSEnableAutomaticGpuFlush":
        return [draw(st.integers(0, 1))], []
    if name in ("DrawInstanced", "Dispatch"):
        return [draw(u32s) for _ in sp.args], []
    if name == "DrawIndexedInstanced":
        return [draw(u32s), draw(u32s), draw(u32s), draw(i32s), draw(u32s)], []
    if name == "DrawIndexedX":
        b, f = pick(c.bufs), draw(st.integers(0, 1))
        isz = 2 if f == 0 else 4
        off = _aligned(draw, c.size[b], isz)
        cnt = draw(st.integers(0, min(U32_MAX, (c.size[b] - off) // isz)))
        return [b, off, f, cnt, draw(u32s)], []
    if name in ("DrawInstancedIndirect", "DrawIndexedInstancedIndirect"):
        rec = ARGS_SIZE[name]
        b = pick(c.bufs_at_least(rec))
        return [b, _aligned(draw, c.size[b] - rec, 4)], []
    if name in ("MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect"):
        rec = ARGS_SIZE[name]
        b = pick(c.bufs_at_least(rec))
        count, off, stride = _multi(draw, c.size[b], rec)
        return [count, b, off, stride], []
    if name in ("MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto"):
        rec = ARGS_SIZE[name]
        cb = pick(c.bufs_at_least(4))
        b = pick(c.bufs_at_least(rec))
        count, off, stride = _multi(draw, c.size[b], rec)
        return [cb, _aligned(draw, c.size[cb] - 4, 4), count, b, off, stride], []
    if name == "GpuSendPipelinedEvent":
        return [draw(st.integers(0, len(PIPELINED_EVENTS) - 1))], []
    if name in ("FlushGpuCacheRange", "FlushGpuCachesBottomOfPipe"):
        return [draw(st.integers(0, len(FLUSH_MODES) - 1))], []
    if name == "ResourceBarrier":
        r = pick(c.bufs + c.ix["texture"] + c.ix["target"] + c.ix["depth"])
        return [r, draw(st.integers(0, len(BARRIER_STATES) - 1)),
                draw(st.integers(0, len(BARRIER_STATES) - 1))], []
    if name == "CopyBufferRegion":
        d, s = pick(c.bufs), pick(c.bufs)
        n = _upto(draw, min(c.size[d], c.size[s]))
        return [d, draw(st.integers(0, c.size[d] - n)), s, draw(st.integers(0, c.size[s] - n)), n], []
    if name == "Opaque":
        text = draw(_OPAQUE_TEXT)
        ix = string_ix.get(text)
        if ix is None:
            ix = string_ix[text] = len(strings)
            strings.append(text)
        return [ix], []
    raise AssertionError(name)  # pragma: no cover


@st.composite
def streams(draw, max_commands: int = 60, min_commands: int = 0, ops: Sequence[str] | None = None,
            min_decls: bool = False) -> Stream:
    """A random valid :class:`~drawopt.ir.stream.Stream` (see the module docstring)."""
    header = draw(headers())
    decls = _declarations(draw, min_decls)
    ctx = _Ctx(decls)
    names_ = [o.name for o in OPS if (ops is None or o.name in ops) and _feasible(o.name, ctx)]
    cb = CommandBuffer()
    strings: list[str] = []
    string_ix: dict[str, int] = {}
    if names_:
        for _ in range(draw(st.integers(min_commands, max_commands))):
            name = names_[draw(_index(len(names_)))]
            row, var = _command(draw, name, ctx, strings, string_ix)
            fl = FLAG_NOMERGE if draw(st.integers(0, 7)) == 0 else 0
            cb.append(BY_NAME[name].code, row, var, fl)
    s = cb.build(header, decls, strings)
    s.check()
    return s


VERIFIABLE_DRAWS = 1 << 20
"""Properties that verify a drawn stream ``assume(multi_draws(s) < VERIFIABLE_DRAWS)``: the verifier
expands multi-draws record by record, up to 2^24 draws in all (a usage error past it), and drawn counts
go up to 2^32; 2^20 keeps each example quick."""


def multi_draws(s: Stream) -> int:
    """The draws the multi-draws of ``s`` may perform (what the verifier expands): the count of a
    ``MultiDraw*Indirect``, the max count of an ``Auto`` one (its count column is an args offset)."""
    auto = np.isin(s.op, _AUTO_OPS)
    plain = np.isin(s.op, _MULTI_OPS) & ~auto
    return sum(int(x) for x in s.args[plain, _COL_COUNT]) + sum(int(x) for x in s.args[auto, _COL_AUTO_MAX])


_AUTO_OPS = [BY_NAME[n].code for n in ("MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto")]
_MULTI_OPS = [BY_NAME[n].code for n in ("MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect")] + _AUTO_OPS
_COL_COUNT = BY_NAME["MultiDrawInstancedIndirect"].col("count")
_COL_AUTO_MAX = BY_NAME["MultiDrawInstancedIndirectAuto"].col("max_count")
