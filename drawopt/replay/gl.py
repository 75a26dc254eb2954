"""The OpenGL side of the replayer: an EGL standalone context and raw GL entry points.

moderngl creates the context (``create_standalone_context(backend="egl")``: Mesa
llvmpipe on CPU machines, the vendor driver where there is a GPU) and all GL
objects (buffers, textures, framebuffers, programs, queries). The calls that
replay a stream are issued through ``ctypes`` function pointers obtained from
``eglGetProcAddress`` of the same ``libEGL`` that glcontext loaded, because
moderngl has no API for several of them (``glMultiDrawElementsIndirectCountARB``,
``glDrawElementsInstancedBaseVertexBaseInstance``, ``glBindVertexBuffer``,
``glMemoryBarrier`` with a chosen mask, ...) and because its own calls re-bind
state on every use. With GLVND these pointers are dispatch stubs that call into
whichever context is current.
"""

from __future__ import annotations

__all__ = ["GLInfo", "GLFunctions", "get_context", "context_error", "GL", "release_context"]

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class GL:
    """The GL enumerants the replayer uses (values from the Khronos registry)."""

    POINTS = 0x0000
    LINES = 0x0001
    LINE_STRIP = 0x0003
    TRIANGLES = 0x0004
    TRIANGLE_STRIP = 0x0005
    LINES_ADJACENCY = 0x000A
    LINE_STRIP_ADJACENCY = 0x000B
    TRIANGLES_ADJACENCY = 0x000C
    TRIANGLE_STRIP_ADJACENCY = 0x000D
    PATCHES = 0x000E
    PATCH_VERTICES = 0x8E72

    UNSIGNED_SHORT = 0x1403
    UNSIGNED_INT = 0x1405

    FRAMEBUFFER = 0x8D40
    ARRAY_BUFFER = 0x8892
    ELEMENT_ARRAY_BUFFER = 0x8893
    DRAW_INDIRECT_BUFFER = 0x8F3F
    PARAMETER_BUFFER = 0x80EE
    SHADER_STORAGE_BUFFER = 0x90D2

    BLEND = 0x0BE2
    DEPTH_TEST = 0x0B71
    SCISSOR_TEST = 0x0C11
    CULL_FACE = 0x0B44

    ZERO = 0
    ONE = 1
    SRC_ALPHA = 0x0302
    ONE_MINUS_SRC_ALPHA = 0x0303
    DST_COLOR = 0x0306
    FUNC_ADD = 0x8006
    MIN = 0x8007
    MAX = 0x8008

    NEVER = 0x0200
    LESS = 0x0201
    EQUAL = 0x0202
    LEQUAL = 0x0203
    GREATER = 0x0204
    NOTEQUAL = 0x0205
    GEQUAL = 0x0206
    ALWAYS = 0x0207

    VERTEX_ATTRIB_ARRAY_BARRIER_BIT = 0x00000001
    ELEMENT_ARRAY_BARRIER_BIT = 0x00000002
    UNIFORM_BARRIER_BIT = 0x00000004
    COMMAND_BARRIER_BIT = 0x00000040
    BUFFER_UPDATE_BARRIER_BIT = 0x00000200
    FRAMEBUFFER_BARRIER_BIT = 0x00000400
    SHADER_STORAGE_BARRIER_BIT = 0x00002000
    ALL_BARRIER_BITS = 0xFFFFFFFF

    TIMESTAMP = 0x8E28
    QUERY_RESULT = 0x8866

    COLOR_ATTACHMENT0 = 0x8CE0
    NONE = 0


_I, _U, _F, _P, _S = ctypes.c_int, ctypes.c_uint, ctypes.c_float, ctypes.c_void_p, ctypes.c_ssize_t

