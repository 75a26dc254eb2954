"""Vulkan enumerants onto drawopt's vocabulary: formats, topologies, blend, depth, layouts, descriptors.

Pure functions over the values ``gfxrecon-convert`` writes (enumerant names as strings, flags as
integers or ``|``-joined names). The mapping is documented in docs/import.md.

>>> topology("VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP")
('TRIANGLESTRIP', 'triangle')
>>> depth_key(True, True, "VK_COMPARE_OP_LESS_OR_EQUAL")
'lequal,write'
>>> vk_format("VK_FORMAT_B8G8R8A8_UNORM"), is_depth_format("VK_FORMAT_D24_UNORM_S8_UINT")
('B8G8R8A8_UNORM', True)
"""

from __future__ import annotations

__all__ = [
    "topology", "depth_key", "blend_key", "vk_format", "is_depth_format", "layout_state", "access_state",
    "TABLE_KIND", "SAMPLER_PART", "DYNAMIC_DESCRIPTORS", "dynamic_state_key", "flag_names", "rect",
]

from functools import cache
from typing import Any

_TOPO = {
    "VK_PRIMITIVE_TOPOLOGY_POINT_LIST": ("POINTLIST", "point"),
    "VK_PRIMITIVE_TOPOLOGY_LINE_LIST": ("LINELIST", "line"),
    "VK_PRIMITIVE_TOPOLOGY_LINE_STRIP": ("LINESTRIP", "line"),
    "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST": ("TRIANGLELIST", "triangle"),
    "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP": ("TRIANGLESTRIP", "triangle"),
    "VK_PRIMITIVE_TOPOLOGY_LINE_LIST_WITH_ADJACENCY": ("LINELIST_ADJ", "line"),
    "VK_PRIMITIVE_TOPOLOGY_LINE_STRIP_WITH_ADJACENCY": ("LINESTRIP_ADJ", "line"),
    "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST_WITH_ADJACENCY": ("TRIANGLELIST_ADJ", "triangle"),
    "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP_WITH_ADJACENCY": ("TRIANGLESTRIP_ADJ", "triangle"),
}


def topology(vk: str, patch_points: int = 3) -> tuple[str, str] | None:
    """``(IASetPrimitiveTopology value, pipeline topology class)`` of a Vulkan topology, or None
    when drawopt has no equivalent (triangle fans; patch lists other than 3 or 4 points)."""
    if vk == "VK_PRIMITIVE_TOPOLOGY_PATCH_LIST":
        return (f"PATCHLIST_{patch_points}", "patch") if patch_points in (3, 4) else None
    return _TOPO.get(vk)


_CMP = {
    "VK_COMPARE_OP_NEVER": "never", "VK_COMPARE_OP_LESS": "less", "VK_COMPARE_OP_EQUAL": "equal",
    "VK_COMPARE_OP_LESS_OR_EQUAL": "lequal", "VK_COMPARE_OP_GREATER": "greater",
    "VK_COMPARE_OP_NOT_EQUAL": "notequal", "VK_COMPARE_OP_GREATER_OR_EQUAL": "gequal",
    "VK_COMPARE_OP_ALWAYS": "always",
}


def depth_key(test: Any, write: Any, op: str) -> str:
    """The pipeline ``depth=`` value: ``off``, ``FUNC`` or ``FUNC,write`` (a write without a test
    is ``always,write``, as Vulkan does it)."""
    if not test:
        return "always,write" if write else "off"
    return _CMP.get(op, "always") + (",write" if write else "")


_F = "VK_BLEND_FACTOR_"


