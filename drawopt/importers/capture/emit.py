"""One frame: the submitted command buffers executed against the capture's objects, as a drawopt stream.

State is emitted at the draw (or dispatch) that uses it: before each draw the emitter sets
whatever differs from what it last set (render targets, root signature, pipeline, topology, root
arguments, vertex and index buffers, viewport, scissor, blend factor, stencil reference), so the
stream carries exactly the state every draw executes with. After an ``Opaque`` command nothing is
assumed set. Declarations are made for the objects a frame uses only.
"""

from __future__ import annotations

__all__ = ["FrameEmitter", "FrameStats", "Shaders", "decode_writes"]

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from drawopt.importers.capture.objects import Objects, PipeInfo, Recorded
from drawopt.importers.capture.source import decode_record
from drawopt.importers.capture.spirv import Reflection
from drawopt.importers.capture.vkmap import (
    DYNAMIC_DESCRIPTORS,
    TABLE_KIND,
    access_state,
    blend_key,
    depth_key,
    dynamic_state_key,
    is_depth_format,
    layout_state,
    rect,
    topology,
    vk_format,
)
from drawopt.ir.decls import Buffer, Depth, Heap, Pipeline, RootParam, RootSig, Target, Texture, View
from drawopt.ir.stream import MAX_VERTEX_BUFFERS, StreamBuilder

# dynamic states the emitter models itself (the others fold into the pipeline variant)
_MODELLED = frozenset(dynamic_state_key(s) for s in (
    "VK_DYNAMIC_STATE_VIEWPORT", "VK_DYNAMIC_STATE_SCISSOR", "VK_DYNAMIC_STATE_VIEWPORT_WITH_COUNT",
    "VK_DYNAMIC_STATE_SCISSOR_WITH_COUNT", "VK_DYNAMIC_STATE_BLEND_CONSTANTS",
    "VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY", "VK_DYNAMIC_STATE_VERTEX_INPUT_EXT",
    "VK_DYNAMIC_STATE_VERTEX_INPUT_BINDING_STRIDE", "VK_DYNAMIC_STATE_DEPTH_TEST_ENABLE",
    "VK_DYNAMIC_STATE_DEPTH_WRITE_ENABLE", "VK_DYNAMIC_STATE_DEPTH_COMPARE_OP"))
_STENCIL = dynamic_state_key("VK_DYNAMIC_STATE_STENCIL_REFERENCE")
_DROPPED = {"vkCmdBeginDebugUtilsLabelEXT", "vkCmdEndDebugUtilsLabelEXT", "vkCmdInsertDebugUtilsLabelEXT",
            "vkCmdDebugMarkerBeginEXT", "vkCmdDebugMarkerEndEXT", "vkCmdDebugMarkerInsertEXT",
            "vkCmdEndRenderPass", "vkCmdEndRendering", "vkCmdEndRenderPass2", "vkCmdEndRenderingKHR",
            "vkCmdEndRenderPass2KHR"}
"""Calls with no effect on what the GPU renders (debug labels; the end of a render pass, whose
store ops drawopt does not model and whose resolves are handled at its start)."""


@dataclass
class Shaders:
    """What the shader modules' SPIR-V shows (module handle -> reflection, or None: absent or unreadable)."""

    reflections: dict[int, Reflection | None] = field(default_factory=dict)
    why: dict[int, str] = field(default_factory=dict)


@dataclass
class FrameStats:
    """Counts of one frame's import (the summary ``drawopt import`` prints)."""

    frame: int
    calls: int = 0            # vkCmd* calls executed (command buffers expanded at each submit)
    submits: int = 0
    draws: int = 0
    opaque: Counter = field(default_factory=Counter)   # call name -> Opaque commands made of it
    dropped: Counter = field(default_factory=Counter)  # calls with no rendering effect
    unknown_tables: int = 0   # descriptor tables whose contents the capture does not decode
    first_line: int = 0
    last_line: int = 0
    commands: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"frame": self.frame, "calls": self.calls, "submits": self.submits, "draws": self.draws,
                "commands": self.commands, "opaque": dict(sorted(self.opaque.items())),
                "opaque_total": sum(self.opaque.values()), "dropped": sum(self.dropped.values()),
                "unknown_tables": self.unknown_tables, "lines": [self.first_line, self.last_line]}


class _Unmodelled(Exception):
    """A command the emitter cannot express: it becomes an Opaque full barrier (reason in the text)."""


class _Exec:
    """Vulkan state of one command buffer while it executes (reset at each command buffer)."""

    def __init__(self, targets: tuple[tuple[int, ...], int | None] = ((), None)) -> None:
        self.pipe: dict[str, int | None] = {"g": None, "c": None}
        self.sets: dict[str, dict[int, tuple[Any, tuple[int, ...]]]] = {"g": {}, "c": {}}
        self.push = [0] * 64
        self.push_known = False
        self.vbs: dict[int, tuple[int, int, int | None]] = {}
        self.ib: tuple[int, int, str] | None = None
        self.dyn: dict[str, Any] = {}
        self.targets = targets
        self.subpass: tuple[int, int] | None = None  # (render pass, subpass index)
        self.fb_views: list[int] = []


