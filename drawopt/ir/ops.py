"""The command vocabulary: one :class:`OpSpec` per API call drawopt models.

Every format (text, JSON, npz), the state tracker, the dependency graph and the
passes are driven by this table, so a command is described exactly once.

A command is stored columnar (see :mod:`drawopt.ir.stream`): an opcode, up to
:data:`NARGS` fixed arguments in an ``int64`` row, and an optional variadic tail
in a shared ``int64`` pool. Argument encodings:

========  ==========================================================
kind      stored value
========  ==========================================================
u32       the integer, ``0 <= v < 2**32``
i32       the integer, ``-2**31 <= v < 2**31``
u64       a byte offset or size, ``0 <= v < 2**63``
f32       the IEEE-754 single-precision bit pattern (as u32)
bool      0 or 1 (``FALSE`` / ``TRUE`` in text)
enum      index into :attr:`Arg.values`
ref       global declaration index (:class:`drawopt.ir.decls.Decls`)
heapref   ``heap_index << 32 | slot`` (text ``heap[slot]``)
str       index into the stream's string table
========  ==========================================================

Opcodes are stable: they are written into ``.npz`` files.
"""

from __future__ import annotations

__all__ = [
    "NARGS", "Arg", "OpSpec", "OPS", "BY_NAME", "Cat", "op_code", "Op", "shared_col",
    "COL_PIPELINE", "COL_DRAW_COUNT", "COL_INSTANCES", "COL_MULTI_ARGS", "COL_AUTO_MAX",
    "INDEX_FORMATS", "INDEX_SIZE", "TOPOLOGIES", "PIPELINED_EVENTS",
    "FLUSH_MODES", "BARRIER_STATES", "GS_MODES", "RESOURCE_KINDS",
    "DRAW_OPS", "INDEXED_DRAW_OPS", "INDIRECT_DRAW_OPS", "MULTI_DRAW_OPS", "STATE_OPS",
    "U32_MAX",
]

from dataclasses import dataclass, field
from enum import IntEnum

NARGS = 6
U32_MAX = 2**32 - 1

INDEX_FORMATS = ("R16_UINT", "R32_UINT")
INDEX_SIZE = {0: 2, 1: 4}
TOPOLOGIES = (
    "UNDEFINED", "POINTLIST", "LINELIST", "LINESTRIP", "TRIANGLELIST", "TRIANGLESTRIP",
    "LINELIST_ADJ", "LINESTRIP_ADJ", "TRIANGLELIST_ADJ", "TRIANGLESTRIP_ADJ",
    "PATCHLIST_3", "PATCHLIST_4",
)
PIPELINED_EVENTS = ("CS_PARTIAL_FLUSH", "VS_PARTIAL_FLUSH", "PS_PARTIAL_FLUSH")
FLUSH_MODES = ("DEFAULT_PFP", "DEFAULT")
BARRIER_STATES = (
    "COMMON", "RENDER_TARGET", "DEPTH_WRITE", "DEPTH_READ", "SHADER_RESOURCE",
    "UNORDERED_ACCESS", "INDIRECT_ARGUMENT", "INDEX_BUFFER", "COPY_DEST", "COPY_SOURCE",
    "VERTEX_AND_CONSTANT_BUFFER",
)
GS_MODES = ("null", "offchip", "onchip")
RESOURCE_KINDS = ("buffer", "texture", "target", "depth")


class Cat(IntEnum):
    """What a command does, for the passes and the dependency graph."""

    STATE = 0
    DRAW = 1
    DISPATCH = 2
    FLUSH = 3
    BARRIER = 4
    COPY = 5
    OPAQUE = 6


@dataclass(frozen=True)
class Arg:
    """One argument of a command."""

    name: str
    kind: str
    ref: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    default: int | None = None
    keyword: bool = False

    @property
    def optional(self) -> bool:
        return self.default is not None


@dataclass(frozen=True)
class OpSpec:
    """A command: its stable opcode, text name, category and arguments."""

    code: int
    name: str
    cat: Cat
    args: tuple[Arg, ...] = ()
    var: Arg | None = None
    var_min: int = 0
    var_max: int = 0
    doc: str = ""
    example: str = ""
    fields: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        assert len(self.args) <= NARGS, self.name
        self.fields.update({a.name: i for i, a in enumerate(self.args)})

    def col(self, name: str) -> int:
        """Column of fixed argument ``name`` in the ``args`` row."""
        return self.fields[name]