def blend_key(att: dict[str, Any] | None) -> str:
    """The pipeline ``blend=`` value of the first colour attachment's blend state.

    Blend equations drawopt has no name for map to ``alpha`` (not commutative, so no pass
    treats them as order independent); the exact equation stays with the pipeline's name."""
    if not att or not att.get("blendEnable"):
        return "opaque"
    src, dst, op = att.get("srcColorBlendFactor"), att.get("dstColorBlendFactor"), att.get("colorBlendOp")
    if op == "VK_BLEND_OP_MIN":
        return "min"
    if op == "VK_BLEND_OP_MAX":
        return "max"
    if op != "VK_BLEND_OP_ADD":
        return "alpha"
    table = {
        (_F + "SRC_ALPHA", _F + "ONE_MINUS_SRC_ALPHA"): "alpha",
        (_F + "ONE", _F + "ONE"): "additive",
        (_F + "SRC_ALPHA", _F + "ONE"): "additive",
        (_F + "ONE", _F + "ONE_MINUS_SRC_ALPHA"): "premultiplied",
        (_F + "DST_COLOR", _F + "ZERO"): "multiply",
        (_F + "ZERO", _F + "SRC_COLOR"): "multiply",
        (_F + "ONE", _F + "ZERO"): "opaque",
    }
    return table.get((src, dst), "alpha")


def vk_format(vk: str) -> str:
    """A Vulkan format name as a drawopt format token (``VK_FORMAT_`` dropped)."""
    name = vk[len("VK_FORMAT_"):] if isinstance(vk, str) and vk.startswith("VK_FORMAT_") else str(vk)
    return name if name and name[0].isalpha() else "F" + name


def is_depth_format(vk: str) -> bool:
    """Whether a Vulkan format has a depth or stencil aspect."""
    return isinstance(vk, str) and (vk.startswith(("VK_FORMAT_D", "VK_FORMAT_X8_D24")) or vk == "VK_FORMAT_S8_UINT")


_LAYOUT = {
    "VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL": "RENDER_TARGET",
    "VK_IMAGE_LAYOUT_ATTACHMENT_OPTIMAL": "RENDER_TARGET",
    "VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL": "DEPTH_WRITE",
    "VK_IMAGE_LAYOUT_DEPTH_ATTACHMENT_OPTIMAL": "DEPTH_WRITE",
    "VK_IMAGE_LAYOUT_DEPTH_STENCIL_READ_ONLY_OPTIMAL": "DEPTH_READ",
    "VK_IMAGE_LAYOUT_DEPTH_READ_ONLY_OPTIMAL": "DEPTH_READ",
    "VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL": "SHADER_RESOURCE",
    "VK_IMAGE_LAYOUT_READ_ONLY_OPTIMAL": "SHADER_RESOURCE",
    "VK_IMAGE_LAYOUT_GENERAL": "UNORDERED_ACCESS",
    "VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL": "COPY_DEST",
    "VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL": "COPY_SOURCE",
}


def layout_state(vk: str, depth: bool) -> str:
    """The ``ResourceBarrier`` state of a Vulkan image layout (anything else is ``COMMON``)."""
    s = _LAYOUT.get(vk, "COMMON")
    if s == "RENDER_TARGET" and depth:
        return "DEPTH_WRITE"
    return s


def flag_names(v: Any) -> set[str]:
    """The names in a flags value as gfxrecon writes it (an integer, or ``A|B`` names)."""
    if isinstance(v, str):
        return {p.strip() for p in v.split("|") if p.strip()}
    return set()


# VkAccessFlagBits (as integers) and their names (synchronization2 writes names)
_ACCESS_BITS = {
    0x1: "INDIRECT_COMMAND_READ", 0x2: "INDEX_READ", 0x4: "VERTEX_ATTRIBUTE_READ", 0x8: "UNIFORM_READ",
    0x20: "SHADER_READ", 0x40: "SHADER_WRITE", 0x80: "COLOR_ATTACHMENT_READ", 0x100: "COLOR_ATTACHMENT_WRITE",
    0x200: "DEPTH_STENCIL_ATTACHMENT_READ", 0x400: "DEPTH_STENCIL_ATTACHMENT_WRITE", 0x800: "TRANSFER_READ",
    0x1000: "TRANSFER_WRITE",
}


