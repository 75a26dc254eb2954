"""The capture reader: one pass over the JSON Lines, objects tracked, command buffers recorded, frames cut.

Command buffers are kept as recorded (the call name and its decoded arguments) until they are
reset, freed or re-begun, and are executed into a frame at each ``vkQueueSubmit`` that submits
them (:class:`~.emit.FrameEmitter`), so a command buffer recorded once and submitted every frame
is expanded in each. A frame ends at ``vkQueuePresentKHR`` (``split="present"``) or at each
``vkQueueSubmit`` (``split="submit"``); ``"auto"`` is ``present`` when the capture presents at all.
Memory is bounded by the live command buffers and the frames kept, not by the capture.
"""

from __future__ import annotations

__all__ = ["read_capture", "FrameInfo", "Summary"]

import gzip
import lzma
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from drawopt.errors import InputError, UsageError
from drawopt.importers.capture.emit import FrameEmitter, FrameStats, Shaders, decode_writes
from drawopt.importers.capture.objects import Objects, PipeInfo, PipeLayout, RenderPass, SetLayout
from drawopt.importers.capture.source import (
    JSON_VERSIONS,
    _loads,
    convert_gfxr,
    extract_shaders,
    open_binary,
    scan,
    temp_dir,
)
from drawopt.importers.capture.spirv import reflect_file
from drawopt.importers.capture.vkmap import dynamic_state_key, rect

SPLITS = ("auto", "present", "submit")


@dataclass
class FrameInfo:
    """One frame of a capture, as ``--list`` prints it."""

    frame: int
    draws: int
    commands: int
    calls: int
    submits: int
    opaque: int
    lines: tuple[int, int]


@dataclass
class Summary:
    """What an import did: per-frame statistics, the split used, shader coverage."""

    file: str
    split: str = "present"
    frames_total: int = 0
    records: int = 0
    frames: list[FrameStats] = field(default_factory=list)
    shaders_read: int = 0
    shaders_missing: dict[str, str] = field(default_factory=dict)  # module -> why no reflection
    json_version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "split": self.split, "frames_total": self.frames_total,
                "records": self.records, "json_version": self.json_version,
                "shaders_read": self.shaders_read, "shaders_missing": dict(sorted(self.shaders_missing.items())),
                "frames": [f.to_json() for f in self.frames]}


_STAGE = {
    "VK_SHADER_STAGE_VERTEX_BIT": "vs", "VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT": "hs",
    "VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT": "ds", "VK_SHADER_STAGE_GEOMETRY_BIT": "gs",
    "VK_SHADER_STAGE_FRAGMENT_BIT": "ps", "VK_SHADER_STAGE_COMPUTE_BIT": "cs",
}
# calls that are neither commands nor objects the mapping needs (queries of the device, memory,
# synchronisation on the host): skipped without decoding their JSON
_SKIP_PREFIX = ("vkGet", "vkEnumerate", "vkWaitFor", "vkResetFences", "vkMapMemory", "vkUnmapMemory",
                "vkAllocateMemory", "vkFreeMemory", "vkBind", "vkFlushMapped", "vkInvalidateMapped",
                "vkDestroy", "vkCreateSemaphore", "vkCreateFence", "vkAcquireNextImage", "vkDeviceWaitIdle",
                "vkQueueWaitIdle", "vkCreatePipelineCache", "vkSetDebugUtils", "vkCreateDebug")


