"""Prepares a stream for replay: GL resources, programs, and the tape of GL calls.

:class:`Frame` walks the stream once, tracking D3D state exactly as the API
defines it and the GL state it has emitted so far, and appends to a tape only the
GL calls that change something. Executing the tape renders the frame; timing
and read-back live in :mod:`drawopt.replay.api`.

Mapping of commands (see ``docs/replay.md`` for the full table):

* direct draws -> ``glDrawArraysInstancedBaseInstance`` /
  ``glDrawElementsInstancedBaseVertexBaseInstance`` (byte offset = index-buffer
  offset + StartIndexLocation x index size);
* ``DrawIndexedX`` -> ``glDrawElementsInstancedBaseVertexBaseInstance`` with
  IndexOffset as basevertex (so ``gl_VertexID`` = index + IndexOffset = the D3D
  SV_VertexID), decoded by the pipeline's ``x`` contract;
* indirect and ``MultiDraw*Indirect`` -> ``glMultiDraw{Arrays,Elements}Indirect``
  on the args buffer itself (D3D12's argument records have GL's layout);
  ``*Auto`` -> ``glMultiDraw*IndirectCountARB``;
* ``Dispatch`` -> a compute shader writing the dispatch's output (args, index
  data; :mod:`drawopt.replay.content`) into every buffer the pipeline writes;
* pipelined events -> ``glMemoryBarrier(SHADER_STORAGE)``; L2 flushes ->
  ``glMemoryBarrier(COMMAND | ELEMENT_ARRAY | VERTEX_ATTRIB_ARRAY)``;
  ``ResourceBarrier`` -> the barrier bits of its after-state;
* ``IASetVertexBuffers`` -> ``glBindVertexBuffer``, and ``glVertexAttribIFormat`` with
  :func:`element_words` of the stride (``min(4, stride // 4)`` words per element) where it changes;
* ``CopyBufferRegion`` -> ``glCopyNamedBufferSubData``;
* ``Opaque`` -> ignored (counted in ``warnings``).
"""

from __future__ import annotations

__all__ = ["Frame", "ReplayOptions", "element_words", "target_format", "index_scale_for", "CONTENTS",
           "PRIM_BUDGET"]

import ctypes
import functools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from drawopt.errors import InputError
from drawopt.ir.decls import Buffer, Depth, Pipeline, Target, View
from drawopt.ir.ops import BY_CODE, BY_NAME, COL_DRAW_COUNT, COL_INSTANCES, TOPOLOGIES, Cat
from drawopt.ir.ops import Op as Cmd
from drawopt.ir.stream import Stream
from drawopt.replay import content
from drawopt.replay.gl import GL, GLFunctions, GLInfo, on_release
from drawopt.replay.shaders import (
    COPY_CS,
    ProgramKey,
    fragment_shader,
    geometry_shader,
    lift_layout,
    prim_class,
    tess_shaders,
    vertex_shader,
)
from drawopt.replay.tape import Op, TapeBuilder, f32_bits

_TOPO_MODE = {
    "POINTLIST": (GL.POINTS, 0), "LINELIST": (GL.LINES, 0), "LINESTRIP": (GL.LINE_STRIP, 0),
    "TRIANGLELIST": (GL.TRIANGLES, 0), "TRIANGLESTRIP": (GL.TRIANGLE_STRIP, 0),
    "LINELIST_ADJ": (GL.LINES_ADJACENCY, 0), "LINESTRIP_ADJ": (GL.LINE_STRIP_ADJACENCY, 0),
    "TRIANGLELIST_ADJ": (GL.TRIANGLES_ADJACENCY, 0), "TRIANGLESTRIP_ADJ": (GL.TRIANGLE_STRIP_ADJACENCY, 0),
    "PATCHLIST_3": (GL.PATCHES, 3), "PATCHLIST_4": (GL.PATCHES, 4),
}
_PIPE_TOPO = {"point": (GL.POINTS, 0), "line": (GL.LINES, 0), "triangle": (GL.TRIANGLES, 0),
              "patch": (GL.PATCHES, 3)}
_BLEND = {  # enabled, src rgb, dst rgb, src a, dst a, equation
    "opaque": (0, GL.ONE, GL.ZERO, GL.ONE, GL.ZERO, GL.FUNC_ADD),
    "alpha": (1, GL.SRC_ALPHA, GL.ONE_MINUS_SRC_ALPHA, GL.ONE, GL.ONE_MINUS_SRC_ALPHA, GL.FUNC_ADD),
    "additive": (1, GL.ONE, GL.ONE, GL.ONE, GL.ONE, GL.FUNC_ADD),
    "premultiplied": (1, GL.ONE, GL.ONE_MINUS_SRC_ALPHA, GL.ONE, GL.ONE_MINUS_SRC_ALPHA, GL.FUNC_ADD),
    "multiply": (1, GL.DST_COLOR, GL.ZERO, GL.ONE, GL.ZERO, GL.FUNC_ADD),
    "min": (1, GL.ONE, GL.ONE, GL.ONE, GL.ONE, GL.MIN),
    "max": (1, GL.ONE, GL.ONE, GL.ONE, GL.ONE, GL.MAX),
}
_DEPTH_FUNC = {"never": GL.NEVER, "less": GL.LESS, "equal": GL.EQUAL, "lequal": GL.LEQUAL,
               "greater": GL.GREATER, "notequal": GL.NOTEQUAL, "gequal": GL.GEQUAL, "always": GL.ALWAYS}
_BARRIER_AFTER = {
    "COMMON": GL.ALL_BARRIER_BITS, "RENDER_TARGET": GL.FRAMEBUFFER_BARRIER_BIT,
    "DEPTH_WRITE": GL.FRAMEBUFFER_BARRIER_BIT, "DEPTH_READ": GL.FRAMEBUFFER_BARRIER_BIT,
    "SHADER_RESOURCE": GL.SHADER_STORAGE_BARRIER_BIT, "UNORDERED_ACCESS": GL.SHADER_STORAGE_BARRIER_BIT,
    "INDIRECT_ARGUMENT": GL.COMMAND_BARRIER_BIT, "INDEX_BUFFER": GL.ELEMENT_ARRAY_BARRIER_BIT,
    "COPY_DEST": GL.BUFFER_UPDATE_BARRIER_BIT, "COPY_SOURCE": GL.BUFFER_UPDATE_BARRIER_BIT,
    "VERTEX_AND_CONSTANT_BUFFER": GL.VERTEX_ATTRIB_ARRAY_BARRIER_BIT | GL.UNIFORM_BARRIER_BIT,
}
L2_FLUSH_BITS = GL.COMMAND_BARRIER_BIT | GL.ELEMENT_ARRAY_BARRIER_BIT | GL.VERTEX_ATTRIB_ARRAY_BARRIER_BIT
PARTIAL_FLUSH_BITS = GL.SHADER_STORAGE_BARRIER_BIT
_NO_EPOCH = frozenset({"IASetVertexBuffers", "IASetIndexBuffer", "OMSetBlendFactor", "OMSetStencilRef",
                       "GSSetParameters", "CSEnableAutomaticGpuFlush", "SetDescriptorHeaps"})
"""State commands that never change the GL setup a draw needs beyond what each draw re-checks."""
STAGING = -2  # placeholder buffer name in the tape, patched once the staging buffer exists
CONTENTS = ("light", "full")
PRIM_BUDGET = 1 << 20
"""Light content: at most about this many primitives drawn from synthesized index buffers per frame."""
DEFAULT_TARGET = "<default>"
DEFAULT_DEPTH = "<default depth>"
"""The depth target of draws with no ``OMSetRenderTargets`` (bundles): the caller's depth target,
which the verifier's model (``(inherited depth target)``) and the ``opaque`` reorder policy assume."""
_STREAM_RE = re.compile(r"[_\-.]")