def _u(name: str, **kw) -> Arg:
    return Arg(name, "u32", **kw)


def _off(name: str, **kw) -> Arg:
    return Arg(name, "u64", **kw)


def _f(name: str, **kw) -> Arg:
    return Arg(name, "f32", **kw)


def _ref(name: str, *kinds: str) -> Arg:
    return Arg(name, "ref", ref=kinds)


def _enum(name: str, values: tuple[str, ...], **kw) -> Arg:
    return Arg(name, "enum", values=values, **kw)


_BUF = ("buffer",)
_S, _D, _X, _F, _B, _C, _O = Cat.STATE, Cat.DRAW, Cat.DISPATCH, Cat.FLUSH, Cat.BARRIER, Cat.COPY, Cat.OPAQUE

_MULTI_ARGS = (_u("count"), _ref("args_buffer", *_BUF), _off("offset"), _u("stride"))
_AUTO_ARGS = (
    _ref("count_buffer", *_BUF), _off("count_offset"), _u("max_count"),
    _ref("args_buffer", *_BUF), _off("offset"), _u("stride"),
)
_ROOT_CONST = (_u("index"), _u("count"), _u("dest", default=0, keyword=True))
_ROOT_VIEW = (_u("index"), _ref("buffer", *_BUF), _off("offset"))

