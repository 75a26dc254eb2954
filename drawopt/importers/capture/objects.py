"""The Vulkan objects a capture creates, as the importer keeps them (one table per object type).

Only what the mapping onto drawopt needs is kept (docs/import.md): sizes and usages of buffers
and images, the bindings of descriptor-set layouts, the sets and push-constant size of pipeline
layouts, the state of pipelines, the attachments of render passes and framebuffers, the current
contents of descriptor sets, the recorded commands of command buffers.
"""

from __future__ import annotations

__all__ = ["SetLayout", "PipeLayout", "PipeInfo", "RenderPass", "Objects", "Recorded"]

from dataclasses import dataclass, field
from typing import Any

from drawopt.importers.capture.vkmap import DYNAMIC_DESCRIPTORS, SAMPLER_PART, TABLE_KIND, dynamic_state_key

Recorded = tuple[str, dict[str, Any], int]
"""One recorded command: (call name, its ``args``, capture line)."""


@dataclass
class SetLayout:
    """A descriptor-set layout: ``(binding, type, count)`` sorted by binding number."""

    bindings: list[tuple[int, str, int]]

    def table_ranges(self) -> list[tuple[int, str, int]]:
        """The CBV_SRV_UAV table's slots: ``(binding, type, count)`` of non-sampler, non-dynamic bindings."""
        return [b for b in self.bindings if b[1] in TABLE_KIND]

    def sampler_ranges(self) -> list[tuple[int, str, int]]:
        return [b for b in self.bindings if b[1] in SAMPLER_PART]

    def dynamic(self) -> list[tuple[int, str, int]]:
        return [b for b in self.bindings if b[1] in DYNAMIC_DESCRIPTORS]

    def unknown_types(self) -> list[str]:
        """Descriptor types drawopt has no view for (inline uniform blocks, acceleration structures ...)."""
        return [t for _, t, _ in self.bindings
                if t not in TABLE_KIND and t not in SAMPLER_PART and t not in DYNAMIC_DESCRIPTORS]


@dataclass
class PipeLayout:
    """A pipeline layout: its set layouts and the 32-bit words of its push-constant ranges."""

    sets: list[int]
    push_words: int


@dataclass
class PipeInfo:
    """A pipeline: stages (drawopt stage -> shader module handle), layout and fixed-function state."""

    handle: int
    compute: bool
    stages: dict[str, int | None]
    layout: int
    topology: str = "VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST"
    patch_points: int = 3
    bindings: tuple[tuple[int, int, str], ...] = ()     # (binding, stride, input rate)
    attributes: tuple[tuple[Any, ...], ...] = ()
    depth: tuple[Any, Any, str] = (0, 0, "VK_COMPARE_OP_ALWAYS")
    blend: dict[str, Any] | None = None
    dynamic: frozenset[str] = frozenset()               # dynamic_state_key() of each dynamic state
    unsupported: str = ""                                # why drawopt cannot declare it ("" = it can)
    viewport: tuple[float, ...] | None = None            # static viewport 0 (x, y, w, h, min, max)
    scissor: tuple[int, int, int, int] | None = None      # static scissor 0 (left, top, right, bottom)

    def is_dynamic(self, state: str) -> bool:
        return dynamic_state_key(state) in self.dynamic

    def other_dynamic(self, modelled: frozenset[str]) -> tuple[str, ...]:
        """Its dynamic states the importer does not model (sorted; computed once)."""
        got = self.__dict__.get("_other")
        if got is None:
            got = self.__dict__["_other"] = tuple(sorted(k for k in self.dynamic if k not in modelled))
        return got


@dataclass
class RenderPass:
    """A render pass: attachment formats and load ops, and each subpass's colour / depth attachments."""

    formats: list[str]
    loads: list[tuple[str, str]]                         # (loadOp, stencilLoadOp) per attachment
    subpasses: list[tuple[list[int], int | None, bool]]  # (colour attachments, depth attachment, resolves)


@dataclass
class Objects:
    """Every object the capture has created so far, by handle."""

    buffers: dict[int, tuple[int, int]] = field(default_factory=dict)          # size, usage
    images: dict[int, tuple[int, int, str, int]] = field(default_factory=dict)  # w, h, format, usage
    image_views: dict[int, int] = field(default_factory=dict)                  # -> image
    buffer_views: dict[int, int] = field(default_factory=dict)                 # -> buffer
    samplers: set[int] = field(default_factory=set)
    set_layouts: dict[int, SetLayout] = field(default_factory=dict)
    pipe_layouts: dict[int, PipeLayout] = field(default_factory=dict)
    modules: dict[int, int] = field(default_factory=dict)                      # -> code size
    pipelines: dict[int, PipeInfo] = field(default_factory=dict)
    render_passes: dict[int, RenderPass] = field(default_factory=dict)
    framebuffers: dict[int, tuple[int, list[int]]] = field(default_factory=dict)  # render pass, views
    sets: dict[int, int] = field(default_factory=dict)                          # set -> layout
    set_content: dict[int, dict[tuple[int, int], Any]] = field(default_factory=dict)
    set_version: dict[int, int] = field(default_factory=dict)  # bumped by every update
    set_unknown: dict[int, bool] = field(default_factory=dict)  # updated through an undecoded template
    templates: dict[int, dict[str, Any]] = field(default_factory=dict)
    cmdbufs: dict[int, list[Recorded]] = field(default_factory=dict)
    pool_of: dict[int, int] = field(default_factory=dict)                       # cmdbuf -> pool