def _access(v: Any) -> set[str]:
    if isinstance(v, int):
        return {n for b, n in _ACCESS_BITS.items() if v & b}
    out = set()
    for n in flag_names(v):
        for key in _ACCESS_BITS.values():
            if key in n:
                out.add(key)
    return out


def access_state(mask: Any) -> str:
    """The ``ResourceBarrier`` state a buffer is in after access ``mask`` (the front-end reads
    first: a transition to them is what makes a GPU write visible to the front end)."""
    a = _access(mask)
    if "INDIRECT_COMMAND_READ" in a:
        return "INDIRECT_ARGUMENT"
    if "INDEX_READ" in a:
        return "INDEX_BUFFER"
    if "SHADER_WRITE" in a:
        return "UNORDERED_ACCESS"
    if "TRANSFER_WRITE" in a:
        return "COPY_DEST"
    if "TRANSFER_READ" in a:
        return "COPY_SOURCE"
    if a & {"VERTEX_ATTRIBUTE_READ", "UNIFORM_READ"}:
        return "VERTEX_AND_CONSTANT_BUFFER"
    if "SHADER_READ" in a:
        return "SHADER_RESOURCE"
    return "COMMON"


_D = "VK_DESCRIPTOR_TYPE_"
TABLE_KIND: dict[str, str] = {
    _D + "UNIFORM_BUFFER": "cbv",
    _D + "STORAGE_BUFFER": "uav",
    _D + "SAMPLED_IMAGE": "srv",
    _D + "COMBINED_IMAGE_SAMPLER": "srv",
    _D + "STORAGE_IMAGE": "uav",
    _D + "UNIFORM_TEXEL_BUFFER": "srv",
    _D + "STORAGE_TEXEL_BUFFER": "uav",
    _D + "INPUT_ATTACHMENT": "srv",
}
"""Descriptor type -> the view kind of its slot in the CBV_SRV_UAV table (storage descriptors are
``uav`` unless the SPIR-V proves no stage writes them: then ``srv``)."""
SAMPLER_PART = frozenset({_D + "SAMPLER", _D + "COMBINED_IMAGE_SAMPLER"})
"""Descriptor types with a sampler (a slot in the set's SAMPLER table)."""
DYNAMIC_DESCRIPTORS = {_D + "UNIFORM_BUFFER_DYNAMIC": "cbv", _D + "STORAGE_BUFFER_DYNAMIC": "uav"}
"""Dynamic-offset descriptors: each is a root view (``cbv`` / ``uav``) of the pipeline layout."""


def _norm(text: str) -> str:
    t = text.upper()
    for suffix in ("_EXT", "_KHR", "_NV", "EXT", "KHR", "NV"):
        if t.endswith(suffix):
            t = t[: -len(suffix)]
            break
    return t.replace("_", "")


def rect(r: dict[str, Any]) -> tuple[int, int, int, int]:
    """A ``VkRect2D`` as ``RSSetScissorRects``' (left, top, right, bottom).

    >>> rect({"offset": {"x": 8, "y": 0}, "extent": {"width": 100, "height": 50}})
    (8, 0, 108, 50)
    """
    x, y = int(r["offset"]["x"]), int(r["offset"]["y"])
    return x, y, min(x + int(r["extent"]["width"]), 2**31 - 1), min(y + int(r["extent"]["height"]), 2**31 - 1)


@cache
def dynamic_state_key(name: str) -> str:
    """The key shared by a ``vkCmdSet*`` command and its ``VK_DYNAMIC_STATE_*`` enumerant.

    >>> dynamic_state_key("vkCmdSetDepthTestEnableEXT") == dynamic_state_key("VK_DYNAMIC_STATE_DEPTH_TEST_ENABLE")
    True
    """
    if name.startswith("vkCmdSet"):
        return _norm(name[len("vkCmdSet"):])
    if name.startswith("VK_DYNAMIC_STATE_"):
        return _norm(name[len("VK_DYNAMIC_STATE_"):])
    return _norm(name)