class FrameEmitter:
    """Builds the stream of one frame (``build()``), or only counts it (``keep=False``)."""

    def __init__(self, frame: int, obj: Objects, shaders: Shaders, variants: dict[Any, str], keep: bool) -> None:
        self.obj, self.shaders, self.variants, self.keep = obj, shaders, variants, keep
        self.file = "<capture>"
        self.variant_count: dict[int, int] = variants.setdefault("count", {})  # type: ignore[assignment]
        self._params_cache: dict[int, tuple[list[tuple[str, Any]], str]] = {}
        self.stats = FrameStats(frame)
        self.cmds: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.decl_order: list[tuple[str, Any]] = []
        self.declared: set[Any] = set()
        self.tables: dict[Any, int] = {}      # table content key -> first slot in the heap
        self.res_slots = 0
        self.smp_slots = 0
        self.views: list[View] = []
        self.rootsigs: dict[Any, str] = {}
        self.pipes: dict[str, Pipeline] = {}
        self.unknown_reads = False  # set by the reader: the capture has undecoded descriptor contents
        self.unknown_counter = 0
        self._reset_emitted()

    # ------------------------------------------------------------------ emitted state
    def _reset_emitted(self) -> None:
        self.em: dict[Any, Any] = {}

    def _set(self, key: Any, value: Any, name: str, *args: Any, **kw: Any) -> None:
        if self.em.get(key, _NONE) != value:
            self.em[key] = value
            self.cmds.append((name, args, kw))

    def opaque(self, text: str, call: str) -> None:
        """A full barrier: ``Opaque TEXT``; nothing is assumed set after it."""
        self.cmds.append(("Opaque", (text,), {}))
        self.stats.opaque[call] += 1
        self._reset_emitted()

    # ------------------------------------------------------------------ declarations
    def _declare(self, key: Any, make: Any) -> None:
        if key not in self.declared:
            self.declared.add(key)
            self.decl_order.append((key, make))

    def buffer(self, h: int, frontend: bool = False) -> str:
        if h not in self.obj.buffers:
            raise _Unmodelled(f"unknown buffer {h}")
        name = f"b{h}"
        self._declare(("b", h), lambda: Buffer(name, max(1, self.obj.buffers[h][0]), frontend=False))
        if frontend:
            self.declared.add(("fe", h))
        return name

    def image(self, h: int) -> str:
        if ("i", h) in self.declared:
            return f"i{h}"
        got = self.obj.images.get(h)
        if got is None:
            raise _Unmodelled(f"unknown image {h}")
        w, hh, fmt, usage = got
        name = f"i{h}"
        cls = Depth if is_depth_format(fmt) or usage & 0x20 else (Target if usage & 0x10 else Texture)
        self._declare(("i", h), lambda: cls(name, min(max(w, 1), 65536), min(max(hh, 1), 65536), vk_format(fmt)))
        return name

    def view_image(self, v: int) -> int:
        img = self.obj.image_views.get(v)
        if img is None:
            raise _Unmodelled(f"unknown image view {v}")
        return img

    # ------------------------------------------------------------------ root signatures and tables
    def _stage_refl(self, p: PipeInfo) -> list[Reflection] | None:
        out = []
        for mod in p.stages.values():
            r = self.shaders.reflections.get(mod) if mod is not None else None
            if r is None:
                return None
            out.append(r)
        return out

    def _written(self, p: PipeInfo) -> set[tuple[int, int]] | None:
        """(set, binding) the pipeline's shaders may write; None = any (code absent or untraceable)."""
        refl = self._stage_refl(p)
        if refl is None or any(r.writes_all for r in refl):
            return None
        out: set[tuple[int, int]] = set()
        for r in refl:
            out |= r.written
        return out

    def _params(self, p: PipeInfo) -> list[tuple[str, Any]]:
        """The root parameters of pipeline ``p``'s layout: (kind, where) in root-parameter order."""
        pl = self.obj.pipe_layouts.get(p.layout)
        if pl is None:
            raise _Unmodelled(f"unknown pipeline layout {p.layout}")
        written = self._written(p)
        params: list[tuple[str, Any]] = []
        for si, lh in enumerate(pl.sets):
            sl = self.obj.set_layouts.get(lh)
            if sl is None:
                raise _Unmodelled(f"unknown descriptor set layout {lh}")
            if sl.unknown_types():
                raise _Unmodelled(f"descriptor type {sl.unknown_types()[0]} has no drawopt view")
            ranges = []
            for b, t, n in sl.table_ranges():
                kind = TABLE_KIND[t]
                if kind == "uav" and written is not None and (si, b) not in written:
                    kind = "srv"
                ranges.append((kind, n, b, t))
            if ranges:
                params.append(("table", (si, tuple(ranges))))
            if sl.sampler_ranges():
                params.append(("samplers", (si, tuple(sl.sampler_ranges()))))
            for b, t, n in sl.dynamic():
                kind = DYNAMIC_DESCRIPTORS[t]
                if kind == "uav" and written is not None and (si, b) not in written:
                    kind = "srv"
                for e in range(n):
                    if p.compute or kind == "uav":
                        params.append(("dyntable", (si, b, e, kind)))
                    else:
                        params.append((kind, (si, b, e)))
        if pl.push_words:
            params.append(("constants", pl.push_words))
        if len(params) > 16:
            raise _Unmodelled(f"pipeline layout {p.layout} needs {len(params)} root parameters (at most 16)")
        return params

    def _rootsig(self, p: PipeInfo, params: list[tuple[str, Any]]) -> str:
        text: list[str] = []
        for kind, where in params:
            if kind == "table":
                merged: list[list[Any]] = []
                for k, n, _, _ in where[1]:
                    if merged and merged[-1][0] == k:
                        merged[-1][1] += n
                    else:
                        merged.append([k, n])
                text.append("table(" + ",".join(f"{k},{n}" for k, n in merged) + ")")
            elif kind == "samplers":
                text.append(f"table(sampler,{sum(n for _, _, n in where[1])})")
            elif kind == "dyntable":
                text.append(f"table({where[3]},1)")
            elif kind == "constants":
                text.append(f"constants({where})")
            else:
                text.append(kind)
        key = tuple(text)
        name = self.rootsigs.get(key)
        if name is None:
            name = f"rs{len(self.rootsigs)}"
            self.rootsigs[key] = name
            rs = RootSig(name, tuple(RootParam.parse(t) for t in text))
            self._declare(("rs", key), lambda: rs)
        return name

    def _descriptor(self, d: Any, kind: str) -> tuple[Any, ...]:
        """A table slot's content key: (kind, resource handle kind, handle, ...)."""
        if d is None:
            return ("none",)
        t, info = d
        if "buffer" in info:
            if not isinstance(info["buffer"], int):  # a null descriptor (VK_NULL_HANDLE): reads nothing
                return ("none",)
            return (kind, "b", info["buffer"], info.get("offset", 0), info.get("range", 0))
        if "texel" in info:
            buf = self.obj.buffer_views.get(info["texel"])
            return (kind, "b", buf, 0, 0) if buf is not None else ("none",)
        if "view" in info and info["view"] is not None:
            return (kind, "i", self.view_image(info["view"]), info["view"])
        return ("none",)

    def _table_slot(self, key: tuple[Any, ...], sampler: bool) -> int:
        full = ("smp" if sampler else "res", key)
        got = self.tables.get(full)
        if got is not None:
            return got
        if key and key[0][0] == "unknown":
            self.stats.unknown_tables += 1
        if sampler:
            base = self.smp_slots
            self.smp_slots += len(key)
            for j, d in enumerate(key):
                if d[0] == "sampler":
                    self.views.append(View("smp", base + j, "sampler"))
        else:
            base = self.res_slots
            self.res_slots += len(key)
            for j, d in enumerate(key):
                if d[0] in ("cbv", "srv", "uav"):
                    res = self.buffer(d[2]) if d[1] == "b" else self.image(d[2])
                    self.views.append(View("res", base + j, d[0], res))
        self.tables[full] = base
        return base

    def _set_key(self, bound: Any, si: int, ranges: Any, sampler: bool, dyn: tuple[int, ...]) -> tuple[Any, ...]:
        """The content key of set ``si`` as bound (``bound``: ("set", handle) or ("push", content))."""
        kind, src = bound
        if kind == "unknown" or (kind == "set" and self.obj.set_unknown.get(src)):
            # contents the capture does not decode: a table of its own per update (a push, or a
            # set's version), never equal to another
            n = sum(r[2] if sampler else r[1] for r in ranges)
            uid = src if kind == "unknown" else ("set", src, self.obj.set_version.get(src, 0))
            return tuple(("unknown", uid, si, j) for j in range(max(n, 1)))
        content = src if kind == "push" else self.obj.set_content.get(src, {})
        out = []
        if sampler:
            for b, _t, n in ranges:
                for e in range(n):
                    d = content.get((b, e))
                    s = d[1].get("sampler") if d is not None else None
                    out.append(("sampler", s) if s is not None else ("none",))
        else:
            for k, n, b, _t in ranges:
                for e in range(n):
                    out.append(self._descriptor(content.get((b, e)), k))
        return tuple(out)

    # ------------------------------------------------------------------ pipelines
    def _variant(self, p: PipeInfo, ex: _Exec, rs: str) -> tuple[str, bool]:
        """The drawopt pipeline for ``p`` with the dynamic state in force; and whether the draw
        must stay unmerged (a topology drawopt has no name for)."""
        dyn = ex.dyn
        nomerge = False
        if p.compute:
            key: tuple[Any, ...] = (p.handle, rs)
            topo_class, layout, depth, blend = "triangle", "none", "off", "opaque"
        else:
            vk_topo = dyn.get("topology", p.topology) if p.is_dynamic("VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY") \
                else p.topology
            pp = dyn.get("patch_points", p.patch_points)
            t = topology(vk_topo, pp)
            if t is None:
                t, nomerge = ("TRIANGLESTRIP", "triangle"), True
            topo_class = t[1]
            if p.is_dynamic("VK_DYNAMIC_STATE_VERTEX_INPUT_EXT"):
                vi = dyn.get("vertex_input", ((), ()))
            else:
                vi = (p.bindings, p.attributes)
            layout = "none" if not vi[1] else self._layout_name(vi)
            d = list(p.depth)
            for i, st in enumerate(("VK_DYNAMIC_STATE_DEPTH_TEST_ENABLE", "VK_DYNAMIC_STATE_DEPTH_WRITE_ENABLE",
                                    "VK_DYNAMIC_STATE_DEPTH_COMPARE_OP")):
                if p.is_dynamic(st) and dynamic_state_key(st) in dyn:
                    d[i] = dyn[dynamic_state_key(st)]
            depth = depth_key(*d)
            att = dict(p.blend or {})
            ce = dynamic_state_key("vkCmdSetColorBlendEnableEXT")
            eq = dynamic_state_key("vkCmdSetColorBlendEquationEXT")
            if ce in p.dynamic and ce in dyn:
                att["blendEnable"] = dyn[ce]
            if eq in p.dynamic and eq in dyn:
                att.update(dict(dyn[eq]))
            blend = blend_key(att)
            st = dyn.get(_STENCIL)
            other = tuple(dyn.get(k) if k != _STENCIL or not isinstance(st, tuple) or st[0] != st[1] else None
                          for k in p.other_dynamic(_MODELLED))
            key = (p.handle, rs, layout, vk_topo, depth, blend, other)
        name = self.variants.get(key)
        if name is None:
            n = self.variant_count.get(p.handle, 0)
            self.variant_count[p.handle] = n + 1
            name = f"p{p.handle}" + (f"_{n}" if n else "")
            self.variants[key] = name
        if name not in self.pipes:
            self.pipes[name] = self._pipeline_decl(name, p, rs, layout, depth, blend, topo_class)
            self._declare(("p", name), lambda: self.pipes[name])
        return name, nomerge

    def _layout_name(self, vi: Any) -> str:
        """The input layout's name: ``vi<k>``, numbered in order of first use in the capture."""
        key = ("layout", vi)
        got = self.variants.get(key)
        if got is None:
            got = self.variants[key] = f"vi{sum(1 for k in self.variants if k[0] == 'layout')}"
        return got

    def _pipeline_decl(self, name: str, p: PipeInfo, rs: str, layout: str, depth: str, blend: str,
                       topo: str) -> Pipeline:
        stages = {s: (f"sh{m}" if m is not None else f"inline{p.handle}{s}") for s, m in p.stages.items()}
        refl = self._stage_refl(p)
        contract: list[str] = []
        uav_stage = None
        if refl is not None:
            reads = set().union(*(r.builtins for r in refl)) if refl else set()
            vs_mod = p.stages.get("vs")
            vs_reads = self.shaders.reflections[vs_mod].builtins if vs_mod is not None else set()
            if {"DrawIndex", "BaseVertex", "BaseInstance"} & reads:
                contract.append("never_merge")
            if not ({"PrimitiveId"} & reads):
                contract.append("no_primitive_id")
            if not p.compute and not ({"VertexIndex", "VertexId"} & vs_reads):
                contract.append("no_vertex_id")
            writers = [s for s, m in p.stages.items() if m is not None and self.shaders.reflections[m].written]
            for s in ("ps", "gs", "ds", "hs", "vs", "cs"):
                if s in writers:
                    uav_stage = s
                    break
        kw: dict[str, Any] = dict(stages)
        if not p.compute:
            kw.update(layout=layout, blend=blend, depth=depth, topology=topo)
        return Pipeline(name, root=rs, contract=",".join(contract), uav_stage=uav_stage, **kw)

    # ------------------------------------------------------------------ execution
    def run(self, cmds: list[Recorded], ex: _Exec | None = None) -> None:
        """Execute one command buffer's recorded commands."""
        ex = ex or _Exec()
        for i, (name, a, line) in enumerate(cmds):
            if isinstance(a, (bytes, str)):  # recorded as read: decode once, keep the arguments
                a = decode_record(a, self.file, line)
                cmds[i] = (name, a, line)
            self.stats.calls += 1
            self.stats.last_line = max(self.stats.last_line, line)
            if name in _DROPPED:
                self.stats.dropped[name] += 1
                continue
            handler = _HANDLERS.get(name)
            try:
                if handler is not None:
                    handler(self, ex, a)
                elif name.startswith("vkCmdSet"):
                    ex.dyn[dynamic_state_key(name)] = json.dumps(
                        {k: v for k, v in a.items() if k != "commandBuffer"}, sort_keys=True)
                elif name == "vkCmdExecuteCommands":
                    for cb in a.get("pCommandBuffers") or ():
                        self.run(self.obj.cmdbufs.get(cb, []), _Exec(ex.targets))
                else:
                    raise _Unmodelled("")
            except _Unmodelled as e:
                self.opaque(f"{name}{' (' + str(e) + ')' if str(e) else ''} @{line}", name)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
                self.opaque(f"{name} (not decoded: {type(e).__name__}) @{line}", name)

    # draws -------------------------------------------------------------
    def _prepare(self, ex: _Exec, bp: str) -> tuple[bool, bool]:
        """Emit the state a draw (bp="g") or dispatch (bp="c") executes with: whether it writes
        through UAVs, and whether it must stay unmerged (a topology drawopt has no name for)."""
        h = ex.pipe[bp]
        if h is None or h not in self.obj.pipelines:
            raise _Unmodelled("no pipeline bound")
        p = self.obj.pipelines[h]
        if p.unsupported:
            raise _Unmodelled(p.unsupported)
        got = self._params_cache.get(p.handle)
        if got is None:
            params = self._params(p)
            got = self._params_cache[p.handle] = (params, self._rootsig(p, params))
        params, rs = got
        pname, nomerge = self._variant(p, ex, rs)
        g = bp == "g"
        writes = any((k == "table" and any(r[0] == "uav" for r in w[1])) or (k == "dyntable" and w[3] == "uav")
                     for k, w in params)
        if writes and self.unknown_reads:
            self.opaque(_FENCE, "fence")
        if g:
            cols, dep = ex.targets
            names = [self.image(c) for c in cols] + ([self.image(dep)] if dep is not None else [])
            self._set("rt", tuple(names), "OMSetRenderTargets", *names)
        if any(k in ("table", "samplers", "dyntable") for k, _ in params):
            heaps = ("res", "smp")
            self._set("heaps", heaps, "SetDescriptorHeaps", *heaps)
        if self.em.get(("rs", bp)) != rs:
            self.em = {k: v for k, v in self.em.items() if not (isinstance(k, tuple) and k[0] == "root" + bp)}
        self._set(("rs", bp), rs, "SetGraphicsRootSignature" if g else "SetComputeRootSignature", rs)
        self._set("pso", pname, "SetPipelineState", pname)
        sets = ex.sets[bp]
        for i, (kind, where) in enumerate(params):
            rk = ("root" + bp, i)
            if kind in ("table", "samplers"):
                si, ranges = where
                bound = sets.get(si)
                if bound is None:
                    raise _Unmodelled(f"descriptor set {si} not bound")
                key = self._set_key(bound[0], si, ranges, kind == "samplers", bound[1])
                slot = self._table_slot(key, kind == "samplers")
                heap = "smp" if kind == "samplers" else "res"
                self._set(rk, (heap, slot), "SetGraphicsRootDescriptorTable" if g else "SetComputeRootDescriptorTable",
                          i, f"{heap}[{slot}]")
            elif kind in ("cbv", "srv", "dyntable"):
                si, b, e = where[:3]
                bound = sets.get(si)
                if bound is None:
                    raise _Unmodelled(f"descriptor set {si} not bound")
                buf, off = self._dynamic(bound, si, b, e, p)
                if kind == "dyntable":
                    vk = where[3]
                    slot = self._table_slot(((vk, "b", buf, off, 0),), False)
                    self._set(rk, ("res", slot), "SetGraphicsRootDescriptorTable" if g else
                              "SetComputeRootDescriptorTable", i, f"res[{slot}]")
                else:
                    name = self.buffer(buf)
                    if off > self.obj.buffers[buf][0]:
                        raise _Unmodelled("dynamic offset past the buffer")
                    op = "SetGraphicsRootConstantBufferView" if kind == "cbv" else "SetGraphicsRootShaderResourceView"
                    self._set(rk, (buf, off), op, i, name, off)
            elif kind == "constants":
                if not ex.push_known:
                    continue  # never pushed: the values are undefined, none is assumed
                vals = tuple(ex.push[:where])
                self._set(rk, vals, "SetGraphicsRoot32BitConstants" if g else "SetComputeRoot32BitConstants",
                          i, where, *vals)
        if g:
            self._emit_fixed(ex, p)
        return writes, nomerge

    def _dynamic(self, bound: Any, si: int, b: int, e: int, p: PipeInfo) -> tuple[int, int]:
        kind, src = bound[0]
        if kind != "set" or self.obj.set_unknown.get(src):
            raise _Unmodelled("dynamic descriptor not decoded")
        d = self.obj.set_content.get(src, {}).get((b, e))
        if d is None or "buffer" not in d[1]:
            raise _Unmodelled("dynamic descriptor not written")
        sl = self.obj.set_layouts[self.obj.sets[src]]
        order = [(bb, ee) for bb, t, n in sl.dynamic() for ee in range(n)]
        k = order.index((b, e))
        dyn = bound[1]
        return d[1]["buffer"], int(d[1].get("offset", 0)) + (int(dyn[k]) if k < len(dyn) else 0)

    def _emit_fixed(self, ex: _Exec, p: PipeInfo) -> None:
        dyn = ex.dyn
        vk_topo = dyn.get("topology", p.topology) if p.is_dynamic("VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY") else p.topology
        t = topology(vk_topo, dyn.get("patch_points", p.patch_points)) or ("TRIANGLESTRIP", "triangle")
        self._set("topo", t[0], "IASetPrimitiveTopology", t[0])
        if p.is_dynamic("VK_DYNAMIC_STATE_VERTEX_INPUT_EXT"):
            bindings = dyn.get("vertex_input", ((), ()))[0]
        else:
            bindings = p.bindings
        for b, stride, _rate in bindings:
            vb = ex.vbs.get(b)
            if vb is None:
                continue
            buf, off, dstride = vb
            s = dstride if dstride is not None and p.is_dynamic("VK_DYNAMIC_STATE_VERTEX_INPUT_BINDING_STRIDE") \
                else stride
            if b >= MAX_VERTEX_BUFFERS:
                raise _Unmodelled(f"vertex binding {b} (D3D12 has {MAX_VERTEX_BUFFERS} slots)")
            name = self.buffer(buf)
            if off > self.obj.buffers[buf][0]:
                raise _Unmodelled("vertex buffer offset past the buffer")
            self._set(("vb", b), (buf, off, s), "IASetVertexBuffers", b, name, off, s)
        vp = dyn.get("viewport")
        if vp is not None:
            self._set("vp", vp, "RSSetViewports", *vp)
        sc = dyn.get("scissor")
        if sc is not None:
            self._set("sc", sc, "RSSetScissorRects", *sc)
        bf = dyn.get("blend_constants")
        if bf is not None:
            self._set("bf", bf, "OMSetBlendFactor", *bf)
        st = dyn.get(_STENCIL)
        if isinstance(st, tuple):
            self._set("stencil", st[0], "OMSetStencilRef", st[0])

    def _index(self, ex: _Exec) -> None:
        if ex.ib is None:
            raise _Unmodelled("no index buffer bound")
        buf, off, fmt = ex.ib
        name = self.buffer(buf)
        if off > self.obj.buffers[buf][0]:
            raise _Unmodelled("index buffer offset past the buffer")
        self._set("ib", ex.ib, "IASetIndexBuffer", name, fmt, off)

    def draw(self, ex: _Exec, op: str, *args: Any, indexed: bool = False, n: int = 1) -> None:
        self.draws(ex, op, [args], indexed=indexed, n=n)

    def draws(self, ex: _Exec, op: str, rows: list[tuple[Any, ...]], indexed: bool = False, n: int = 1) -> None:
        """Draws ``op(*row)`` for each row under the same state (a multi-draw's expansion); each
        row counts as ``n`` draws. A fenced writer gets its fences around every draw."""
        if not rows:
            return
        writes, nomerge = self._prepare(ex, "g")
        if indexed:
            self._index(ex)
        kw = {"flags": "nomerge"} if nomerge else {}
        fence = writes and self.unknown_reads
        for j, args in enumerate(rows):
            if fence and j:
                self._prepare(ex, "g")
                if indexed:
                    self._index(ex)
            self.cmds.append((op, args, kw))
            self.stats.draws += n
            if fence:
                self.opaque(_FENCE, "fence")

    # ------------------------------------------------------------------ build
    def build(self) -> Any:
        """The frame's stream (checked)."""
        b = StreamBuilder()
        for key, make in self.decl_order:
            d = make()
            if isinstance(d, Buffer) and ("fe", key[1]) in self.declared:
                d.frontend = True
            b.declare(d)
        if self.res_slots or self.smp_slots or any(c[0] == "SetDescriptorHeaps" for c in self.cmds):
            b.declare(Heap("res", "CBV_SRV_UAV", max(1, min(self.res_slots, 1_000_000))))
            b.declare(Heap("smp", "SAMPLER", max(1, min(self.smp_slots, 1_000_000))))
            for v in self.views:
                b.declare(v)
        for name, args, kw in self.cmds:
            b.cmd(name, *args, **kw)
        s = b.build()
        self.stats.commands = len(s)
        return s


