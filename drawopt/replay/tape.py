"""The GL command tape: the calls a replay issues, prepared ahead, and the loops that issue them.

A prepared frame is an ``int64[n, 8]`` array: column 0 the tape opcode (below),
columns 1..7 the GL call's integer arguments (floats as IEEE-754 single bits).
Preparing it does all of the per-command work (state tracking, hashing, program
selection, argument conversion); executing it only issues GL calls.

Two interpreters run a tape:

* :class:`PythonTape` turns every row into a ``(ctypes function, args)`` pair once,
  then loops ``for f, a in calls: f(*a)``. Its cost per call is the ``ctypes``
  call overhead (a fraction of a microsecond to a microsecond), which
  :func:`measure_call_overhead` reports.
* a native loop, if a compiled ``_glexec`` module is importable (see
  ``cext/_glexec.pyx``, built as ``drawopt._glexec``): it walks the array in C and calls the GL
  entry points by address (a few nanoseconds per call besides the driver's).
  ``DRAWOPT_PURE=1`` or ``DRAWOPT_REPLAY_NATIVE=0`` disables it.
"""

from __future__ import annotations

__all__ = ["Op", "TapeBuilder", "PythonTape", "make_executor", "measure_call_overhead", "OP_SPECS",
           "native_available"]

import ctypes
import os
import struct
import time
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import numpy as np

from drawopt.replay.gl import GLFunctions

WIDTH = 8


class Op(IntEnum):
    """Tape opcodes (stable: the native loop switches on them)."""

    USE_PROGRAM = 1
    UNIFORM1UI = 2
    BIND_FRAMEBUFFER = 3
    VIEWPORT = 4
    SCISSOR = 5
    DEPTH_RANGE = 6
    ENABLE = 7
    DISABLE = 8
    BLEND_FUNC = 9
    BLEND_EQUATION = 10
    DEPTH_FUNC = 11
    DEPTH_MASK = 12
    BIND_BUFFER = 13
    BIND_BUFFER_BASE = 14
    BIND_VERTEX_BUFFER = 15
    BINDING_DIVISOR = 16
    ENABLE_ATTRIB = 17
    DISABLE_ATTRIB = 18
    PATCH_PARAMETER = 19
    DRAW_ARRAYS = 20
    DRAW_ELEMENTS = 21
    MULTI_DRAW_ARRAYS_INDIRECT = 22
    MULTI_DRAW_ELEMENTS_INDIRECT = 23
    MULTI_DRAW_ARRAYS_INDIRECT_COUNT = 24
    MULTI_DRAW_ELEMENTS_INDIRECT_COUNT = 25
    MEMORY_BARRIER = 26
    DISPATCH = 27
    COPY_BUFFER = 28
    BIND_VERTEX_ARRAY = 29
    UNIFORM1I = 30
    UNIFORM2F = 31
    UNIFORM4UI = 32
    VERTEX_ATTRIB_I_FORMAT = 33
    QUERY_COUNTER = 34
    CALLBACK = 99


OP_SPECS: dict[int, tuple[str, int, tuple[int, ...]]] = {
    Op.USE_PROGRAM: ("glUseProgram", 1, ()),
    Op.UNIFORM1UI: ("glUniform1ui", 2, ()),
    Op.UNIFORM1I: ("glUniform1i", 2, ()),
    Op.UNIFORM2F: ("glUniform2f", 3, (1, 2)),
    Op.UNIFORM4UI: ("glUniform4ui", 5, ()),
    Op.BIND_FRAMEBUFFER: ("glBindFramebuffer", 2, ()),
    Op.VIEWPORT: ("glViewport", 4, ()),
    Op.SCISSOR: ("glScissor", 4, ()),
    Op.DEPTH_RANGE: ("glDepthRangef", 2, (0, 1)),
    Op.ENABLE: ("glEnable", 1, ()),
    Op.DISABLE: ("glDisable", 1, ()),
    Op.BLEND_FUNC: ("glBlendFuncSeparate", 4, ()),
    Op.BLEND_EQUATION: ("glBlendEquation", 1, ()),
    Op.DEPTH_FUNC: ("glDepthFunc", 1, ()),
    Op.DEPTH_MASK: ("glDepthMask", 1, ()),
    Op.BIND_BUFFER: ("glBindBuffer", 2, ()),
    Op.BIND_BUFFER_BASE: ("glBindBufferBase", 3, ()),
    Op.BIND_VERTEX_BUFFER: ("glBindVertexBuffer", 4, ()),
    Op.BINDING_DIVISOR: ("glVertexBindingDivisor", 2, ()),
    Op.ENABLE_ATTRIB: ("glEnableVertexAttribArray", 1, ()),
    Op.DISABLE_ATTRIB: ("glDisableVertexAttribArray", 1, ()),
    Op.PATCH_PARAMETER: ("glPatchParameteri", 2, ()),
    Op.DRAW_ARRAYS: ("glDrawArraysInstancedBaseInstance", 5, ()),
    Op.DRAW_ELEMENTS: ("glDrawElementsInstancedBaseVertexBaseInstance", 7, ()),
    Op.MULTI_DRAW_ARRAYS_INDIRECT: ("glMultiDrawArraysIndirect", 4, ()),
    Op.MULTI_DRAW_ELEMENTS_INDIRECT: ("glMultiDrawElementsIndirect", 5, ()),
    Op.MULTI_DRAW_ARRAYS_INDIRECT_COUNT: ("glMultiDrawArraysIndirectCountARB", 5, ()),
    Op.MULTI_DRAW_ELEMENTS_INDIRECT_COUNT: ("glMultiDrawElementsIndirectCountARB", 6, ()),
    Op.MEMORY_BARRIER: ("glMemoryBarrier", 1, ()),
    Op.DISPATCH: ("glDispatchCompute", 3, ()),
    Op.COPY_BUFFER: ("glCopyNamedBufferSubData", 5, ()),
    Op.BIND_VERTEX_ARRAY: ("glBindVertexArray", 1, ()),
    Op.VERTEX_ATTRIB_I_FORMAT: ("glVertexAttribIFormat", 4, ()),
    Op.QUERY_COUNTER: ("glQueryCounter", 2, ()),
}
"""opcode -> (GL entry point, number of arguments, positions of float arguments)."""