# name -> argument types (all return void unless listed in _RESTYPE)
_SIGNATURES: dict[str, tuple[Any, ...]] = {
    "glUseProgram": (_U,),
    "glUniform1ui": (_I, _U),
    "glUniform1i": (_I, _I),
    "glUniform2f": (_I, _F, _F),
    "glUniform4ui": (_I, _U, _U, _U, _U),
    "glProgramUniform1ui": (_U, _I, _U),
    "glProgramUniform4ui": (_U, _I, _U, _U, _U, _U),
    "glProgramUniform2f": (_U, _I, _F, _F),
    "glGetUniformLocation": (_U, ctypes.c_char_p),
    "glBindFramebuffer": (_U, _U),
    "glViewport": (_I, _I, _I, _I),
    "glScissor": (_I, _I, _I, _I),
    "glDepthRangef": (_F, _F),
    "glEnable": (_U,),
    "glDisable": (_U,),
    "glBlendFuncSeparate": (_U, _U, _U, _U),
    "glBlendEquation": (_U,),
    "glDepthFunc": (_U,),
    "glDepthMask": (ctypes.c_ubyte,),
    "glColorMask": (ctypes.c_ubyte,) * 4,
    "glBindBuffer": (_U, _U),
    "glBindBufferBase": (_U, _U, _U),
    "glBindVertexArray": (_U,),
    "glGenVertexArrays": (_I, ctypes.POINTER(_U)),
    "glDeleteVertexArrays": (_I, ctypes.POINTER(_U)),
    "glBindVertexBuffer": (_U, _U, _S, _I),
    "glVertexAttribIFormat": (_U, _I, _U, _U),
    "glVertexAttribBinding": (_U, _U),
    "glVertexBindingDivisor": (_U, _U),
    "glEnableVertexAttribArray": (_U,),
    "glDisableVertexAttribArray": (_U,),
    "glPatchParameteri": (_U, _I),
    "glDrawArraysInstancedBaseInstance": (_U, _I, _I, _I, _U),
    "glDrawElementsInstancedBaseVertexBaseInstance": (_U, _I, _U, _P, _I, _I, _U),
    "glMultiDrawArraysIndirect": (_U, _P, _I, _I),
    "glMultiDrawElementsIndirect": (_U, _U, _P, _I, _I),
    "glMultiDrawArraysIndirectCountARB": (_U, _P, _S, _I, _I),
    "glMultiDrawElementsIndirectCountARB": (_U, _U, _P, _S, _I, _I),
    "glMemoryBarrier": (_U,),
    "glDispatchCompute": (_U, _U, _U),
    "glCopyNamedBufferSubData": (_U, _U, _S, _S, _S),
    "glDrawBuffers": (_I, ctypes.POINTER(_U)),
    "glQueryCounter": (_U, _U),
    "glGenQueries": (_I, ctypes.POINTER(_U)),
    "glDeleteQueries": (_I, ctypes.POINTER(_U)),
    "glGetQueryObjectui64v": (_U, _U, ctypes.POINTER(ctypes.c_uint64)),
    "glFinish": (),
    "glFlush": (),
    "glGetError": (),
}
_RESTYPE = {"glGetUniformLocation": _I, "glGetError": _U}


class GLFunctions:
    """Raw GL entry points as ``ctypes`` functions, plus their addresses (for a native loop)."""

    def __init__(self, libegl: str | None) -> None:
        egl = ctypes.CDLL(libegl or ctypes.util.find_library("EGL") or "libEGL.so.1")
        gpa = egl.eglGetProcAddress
        gpa.restype = ctypes.c_void_p
        gpa.argtypes = [ctypes.c_char_p]
        self.addr: dict[str, int] = {}
        self.missing: list[str] = []
        for name, argtypes in _SIGNATURES.items():
            addr = gpa(name.encode())
            if not addr:
                self.missing.append(name)
                continue
            self.addr[name] = int(addr)
            proto = ctypes.CFUNCTYPE(_RESTYPE.get(name), *argtypes)
            setattr(self, name, proto(addr))

    def __getattr__(self, name: str) -> Any:  # only reached for missing entry points
        raise RuntimeError(f"OpenGL entry point {name} is not available")


@dataclass
class GLInfo:
    """What the context offers (filled once per context)."""

    renderer: str
    version: str
    vendor: str
    version_code: int
    extensions: frozenset[str] = field(default_factory=frozenset)
    draw_parameters: bool = False
    indirect_parameters: bool = False
    base_vertex_nonindexed_zero: bool = True
    """gl_BaseVertexARB is 0 for non-indexed draws (the GL spec); probed at start."""

    def as_dict(self) -> dict[str, Any]:
        return {"renderer": self.renderer, "version": self.version, "vendor": self.vendor,
                "GL_ARB_shader_draw_parameters": self.draw_parameters,
                "GL_ARB_indirect_parameters": self.indirect_parameters,
                "base_vertex_nonindexed_zero": self.base_vertex_nonindexed_zero}


_lock = threading.Lock()
_state: dict[str, Any] = {}
_ON_RELEASE: list[Callable[[], None]] = []
"""Called before the process-wide context is released (the executor's program cache registers here)."""


def on_release(fn: Callable[[], None]) -> Callable[[], None]:
    """Register ``fn`` to run before :func:`release_context` releases the context; returns ``fn``."""
    _ON_RELEASE.append(fn)
    return fn


