"""``quads``: the five methods of "The Many Ways to Render Quads in D3D12".

``method=1`` (the default, what the optimizer must collapse): one draw per quad.
For every quad the CPU writes 6 vertices (x, y, colour: 12 bytes each) into a
temporary window of an upload buffer, binds it with
``IASetVertexBuffers 0 quadverts <i*72> 12`` and issues ``DrawInstanced 6 1 0 0``.
``draws`` is the number of quads.

Methods 2..5 draw ``quads_per_draw`` quads per call (default 1024, or fewer so that
all vertex/index locations fit 32 bits; ``draws`` calls,
each over the next contiguous range, as a sprite batcher that flushes every
``quads_per_draw`` quads; the post's single call for 1M quads is
``draws=1, quads_per_draw=1000000``):

2. batched triangle list: one vertex buffer, ``DrawInstanced 6Q 1 6Qb 0``;
3. index buffer: 4 vertices per quad and a static R32 index buffer,
   ``DrawIndexedInstanced 6Q 1 6Qb 0 0``;
4. vertex pulling: ``layout=none``, 20 bytes per quad in a structured buffer read
   through ``ResourceDescriptorHeap[index]``, ``DrawInstanced 6Q 1 6Qb 0``;
5. instancing: per-instance layout, TRIANGLESTRIP, ``DrawInstanced 4 Q 0 Qb``.

Every pipeline declares ``contract=no_primitive_id`` (the shaders of the post never
read SV_PrimitiveID, so contiguous vertex ranges may merge), and methods 1-3 also
``no_vertex_id`` (their input-layout vertex shaders never read SV_VertexID, so a
vertex-buffer window may move into StartVertexLocation; vertex pulling and the
instanced shader do read it); ``contract=none``
declares nothing, for tests of the optimizer's caution. With ``data=on`` (or
``auto`` and at most 2^18 words) the CPU-written buffers carry their contents:
quads with sides of ``size_min..size_max`` pixels (default 4..64) at random
positions and colours.
"""

from __future__ import annotations

__all__ = ["OPTIONS", "build"]

import numpy as np

from drawopt.errors import UsageError
from drawopt.gen.common import Option, Program, Slot, choice_opt, f32, int_opt
from drawopt.ir.decls import Buffer, Heap, Pipeline, RootParam, RootSig, Target, View
from drawopt.ir.stream import Header, Stream

OPTIONS: tuple[Option, ...] = (
    int_opt("method", 1, 1, 5, "1 one draw per quad, 2 batched, 3 index buffer, 4 vertex pulling, 5 instancing"),
    int_opt("quads_per_draw", 0, 0, 1 << 30, "quads per draw call for methods 2-5 (0 = 1024, fewer if "
            "the 32-bit vertex range needs it)"),
    choice_opt("contract", "no_primitive_id", ("no_primitive_id", "none"), "the pipelines' rewrite contract"),
    choice_opt("data", "auto", ("auto", "on", "off"), "carry the CPU-written buffer contents"),
    int_opt("width", 1280, 16, 16384, "render target width"),
    int_opt("height", 720, 16, 16384, "render target height"),
    int_opt("size_min", 4, 1, 4096, "smallest quad side in pixels (with data)"),
    int_opt("size_max", 64, 1, 4096, "largest quad side in pixels (with data; at least size_min)"),
)

DATA_AUTO_WORDS = 1 << 18
MAX_DATA_WORDS = 1 << 28
TRIANGLELIST, TRIANGLESTRIP = 4, 5


def _quads(rng: np.random.Generator, n: int, w: int, h: int, lo: int = 4, hi: int = 64) -> tuple[np.ndarray, ...]:
    size = rng.integers(lo, hi + 1, (n, 2)).astype(np.float32)
    x = np.floor(rng.random(n) * np.maximum(w - size[:, 0], 1)).astype(np.float32)
    y = np.floor(rng.random(n) * np.maximum(h - size[:, 1], 1)).astype(np.float32)
    color = rng.integers(0, 1 << 24, n, dtype=np.int64) | 0xFF000000
    return x, y, size[:, 0], size[:, 1], color


def _bits(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32).view(np.uint32).astype(np.int64)


def _vertex_words(x, y, qw, qh, color, corners: tuple[tuple[int, int], ...]) -> np.ndarray:
    """(x, y, colour) words of the given corners of every quad, quad-major."""
    cx = np.array([c[0] for c in corners], np.float32)
    cy = np.array([c[1] for c in corners], np.float32)
    vx = x[:, None] + cx[None, :] * qw[:, None]
    vy = y[:, None] + cy[None, :] * qh[:, None]
    col = np.broadcast_to(color[:, None], vx.shape)
    return np.stack([_bits(vx), _bits(vy), col], axis=2).reshape(-1)