OPS: tuple[OpSpec, ...] = (
    OpSpec(1, "SetPipelineState", _S, (_ref("pipeline", "pipeline"),),
           example="SetPipelineState opaque"),
    OpSpec(2, "SetGraphicsRootSignature", _S, (_ref("rootsig", "rootsig"),),
           example="SetGraphicsRootSignature main"),
    OpSpec(3, "SetComputeRootSignature", _S, (_ref("rootsig", "rootsig"),),
           example="SetComputeRootSignature main"),
    OpSpec(4, "SetDescriptorHeaps", _S, (), _ref("heaps", "heap"), 1, 2,
           doc="one CBV_SRV_UAV heap and/or one SAMPLER heap",
           example="SetDescriptorHeaps res samp"),
    OpSpec(5, "SetGraphicsRootDescriptorTable", _S, (_u("index"), Arg("table", "heapref")),
           example="SetGraphicsRootDescriptorTable 0 res[0]"),
    OpSpec(6, "SetComputeRootDescriptorTable", _S, (_u("index"), Arg("table", "heapref")),
           example="SetComputeRootDescriptorTable 0 res[1]"),
    OpSpec(7, "SetGraphicsRoot32BitConstants", _S, _ROOT_CONST, _u("values"), 1, 64,
           doc="count values follow; dest= is DestOffsetIn32BitValues",
           example="SetGraphicsRoot32BitConstants 1 4 0x3f800000 0 0 0"),
    OpSpec(8, "SetComputeRoot32BitConstants", _S, _ROOT_CONST, _u("values"), 1, 64,
           example="SetComputeRoot32BitConstants 1 1 7"),
    OpSpec(9, "SetGraphicsRootConstantBufferView", _S, _ROOT_VIEW,
           example="SetGraphicsRootConstantBufferView 2 consts 256"),
    OpSpec(10, "SetGraphicsRootShaderResourceView", _S, _ROOT_VIEW,
           example="SetGraphicsRootShaderResourceView 3 perdraw 0"),
    OpSpec(11, "IASetIndexBuffer", _S,
           (_ref("buffer", *_BUF), _enum("format", INDEX_FORMATS), _off("offset")),
           example="IASetIndexBuffer ib16 R16_UINT 0"),
    OpSpec(12, "IASetVertexBuffers", _S,
           (_u("slot"), _ref("buffer", *_BUF), _off("offset"), _u("stride")),
           example="IASetVertexBuffers 0 verts 0 32"),
    OpSpec(13, "IASetPrimitiveTopology", _S, (_enum("topology", TOPOLOGIES),),
           example="IASetPrimitiveTopology TRIANGLELIST"),
    OpSpec(14, "OMSetRenderTargets", _S, (), _ref("targets", "target", "depth"), 0, 9,
           doc="up to 8 render targets, then at most one depth target",
           example="OMSetRenderTargets hdr zbuf"),
    OpSpec(15, "RSSetViewports", _S,
           (_f("x"), _f("y"), _f("width"), _f("height"),
            _f("min_depth", default=0), _f("max_depth", default=0x3F800000)),
           example="RSSetViewports 0 0 1920 1080 0 1"),
    OpSpec(16, "RSSetScissorRects", _S,
           (Arg("left", "i32"), Arg("top", "i32"), Arg("right", "i32"), Arg("bottom", "i32")),
           example="RSSetScissorRects 0 0 1920 1080"),
    OpSpec(17, "OMSetBlendFactor", _S, (_f("r"), _f("g"), _f("b"), _f("a")),
           example="OMSetBlendFactor 1 1 1 1"),
    OpSpec(18, "OMSetStencilRef", _S, (_u("ref"),), example="OMSetStencilRef 1"),
    OpSpec(19, "GSSetParameters", _S,
           (_enum("mode", GS_MODES), _u("vps", default=0, keyword=True),
            _u("pps", default=0, keyword=True), _f("ratio", default=0, keyword=True),
            _u("lds", default=0, keyword=True)),
           doc="null reverts to the driver default; 0 = field not overridden",
           example="GSSetParameters onchip vps=64 pps=32 lds=16384"),
    OpSpec(20, "CSEnableAutomaticGpuFlush", _S, (Arg("enable", "bool"),),
           example="CSEnableAutomaticGpuFlush FALSE"),
    OpSpec(32, "DrawInstanced", _D,
           (_u("vertex_count"), _u("instance_count"), _u("start_vertex"), _u("start_instance")),
           example="DrawInstanced 6 1 0 0"),
    OpSpec(33, "DrawIndexedInstanced", _D,
           (_u("index_count"), _u("instance_count"), _u("start_index"),
            Arg("base_vertex", "i32"), _u("start_instance")),
           example="DrawIndexedInstanced 36 1 0 0 0"),
    OpSpec(34, "DrawIndexedX", _D,
           (_ref("buffer", *_BUF), _off("offset"), _enum("format", INDEX_FORMATS),
            _u("index_count"), _u("index_offset")),
           doc="IndexBufferLocation = buffer + offset; leaves the index buffer undefined",
           example="DrawIndexedX ib16 1024 R16_UINT 36 65536"),
    OpSpec(35, "DrawInstancedIndirect", _D, (_ref("args_buffer", *_BUF), _off("offset")),
           example="DrawInstancedIndirect args 0"),
    OpSpec(36, "DrawIndexedInstancedIndirect", _D, (_ref("args_buffer", *_BUF), _off("offset")),
           example="DrawIndexedInstancedIndirect args 0"),
    OpSpec(37, "MultiDrawInstancedIndirect", _D, _MULTI_ARGS,
           example="MultiDrawInstancedIndirect 100 args 0 16"),
    OpSpec(38, "MultiDrawIndexedInstancedIndirect", _D, _MULTI_ARGS,
           example="MultiDrawIndexedInstancedIndirect 100 cullargs 0 20"),
    OpSpec(39, "MultiDrawInstancedIndirectAuto", _D, _AUTO_ARGS,
           doc="the draw count is read (GPU-written) from count_buffer, capped at max_count",
           example="MultiDrawInstancedIndirectAuto counts 0 4096 cullargs 0 16"),
    OpSpec(40, "MultiDrawIndexedInstancedIndirectAuto", _D, _AUTO_ARGS,
           example="MultiDrawIndexedInstancedIndirectAuto counts 0 4096 cullargs 0 20"),
    OpSpec(48, "Dispatch", _X, (_u("x"), _u("y"), _u("z")), example="Dispatch 64 1 1"),
    OpSpec(56, "GpuSendPipelinedEvent", _F, (_enum("event", PIPELINED_EVENTS),),
           example="GpuSendPipelinedEvent CS_PARTIAL_FLUSH"),
    OpSpec(57, "FlushGpuCacheRange", _F, (_enum("mode", FLUSH_MODES),),
           doc="the whole L2 (base address 0, size 0)",
           example="FlushGpuCacheRange DEFAULT_PFP"),
    OpSpec(58, "FlushGpuCachesBottomOfPipe", _F, (_enum("mode", FLUSH_MODES),),
           example="FlushGpuCachesBottomOfPipe DEFAULT"),
    OpSpec(64, "ResourceBarrier", _B,
           (_ref("resource", *RESOURCE_KINDS), _enum("before", BARRIER_STATES),
            _enum("after", BARRIER_STATES)),
           example="ResourceBarrier shadow DEPTH_WRITE SHADER_RESOURCE"),
    OpSpec(72, "CopyBufferRegion", _C,
           (_ref("dst", *_BUF), _off("dst_offset"), _ref("src", *_BUF), _off("src_offset"),
            _off("size")),
           example="CopyBufferRegion ib32 0 staging 0 4096"),
    OpSpec(80, "Opaque", _O, (Arg("text", "str"),),
           doc="an API call drawopt does not model, kept verbatim; a full barrier",
           example="Opaque ClearState"),
)