class _Reader:
    def __init__(self, name: str, keep: Callable[[int], bool], build: bool, split: str, shaders_dir: str | None):
        self.name, self.keep, self.build_streams, self.split = name, keep, build, split
        self.obj = Objects()
        self.shaders = Shaders()
        self.shaders_dir = shaders_dir
        self.summary = Summary(name, split)
        self.variants: dict[Any, str] = {}
        self.frame = 1
        self.fe: FrameEmitter | None = None
        self.out: dict[int, Any] = {}
        self.line = 0
        self.unknown_reads = False  # descriptor contents the capture does not decode

    # ---------------------------------------------------------------- frames
    def _emitter(self) -> FrameEmitter:
        if self.fe is None:
            self.fe = FrameEmitter(self.frame, self.obj, self.shaders, self.variants, self.keep(self.frame))
            self.fe.file = self.name
            self.fe.unknown_reads = self.unknown_reads
            self.fe.stats.first_line = self.line
        return self.fe

    def _end_frame(self) -> None:
        fe = self._emitter()
        fe.stats.last_line = self.line
        if fe.keep:
            try:
                stream = fe.build()
            except ValueError as e:  # a mapping bug, not bad input: say where
                raise InputError(f"frame {self.frame}: imported stream is invalid: {e}", self.name,
                                 fe.stats.first_line, 1) from None
            if self.build_streams:
                self.out[self.frame] = stream
        else:
            fe.stats.commands = len(fe.cmds)
        self.summary.frames.append(fe.stats)
        self.fe = None
        self.frame += 1

    def _submit(self, a: dict[str, Any]) -> None:
        fe = self._emitter()
        if fe.keep:
            for s in a.get("pSubmits") or ():
                if self.unknown_reads and s.get("waitSemaphoreCount") and (fe.cmds or fe.stats.submits):
                    fe.opaque("vkQueueSubmit: semaphore wait (the capture's descriptor reads are not all known)",
                              "vkQueueSubmit")
                for cb in s.get("pCommandBuffers") or ():
                    fe.run(self.obj.cmdbufs.get(cb, []))
        fe.stats.submits += 1
        if self.split == "submit":
            self._end_frame()

    def _submit2(self, a: dict[str, Any]) -> None:
        subs = []
        for s in a.get("pSubmits") or ():
            subs.append({"pCommandBuffers": [c["commandBuffer"] for c in s.get("pCommandBufferInfos") or ()],
                         "waitSemaphoreCount": s.get("waitSemaphoreInfoCount", 0)})
        self._submit({"pSubmits": subs})

    # ---------------------------------------------------------------- objects
    def record(self, name: str, a: dict[str, Any]) -> None:
        o = self.obj
        if name.startswith("vkCmd"):
            cb = a.get("commandBuffer")
            o.cmdbufs.setdefault(cb, []).append((name, a, self.line))
            return
        h = _HANDLERS.get(name)
        if h is not None:
            h(self, a)

    def module(self, h: int) -> None:
        if h in self.shaders.reflections:
            return
        refl, why = None, "no --shaders folder"
        if self.shaders_dir is not None:
            path = os.path.join(self.shaders_dir, f"sh{h}")
            if os.path.exists(path):
                refl, why = reflect_file(path)
            else:
                why = f"sh{h} not in the shaders folder"
        self.shaders.reflections[h] = refl
        if refl is None:
            self.summary.shaders_missing[f"sh{h}"] = why
        else:
            self.summary.shaders_read += 1