@dataclass
class ReplayOptions:
    """How to replay.

    ``size``: every target is rendered at this size (viewports and scissors are
    scaled from the declared target size). ``cell_px``: side of a grid cell of the
    synthetic geometry. ``draw_parameters``: None uses ARB_shader_draw_parameters
    when the driver has it; False forces the uniform fallback (base vertex /
    instance / draw id set per call; indirect draws expanded or read back).
    ``native``: None uses the compiled tape loop when built.
    ``content``: ``"light"`` (default) squeezes the index ranges of indexed draws into index
    buffers the replay synthesizes by ``index_scale`` (None: the smallest power of two that
    brings the stream to ``prim_budget`` primitives, :func:`index_scale_for`), so GPU time
    follows the command stream; ``"full"`` draws every index (docs/replay.md, "Content").
    Two replays compare only under the same ``index_scale`` (``replay A B`` uses A's for both).
    """

    size: tuple[int, int] = (128, 128)
    cell_px: int = 8
    pool_size: int = content.POOL_SIZE
    max_buffer_bytes: int = 1 << 30
    draw_parameters: bool | None = None
    native: bool | None = None
    content: str = "light"
    index_scale: int | None = None
    prim_budget: int = PRIM_BUDGET


def target_format(fmt: str) -> tuple[str, int]:
    """moderngl dtype and bytes per channel used for a declared colour format."""
    f = fmt.upper()
    if "FLOAT" in f:
        return ("f4", 4) if "32" in f else ("f2", 2)
    return "f1", 1