BY_NAME: dict[str, OpSpec] = {o.name: o for o in OPS}
BY_CODE: dict[int, OpSpec] = {o.code: o for o in OPS}
MAX_OPCODE = max(BY_CODE)


def op_code(name: str) -> int:
    """Opcode of command ``name`` (``KeyError`` if unknown)."""
    return BY_NAME[name].code


class _OpEnum(IntEnum):
    """The opcodes by name, from :data:`OPS` (stable: written into ``.npz`` files).

    >>> Op.DrawInstanced == 32, Op(11).name, Op.IASetIndexBuffer.col("offset")
    (True, 'IASetIndexBuffer', 2)
    """

    @property
    def spec(self) -> OpSpec:
        """The command's :class:`OpSpec`."""
        return BY_CODE[int(self)]

    def col(self, arg: str) -> int:
        """Column of the command's fixed argument ``arg`` in a stream's ``args`` rows."""
        return BY_CODE[int(self)].col(arg)


Op = _OpEnum("Op", {o.name: o.code for o in OPS})  # type: ignore[misc]
"""The opcodes by name (:class:`_OpEnum`): ``Op.DrawInstanced``, ``Op.IASetIndexBuffer.col("offset")``."""


def shared_col(*pairs: tuple[str, str]) -> int:
    """The one column that every ``(command, argument)`` pair names (for code that reads one
    column of rows of several commands at once); ``ValueError`` if they disagree.

    >>> shared_col(("DrawInstanced", "instance_count"), ("DrawIndexedInstanced", "instance_count"))
    1
    """
    cols = {BY_NAME[op].col(arg) for op, arg in pairs}
    if len(cols) != 1:
        raise ValueError(f"{pairs} are in different columns: {sorted(cols)}")
    return cols.pop()


# Argument columns that several commands share, named once (checked against the table when imported).
COL_PIPELINE = Op.SetPipelineState.col("pipeline")
COL_DRAW_COUNT = shared_col(("DrawInstanced", "vertex_count"), ("DrawIndexedInstanced", "index_count"),
                            ("MultiDrawInstancedIndirect", "count"), ("MultiDrawIndexedInstancedIndirect", "count"))
"""Vertices / indices of a direct draw, records of a CPU-counted multi-draw."""
COL_INSTANCES = shared_col(("DrawInstanced", "instance_count"), ("DrawIndexedInstanced", "instance_count"))
COL_MULTI_ARGS = shared_col(("MultiDrawInstancedIndirect", "args_buffer"),
                            ("MultiDrawIndexedInstancedIndirect", "args_buffer"))
COL_AUTO_MAX = shared_col(("MultiDrawInstancedIndirectAuto", "max_count"),
                          ("MultiDrawIndexedInstancedIndirectAuto", "max_count"))


def _codes(*names: str) -> frozenset[int]:
    return frozenset(BY_NAME[n].code for n in names)


DRAW_OPS = frozenset(o.code for o in OPS if o.cat == Cat.DRAW)
STATE_OPS = frozenset(o.code for o in OPS if o.cat == Cat.STATE)
INDEXED_DRAW_OPS = _codes(
    "DrawIndexedInstanced", "DrawIndexedInstancedIndirect",
    "MultiDrawIndexedInstancedIndirect", "MultiDrawIndexedInstancedIndirectAuto",
)
"""Draws that read the bound index buffer (DrawIndexedX brings its own)."""
INDIRECT_DRAW_OPS = _codes(
    "DrawInstancedIndirect", "DrawIndexedInstancedIndirect",
    "MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect",
    "MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto",
)
MULTI_DRAW_OPS = _codes(
    "MultiDrawInstancedIndirect", "MultiDrawIndexedInstancedIndirect",
    "MultiDrawInstancedIndirectAuto", "MultiDrawIndexedInstancedIndirectAuto",
)