_NONE = object()
_FENCE = "fence: a GPU write, and the capture's descriptor reads are not all known"


# ---------------------------------------------------------------------- command handlers
def _bind_pipeline(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    bp = "c" if a["pipelineBindPoint"] == "VK_PIPELINE_BIND_POINT_COMPUTE" else "g"
    if a["pipelineBindPoint"] not in ("VK_PIPELINE_BIND_POINT_COMPUTE", "VK_PIPELINE_BIND_POINT_GRAPHICS"):
        raise _Unmodelled("bind point")
    ex.pipe[bp] = a["pipeline"]
    p = fe.obj.pipelines.get(a["pipeline"])
    if p is not None and bp == "g":
        # a pipeline with a static viewport / scissor sets it itself
        if not p.is_dynamic("VK_DYNAMIC_STATE_VIEWPORT") and not p.is_dynamic("VK_DYNAMIC_STATE_VIEWPORT_WITH_COUNT"):
            _put(ex.dyn, "viewport", p.viewport)
        if not p.is_dynamic("VK_DYNAMIC_STATE_SCISSOR") and not p.is_dynamic("VK_DYNAMIC_STATE_SCISSOR_WITH_COUNT"):
            _put(ex.dyn, "scissor", p.scissor)


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value


def _bind_sets(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    bp = "c" if a["pipelineBindPoint"] == "VK_PIPELINE_BIND_POINT_COMPUTE" else "g"
    dyn = list(a.get("pDynamicOffsets") or ())
    first = int(a["firstSet"])
    for j, s in enumerate(a.get("pDescriptorSets") or ()):
        lh = fe.obj.sets.get(s)
        n = len(fe.obj.set_layouts[lh].dynamic()) if lh in fe.obj.set_layouts else 0
        n = sum(c for _, _, c in fe.obj.set_layouts[lh].dynamic()) if lh in fe.obj.set_layouts else n
        ex.sets[bp][first + j] = (("set", s), tuple(dyn[:n]))
        dyn = dyn[n:]


def decode_writes(writes: Any, content: dict[tuple[int, int], Any]) -> None:
    """Apply ``VkWriteDescriptorSet``s to ``content`` ((binding, element) -> (type, info))."""
    for w in writes or ():
        t = w["descriptorType"]
        b, e0 = int(w["dstBinding"]), int(w["dstArrayElement"])
        infos: list[dict[str, Any]] = []
        if w.get("pBufferInfo"):
            infos = [{"buffer": x["buffer"], "offset": x.get("offset", 0), "range": x.get("range", 0)}
                     for x in w["pBufferInfo"]]
        elif w.get("pImageInfo"):
            infos = [{"view": x.get("imageView") if isinstance(x.get("imageView"), int) else None,
                      "sampler": x.get("sampler") if isinstance(x.get("sampler"), int) else None}
                     for x in w["pImageInfo"]]
        elif w.get("pTexelBufferView"):
            infos = [{"texel": x} for x in w["pTexelBufferView"]]
        else:
            raise ValueError("descriptor write without decoded contents")
        for j, info in enumerate(infos[: int(w["descriptorCount"])]):
            content[(b, e0 + j)] = (t, info)


def _push_set(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    bp = "c" if a["pipelineBindPoint"] == "VK_PIPELINE_BIND_POINT_COMPUTE" else "g"
    content: dict[tuple[int, int], Any] = {}
    decode_writes(a.get("pDescriptorWrites"), content)
    ex.sets[bp][int(a["set"])] = (("push", content), ())


def _push_set_template(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    tpl = fe.obj.templates.get(a["descriptorUpdateTemplate"], {})
    bp = "c" if tpl.get("pipelineBindPoint") == "VK_PIPELINE_BIND_POINT_COMPUTE" else "g"
    fe.unknown_counter += 1  # every push is an update of its own
    ex.sets[bp][int(tpl.get("set", 0))] = (("unknown", ("push", fe.unknown_counter)), ())


def _push_constants(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    vals = a.get("pValues")
    off, size = int(a["offset"]), int(a["size"])
    if not isinstance(vals, list) or off % 4 or size % 4 or off + size > 256:
        raise _Unmodelled("push constant values not decoded")
    data = bytes(int(v) & 0xFF for v in vals[:size])
    ex.push_known = True
    for j in range(size // 4):
        ex.push[off // 4 + j] = int.from_bytes(data[4 * j: 4 * j + 4], "little")


def _vbs(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    first = int(a["firstBinding"])
    strides = a.get("pStrides") or [None] * len(a["pBuffers"])
    for j, (buf, off) in enumerate(zip(a["pBuffers"], a["pOffsets"])):
        if not isinstance(buf, int):
            ex.vbs.pop(first + j, None)
            continue
        ex.vbs[first + j] = (buf, int(off), None if strides[j] is None else int(strides[j]))


def _ib(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    fmt = {"VK_INDEX_TYPE_UINT16": "R16_UINT", "VK_INDEX_TYPE_UINT32": "R32_UINT"}.get(a["indexType"])
    if fmt is None:
        ex.ib = None
        raise _Unmodelled(f"index type {a['indexType']}")
    ex.ib = (a["buffer"], int(a["offset"]), fmt)


def _viewport(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    if int(a.get("firstViewport", 0)) != 0:
        raise _Unmodelled("viewport other than the first")
    v = a["pViewports"][0]
    ex.dyn["viewport"] = tuple(float(v[k]) for k in ("x", "y", "width", "height", "minDepth", "maxDepth"))
    if len(a["pViewports"]) > 1:
        ex.dyn["viewports+"] = json.dumps(a["pViewports"][1:])


def _scissor(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    if int(a.get("firstScissor", 0)) != 0:
        raise _Unmodelled("scissor other than the first")
    ex.dyn["scissor"] = rect(a["pScissors"][0])


def _blend_constants(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    ex.dyn["blend_constants"] = tuple(float(x) for x in a["blendConstants"])


def _stencil_ref(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    f, b = ex.dyn.get(_STENCIL, (0, 0)) if isinstance(ex.dyn.get(_STENCIL), tuple) else (0, 0)
    m, r = int(a["faceMask"]), int(a["reference"])
    ex.dyn[_STENCIL] = (r if m & 1 else f, r if m & 2 else b)


def _topology(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    ex.dyn["topology"] = a["primitiveTopology"]


def _patch_points(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    ex.dyn["patch_points"] = int(a["patchControlPoints"])


def _vertex_input(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    binds = tuple((int(d["binding"]), int(d["stride"]), d["inputRate"], int(d.get("divisor", 1)))
                  for d in a.get("pVertexBindingDescriptions") or ())
    attrs = tuple((int(d["location"]), int(d["binding"]), d["format"], int(d["offset"]))
                  for d in a.get("pVertexAttributeDescriptions") or ())
    ex.dyn["vertex_input"] = (tuple(b[:3] for b in binds), attrs + tuple(("div",) + b for b in binds if b[3] != 1))


def _depth_dyn(key: str, field_: str) -> Any:
    def h(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
        ex.dyn[dynamic_state_key(key)] = a[field_]
    return h


def _begin_render_pass(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    info = a["pRenderPassBegin"]
    fb = fe.obj.framebuffers.get(info["framebuffer"])
    rp = fe.obj.render_passes.get(info["renderPass"])
    if fb is None or rp is None:
        raise _Unmodelled("unknown render pass or framebuffer")
    ex.fb_views = list(fb[1])
    ex.subpass = (info["renderPass"], 0)
    _enter_subpass(fe, ex, rp, 0, "vkCmdBeginRenderPass")


def _enter_subpass(fe: FrameEmitter, ex: _Exec, rp: Any, k: int, call: str) -> None:
    cols, dep, resolves = rp.subpasses[k]
    if fe.unknown_reads and k == 0:
        fe.opaque(f"{call} (subpass dependencies; the capture's descriptor reads are not all known)", call)
    if resolves:
        fe.opaque(f"{call}: subpass {k} resolves", call)
    imgs = [fe.view_image(ex.fb_views[c]) for c in cols if c < len(ex.fb_views)]
    d = fe.view_image(ex.fb_views[dep]) if dep is not None and dep < len(ex.fb_views) else None
    ex.targets = (tuple(imgs[:8]), d)
    # attachments first used in this subpass and not loaded are written here (clear / undefined)
    used = [c for c in cols] + ([dep] if dep is not None else [])
    first_use = [i for i in used if i < len(rp.loads) and not any(
        i in (sp[0] + ([sp[1]] if sp[1] is not None else [])) for sp in rp.subpasses[:k])]
    cleared = [i for i in first_use if "LOAD_OP_LOAD" not in rp.loads[i][0] and "LOAD_OP_NONE" not in rp.loads[i][0]]
    if cleared:
        names = " ".join(fe.image(fe.view_image(ex.fb_views[i])) for i in cleared)
        fe.opaque(f"{call}: loadOp {rp.loads[cleared[0]][0][len('VK_ATTACHMENT_LOAD_OP_'):]} {names}", call)


def _next_subpass(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    if ex.subpass is None:
        raise _Unmodelled("no render pass")
    rph, k = ex.subpass
    rp = fe.obj.render_passes[rph]
    fe.opaque("vkCmdNextSubpass", "vkCmdNextSubpass")
    ex.subpass = (rph, k + 1)
    _enter_subpass(fe, ex, rp, k + 1, "vkCmdNextSubpass")


def _begin_rendering(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    info = a["pRenderingInfo"]
    if fe.unknown_reads:
        fe.opaque("vkCmdBeginRendering (the capture's descriptor reads are not all known)", "vkCmdBeginRendering")
    cols, cleared = [], []
    for att in info.get("pColorAttachments") or ():
        v = att.get("imageView")
        if not isinstance(v, int):
            continue
        img = fe.view_image(v)
        cols.append(img)
        if att.get("resolveMode") not in (None, "VK_RESOLVE_MODE_NONE"):
            fe.opaque("vkCmdBeginRendering: resolve", "vkCmdBeginRendering")
        if att.get("loadOp") not in ("VK_ATTACHMENT_LOAD_OP_LOAD", "VK_ATTACHMENT_LOAD_OP_NONE_EXT"):
            cleared.append(img)
    dep = None
    for key in ("pDepthAttachment", "pStencilAttachment"):
        att = info.get(key)
        if att and isinstance(att.get("imageView"), int):
            dep = fe.view_image(att["imageView"])
            if att.get("loadOp") not in ("VK_ATTACHMENT_LOAD_OP_LOAD", "VK_ATTACHMENT_LOAD_OP_NONE_EXT") \
                    and dep not in cleared:
                cleared.append(dep)
    if int(info.get("flags", 0) or 0) & 0x2:  # RESUMING: the attachments carry on from the suspended pass
        cleared = []
    ex.targets = (tuple(cols[:8]), dep)
    if cleared:
        fe.opaque("vkCmdBeginRendering: clear " + " ".join(fe.image(i) for i in cleared), "vkCmdBeginRendering")


def _draw(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    if int(a["vertexCount"]) == 0 or int(a["instanceCount"]) == 0:
        fe.stats.dropped["vkCmdDraw(empty)"] += 1
        return
    fe.draw(ex, "DrawInstanced", int(a["vertexCount"]), int(a["instanceCount"]), int(a["firstVertex"]),
            int(a["firstInstance"]))


def _draw_indexed(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    if int(a["indexCount"]) == 0 or int(a["instanceCount"]) == 0:
        fe.stats.dropped["vkCmdDrawIndexed(empty)"] += 1
        return
    fe.draw(ex, "DrawIndexedInstanced", int(a["indexCount"]), int(a["instanceCount"]), int(a["firstIndex"]),
            int(a["vertexOffset"]), int(a["firstInstance"]), indexed=True)


def _draw_multi(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    inst, fi = int(a["instanceCount"]), int(a["firstInstance"])
    fe.draws(ex, "DrawInstanced", [(int(v["vertexCount"]), inst, int(v["firstVertex"]), fi)
                                   for v in a.get("pVertexInfo") or () if int(v["vertexCount"]) and inst])


def _draw_multi_indexed(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    inst, fi = int(a["instanceCount"]), int(a["firstInstance"])
    common = a.get("pVertexOffset")
    fe.draws(ex, "DrawIndexedInstanced",
             [(int(v["indexCount"]), inst, int(v["firstIndex"]),
               int(common) if isinstance(common, int) else int(v["vertexOffset"]), fi)
              for v in a.get("pIndexInfo") or () if int(v["indexCount"]) and inst], indexed=True)


def _indirect(indexed: bool) -> Any:
    rec = 20 if indexed else 16

    def h(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
        n, stride, off = int(a["drawCount"]), int(a["stride"]), int(a["offset"])
        if n == 0:
            fe.stats.dropped["indirect(empty)"] += 1
            return
        buf = fe.buffer(a["buffer"], frontend=True)
        if off % 4 or off + (n - 1) * stride + rec > fe.obj.buffers[a["buffer"]][0]:
            raise _Unmodelled("indirect arguments outside the buffer")
        if n == 1:
            fe.draw(ex, "DrawIndexedInstancedIndirect" if indexed else "DrawInstancedIndirect", buf, off,
                    indexed=indexed)
        else:
            fe.draw(ex, "MultiDrawIndexedInstancedIndirect" if indexed else "MultiDrawInstancedIndirect",
                    n, buf, off, stride, indexed=indexed, n=n)
    return h


def _indirect_count(indexed: bool) -> Any:
    rec = 20 if indexed else 16

    def h(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
        mx, stride, off, coff = int(a["maxDrawCount"]), int(a["stride"]), int(a["offset"]), int(a["countBufferOffset"])
        if mx == 0:
            fe.stats.dropped["indirect-count(empty)"] += 1
            return
        buf = fe.buffer(a["buffer"], frontend=True)
        cbuf = fe.buffer(a["countBuffer"], frontend=True)
        if off % 4 or off + (mx - 1) * stride + rec > fe.obj.buffers[a["buffer"]][0]:
            raise _Unmodelled("indirect arguments outside the buffer")
        fe.draw(ex, "MultiDrawIndexedInstancedIndirectAuto" if indexed else "MultiDrawInstancedIndirectAuto",
                cbuf, coff, mx, buf, off, max(stride, rec), indexed=indexed, n=1)
    return h


def _dispatch(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    writes, _ = fe._prepare(ex, "c")
    fe.cmds.append(("Dispatch", (int(a["groupCountX"]), int(a["groupCountY"]), int(a["groupCountZ"])), {}))
    if writes and fe.unknown_reads:
        fe.opaque(_FENCE, "fence")


def _barrier(fe: FrameEmitter, ex: _Exec, a: dict[str, Any], v2: bool = False) -> None:
    info = a["pDependencyInfo"] if v2 else a
    if fe.unknown_reads:  # the reads this barrier orders are not all known: nothing may cross it
        fe.opaque("vkCmdPipelineBarrier (the capture's descriptor reads are not all known)",
                  "vkCmdPipelineBarrier" + ("2" if v2 else ""))
        return
    if info.get("memoryBarrierCount"):
        fe.opaque("vkCmdPipelineBarrier: global memory barrier", "vkCmdPipelineBarrier" + ("2" if v2 else ""))
        return
    for b in info.get("pBufferMemoryBarriers") or ():
        name = fe.buffer(b["buffer"])
        before, after = access_state(b["srcAccessMask"]), access_state(b["dstAccessMask"])
        if after in ("INDIRECT_ARGUMENT", "INDEX_BUFFER"):
            fe.declared.add(("fe", b["buffer"]))
        fe.cmds.append(("ResourceBarrier", (name, before, after), {}))
    for b in info.get("pImageMemoryBarriers") or ():
        img = b["image"]
        name = fe.image(img)
        dep = is_depth_format(fe.obj.images[img][2])
        fe.cmds.append(("ResourceBarrier", (name, layout_state(b["oldLayout"], dep),
                                            layout_state(b["newLayout"], dep)), {}))


def _copy_buffer(fe: FrameEmitter, ex: _Exec, a: dict[str, Any]) -> None:
    src, dst = fe.buffer(a["srcBuffer"]), fe.buffer(a["dstBuffer"])
    if fe.unknown_reads:
        raise _Unmodelled("the capture's descriptor reads are not all known")
    for r in a["pRegions"]:
        s_off, d_off, size = int(r["srcOffset"]), int(r["dstOffset"]), int(r["size"])
        if s_off + size > fe.obj.buffers[a["srcBuffer"]][0] or d_off + size > fe.obj.buffers[a["dstBuffer"]][0]:
            raise _Unmodelled("copy outside the buffers")
        fe.cmds.append(("CopyBufferRegion", (dst, d_off, src, s_off, size), {}))


_HANDLERS: dict[str, Any] = {
    "vkCmdBindPipeline": _bind_pipeline,
    "vkCmdBindDescriptorSets": _bind_sets,
    "vkCmdPushDescriptorSetKHR": _push_set,
    "vkCmdPushDescriptorSetWithTemplateKHR": _push_set_template,
    "vkCmdPushConstants": _push_constants,
    "vkCmdBindVertexBuffers": _vbs,
    "vkCmdBindVertexBuffers2": _vbs,
    "vkCmdBindVertexBuffers2EXT": _vbs,
    "vkCmdBindIndexBuffer": _ib,
    "vkCmdSetViewport": _viewport,
    "vkCmdSetViewportWithCount": _viewport,
    "vkCmdSetViewportWithCountEXT": _viewport,
    "vkCmdSetScissor": _scissor,
    "vkCmdSetScissorWithCount": _scissor,
    "vkCmdSetScissorWithCountEXT": _scissor,
    "vkCmdSetBlendConstants": _blend_constants,
    "vkCmdSetStencilReference": _stencil_ref,
    "vkCmdSetPrimitiveTopology": _topology,
    "vkCmdSetPrimitiveTopologyEXT": _topology,
    "vkCmdSetPatchControlPointsEXT": _patch_points,
    "vkCmdSetVertexInputEXT": _vertex_input,
    "vkCmdSetDepthTestEnable": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_TEST_ENABLE", "depthTestEnable"),
    "vkCmdSetDepthTestEnableEXT": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_TEST_ENABLE", "depthTestEnable"),
    "vkCmdSetDepthWriteEnable": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_WRITE_ENABLE", "depthWriteEnable"),
    "vkCmdSetDepthWriteEnableEXT": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_WRITE_ENABLE", "depthWriteEnable"),
    "vkCmdSetDepthCompareOp": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_COMPARE_OP", "depthCompareOp"),
    "vkCmdSetDepthCompareOpEXT": _depth_dyn("VK_DYNAMIC_STATE_DEPTH_COMPARE_OP", "depthCompareOp"),
    "vkCmdSetColorBlendEnableEXT": lambda fe, ex, a: ex.dyn.__setitem__(
        dynamic_state_key("vkCmdSetColorBlendEnableEXT"), int(a["pColorBlendEnables"][0])),
    "vkCmdSetColorBlendEquationEXT": lambda fe, ex, a: ex.dyn.__setitem__(
        dynamic_state_key("vkCmdSetColorBlendEquationEXT"), tuple(sorted(a["pColorBlendEquations"][0].items()))),
    "vkCmdBeginRenderPass": _begin_render_pass,
    "vkCmdBeginRenderPass2": lambda fe, ex, a: _begin_render_pass(fe, ex, a),
    "vkCmdBeginRenderPass2KHR": lambda fe, ex, a: _begin_render_pass(fe, ex, a),
    "vkCmdNextSubpass": _next_subpass,
    "vkCmdBeginRendering": _begin_rendering,
    "vkCmdBeginRenderingKHR": _begin_rendering,
    "vkCmdDraw": _draw,
    "vkCmdDrawIndexed": _draw_indexed,
    "vkCmdDrawMultiEXT": _draw_multi,
    "vkCmdDrawMultiIndexedEXT": _draw_multi_indexed,
    "vkCmdDrawIndirect": _indirect(False),
    "vkCmdDrawIndexedIndirect": _indirect(True),
    "vkCmdDrawIndirectCount": _indirect_count(False),
    "vkCmdDrawIndirectCountKHR": _indirect_count(False),
    "vkCmdDrawIndexedIndirectCount": _indirect_count(True),
    "vkCmdDrawIndexedIndirectCountKHR": _indirect_count(True),
    "vkCmdDispatch": _dispatch,
    "vkCmdPipelineBarrier": _barrier,
    "vkCmdPipelineBarrier2": lambda fe, ex, a: _barrier(fe, ex, a, True),
    "vkCmdPipelineBarrier2KHR": lambda fe, ex, a: _barrier(fe, ex, a, True),
    "vkCmdCopyBuffer": _copy_buffer,
}
"""vkCmd* calls the emitter models; any other vkCmd* call (not a ``vkCmdSet*`` dynamic state and not
dropped) becomes an Opaque full barrier."""

# the vkCmdSet* calls above whose value the handler keeps under its own key are modelled; the
# others (line width, depth bias, cull mode ...) are kept by run() under dynamic_state_key(name)