def get_context() -> tuple[Any, GLFunctions, GLInfo]:
    """The process-wide EGL context (created on first use), its GL functions and info.

    Raises ``RuntimeError`` with the reason when no context can be created
    (moderngl missing, no EGL library, no GL 4.3 driver).
    """
    with _lock:
        if "ctx" in _state:
            return _state["ctx"], _state["gl"], _state["info"]
        if "error" in _state:
            raise RuntimeError(_state["error"])
        try:
            import moderngl
        except ImportError as e:
            _state["error"] = f"moderngl is not installed ({e}); run .ci/install-system.sh"
            raise RuntimeError(_state["error"]) from None
        libegl = os.environ.get("GLCONTEXT_LINUX_LIBEGL") or ctypes.util.find_library("EGL")
        try:
            ctx = moderngl.create_standalone_context(backend="egl", require=430)
        except Exception as e:  # moderngl raises plain Exception subclasses
            _state["error"] = f"no EGL OpenGL 4.3 context: {e}"
            raise RuntimeError(_state["error"]) from None
        gl = GLFunctions(libegl)
        ext = frozenset(ctx.extensions)
        info = GLInfo(
            renderer=ctx.info.get("GL_RENDERER", "?"), version=ctx.info.get("GL_VERSION", "?"),
            vendor=ctx.info.get("GL_VENDOR", "?"), version_code=int(ctx.version_code), extensions=ext,
            draw_parameters="GL_ARB_shader_draw_parameters" in ext or ctx.version_code >= 460,
            indirect_parameters=("GL_ARB_indirect_parameters" in ext or ctx.version_code >= 460)
            and "glMultiDrawElementsIndirectCountARB" in gl.addr,
        )
        required = ("glDrawElementsInstancedBaseVertexBaseInstance", "glBindVertexBuffer",
                    "glMultiDrawElementsIndirect", "glDispatchCompute", "glCopyNamedBufferSubData")
        missing = [n for n in required if n not in gl.addr]
        if missing:
            ctx.release()
            _state["error"] = f"the GL driver lacks {', '.join(missing)}"
            raise RuntimeError(_state["error"])
        _state.update(ctx=ctx, gl=gl, info=info)
        if info.draw_parameters:
            info.base_vertex_nonindexed_zero = _probe_base_vertex(ctx, gl)
        return ctx, gl, info


def context_error() -> str | None:
    """None if a context can be made, else the reason (for test skips)."""
    try:
        get_context()
    except RuntimeError as e:
        return str(e)
    return None


def release_context() -> None:
    """Release the process-wide context (tests, or before exiting)."""
    with _lock:
        ctx = _state.pop("ctx", None)
        if ctx is not None:
            for fn in _ON_RELEASE:
                fn()
        _state.pop("gl", None)
        _state.pop("info", None)
        if ctx is not None:
            ctx.release()


_PROBE_VS = """
#version 430 core
#extension GL_ARB_shader_draw_parameters : require
layout(std430, binding = 0) buffer Out { int o[]; };
void main() {
    o[0] = gl_BaseVertexARB;
    gl_Position = vec4(2.0, 2.0, 2.0, 1.0);
}
"""
_PROBE_FS = "#version 430 core\nout vec4 c;\nvoid main() { c = vec4(1.0); }\n"


def _probe_base_vertex(ctx: Any, gl: GLFunctions) -> bool:
    """Whether ``gl_BaseVertexARB`` reads 0 in ``glDrawArrays(first=5)`` (the GL rule)."""
    import numpy as np

    prog = ctx.program(vertex_shader=_PROBE_VS, fragment_shader=_PROBE_FS)
    buf = ctx.buffer(np.full(4, -1, np.int32).tobytes())
    vao = (ctypes.c_uint * 1)()
    gl.glGenVertexArrays(1, vao)
    try:
        gl.glBindVertexArray(vao[0])
        gl.glUseProgram(prog.glo)
        gl.glBindBufferBase(GL.SHADER_STORAGE_BUFFER, 0, buf.glo)
        gl.glDrawArraysInstancedBaseInstance(GL.POINTS, 5, 1, 1, 0)
        gl.glMemoryBarrier(GL.BUFFER_UPDATE_BARRIER_BIT)
        gl.glFinish()
        got = int(np.frombuffer(buf.read(), np.int32)[0])
    finally:
        gl.glBindVertexArray(0)
        gl.glUseProgram(0)
        gl.glDeleteVertexArrays(1, vao)
        prog.release()
        buf.release()
    return got == 0