def element_words(stride: int) -> int:
    """32-bit words an input-layout attribute fetches from each element of a slot bound with
    ``stride`` bytes: ``min(4, stride // 4)`` (at least 1), so a fetch never reaches the next
    element; 4 for stride 0 (every vertex reads the same element, whose size is not declared).
    GL fills the components not fetched with 0, 0, 0, 1 (``uvec4(x, y, z, 1)`` for 12 bytes)."""
    if stride <= 0:
        return 4
    return max(1, min(4, stride // 4))


@functools.lru_cache(maxsize=256)
def _layout_slot0_instance(layout: str) -> bool:
    """Input layouts whose name has a token starting with ``inst`` read slot 0 per instance."""
    return any(t.startswith("inst") for t in _STREAM_RE.split(layout.lower()))


_PROGRAMS: dict[tuple[tuple[str, str], ...], tuple[Any, _Prog]] = {}
"""Linked programs by shader sources, kept for the life of the context (compiling is the slow part
of preparing a frame on llvmpipe, and an original and its rewrite share their pipelines)."""


@on_release
def clear_program_cache() -> None:
    """Release every cached program (before releasing the context)."""
    for _, pr in _PROGRAMS.values():
        pr.mprog.release()
    _PROGRAMS.clear()


@dataclass
class _Prog:
    glo: int
    locs: dict[str, int]
    mprog: Any


_P_OF_MODE = {GL.TRIANGLES: 3, GL.TRIANGLE_STRIP: 3}


def indexed_indices(s: Stream) -> int:
    """Indices (times instances) that the indexed draws of ``s`` read from index buffers without
    data (those the replay synthesizes, which light content squeezes): direct draws,
    ``DrawIndexedX`` and the records of indexed indirect calls whose args buffer has data
    (GPU-written records are not known before the frame runs and are not counted)."""
    decls = s.decls
    op = s.op
    synth = np.array([isinstance(d, Buffer) and d.data is None for d in decls.items] + [False])
    ib_rows = np.flatnonzero(op == Cmd.IASetIndexBuffer)
    ib_of = s.args[ib_rows, Cmd.IASetIndexBuffer.col("buffer")].astype(np.int64)

    def bound(rows: np.ndarray) -> np.ndarray:
        """Whether the index buffer bound at each of ``rows`` is synthesized."""
        k = np.searchsorted(ib_rows, rows) - 1
        out = np.zeros(rows.size, bool)
        ok = k >= 0
        out[ok] = synth[ib_of[k[ok]]]
        return out

    total = 0.0
    rows = np.flatnonzero(op == Cmd.DrawIndexedInstanced)
    if rows.size:
        m = bound(rows)
        counts = s.args[rows[m], COL_DRAW_COUNT].astype(np.float64)
        total += float((counts * s.args[rows[m], COL_INSTANCES]).sum())
    rows = np.flatnonzero(op == Cmd.DrawIndexedX)
    if rows.size:
        m = synth[s.args[rows, Cmd.DrawIndexedX.col("buffer")].astype(np.int64)]
        total += float(s.args[rows[m], Cmd.DrawIndexedX.col("index_count")].astype(np.float64).sum())
    for name, ci, bi, oi, si in (("DrawIndexedInstancedIndirect", None, 0, 1, None),
                                 ("MultiDrawIndexedInstancedIndirect", 0, 1, 2, 3),
                                 ("MultiDrawIndexedInstancedIndirectAuto", 2, 3, 4, 5)):
        rows = np.flatnonzero(op == BY_NAME[name].code)
        for r, ok in zip(rows.tolist(), bound(rows).tolist()):
            a = s.args[r]
            d = decls[int(a[bi])]
            if not ok or not isinstance(d, Buffer) or d.data is None:
                continue
            n = 1 if ci is None else int(a[ci])
            stride = (int(a[si]) if si is not None else 0) or 20
            idx = int(a[oi]) // 4 + (np.arange(min(n, 1 << 20)) * stride) // 4
            idx = idx[idx + 1 < d.data.size]
            total += float((d.data[idx].astype(np.float64) * d.data[idx + 1]).sum())
    return int(total)


def index_scale_for(s: Stream, budget: int = PRIM_BUDGET) -> int:
    """The light content's squeeze factor for ``s``: the smallest power of two ``k`` with
    ``indexed_indices(s) / 3 / k <= budget`` (1 for streams that are light already).

    >>> from drawopt.ir.stream import StreamBuilder
    >>> b = StreamBuilder(); b.pipeline("p", vs="v"); b.SetPipelineState("p")
    >>> b.buffer("ib", 1 << 24); b.IASetIndexBuffer("ib", "R32_UINT", 0)
    >>> for _ in range(10): b.DrawIndexedInstanced(3_000_000, 1, 0, 0, 0)
    >>> index_scale_for(b.build(), budget=1 << 20)
    16
    """
    prims = indexed_indices(s) / 3
    k = 1
    while prims / k > max(1, budget):
        k *= 2
    return k


LLVMPIPE_MULTIDRAW_WORKAROUND = True
"""On llvmpipe, default to the uniform path (no ARB_shader_draw_parameters): indirect and multi-draw
calls are issued record by record (docs/replay.md, "llvmpipe"). ``ReplayOptions(draw_parameters=True)``
still forces the extension."""


class Frame:
    """A stream prepared for replay on the current GL context."""

    def __init__(self, stream: Stream, ctx: Any, gl: GLFunctions, info: GLInfo, opts: ReplayOptions):
        self.s, self.ctx, self.gl, self.info, self.opts = stream, ctx, gl, info, opts
        self.W, self.H = opts.size
        self.draw_params = info.draw_parameters if opts.draw_parameters is None else \
            (opts.draw_parameters and info.draw_parameters)
        if opts.draw_parameters is None and LLVMPIPE_MULTIDRAW_WORKAROUND and "llvmpipe" in info.renderer:
            # Mesa's llvmpipe (22.3 here) renders some glMultiDrawElementsIndirect calls with draw
            # parameters differently from the same records drawn one by one (examples/gpu-driven.dstream:
            # 15+ records of `occargs` in one call change 3 pixels); the per-record path is exact
            self.draw_params = False
        self.warnings: Counter[str] = Counter()
        self.roles = content.analyze_roles(stream)
        if opts.content not in CONTENTS:
            raise ValueError(f"content must be one of {CONTENTS}, got {opts.content!r}")
        self.index_scale = 1 if opts.content == "full" else \
            int(opts.index_scale or index_scale_for(stream, opts.prim_budget))
        self._remapped: dict[tuple[int, int], tuple[int, int]] = {}
        self._lift_cache: dict[str, list[tuple[int, int]]] = {}
        self._dirty: set[int] = set()
        self.tb = TapeBuilder()
        self._objs: list[Any] = []  # moderngl objects to release
        self.buffers: dict[int, Any] = {}
        self._glo: dict[int, int] = {}
        self.initial: dict[int, np.ndarray] = {}
        self.written: set[int] = set()
        self.dispatch_writes: Counter[int] = Counter()
        self.targets: dict[str, Any] = {}  # name -> moderngl texture
        self.target_decl: dict[str, Any] = {}
        self.fbos: dict[tuple[str, ...], Any] = {}
        self.progs: dict[ProgramKey, _Prog] = {}
        self.staging_chunks: list[np.ndarray] = []
        self.staging_words = 0
        self.aliases: dict[tuple[int, int], Any] = {}
        self.state_hash_cache: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {}
        self.gpu_written_ever = self._gpu_written_buffers()
        self.counts = Counter()
        self._setup_static()
        self._walk()
        for b in self._dirty:  # args records squeezed during the walk
            self.buffers[b].write(self.initial[b])
        self.tape = self.tb.array()
        self.origins = self.tb.origins()
        self._finish_staging()

    # ---------------------------------------------------------------- resources
    def _setup_static(self) -> None:
        ctx = self.ctx
        self.pool = ctx.buffer(content.pool_data(self.opts.pool_size))
        self.zero_buf = ctx.buffer(reserve=1 << 16)
        self._objs += [self.pool, self.zero_buf]
        cached = _PROGRAMS.get((("compute", COPY_CS),))
        if cached is None or cached[0] is not ctx:
            cs = ctx.compute_shader(COPY_CS)
            cached = (ctx, _Prog(cs.glo, {}, cs))
            _PROGRAMS[(("compute", COPY_CS),)] = cached
        self.copy_prog = cached[1].mprog
        self.copy_locs = {n: self.gl.glGetUniformLocation(self.copy_prog.glo, n.encode())
                          for n in ("u_src_off", "u_dst_off", "u_n")}
        vao = (ctypes.c_uint * 1)()
        self.gl.glGenVertexArrays(1, vao)
        self.vao = int(vao[0])
        self.gl.glBindVertexArray(self.vao)
        for a in (0, 1):
            self.gl.glVertexAttribIFormat(a, 4, GL.UNSIGNED_INT, 0)
            self.gl.glVertexAttribBinding(a, a)
        self.gl.glBindVertexArray(0)
        depth_funcs = {p.depth.split(",")[0] for p in self.s.decls.of_kind("pipeline") if p.depth_test}
        self.clear_depth = 0.0 if depth_funcs and depth_funcs <= {"greater", "gequal"} else 1.0
        # a draw with no OMSetRenderTargets (a bundle) draws into the caller's targets: a colour
        # target and, when a pipeline depth-tests, a depth target (the verifier's "inherited depth
        # target", which the opaque reorder policy lets draws commute on); without it GL skips the test
        self.inherited_targets = (DEFAULT_TARGET, DEFAULT_DEPTH) if depth_funcs else (DEFAULT_TARGET,)
        cells_x = max(1, self.W // max(1, self.opts.cell_px))
        cells_y = max(1, self.H // max(1, self.opts.cell_px))
        self.grid = (cells_x, cells_y, cells_x * cells_y, self.opts.pool_size - 1)
        self.cell = (2.0 / cells_x, 2.0 / cells_y)
        # GL state emitted so far (None = unknown)
        self.g: dict[str, Any] = {}
        self.g_vb: dict[int, tuple[int, int, int]] = {}
        self.g_attr: dict[int, bool] = {}
        self.g_div: dict[int, int] = {}
        self.g_fmt: dict[int, int] = {}  # components fetched per attribute (unknown at frame start)
        self.g_ssbo: dict[int, int] = {}
        self.prog_uniforms: dict[int, dict[int, int]] = {}
        tb = self.tb
        tb.emit(Op.BIND_VERTEX_ARRAY, self.vao)
        tb.emit(Op.DISABLE, GL.CULL_FACE)
        tb.emit(Op.DEPTH_MASK, 1)
        self._ssbo(0, self.pool.glo)

    def _gpu_written_buffers(self) -> set[int]:
        out: set[int] = set()
        decls = self.s.decls
        for p in decls.of_kind("pipeline"):
            if p.is_compute:
                for w in p.writes:
                    try:
                        r = decls[decls.resource_of(w)]
                    except (KeyError, ValueError):
                        continue
                    if isinstance(r, Buffer):
                        out.add(decls.index[r.name])
        sp = BY_CODE[72]
        for i in np.flatnonzero(self.s.op == sp.code):
            out.add(int(self.s.args[i, sp.col("dst")]))
        return out

    def _buffer(self, b: int) -> Any:
        buf = self.buffers.get(b)
        if buf is not None:
            return buf
        d = self.s.decls[b]
        if d.size > self.opts.max_buffer_bytes:
            raise InputError(f"buffer '{d.name}' ({d.size} bytes) is larger than the replay limit "
                             f"({self.opts.max_buffer_bytes} bytes)")
        nwords = (d.size + 3) // 4
        if d.data is not None:
            words = np.zeros(nwords, np.uint32)
            words[: d.data.size] = d.data
        elif b in self.gpu_written_ever and b not in self.roles.index_format:
            words = np.zeros(nwords, np.uint32)
        else:
            words = content.synthesize_cached(d.size, b, d.name, self.roles)
        # 16 zero bytes past the end: an attribute fetch (at most 4 words) of the last element stays inside
        buf = self.ctx.buffer(reserve=nwords * 4 + 16)
        buf.write(words)
        buf.write(bytes(16), offset=nwords * 4)
        self._objs.append(buf)
        self.buffers[b] = buf
        self._glo[b] = buf.glo
        self.initial[b] = words
        return buf

    def _target(self, name: str) -> Any:
        t = self.targets.get(name)
        if t is not None:
            return t
        d: Any
        if name == DEFAULT_TARGET:
            d = Target(name="default", width=self.W, height=self.H, format="R8G8B8A8_UNORM")
        elif name == DEFAULT_DEPTH:
            d = Depth(name="default_depth", width=self.W, height=self.H, format="D32_FLOAT")
        else:
            d = self.s.decls[name]
        if isinstance(d, Depth):
            t = self.ctx.depth_texture((self.W, self.H))
        else:
            dtype, _ = target_format(d.format)
            t = self.ctx.texture((self.W, self.H), 4, dtype=dtype)
        self._objs.append(t)
        self.targets[name] = t
        self.target_decl[name] = d
        return t

    def _fbo(self, names: tuple[str, ...]) -> Any:
        fbo = self.fbos.get(names)
        if fbo is None:
            texs = [(self._target(n), isinstance(self.target_decl[n], Depth)) for n in names]
            colours = [t for t, is_depth in texs if not is_depth]
            depth = [t for t, is_depth in texs if is_depth]
            fbo = self.ctx.framebuffer(color_attachments=colours, depth_attachment=depth[0] if depth else None)
            self._objs.append(fbo)
            self.fbos[names] = fbo
        return fbo

    # ---------------------------------------------------------------- programs
    def _program(self, p: Pipeline, mode: str, gl_mode: int, patch: int) -> _Prog | None:
        prim = prim_class(gl_mode)
        tess = p.tessellation
        if tess and prim != "patches":
            self.warnings["tessellation pipeline drawn without a PATCHLIST topology (drawn untessellated)"] += 1
            tess = False
        if prim == "patches" and not tess:
            self.warnings["PATCHLIST topology with a pipeline without hs/ds (draw skipped)"] += 1
            return None
        key = ProgramKey(p.name, mode, prim, patch if tess else 0)
        pr = self.progs.get(key)
        if pr is not None:
            return pr
        lifts = self._lifts(p)
        gs = p.gs is not None
        fs_in = "f_color"
        after_tess = ("g_in" if gs else fs_in)
        vs_out = "t_in" if tess else ("g_in" if gs else fs_in)
        vs = vertex_shader(p, key, content.crc("pipeline", p.name), len(lifts),
                           _layout_slot0_instance(p.layout), self.draw_params, vs_out)
        kw: dict[str, str] = {"vertex_shader": vs, "fragment_shader": fragment_shader(fs_in)}
        if tess:
            tcs, tes = tess_shaders(patch, vs_out, after_tess)
            kw["tess_control_shader"], kw["tess_evaluation_shader"] = tcs, tes
        if gs:
            gs_prim = "triangles" if tess else prim
            kw["geometry_shader"] = geometry_shader(gs_prim, "g_in", fs_in, p.gs_instances)
        src = tuple(sorted(kw.items()))
        cached = _PROGRAMS.get(src)
        if cached is None or cached[0] is not self.ctx:
            try:
                mp = self.ctx.program(**kw)
            except Exception as e:  # moderngl raises a plain Error with the compiler log
                raise RuntimeError(f"replay: shaders of pipeline '{p.name}' failed to build: {e}") from None
            names = ["u_state", "u_indexed", "u_array", "u_pd_off", "u_grid", "u_cell", "u_decl",
                     "u_base_vertex", "u_base_instance", "u_draw_id"] + [f"u_lift[{j}]" for j in range(len(lifts))]
            locs = {n: self.gl.glGetUniformLocation(mp.glo, n.encode()) for n in names}
            cached = (self.ctx, _Prog(mp.glo, locs, mp))
            _PROGRAMS[src] = cached
        pr = cached[1]
        self.progs[key] = pr
        self.prog_uniforms[pr.glo] = {}
        # the grid depends on the replay size: set it in the tape (programs are shared between frames)
        self._use(pr.glo)
        gx, gy, gn, gm = self.grid
        self.tb.emit(Op.UNIFORM4UI, pr.locs["u_grid"], gx, gy, gn, gm)
        self._uniform_f2(pr, "u_cell", *self.cell)
        return pr

    def _lifts(self, p: Pipeline) -> list[tuple[int, int]]:
        """The union of the lift items of ``p``'s per-draw clauses (:func:`shaders.lift_layout`),
        parsed once per pipeline (it is asked for at every draw's state hash)."""
        got = self._lift_cache.get(p.name)
        if got is None:
            try:
                got = lift_layout(p)[0]
            except ValueError as e:
                raise InputError(f"pipeline '{p.name}': contract: {e}") from None
            self._lift_cache[p.name] = got
        return got

    # ---------------------------------------------------------------- GL state emission
    def _set(self, key: str, value: Any, op: int, *args: int) -> None:
        if self.g.get(key) != value:
            self.g[key] = value
            self.tb.emit(op, *args)

    def _ssbo(self, index: int, glo: int) -> None:
        if self.g_ssbo.get(index) != glo:
            self.g_ssbo[index] = glo
            self.tb.emit(Op.BIND_BUFFER_BASE, GL.SHADER_STORAGE_BUFFER, index, glo)

    def _use(self, glo: int) -> None:
        self._set("program", glo, Op.USE_PROGRAM, glo)

    def _uniform(self, pr: _Prog, name: str, value: int, signed: bool = False) -> None:
        loc = pr.locs.get(name, -1)
        if loc < 0:
            return
        cache = self.prog_uniforms[pr.glo]
        value &= 0xFFFFFFFF
        if cache.get(loc) != value:
            cache[loc] = value
            self.tb.emit(Op.UNIFORM1I if signed else Op.UNIFORM1UI, loc, value)

    def _uniform_f2(self, pr: _Prog, name: str, x: float, y: float) -> None:
        loc = pr.locs.get(name, -1)
        if loc < 0:
            return
        cache = self.prog_uniforms[pr.glo]
        value = (f32_bits(x), f32_bits(y))
        if cache.get(loc) != value:
            cache[loc] = value
            self.tb.emit(Op.UNIFORM2F, loc, *value)

    def _enable(self, cap: int, on: bool) -> None:
        self._set(f"cap{cap}", on, Op.ENABLE if on else Op.DISABLE, cap)

    # ---------------------------------------------------------------- the walk
    def _walk(self) -> None:
        s = self.s
        decls = s.decls
        ops = s.op.tolist()
        args = s.args.tolist()
        self.pso: int | None = None
        self.gfx_rs: int | None = None
        self.cmp_rs: int | None = None
        self.gfx_root: dict[int, Any] = {}
        self.cmp_root: dict[int, Any] = {}
        self.root_ver = 0
        self.ib: tuple[int, int, int] | None = None
        self.vb: dict[int, tuple[int, int, int]] = {}
        self.topology = 0
        self.rt_names: tuple[str, ...] = ()
        self.viewport: tuple[float, ...] | None = None
        self.scissor: tuple[int, ...] | None = None
        self.epoch = 0  # bumped by every command that can change a draw's GL setup
        self._last_setup: tuple[Any, ...] | None = None
        handlers = self._handlers()
        table = {sp_code: (handlers.get(BY_CODE[sp_code].name), BY_CODE[sp_code].cat == Cat.STATE
                           and BY_CODE[sp_code].name not in _NO_EPOCH, BY_CODE[sp_code].name)
                 for sp_code in set(ops)}
        tb = self.tb
        for i, code in enumerate(ops):
            tb.origin = i
            h, bumps, name = table[code]
            if bumps:
                self.epoch += 1
            if h is None:
                self.warnings[f"{name} ignored"] += 1
                continue
            h(i, args[i])
        tb.origin = -1
        _ = decls

    def _handlers(self) -> dict[str, Any]:
        return {
            "SetPipelineState": self._c_pso,
            "SetGraphicsRootSignature": lambda i, a: self._c_rootsig(True, a[0]),
            "SetComputeRootSignature": lambda i, a: self._c_rootsig(False, a[0]),
            "SetDescriptorHeaps": lambda i, a: None,
            "SetGraphicsRootDescriptorTable": lambda i, a: self._c_root(True, a[0], ("table", a[1])),
            "SetComputeRootDescriptorTable": lambda i, a: self._c_root(False, a[0], ("table", a[1])),
            "SetGraphicsRoot32BitConstants": lambda i, a: self._c_consts(True, i, a),
            "SetComputeRoot32BitConstants": lambda i, a: self._c_consts(False, i, a),
            "SetGraphicsRootConstantBufferView": lambda i, a: self._c_root(True, a[0], ("cbv", a[1], a[2])),
            "SetGraphicsRootShaderResourceView": lambda i, a: self._c_root(True, a[0], ("srv", a[1], a[2])),
            "IASetIndexBuffer": self._c_ib,
            "IASetVertexBuffers": self._c_vb,
            "IASetPrimitiveTopology": self._c_topo,
            "OMSetRenderTargets": self._c_rts,
            "RSSetViewports": self._c_viewport,
            "RSSetScissorRects": self._c_scissor,
            "OMSetBlendFactor": lambda i, a: None,
            "OMSetStencilRef": lambda i, a: None,
            "GSSetParameters": lambda i, a: None,
            "CSEnableAutomaticGpuFlush": lambda i, a: None,
            "DrawInstanced": self._c_draw_instanced,
            "DrawIndexedInstanced": self._c_draw_indexed,
            "DrawIndexedX": self._c_draw_x,
            "DrawInstancedIndirect": lambda i, a: self._c_indirect(False, 1, a[0], a[1], 0, None),
            "DrawIndexedInstancedIndirect": lambda i, a: self._c_indirect(True, 1, a[0], a[1], 0, None),
            "MultiDrawInstancedIndirect": lambda i, a: self._c_indirect(False, a[0], a[1], a[2], a[3], None),
            "MultiDrawIndexedInstancedIndirect": lambda i, a: self._c_indirect(True, a[0], a[1], a[2], a[3], None),
            "MultiDrawInstancedIndirectAuto":
                lambda i, a: self._c_indirect(False, a[2], a[3], a[4], a[5], (a[0], a[1])),
            "MultiDrawIndexedInstancedIndirectAuto":
                lambda i, a: self._c_indirect(True, a[2], a[3], a[4], a[5], (a[0], a[1])),
            "Dispatch": self._c_dispatch,
            "GpuSendPipelinedEvent": lambda i, a: self.tb.emit(Op.MEMORY_BARRIER, PARTIAL_FLUSH_BITS),
            "FlushGpuCacheRange": lambda i, a: self.tb.emit(Op.MEMORY_BARRIER, L2_FLUSH_BITS),
            "FlushGpuCachesBottomOfPipe": lambda i, a: self.tb.emit(Op.MEMORY_BARRIER, L2_FLUSH_BITS),
            "ResourceBarrier": self._c_barrier,
            "CopyBufferRegion": self._c_copy,
            "Opaque": self._c_opaque,
        }

    # state commands
    def _c_pso(self, i: int, a: list[int]) -> None:
        self.pso = a[0]

    def _c_rootsig(self, gfx: bool, rs: int) -> None:
        if gfx:
            if self.gfx_rs != rs:
                self.gfx_root = {}
            self.gfx_rs = rs
        else:
            if self.cmp_rs != rs:
                self.cmp_root = {}
            self.cmp_rs = rs
        self.root_ver += 1

    def _c_root(self, gfx: bool, index: int, value: tuple[Any, ...]) -> None:
        (self.gfx_root if gfx else self.cmp_root)[index] = value
        self.root_ver += 1

    def _c_consts(self, gfx: bool, i: int, a: list[int]) -> None:
        root = self.gfx_root if gfx else self.cmp_root
        index, count, dest = a[0], a[1], a[2]
        cur = root.get(index)
        if not (isinstance(cur, tuple) and cur[0] == "const"):
            cur = ("const", np.zeros(64, np.uint32))
        words = cur[1].copy()
        words[dest:dest + count] = self.s.var(i)[:count]
        root[index] = ("const", words)
        self.root_ver += 1

    def _c_ib(self, i: int, a: list[int]) -> None:
        self.ib = (a[0], a[1], a[2])

    def _c_vb(self, i: int, a: list[int]) -> None:
        self.vb[a[0]] = (a[1], a[2], a[3])

    def _c_topo(self, i: int, a: list[int]) -> None:
        self.topology = a[0]

    def _c_rts(self, i: int, a: list[int]) -> None:
        self.rt_names = tuple(self.s.decls[int(v)].name for v in self.s.var(i))

    def _c_viewport(self, i: int, a: list[int]) -> None:
        from drawopt.ir.codec import bits_f32
        self.viewport = tuple(bits_f32(v) for v in a[:6])

    def _c_scissor(self, i: int, a: list[int]) -> None:
        self.scissor = tuple(int(np.int64(v)) for v in a[:4])

    def _c_opaque(self, i: int, a: list[int]) -> None:
        self.warnings["Opaque commands ignored"] += 1

    def _c_barrier(self, i: int, a: list[int]) -> None:
        from drawopt.ir.ops import BARRIER_STATES
        self.tb.emit(Op.MEMORY_BARRIER, _BARRIER_AFTER[BARRIER_STATES[a[2]]])

    def _c_copy(self, i: int, a: list[int]) -> None:
        dst, dst_off, src, src_off, size = a[:5]
        if size == 0:
            return
        self.tb.emit(Op.COPY_BUFFER, self._buffer(src).glo, self._buffer(dst).glo, src_off, dst_off, size)
        self.written.add(dst)

    # ---------------------------------------------------------------- draws
    def _graphics_pipeline(self) -> Pipeline | None:
        if self.pso is None:
            self.warnings["draw without a pipeline (skipped)"] += 1
            return None
        p = self.s.decls[self.pso]
        if p.is_compute:
            self.warnings["draw with a compute pipeline bound (skipped)"] += 1
            return None
        return p

    def _mode(self, p: Pipeline) -> tuple[int, int]:
        topo = TOPOLOGIES[self.topology]
        if topo == "UNDEFINED":
            return _PIPE_TOPO[p.topology]
        return _TOPO_MODE[topo]

    def _state_hash(self, p: Pipeline) -> tuple[int, tuple[int, ...]]:
        key = (self.pso, self.root_ver)
        got = self.state_hash_cache.get(key)
        if got is not None:
            return got
        lifts = self._lifts(p)
        excluded = set(p.contract.perdraw_params)
        rs = self.s.decls[p.root] if p.root is not None else None
        nparams = len(rs.params) if rs is not None else 0
        readable = p.read_params(nparams)
        lifted_words: dict[int, set[int]] = {}
        for param, word in lifts:
            lifted_words.setdefault(param, set()).add(word)
        # declarations by name, never by index: a rewrite (or a reordered declaration list) that
        # keeps what the shaders read keeps the hash
        names = self.s.decls
        parts: list[Any] = [names[self.gfx_rs].name if self.gfx_rs is not None else None]
        for param in readable:
            if param in excluded:
                continue
            v = self.gfx_root.get(param)
            lw = lifted_words.get(param, set())
            if v is None:
                parts.append((param, None))
            elif v[0] == "const":
                w = v[1].copy()
                for k in lw:
                    if k < 64:
                        w[k] = 0
                parts.append((param, w.tobytes()))
            elif v[0] == "table":   # a lifted table keeps its heap
                heap = names[v[1] >> 32].name
                parts.append((param, "table", heap) if 0 in lw else (param, "table", heap, v[1] & 0xFFFFFFFF))
            else:
                off = v[2]
                parts.append((param, v[0], names[v[1]].name, None if 0 in lw else off & 0xFFFFFFFF,
                              None if 1 in lw else off >> 32))
        h = content.crc(*parts)
        vals = tuple(self._lift_value(param, word) for param, word in lifts)
        self.state_hash_cache[key] = (h, vals)
        if len(self.state_hash_cache) > 4096:
            self.state_hash_cache.clear()
        return h, vals

    def _root_arg_key(self, v: tuple[Any, ...]) -> tuple[Any, ...]:
        """A root argument with declarations by name (hashable, independent of declaration order)."""
        if v[0] == "const":
            return ("const", v[1].tobytes())
        decls = self.s.decls
        if v[0] == "table":
            return ("table", decls[v[1] >> 32].name, v[1] & 0xFFFFFFFF)
        return (v[0], decls[v[1]].name, v[2])

    def _lift_value(self, param: int, word: int) -> int:
        v = self.gfx_root.get(param)
        if v is None:
            return 0
        if v[0] == "const":
            return int(v[1][word]) if word < 64 else 0
        if v[0] == "table":
            return (v[1] & 0xFFFFFFFF) if word == 0 else 0
        return (v[2] & 0xFFFFFFFF) if word == 0 else (v[2] >> 32) & 0xFFFFFFFF

    def _perdraw_binding(self, param: int) -> tuple[int, int] | None:
        """(buffer decl index, byte offset) of the array bound at graphics root parameter ``param``."""
        v = self.gfx_root.get(param)
        if v is None:
            return None
        if v[0] in ("cbv", "srv", "uav"):
            return v[1], v[2]
        if v[0] == "table":
            decls = self.s.decls
            heap = decls[v[1] >> 32]
            name = f"{heap.name}[{v[1] & 0xFFFFFFFF}]"
            if name in decls:
                view = decls[name]
                if isinstance(view, View) and view.resource is not None:
                    r = decls[view.resource]
                    if isinstance(r, Buffer):
                        return decls.index[r.name], 0
        return None

    def _begin_draw(self, mode_kind: str, indexed: bool) -> tuple[Pipeline, _Prog, int, int] | None:
        """Common state for a draw; returns (pipeline, program, gl mode, patch vertices)."""
        key = (self.epoch, mode_kind, indexed)
        last = self._last_setup
        if last is not None and last[0] == key:
            if not last[1][0].vertex_pulling:
                self._vertex_input(last[1][0])
            self.counts["draw_calls"] += 1
            return last[1]
        got = self._setup_draw(mode_kind, indexed)
        self._last_setup = (key, got) if got is not None else None
        return got

    def _setup_draw(self, mode_kind: str, indexed: bool) -> tuple[Pipeline, _Prog, int, int] | None:
        p = self._graphics_pipeline()
        if p is None:
            return None
        gl_mode, patch = self._mode(p)
        mode = "x" if mode_kind == "x" else "direct"
        pr = self._program(p, mode, gl_mode, patch)
        if pr is None:
            return None
        self._use(pr.glo)
        # targets, viewport, scissor
        names = self.rt_names or self.inherited_targets
        fbo = self._fbo(names)
        self._set("fbo", fbo.glo, Op.BIND_FRAMEBUFFER, GL.FRAMEBUFFER, fbo.glo)
        first = self.target_decl[names[0]] if names[0] in self.target_decl else self.s.decls[names[0]]
        sx, sy = self.W / first.width, self.H / first.height
        self._uniform_f2(pr, "u_decl", float(first.width), float(first.height))
        if self.viewport is not None:
            x, y, w, h, zn, zf = self.viewport
            vp = (round(x * sx), self.H - round((y + h) * sy), round(w * sx), round(h * sy))
            dr = (f32_bits(zn), f32_bits(zf))
        else:
            vp, dr = (0, 0, self.W, self.H), (f32_bits(0.0), f32_bits(1.0))
        self._set("viewport", vp, Op.VIEWPORT, *vp)
        self._set("depth_range", dr, Op.DEPTH_RANGE, *dr)
        if self.scissor is not None:
            left, top, right, bottom = self.scissor
            sc = (round(left * sx), self.H - round(bottom * sy), max(0, round((right - left) * sx)),
                  max(0, round((bottom - top) * sy)))
            self._enable(GL.SCISSOR_TEST, True)
            self._set("scissor", sc, Op.SCISSOR, *sc)
        else:
            self._enable(GL.SCISSOR_TEST, False)
        # blend and depth
        bl = _BLEND[p.blend]
        self._enable(GL.BLEND, bool(bl[0]))
        if bl[0]:
            self._set("blend_func", bl[1:5], Op.BLEND_FUNC, *bl[1:5])
            self._set("blend_eq", bl[5], Op.BLEND_EQUATION, bl[5])
        self._enable(GL.DEPTH_TEST, p.depth_test)
        if p.depth_test:
            self._set("depth_func", p.depth, Op.DEPTH_FUNC, _DEPTH_FUNC[p.depth.split(",")[0]])
            self._set("depth_mask", p.depth_write, Op.DEPTH_MASK, int(p.depth_write))
        if gl_mode == GL.PATCHES:
            self._set("patch", patch, Op.PATCH_PARAMETER, GL.PATCH_VERTICES, patch)
        if not p.vertex_pulling:
            self._vertex_input(p)
        self._draw_uniforms(p, pr, mode, indexed)
        self.counts["draw_calls"] += 1
        return p, pr, gl_mode, patch

    def _vertex_input(self, p: Pipeline) -> None:
        """Vertex buffer bindings, enabled attributes and divisors of an input-layout pipeline."""
        slot0_inst = _layout_slot0_instance(p.layout)
        # with an array clause the pipeline's only instance-rate input is the per-draw id stream,
        # i.e. the record index (docs/architecture.md): instance-rate slots are not fetched
        idstream = p.contract.array is not None
        for slot in (0, 1):
            b = self.vb.get(slot)
            on = b is not None and not (idstream and (slot == 1 or slot0_inst))
            if self.g_attr.get(slot) != on:
                self.g_attr[slot] = on
                self.tb.emit(Op.ENABLE_ATTRIB if on else Op.DISABLE_ATTRIB, slot)
            if on:
                assert b is not None
                glo = self._glo.get(b[0])
                if glo is None:
                    glo = self._buffer(b[0]).glo
                binding = (glo, b[1], b[2])
                if self.g_vb.get(slot) != binding:
                    self.g_vb[slot] = binding
                    self.tb.emit(Op.BIND_VERTEX_BUFFER, slot, *binding)
                comps = element_words(b[2])
                if self.g_fmt.get(slot) != comps:
                    self.g_fmt[slot] = comps
                    self.tb.emit(Op.VERTEX_ATTRIB_I_FORMAT, slot, comps, GL.UNSIGNED_INT, 0)
                div = 1 if (slot == 1 or slot0_inst) else 0
                if self.g_div.get(slot) != div:
                    self.g_div[slot] = div
                    self.tb.emit(Op.BINDING_DIVISOR, slot, div)

    def _draw_uniforms(self, p: Pipeline, pr: _Prog, mode: str, indexed: bool) -> None:
        h, lifted = self._state_hash(p)
        self._uniform(pr, "u_state", h)
        self._uniform(pr, "u_indexed", int(indexed))
        ac = p.contract.array
        array_param = ac.perdraw if ac is not None else None
        use_array = 0
        if mode == "x":
            x = p.contract.x
            if x is not None and x.perdraw is not None:
                self._bind_perdraw(pr, x.perdraw)
            elif x is not None:
                self.warnings["x contract without perdraw= (records read as zeros)"] += 1
                self._bind_zero(pr)
        elif array_param is not None and self._perdraw_binding(array_param) is not None:
            use_array = 1
            self._bind_perdraw(pr, array_param)
        self._uniform(pr, "u_array", use_array)
        # the items the clause in use does not lift come from the root arguments in every form
        for j, v in enumerate(lifted):
            self._uniform(pr, f"u_lift[{j}]", v)

    def _bind_perdraw(self, pr: _Prog, param: int) -> None:
        bnd = self._perdraw_binding(param)
        if bnd is None:
            self.warnings["per-draw array parameter not bound (records read as zeros)"] += 1
            self._bind_zero(pr)
            return
        b, off = bnd
        self._ssbo(1, self._buffer(b).glo)
        self._uniform(pr, "u_pd_off", off // 4)

    def _bind_zero(self, pr: _Prog) -> None:
        self._ssbo(1, self.zero_buf.glo)
        self._uniform(pr, "u_pd_off", 0)

    def _fallback_params(self, pr: _Prog, base_vertex: int, base_instance: int, draw_id: int = 0) -> None:
        if not self.draw_params:
            self._uniform(pr, "u_base_vertex", base_vertex, signed=True)
            self._uniform(pr, "u_base_instance", base_instance, signed=True)
            self._uniform(pr, "u_draw_id", draw_id, signed=True)

    def _squeeze_prim(self, buf: int, mode: int, patch: int) -> int | None:
        """Vertices per primitive where light content squeezes draws of GL ``mode`` from ``buf``
        (triangles, strips and patches of up to 4 points into a buffer the replay synthesizes),
        else None."""
        if self.index_scale == 1 or self.s.decls[buf].data is not None:
            return None
        return patch if mode == GL.PATCHES and 0 < patch <= 4 else _P_OF_MODE.get(mode)

    def _squeeze(self, buf: int, isize: int, byte_off: int, count: int, mode: int, patch: int
                 ) -> tuple[int, int] | None:
        """Light content: (byte offset, count) of the squeezed index range of a draw reading
        ``count`` indices at ``byte_off`` of ``buf``, or None where it is drawn as given.

        Index positions map through ``p -> P * (p // (P * k))`` (P the primitive's vertices,
        k :attr:`index_scale`): a fixed monotone map, so ranges that concatenate in one
        stream concatenate in any rewrite of it (merged draws, multi-draw records). A range
        that maps to nothing draws one degenerate primitive from the zero bytes past the
        buffer's end, so every draw stays a real draw for the driver."""
        k = self.index_scale
        P = self._squeeze_prim(buf, mode, patch)
        if P is None or byte_off % isize:
            return None
        d = self.s.decls[buf]
        p0 = byte_off // isize
        a = P * (p0 // (P * k))
        b = P * ((p0 + count) // (P * k))
        if b > a:
            self.counts["squeezed_draws"] += 1
            return a * isize, b - a
        self.counts["null_draws"] += 1
        return ((d.size + 3) // 4) * 4, P

    def _c_draw_instanced(self, i: int, a: list[int]) -> None:
        vc, ic, sv, si = a[:4]
        if vc == 0 or ic == 0:
            return
        got = self._begin_draw("direct", False)
        if got is None:
            return
        _, pr, mode, _ = got
        if sv >= 1 << 31 or vc >= 1 << 31 or ic >= 1 << 31:
            self.warnings["draw arguments beyond GL's signed range (skipped)"] += 1
            return
        self._fallback_params(pr, sv, si)
        self.tb.emit(Op.DRAW_ARRAYS, mode, sv, vc, ic, si)

    def _c_draw_indexed(self, i: int, a: list[int]) -> None:
        count, ic, start, base, si = a[:5]
        if count == 0 or ic == 0:
            return
        if self.ib is None:
            self.warnings["indexed draw with no (or an undefined) index buffer (skipped)"] += 1
            return
        got = self._begin_draw("direct", True)
        if got is None:
            return
        _, pr, mode, patch = got
        buf, fmt, off = self.ib
        isize = 2 if fmt == 0 else 4
        self._set("element", buf, Op.BIND_BUFFER, GL.ELEMENT_ARRAY_BUFFER, self._buffer(buf).glo)
        self._fallback_params(pr, base, si)
        byte_off = off + start * isize
        sq = self._squeeze(buf, isize, byte_off, count, mode, patch)
        if sq is not None:
            byte_off, count = sq
        self.tb.emit(Op.DRAW_ELEMENTS, mode, count, GL.UNSIGNED_SHORT if fmt == 0 else GL.UNSIGNED_INT,
                     byte_off, ic, base & 0xFFFFFFFF, si)

    def _c_draw_x(self, i: int, a: list[int]) -> None:
        buf, off, fmt, count, index_offset = a[:5]
        self.ib = None  # DrawIndexedX leaves the index buffer undefined
        if count == 0:
            return
        got = self._begin_draw("x", True)
        if got is None:
            return
        _, pr, mode, patch = got
        self._set("element", buf, Op.BIND_BUFFER, GL.ELEMENT_ARRAY_BUFFER, self._buffer(buf).glo)
        self._fallback_params(pr, index_offset, 0)
        self.counts["x_calls"] += 1
        sq = self._squeeze(buf, 2 if fmt == 0 else 4, off, count, mode, patch)
        if sq is not None:
            off, count = sq
        self.tb.emit(Op.DRAW_ELEMENTS, mode, count, GL.UNSIGNED_SHORT if fmt == 0 else GL.UNSIGNED_INT,
                     off, 1, index_offset & 0xFFFFFFFF, 0)

    def _c_indirect(self, indexed: bool, count: int, args_buf: int, offset: int, stride: int,
                    auto: tuple[int, int] | None) -> None:
        if count == 0:
            return
        if indexed and self.ib is None:
            self.warnings["indexed draw with no (or an undefined) index buffer (skipped)"] += 1
            return
        got = self._begin_draw("direct", indexed)
        if got is None:
            return
        _, pr, mode, patch = got
        rec = 20 if indexed else 16
        gl_stride = stride if count > 1 or auto else 0
        ab = self._buffer(args_buf)
        if indexed:
            assert self.ib is not None
            buf, fmt, ioff = self.ib
            ebuf = self._buffer(buf)
            if self._squeeze_records(args_buf, offset, stride or rec, count, buf, fmt, ioff, mode, patch):
                ioff = 0  # the records now hold absolute (squeezed) positions
            elif ioff:
                ebuf = self._alias(buf, ioff)
            self._set("element", (buf, ioff), Op.BIND_BUFFER, GL.ELEMENT_ARRAY_BUFFER, ebuf.glo)
            itype = GL.UNSIGNED_SHORT if fmt == 0 else GL.UNSIGNED_INT
        if not self.draw_params:
            self._indirect_fallback(pr, mode, indexed, itype if indexed else 0, count, args_buf, offset,
                                    stride or rec, auto)
            return
        self._set("indirect", args_buf, Op.BIND_BUFFER, GL.DRAW_INDIRECT_BUFFER, ab.glo)
        if auto is not None:
            cbuf, coff = auto
            if not self.info.indirect_parameters:
                self._indirect_fallback(pr, mode, indexed, itype if indexed else 0, count, args_buf, offset,
                                        stride or rec, auto)
                return
            self._set("parameter", cbuf, Op.BIND_BUFFER, GL.PARAMETER_BUFFER, self._buffer(cbuf).glo)
            if indexed:
                self.tb.emit(Op.MULTI_DRAW_ELEMENTS_INDIRECT_COUNT, mode, itype, offset, coff, count, gl_stride)
            else:
                self.tb.emit(Op.MULTI_DRAW_ARRAYS_INDIRECT_COUNT, mode, offset, coff, count, gl_stride)
        elif indexed:
            self.tb.emit(Op.MULTI_DRAW_ELEMENTS_INDIRECT, mode, itype, offset, count, gl_stride)
        else:
            self.tb.emit(Op.MULTI_DRAW_ARRAYS_INDIRECT, mode, offset, count, gl_stride)

    def _squeeze_records(self, args_buf: int, offset: int, stride: int, count: int, buf: int, fmt: int,
                         ioff: int, mode: int, patch: int) -> bool:
        """Light content for indexed indirect records the CPU wrote (args buffer with data, not
        written in the frame): squeeze each record's index range as :meth:`_squeeze` does a
        direct draw's, in place in the args buffer (positions become absolute, so the index
        buffer is bound from its start). False where the records are drawn as given."""
        d = self.s.decls[args_buf]
        isize = 2 if fmt == 0 else 4
        if d.data is None or args_buf in self.gpu_written_ever or offset % 4 or stride % 4 or ioff % isize \
                or self._squeeze_prim(buf, mode, patch) is None:
            return False
        words = self.initial[args_buf]
        for j in range(count):
            w = (offset + j * stride) // 4
            if w + 4 >= words.size:
                break
            ctx = (ioff, mode * 8 + patch)
            seen = self._remapped.get((args_buf, w))
            if seen is not None:
                if seen != ctx:
                    self.warnings["args record read in two index contexts (squeezed for the first)"] += 1
                continue
            self._remapped[(args_buf, w)] = ctx
            c, start = int(words[w]), int(words[w + 2])
            sq = self._squeeze(buf, isize, ioff + start * isize, c, mode, patch)
            if sq is not None and c:
                words[w], words[w + 2] = sq[1], sq[0] // isize
        self._dirty.add(args_buf)
        return True

    def _alias(self, buf: int, offset: int) -> Any:
        """A copy of ``buf`` from byte ``offset`` (GL indirect draws index from the buffer start)."""
        src = self._buffer(buf)
        al = self.aliases.get((buf, offset))
        if al is None:
            al = self.ctx.buffer(reserve=max(4, src.size - offset))
            self._objs.append(al)
            self.aliases[(buf, offset)] = al
        self.warnings["indirect indexed draw with an index-buffer offset (GPU copy to an alias buffer)"] += 1
        self.tb.emit(Op.COPY_BUFFER, src.glo, al.glo, offset, 0, src.size - offset)
        return al

    def _indirect_fallback(self, pr: _Prog, mode: int, indexed: bool, itype: int, count: int, args_buf: int,
                           offset: int, stride: int, auto: tuple[int, int] | None) -> None:
        """Without draw parameters: issue each record as a direct draw, reading the args at run time."""
        gl, ctx = self.gl, self.ctx
        ab = self._buffer(args_buf)
        cb = self._buffer(auto[0]) if auto is not None else None
        locs = pr.locs
        nwords = 5 if indexed else 4

        def run() -> None:
            gl.glMemoryBarrier(GL.BUFFER_UPDATE_BARRIER_BIT)
            n = count
            if cb is not None:
                n = min(count, int(np.frombuffer(cb.read(4, offset=auto[1]), np.uint32)[0]))
            if n <= 0:
                return
            raw = np.frombuffer(ab.read((n - 1) * stride + nwords * 4, offset=offset), np.uint8)
            for k in range(n):
                r = raw[k * stride: k * stride + nwords * 4].view(np.uint32).tolist()
                gl.glUniform1i(locs["u_draw_id"], k)
                if indexed:
                    c, ic, si, bv, sinst = r
                    bv = bv - (1 << 32) if bv >= 1 << 31 else bv
                    gl.glUniform1i(locs["u_base_vertex"], bv)
                    gl.glUniform1i(locs["u_base_instance"], sinst)
                    isize = 2 if itype == GL.UNSIGNED_SHORT else 4
                    gl.glDrawElementsInstancedBaseVertexBaseInstance(mode, c, itype, si * isize, ic, bv, sinst)
                else:
                    c, ic, sv, sinst = r
                    gl.glUniform1i(locs["u_base_vertex"], sv)
                    gl.glUniform1i(locs["u_base_instance"], sinst)
                    gl.glDrawArraysInstancedBaseInstance(mode, sv, c, ic, sinst)

        self.tb.callback(run)
        self.prog_uniforms[pr.glo].clear()
        self.epoch += 1
        self.warnings["indirect draw without draw parameters (records read back on the CPU)"] += 1
        _ = ctx

    # ---------------------------------------------------------------- compute
    def _c_dispatch(self, i: int, a: list[int]) -> None:
        x, y, z = a[:3]
        if self.pso is None or not self.s.decls[self.pso].is_compute:
            self.warnings["Dispatch without a compute pipeline (skipped)"] += 1
            return
        p = self.s.decls[self.pso]
        if x == 0 or y == 0 or z == 0:
            return
        self.counts["dispatches"] += 1
        self.epoch += 1
        decls = self.s.decls
        cstate = content.crc(decls[self.cmp_rs].name if self.cmp_rs is not None else None,
                             sorted((k, *self._root_arg_key(v)) for k, v in self.cmp_root.items()))
        for w in p.writes:
            try:
                r = decls[decls.resource_of(w)]
            except (KeyError, ValueError):
                continue
            if not isinstance(r, Buffer):
                self.warnings["Dispatch writes to textures are not replayed"] += 1
                continue
            b = decls.index[r.name]
            self.dispatch_writes[b] += 1
            salt = content.crc("dispatch", r.name, self.dispatch_writes[b], x, y, z, p.name, cstate) | 1
            words = content.synthesize(r.size, b, r.name, self.roles, salt=salt, words_role=False)
            src_off = self.staging_words
            self.staging_chunks.append(words)
            self.staging_words += words.size
            dst = self._buffer(b)
            self.written.add(b)
            self._use(self.copy_prog.glo)
            self._ssbo(2, dst.glo)
            self._ssbo(3, STAGING)
            for name, v in (("u_src_off", src_off), ("u_dst_off", 0), ("u_n", words.size)):
                self.tb.emit(Op.UNIFORM1UI, self.copy_locs[name], v)
            groups = (words.size + 63) // 64
            gx = min(groups, 65535)
            gy = (groups + 65534) // 65535
            self.tb.emit(Op.DISPATCH, gx, gy, 1)

    def _finish_staging(self) -> None:
        data = np.concatenate(self.staging_chunks) if self.staging_chunks else np.zeros(1, np.uint32)
        self.staging = self.ctx.buffer(data.tobytes())
        self._objs.append(self.staging)
        self.staging_chunks = []
        t = self.tape
        m = (t[:, 0] == Op.BIND_BUFFER_BASE) & (t[:, 3] == STAGING)
        t[m, 3] = self.staging.glo

    # ---------------------------------------------------------------- per frame
    def reset(self) -> None:
        """Restore every buffer the frame writes and clear every target (untimed)."""
        for b in self.written:
            buf = self.buffers[b]
            buf.write(self.initial[b])
        for name in self.targets:
            self._clear(name)

    def _clear(self, name: str) -> None:
        tex = self.targets[name]
        d = self.target_decl[name]
        fb = self._fbo((name,))
        self.gl.glDisable(GL.SCISSOR_TEST)
        self.gl.glDepthMask(1)
        self.gl.glColorMask(1, 1, 1, 1)
        if isinstance(d, Depth):
            fb.clear(depth=self.clear_depth)
        else:
            fb.clear(0.0, 0.0, 0.0, 0.0)
        _ = tex
        self.g.pop(f"cap{GL.SCISSOR_TEST}", None)
        self.g.pop("depth_mask", None)

    def read_targets(self) -> dict[str, np.ndarray]:
        """Every target as a top-down array: colour ``(H, W, 4)``, depth ``(H, W)`` float32."""
        out: dict[str, np.ndarray] = {}
        for name, tex in sorted(self.targets.items()):
            d = self.target_decl[name]
            if isinstance(d, Depth):
                arr = np.frombuffer(tex.read(), np.float32).reshape(self.H, self.W)
            else:
                dtype = {"f1": np.uint8, "f2": np.float16, "f4": np.float32}[target_format(d.format)[0]]
                arr = np.frombuffer(tex.read(), dtype).reshape(self.H, self.W, 4)
            out[name] = np.ascontiguousarray(arr[::-1])
        return out

    def read_written_buffers(self) -> dict[str, np.ndarray]:
        """Final contents of every buffer the GPU wrote in the frame."""
        self.gl.glMemoryBarrier(GL.BUFFER_UPDATE_BARRIER_BIT)
        out = {}
        for b in sorted(self.written):
            d = self.s.decls[b]
            out[d.name] = np.frombuffer(self.buffers[b].read(), np.uint32)[: (d.size + 3) // 4].copy()
        return out

    def release(self) -> None:
        """Free every GL object of this frame."""
        for o in reversed(self._objs):
            try:
                o.release()
            except Exception:  # noqa: BLE001 - releasing is best effort
                pass
        self._objs = []
        vao = (ctypes.c_uint * 1)(self.vao)
        self.gl.glDeleteVertexArrays(1, vao)