def _create_buffer(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    r.obj.buffers[a["pBuffer"]] = (int(ci["size"]), int(ci.get("usage", 0)) if isinstance(ci.get("usage"), int) else 0)


def _create_image(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    usage = ci.get("usage", 0)
    r.obj.images[a["pImage"]] = (int(ci["extent"]["width"]), int(ci["extent"]["height"]), ci["format"],
                                 usage if isinstance(usage, int) else 0)


def _create_swapchain(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    r.obj.images[-int(a["pSwapchain"])] = (int(ci["imageExtent"]["width"]), int(ci["imageExtent"]["height"]),
                                           ci["imageFormat"], 0x10)


def _swapchain_images(r: _Reader, a: dict[str, Any]) -> None:
    imgs = a.get("pSwapchainImages")
    sc = r.obj.images.get(-int(a["swapchain"]))
    if imgs and sc is not None:
        for i in imgs:
            r.obj.images[i] = sc


def _create_image_view(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.image_views[a["pView"]] = a["pCreateInfo"]["image"]


def _create_buffer_view(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.buffer_views[a["pView"]] = a["pCreateInfo"]["buffer"]


def _create_set_layout(r: _Reader, a: dict[str, Any]) -> None:
    b = sorted((int(x["binding"]), x["descriptorType"], int(x["descriptorCount"]))
               for x in a["pCreateInfo"].get("pBindings") or ())
    r.obj.set_layouts[a["pSetLayout"]] = SetLayout([x for x in b if x[2] > 0])


def _create_pipe_layout(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    words = max((int(p["offset"]) + int(p["size"]) for p in ci.get("pPushConstantRanges") or ()), default=0)
    r.obj.pipe_layouts[a["pPipelineLayout"]] = PipeLayout(list(ci.get("pSetLayouts") or ()), (words + 3) // 4)


def _create_module(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.modules[a["pShaderModule"]] = int(a["pCreateInfo"].get("codeSize", 0))
    r.shaders.reflections.pop(a["pShaderModule"], None)


def _stages(r: _Reader, stages: Iterable[dict[str, Any]]) -> tuple[dict[str, int | None], str]:
    out: dict[str, int | None] = {}
    why = ""
    for st in stages:
        s = _STAGE.get(st["stage"])
        if s is None:
            why = f"shader stage {st['stage']} has no drawopt equivalent"
            continue
        m = st.get("module")
        out[s] = m if isinstance(m, int) else None
        if isinstance(m, int):
            r.module(m)
    return out, why


def _create_graphics(r: _Reader, a: dict[str, Any]) -> None:
    for ci, h in zip(a["pCreateInfos"], a["pPipelines"]):
        stages, why = _stages(r, ci.get("pStages") or ())
        if "vs" not in stages:
            why = why or "no vertex shader (mesh shading)"
        if ("hs" in stages) != ("ds" in stages):
            why = why or "tessellation stages incomplete"
        dyn = frozenset(dynamic_state_key(d) for d in (ci.get("pDynamicState") or {}).get("pDynamicStates") or ())
        vi = ci.get("pVertexInputState") or {}
        binds = tuple((int(b["binding"]), int(b["stride"]), b["inputRate"])
                      for b in vi.get("pVertexBindingDescriptions") or ())
        attrs = tuple((int(x["location"]), int(x["binding"]), x["format"], int(x["offset"]))
                      for x in vi.get("pVertexAttributeDescriptions") or ())
        ia = ci.get("pInputAssemblyState") or {}
        ts = ci.get("pTessellationState") or {}
        ds = ci.get("pDepthStencilState") or {}
        cb = ci.get("pColorBlendState") or {}
        atts = cb.get("pAttachments") or [None]
        vp = ci.get("pViewportState") or {}
        v0 = (vp.get("pViewports") or [None])[0]
        s0 = (vp.get("pScissors") or [None])[0]
        r.obj.pipelines[h] = PipeInfo(
            h, False, stages, ci["layout"], ia.get("topology", "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST"),
            int(ts.get("patchControlPoints", 3) or 3), binds, attrs,
            (ds.get("depthTestEnable", 0), ds.get("depthWriteEnable", 0),
             ds.get("depthCompareOp", "VK_COMPARE_OP_ALWAYS")),
            atts[0], dyn, why,
            tuple(float(v0[k]) for k in ("x", "y", "width", "height", "minDepth", "maxDepth")) if v0 else None,
            rect(s0) if s0 else None)


def _create_compute(r: _Reader, a: dict[str, Any]) -> None:
    for ci, h in zip(a["pCreateInfos"], a["pPipelines"]):
        stages, why = _stages(r, [ci["stage"]])
        r.obj.pipelines[h] = PipeInfo(h, True, stages, ci["layout"], unsupported=why)


def _create_render_pass(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    atts = ci.get("pAttachments") or ()
    subs = []
    for sp in ci.get("pSubpasses") or ():
        cols = [int(c["attachment"]) for c in sp.get("pColorAttachments") or () if int(c["attachment"]) != 0xFFFFFFFF]
        d = sp.get("pDepthStencilAttachment")
        dep = int(d["attachment"]) if d and int(d["attachment"]) != 0xFFFFFFFF else None
        res = any(int(x["attachment"]) != 0xFFFFFFFF for x in sp.get("pResolveAttachments") or ())
        subs.append((cols, dep, res))
    r.obj.render_passes[a["pRenderPass"]] = RenderPass(
        [x["format"] for x in atts], [(x["loadOp"], x.get("stencilLoadOp", "")) for x in atts], subs)


def _create_framebuffer(r: _Reader, a: dict[str, Any]) -> None:
    ci = a["pCreateInfo"]
    r.obj.framebuffers[a["pFramebuffer"]] = (ci["renderPass"], list(ci.get("pAttachments") or ()))


def _alloc_sets(r: _Reader, a: dict[str, Any]) -> None:
    for s, lh in zip(a.get("pDescriptorSets") or (), a["pAllocateInfo"]["pSetLayouts"]):
        r.obj.sets[s] = lh
        r.obj.set_content[s] = {}
        r.obj.set_unknown[s] = False
        r.obj.set_version[s] = r.obj.set_version.get(s, 0) + 1


def _update_sets(r: _Reader, a: dict[str, Any]) -> None:
    o = r.obj
    for w in a.get("pDescriptorWrites") or ():
        s = w["dstSet"]
        content = o.set_content.setdefault(s, {})
        try:
            decode_writes([w], content)
        except (KeyError, TypeError, ValueError):
            o.set_unknown[s] = True
        o.set_version[s] = o.set_version.get(s, 0) + 1
    for c in a.get("pDescriptorCopies") or ():
        src, dst = o.set_content.get(c["srcSet"], {}), o.set_content.setdefault(c["dstSet"], {})
        for j in range(int(c["descriptorCount"])):
            d = src.get((int(c["srcBinding"]), int(c["srcArrayElement"]) + j))
            if d is not None:
                dst[(int(c["dstBinding"]), int(c["dstArrayElement"]) + j)] = d
        if o.set_unknown.get(c["srcSet"]):
            o.set_unknown[c["dstSet"]] = True
        o.set_version[c["dstSet"]] = o.set_version.get(c["dstSet"], 0) + 1


def _update_template(r: _Reader, a: dict[str, Any]) -> None:
    s = a["descriptorSet"]
    r.obj.set_unknown[s] = True  # gfxrecon-convert 0.9.18 does not decode template data
    r.obj.set_version[s] = r.obj.set_version.get(s, 0) + 1


def _create_template(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.templates[a["pDescriptorUpdateTemplate"]] = a["pCreateInfo"]


def _alloc_cbs(r: _Reader, a: dict[str, Any]) -> None:
    pool = a["pAllocateInfo"]["commandPool"]
    for cb in a.get("pCommandBuffers") or ():
        r.obj.cmdbufs[cb] = []
        r.obj.pool_of[cb] = pool


def _begin_cb(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.cmdbufs[a["commandBuffer"]] = []


def _free_cbs(r: _Reader, a: dict[str, Any]) -> None:
    for cb in a.get("pCommandBuffers") or ():
        r.obj.cmdbufs.pop(cb, None)


def _reset_pool(r: _Reader, a: dict[str, Any]) -> None:
    pool = a["commandPool"]
    for cb, p in r.obj.pool_of.items():
        if p == pool:
            r.obj.cmdbufs[cb] = []


def _reset_cb(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.cmdbufs[a["commandBuffer"]] = []


def _sampler(r: _Reader, a: dict[str, Any]) -> None:
    r.obj.samplers.add(a["pSampler"])


_HANDLERS: dict[str, Callable[[_Reader, dict[str, Any]], None]] = {
    "vkCreateBuffer": _create_buffer,
    "vkCreateImage": _create_image,
    "vkCreateSwapchainKHR": _create_swapchain,
    "vkGetSwapchainImagesKHR": _swapchain_images,
    "vkCreateImageView": _create_image_view,
    "vkCreateBufferView": _create_buffer_view,
    "vkCreateSampler": _sampler,
    "vkCreateDescriptorSetLayout": _create_set_layout,
    "vkCreatePipelineLayout": _create_pipe_layout,
    "vkCreateShaderModule": _create_module,
    "vkCreateGraphicsPipelines": _create_graphics,
    "vkCreateComputePipelines": _create_compute,
    "vkCreateRenderPass": _create_render_pass,
    "vkCreateRenderPass2": _create_render_pass,
    "vkCreateRenderPass2KHR": _create_render_pass,
    "vkCreateFramebuffer": _create_framebuffer,
    "vkAllocateDescriptorSets": _alloc_sets,
    "vkUpdateDescriptorSets": _update_sets,
    "vkUpdateDescriptorSetWithTemplate": _update_template,
    "vkUpdateDescriptorSetWithTemplateKHR": _update_template,
    "vkCreateDescriptorUpdateTemplate": _create_template,
    "vkCreateDescriptorUpdateTemplateKHR": _create_template,
    "vkAllocateCommandBuffers": _alloc_cbs,
    "vkBeginCommandBuffer": _begin_cb,
    "vkResetCommandBuffer": _reset_cb,
    "vkFreeCommandBuffers": _free_cbs,
    "vkResetCommandPool": _reset_pool,
}
_NEEDED = ("vkGetSwapchainImagesKHR",)


def _name_of(text: str) -> str | None:
    """The call name of a ``{"index":N,"vkFunc":{"name":"..."`` record without decoding it."""
    i = text.find('"vkFunc":{"name":"', 0, 64)
    if i < 0:
        return None
    j = i + 18
    k = text.find('"', j)
    return text[j:k] if k > 0 else None


def read_capture(path: str, frames: Callable[[int], bool] | None = None, *, build: bool = True,
                 split: str = "auto", shaders: str | None = None,
                 name: str | None = None) -> tuple[dict[int, Any], Summary]:
    """Read capture ``path``: the streams of the frames ``frames(n)`` selects (all when None) and the summary."""
    if split not in SPLITS:
        raise UsageError(f"--split must be one of {', '.join(SPLITS)}")
    name = name or path
    if not os.path.exists(path):
        raise InputError("no such file", name, 1, 1)
    with temp_dir() as tmp:
        src = path
        if path.lower().endswith(".gfxr"):
            src = convert_gfxr(path, tmp)
            if shaders is None:
                shaders = extract_shaders(path, os.path.join(tmp, "shaders"))
        if shaders is not None and not os.path.isdir(shaders):
            raise UsageError(f"--shaders: '{shaders}' is not a folder")
        present, templates = scan(src)
        if split == "auto":
            split = "present" if present else "submit"
        r = _Reader(name, frames or (lambda n: True), build, split, shaders)
        r.unknown_reads = templates
        _loop(r, src, name)
    return r.out, r.summary


_SKIP_B = tuple(p.encode() for p in _SKIP_PREFIX)
_NEEDED_B = tuple(p.encode() for p in _NEEDED)
_CALL = b'"vkFunc":{"name":"'
_CBARG = b'"args":{"commandBuffer":'


def _header(r: _Reader, raw: bytes, name: str) -> None:
    try:
        head = _loads(raw)
    except ValueError as e:
        raise InputError(f"not a gfxrecon-convert JSON Lines capture: {e}", name, 1, 1) from None
    ver = (head.get("header") or {}).get("json-version") if isinstance(head, dict) else None
    if not isinstance(ver, str):
        raise InputError("not a gfxrecon-convert JSON Lines capture (no header with a json-version)", name, 1, 1)
    if ".".join(ver.split(".")[:2]) not in JSON_VERSIONS:
        raise InputError(f"unknown JSON version {ver} (this importer reads {', '.join(JSON_VERSIONS)}.x, "
                         "written by GFXReconstruct 0.9.18)", name, 1, 1)
    r.summary.json_version = ver


def _loop(r: _Reader, src: str, name: str) -> None:
    """The record loop. Command records (most of a capture) are only framed here: their name and
    command buffer are found by byte search and the record is kept undecoded until a kept frame
    executes it; the calls the mapping does not need are skipped; the rest is decoded."""
    loads = _loads
    cmdbufs = r.obj.cmdbufs
    names: dict[bytes, str] = {}
    n = 0
    with open_binary(src, name) as f:
        try:
            for raw in f:
                n += 1
                if n == 1:
                    _header(r, raw, name)
                    continue
                i = raw.find(_CALL, 0, 64)
                if i >= 0:
                    j = i + 18
                    k = raw.find(b'"', j, j + 96)
                    cb = raw[j:k]
                    if cb.startswith(b"vkCmd"):
                        if not raw.rstrip().endswith(b"}"):
                            raise InputError("truncated record", name, n, len(raw.rstrip()) + 1)
                        c = raw.find(_CBARG, k, k + 48)
                        e = raw.find(b",", c + 24, c + 48) if c >= 0 else -1
                        if e < 0:
                            e = raw.find(b"}", c + 24, c + 48) if c >= 0 else -1
                        if e < 0 or not raw[c + 24:e].isdigit():
                            raise InputError("command record without a commandBuffer argument", name, n, 1)
                        call = names.get(cb)
                        if call is None:
                            call = names[cb] = cb.decode("ascii", "replace")
                        cmdbufs.setdefault(int(raw[c + 24:e]), []).append((call, raw, n))
                        continue
                    if cb.startswith(_SKIP_B) and cb not in _NEEDED_B:
                        if not raw.rstrip().endswith(b"}"):
                            raise InputError("truncated record", name, n, len(raw.rstrip()) + 1)
                        continue
                r.line = n
                try:
                    rec = loads(raw)
                except ValueError as e:
                    col = getattr(e, "colno", 1)
                    raise InputError(f"corrupt record: {getattr(e, 'msg', e)}", name, n, col or 1) from None
                fn = rec.get("vkFunc") if isinstance(rec, dict) else None
                if fn is None:
                    if isinstance(rec, dict) and ("meta" in rec or "header" in rec):
                        continue  # metadata blocks (memory fills, state markers): not API calls
                    raise InputError("record is neither an API call nor metadata", name, n, 1)
                call = fn.get("name")
                args = fn.get("args") or {}
                try:
                    if call == "vkQueueSubmit":
                        r._submit(args)
                    elif call in ("vkQueueSubmit2", "vkQueueSubmit2KHR"):
                        r._submit2(args)
                    elif call == "vkQueuePresentKHR":
                        if r.split == "present":
                            r._end_frame()
                    else:
                        r.record(call, args)
                except InputError:
                    raise
                except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
                    raise InputError(f"{call}: unexpected arguments ({type(e).__name__}: {e})", name, n, 1) from None
        except (OSError, EOFError, lzma.LZMAError, gzip.BadGzipFile) as e:
            raise InputError(f"corrupt or truncated compressed capture: {e}", name, n + 1, 1) from None
    r.line = n
    r.summary.records = max(n - 1, 0)
    if n == 0:
        raise InputError("empty capture", name, 1, 1)
    if r.fe is not None and (r.fe.stats.submits or r.fe.cmds):
        r._end_frame()
    r.summary.frames_total = r.frame - 1