def build(draws: int, rng: np.random.Generator, method: int, quads_per_draw: int, contract: str, data: str,
          width: int, height: int, size_min: int = 4, size_max: int = 64) -> Stream:
    """The ``quads`` stream (see the module docstring)."""
    if size_max < size_min:
        raise UsageError(f"gen: size_max ({size_max}) must be at least size_min ({size_min})")
    if method == 1 and quads_per_draw not in (0, 1):
        raise UsageError("gen: quads method 1 draws one quad per call (quads_per_draw must be 1)")
    per_quad = 4 if method == 5 else 6   # vertices (or indices) per quad in the 32-bit ranges
    limit = (2**32 - 1) // (1 if method == 5 else per_quad)
    q = 1 if method == 1 else (quads_per_draw or max(1, min(1024, limit // draws)))
    n = draws * q
    if n > limit:
        raise UsageError(f"gen: {draws} draws x {q} quads do not fit the 32-bit vertex/index range "
                         f"(at most {limit} quads for method {method})")
    p = Program(Header())
    if contract != "none" and method in (1, 2, 3):
        contract += ",no_vertex_id"  # input-layout shaders of methods 1-3 never read SV_VertexID
    c = {} if contract == "none" else {"contract": contract}
    W, H = width, height
    words_needed = {1: 18, 2: 18, 3: 12 + 6, 4: 5, 5: 5}[method] * n
    keep = data == "on" or (data == "auto" and words_needed <= DATA_AUTO_WORDS)
    if keep and words_needed > MAX_DATA_WORDS:
        raise UsageError(f"gen: data=on for {n} quads needs {words_needed} words (at most {MAX_DATA_WORDS})")
    x, y, qw, qh, color = _quads(rng, n if keep else 0, W, H, size_min, size_max)

    p.declare(Target("backbuffer", W, H, "R8G8B8A8_UNORM"))
    screen = [f32(v) for v in (2.0 / W, -2.0 / H, -1.0, 1.0)]
    tri6 = ((0, 0), (1, 0), (0, 1), (0, 1), (1, 0), (1, 1))
    if method in (1, 2):
        p.declare(Buffer("quadverts", n * 72, cpu=True,
                         data=_vertex_words(x, y, qw, qh, color, tri6) if keep else None))
        layout, root = "pos_color", "quadroot"
    elif method == 3:
        p.declare(Buffer("quadverts", n * 48, cpu=True,
                         data=_vertex_words(x, y, qw, qh, color, ((0, 0), (1, 0), (0, 1), (1, 1))) if keep else None))
        idx = None
        if keep:
            idx = (np.arange(n, dtype=np.int64)[:, None] * 4 + np.array([0, 1, 2, 2, 1, 3])).reshape(-1)
        p.declare(Buffer("quadib", n * 24, cpu=True, data=idx))
        layout, root = "pos_color", "quadroot"
    else:
        per_quad = np.stack([_bits(x), _bits(y), _bits(qw), _bits(qh), color], axis=1).reshape(-1)
        name = "quaddata" if method == 4 else "quadinst"
        p.declare(Buffer(name, n * 20, cpu=True, data=per_quad if keep else None))
        layout, root = ("none", "quadpull") if method == 4 else ("quad_instance", "quadroot")
    if method == 4:
        p.declare(Heap("res", "CBV_SRV_UAV", 1))
        p.declare(View("res", 0, "srv", "quaddata"))
        p.declare(RootSig("quadpull", (RootParam("constants", 1),)))
        p.declare(Pipeline("quads_m4", vs="quad_pull", ps="quad_color", layout="none", blend="alpha", root=root,
                           reads=("quaddata",), **c))
    else:
        p.declare(RootSig("quadroot", (RootParam("constants", 4),)))
        p.declare(Pipeline(f"quads_m{method}", vs="quad_vs" if method != 5 else "quad_instanced", ps="quad_color",
                           layout=layout, blend="alpha", root=root, **c))

    p.cmd("OMSetRenderTargets", "backbuffer")
    p.cmd("RSSetViewports", 0, 0, W, H, 0, 1)
    p.cmd("RSSetScissorRects", 0, 0, W, H)
    if method == 4:
        p.cmd("SetDescriptorHeaps", "res")
        p.cmd("SetGraphicsRootSignature", "quadpull")
        p.cmd("SetGraphicsRoot32BitConstants", 0, 1, 0)  # structuredBufferIndex
    else:
        p.cmd("SetGraphicsRootSignature", "quadroot")
        p.cmd("SetGraphicsRoot32BitConstants", 0, 4, *screen)
    p.cmd("SetPipelineState", f"quads_m{method}")
    p.cmd("IASetPrimitiveTopology", "TRIANGLESTRIP" if method == 5 else "TRIANGLELIST")
    if method in (2, 3):
        p.cmd("IASetVertexBuffers", 0, "quadverts", 0, 12)
    if method == 3:
        p.cmd("IASetIndexBuffer", "quadib", "R32_UINT", 0)
    if method == 5:
        p.cmd("IASetVertexBuffers", 0, "quadinst", 0, 20)
    rows = p.rows(draws)
    b = np.arange(draws, dtype=np.int64)
    if method == 1:
        p.emit("IASetVertexBuffers", rows, Slot.VERTEX, slot=0, buffer=p.ref("quadverts"), offset=b * 72, stride=12)
        p.emit("DrawInstanced", rows, Slot.DRAW, vertex_count=6, instance_count=1, start_vertex=0, start_instance=0)
    elif method in (2, 4):
        p.emit("DrawInstanced", rows, Slot.DRAW, vertex_count=6 * q, instance_count=1, start_vertex=6 * q * b,
               start_instance=0)
    elif method == 3:
        p.emit("DrawIndexedInstanced", rows, Slot.DRAW, index_count=6 * q, instance_count=1, start_index=6 * q * b,
               base_vertex=0, start_instance=0)
    else:
        p.emit("DrawInstanced", rows, Slot.DRAW, vertex_count=4, instance_count=q, start_vertex=0,
               start_instance=q * b)
    return p.build()