TAPE_VERSION = 3
"""Version of the opcode set; a compiled ``_glexec`` whose ``TAPE_VERSION`` (1 when absent) is
lower does not know the newer opcodes (``VERTEX_ATTRIB_I_FORMAT``, version 2; ``QUERY_COUNTER``,
version 3, only in profiling tapes) and is not used for a tape that holds them."""
_OP_VERSION = {Op.VERTEX_ATTRIB_I_FORMAT: 2, Op.QUERY_COUNTER: 3}

DRAW_OPS = frozenset({Op.DRAW_ARRAYS, Op.DRAW_ELEMENTS, Op.MULTI_DRAW_ARRAYS_INDIRECT,
                      Op.MULTI_DRAW_ELEMENTS_INDIRECT, Op.MULTI_DRAW_ARRAYS_INDIRECT_COUNT,
                      Op.MULTI_DRAW_ELEMENTS_INDIRECT_COUNT})


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


_PAD = tuple((0,) * (WIDTH - 1 - k) for k in range(WIDTH))


class TapeBuilder:
    """Appends rows; ``array()`` returns the ``int64[n, 8]`` tape."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._rows: list[tuple[int, ...]] = []
        self.origin = -1
        """Index of the stream command being translated (set by the walk): every row records it."""
        self._origins: list[int] = []
        self.callbacks: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return sum(c.shape[0] for c in self._chunks) + len(self._rows)

    def emit(self, op: int, *args: int) -> None:
        rows = self._rows
        rows.append((op, *args, *_PAD[len(args)]))
        self._origins.append(self.origin)
        if len(rows) >= 65536:
            self._flush()

    def origins(self) -> np.ndarray:
        """``int64[n]``: the stream command each row was emitted for (-1: frame setup)."""
        return np.array(self._origins, dtype=np.int64)

    def callback(self, fn: Callable[[], None]) -> None:
        """A Python call at this point of the tape (forces the Python interpreter)."""
        self.callbacks.append(fn)
        self.emit(Op.CALLBACK, len(self.callbacks) - 1)

    def _flush(self) -> None:
        if self._rows:
            self._chunks.append(np.array(self._rows, dtype=np.int64).reshape(-1, WIDTH))
            self._rows = []

    def array(self) -> np.ndarray:
        self._flush()
        if not self._chunks:
            return np.zeros((0, WIDTH), np.int64)
        return np.concatenate(self._chunks)


def _bits_to_float(v: int) -> float:
    return struct.unpack("<f", struct.pack("<I", v & 0xFFFFFFFF))[0]


def _to_signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class PythonTape:
    """Executes a tape through ``ctypes`` (each row prebound to its function and arguments)."""

    kind = "python"

    def __init__(self, tape: np.ndarray, gl: GLFunctions, callbacks: list[Callable[[], None]]):
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        rows = tape.tolist()
        fns: dict[int, Callable[..., Any]] = {}
        for code, (name, _n, _f) in OP_SPECS.items():
            if name in gl.addr:
                fns[code] = getattr(gl, name)
        append = self.calls.append
        for row in rows:
            op = row[0]
            if op == Op.CALLBACK:
                append((callbacks[row[1]], ()))
                continue
            name, n, floats = OP_SPECS[op]
            args = row[1:1 + n]
            if floats:
                args = [(_bits_to_float(a) if k in floats else a) for k, a in enumerate(args)]
            if op in (Op.DRAW_ELEMENTS,):
                args[5] = _to_signed32(args[5])
            if op == Op.UNIFORM1I:
                args[1] = _to_signed32(args[1])
            fn = fns.get(op)
            if fn is None:
                raise RuntimeError(f"OpenGL entry point {name} is not available")
            append((fn, tuple(args)))

    def __len__(self) -> int:
        return len(self.calls)

    def run(self) -> None:
        for f, a in self.calls:
            f(*a)

    def run_timed(self) -> np.ndarray:
        """Run, returning ``int64[n + 1]`` monotonic nanoseconds before each row and after the last
        (the compiled loop's :meth:`NativeTape.run_timed` twin)."""
        now = time.perf_counter_ns
        stamps = [0] * (len(self.calls) + 1)
        k = 0
        for f, a in self.calls:
            stamps[k] = now()
            f(*a)
            k += 1
        stamps[k] = now()
        return np.array(stamps, dtype=np.int64)


class NativeTape:
    """Executes a tape with the compiled loop of ``_glexec`` (no Python per call)."""

    kind = "native"

    def __init__(self, tape: np.ndarray, gl: GLFunctions, module: Any):
        self.tape = np.ascontiguousarray(tape, dtype=np.int64)
        self.table = np.zeros(128, dtype=np.uint64)
        for code, (name, _n, _f) in OP_SPECS.items():
            self.table[code] = gl.addr.get(name, 0)
        used = np.unique(self.tape[:, 0]) if self.tape.shape[0] else np.zeros(0, np.int64)
        missing = [OP_SPECS[int(c)][0] for c in used if int(c) in OP_SPECS and not self.table[int(c)]]
        if missing:
            raise RuntimeError(f"OpenGL entry points not available: {', '.join(missing)}")
        self.module = module

    def __len__(self) -> int:
        return int(self.tape.shape[0])

    def run(self) -> None:
        self.module.run_tape(self.tape, self.table)

    def run_timed(self) -> np.ndarray:
        """Run, returning ``int64[n + 1]``: ``CLOCK_MONOTONIC`` ns before each row and after the last."""
        stamps = np.zeros(self.tape.shape[0] + 1, dtype=np.int64)
        self.module.run_tape_timed(self.tape, self.table, stamps)
        return stamps


def _native_module() -> Any | None:
    if os.environ.get("DRAWOPT_PURE") == "1" or os.environ.get("DRAWOPT_REPLAY_NATIVE") == "0":
        return None
    for name in ("drawopt._glexec", "drawopt.replay._glexec"):
        try:
            return __import__(name, fromlist=["run_tape"])
        except ImportError:
            continue
    return None


def _tape_version_needed(tape: np.ndarray) -> int:
    used = np.unique(tape[:, 0]).tolist() if tape.shape[0] else []
    return max([1] + [_OP_VERSION.get(int(c), 1) for c in used])


def native_available() -> bool:
    """Whether the compiled tape loop is importable."""
    return _native_module() is not None


def make_executor(tape: np.ndarray, gl: GLFunctions, callbacks: list[Callable[[], None]],
                  native: bool | None = None, timed: bool = False) -> PythonTape | NativeTape:
    """The fastest interpreter that can run ``tape`` (``native``: None = auto, False = Python);
    ``timed``: one that has ``run_timed`` (compiled loops of ``TAPE_VERSION`` 3 on)."""
    if native is not False and not callbacks:
        mod = _native_module()
        need = max(_tape_version_needed(tape), 3 if timed else 1)
        if mod is not None and getattr(mod, "TAPE_VERSION", 1) >= need:
            return NativeTape(tape, gl, mod)
        if native:
            raise RuntimeError("the native tape loop (_glexec) is not built" if mod is None else
                               "the native tape loop (_glexec) is out of date (rebuild: python setup.py "
                               "build_ext --inplace)")
    return PythonTape(tape, gl, callbacks)


def measure_call_overhead(gl: GLFunctions, n: int = 200_000, native: bool | None = None) -> dict[str, float]:
    """Per-call cost of the replayer's loop, in nanoseconds.

    ``noop_gl_ns``: ``glUniform1ui(-1, k)`` through the tape (location -1 is ignored
    by GL, so this is the loop plus the driver's entry and validation);
    ``interpreter_ns``: the same rows through the same loop with the entry point
    replaced by libc ``abs``: the replayer's own cost per call, without the driver.
    """
    tb = TapeBuilder()
    for k in range(n):
        tb.emit(Op.UNIFORM1UI, 0xFFFFFFFF, k)
    tape = tb.array()
    tape[:, 1] = -1
    ex = make_executor(tape, gl, [], native=native)
    ex.run()  # warm
    t0 = time.perf_counter()
    ex.run()
    dt = time.perf_counter() - t0
    out = {"noop_gl_ns": dt / n * 1e9, "executor": ex.kind}
    libc = ctypes.CDLL(None)
    abs_addr = ctypes.cast(libc.abs, ctypes.c_void_p).value
    if isinstance(ex, NativeTape):
        # the same rows through the same loop, every entry point replaced by libc abs(): the loop alone
        table = np.zeros_like(ex.table)
        table[Op.UNIFORM1UI] = abs_addr
        t0 = time.perf_counter()
        ex.module.run_tape(ex.tape, table)
        out["interpreter_ns"] = (time.perf_counter() - t0) / n * 1e9
    else:
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_uint)(abs_addr)
        calls = [(fn, (-1, k)) for k in range(n)]
        t0 = time.perf_counter()
        for f, a in calls:
            f(*a)
        out["interpreter_ns"] = (time.perf_counter() - t0) / n * 1e9
    return out
