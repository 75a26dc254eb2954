"""What a shader module's SPIR-V proves: the built-ins it reads and the descriptors it writes.

The SPIR-V is read with Khronos' disassembler ``spirv-dis`` (Debian package ``spirv-tools``), the
reference implementation of the SPIR-V assembly syntax, rather than with a decoder of our own:
its text form is stable and documented, and one subprocess per module (cached by content) is cheap
next to the import. Only facts the code shows are reported; a module that is absent or that
``spirv-dis`` cannot read gives ``None`` (no contract clause is then declared for its pipeline).

>>> r = reflect_text('''
...   OpEntryPoint Vertex %4 "main" %9
...   OpDecorate %9 BuiltIn VertexIndex
...   %8 = OpTypePointer Input %5
...   %9 = OpVariable %8 Input''')
>>> sorted(r.builtins), r.writes_all
(['VertexIndex'], False)
"""

from __future__ import annotations

__all__ = ["Reflection", "reflect_file", "reflect_text", "spirv_dis", "PROVEN_BUILTINS"]

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field

PROVEN_BUILTINS = ("VertexIndex", "VertexId", "InstanceIndex", "InstanceId", "PrimitiveId", "DrawIndex",
                   "BaseVertex", "BaseInstance")
"""The built-ins whose use decides a contract clause (docs/import.md)."""

_WRITE_OPS = {"OpStore", "OpImageWrite", "OpCopyMemory", "OpCopyMemorySized"}
_PTR_OPS = {"OpAccessChain", "OpInBoundsAccessChain", "OpPtrAccessChain", "OpInBoundsPtrAccessChain",
            "OpCopyObject", "OpLoad", "OpImage", "OpSampledImage", "OpBitcast", "OpImageTexelPointer"}


@dataclass
class Reflection:
    """What one module shows.

    ``builtins``: built-in names decorated on the module's variables or block members (any
    storage class; a conservative superset of those read). ``written``: ``(set, binding)`` of the
    descriptors some instruction stores to, writes as an image or updates atomically.
    ``writes_all``: a write whose target could not be traced to a descriptor (every storage
    descriptor then counts as written). ``stages``: the entry points' execution models.
    """

    builtins: set[str] = field(default_factory=set)
    written: set[tuple[int, int]] = field(default_factory=set)
    writes_all: bool = False
    stages: set[str] = field(default_factory=set)


def spirv_dis() -> str | None:
    """The path of ``spirv-dis``, or None when the Debian package ``spirv-tools`` is missing."""
    return shutil.which("spirv-dis")


def reflect_text(text: str) -> Reflection:
    """Reflect the ``spirv-dis --raw-id`` disassembly ``text``."""
    r = Reflection()
    deco_set: dict[str, int] = {}
    deco_bind: dict[str, int] = {}
    base: dict[str, str] = {}   # pointer/image id -> the variable it came from
    variables: set[str] = set()
    write_targets: list[str] = []
    for line in text.splitlines():
        t = line.split()
        if not t or t[0].startswith(";"):
            continue
        if t[0] == "OpEntryPoint" and len(t) > 1:
            r.stages.add(t[1])
            continue
        if t[0] == "OpDecorate" and len(t) >= 3:
            if t[2] == "BuiltIn" and len(t) > 3:
                r.builtins.add(t[3])
            elif t[2] == "DescriptorSet" and len(t) > 3:
                deco_set[t[1]] = int(t[3])
            elif t[2] == "Binding" and len(t) > 3:
                deco_bind[t[1]] = int(t[3])
            continue
        if t[0] == "OpMemberDecorate" and len(t) >= 5 and t[3] == "BuiltIn":
            r.builtins.add(t[4])
            continue
        if len(t) >= 3 and t[1] == "=":
            res, op, ops = t[0], t[2], t[3:]
            if op == "OpVariable":
                variables.add(res)
                base[res] = res
            elif op in _PTR_OPS and len(ops) >= 2:
                src = ops[1]  # the operand after the result type
                if src in base:
                    base[res] = base[src]
            elif op.startswith("OpAtomic") and op not in ("OpAtomicLoad",) and len(ops) >= 2:
                write_targets.append(ops[1])
            continue
        if t[0] in _WRITE_OPS and len(t) >= 2:
            write_targets.append(t[1])
        elif t[0] == "OpAtomicStore" and len(t) >= 2:
            write_targets.append(t[1])
    for w in write_targets:
        v = base.get(w)
        if v is None:
            r.writes_all = True
        elif v in deco_set or v in deco_bind:
            r.written.add((deco_set.get(v, 0), deco_bind.get(v, 0)))
        # a store to a Function/Private/Output/Workgroup variable writes no descriptor
    return r


_CACHE: dict[str, Reflection | None] = {}


def reflect_file(path: str) -> tuple[Reflection | None, str]:
    """Reflect the SPIR-V module in file ``path``: ``(reflection, "")`` or ``(None, why not)``."""
    try:
        with open(path, "rb") as f:
            code = f.read()
    except OSError as e:
        return None, f"cannot read {os.path.basename(path)}: {e.strerror or e}"
    if len(code) < 20 or code[:4] not in (b"\x03\x02\x23\x07", b"\x07\x23\x02\x03"):
        return None, f"{os.path.basename(path)} is not SPIR-V"
    key = hashlib.sha256(code).hexdigest()
    if key in _CACHE:
        got = _CACHE[key]
        return got, "" if got is not None else "spirv-dis could not read it"
    exe = spirv_dis()
    if exe is None:
        return None, "spirv-dis is not installed (Debian package spirv-tools)"
    p = subprocess.run([exe, "--raw-id", "--no-color", "-o", "-", path], capture_output=True, text=True)
    got = reflect_text(p.stdout) if p.returncode == 0 else None
    _CACHE[key] = got
    return got, "" if got is not None else "spirv-dis could not read it"
