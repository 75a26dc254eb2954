"""Mutation fuzzing of the three readers (deterministic: seeded ``random.Random``).

Every mutated input must either load -- and then be a valid stream that
round-trips through the text format -- or raise ``InputError``; any other
exception is a bug. More than 2,000 inputs in total, a few seconds.
"""

from __future__ import annotations

import io
import json
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drawopt.errors import InputError
from drawopt.ir.formats import dumps, loads
from drawopt.ir.ops import OPS
from drawopt.ir.stream import Stream

DOC = Path(__file__).resolve().parents[1] / "docs" / "format.md"

EXTRA = """\
buffer   big      size=256 cpu frontend
data     big      1 2 3 0xffffffff 65536 0 0 0 7 7 7 7 7 7 7 7
data     big      9
rootsig  rs2      table(srv,2,uav,1) constants(8) cbv srv uav
pipeline cull     cs=cull root=rs2 params=0,1 writes=res[1] contract=draw_data(perdraw=1)
pipeline gsp      vs=v gs=g hs=h ds=d ps=p layout=pos blend=alpha depth=less topology=patch gs_maxverts=4 gs_ratio=1.5
SetGraphicsRoot32BitConstants 1 3 0x3f800000 0xffffffff 0 dest=4 @nomerge
GSSetParameters onchip vps=64 pps=32 ratio=0.5 lds=16384
RSSetViewports 0x80000000 nan inf -inf 0 1
RSSetScissorRects -2147483648 0 2147483647 -1
MultiDrawIndexedInstancedIndirectAuto counts 4 4096 cullargs 0 20 @nomerge
Opaque "quoted # text \\u00e9" @nomerge
Opaque Verbatim(  spaced  )   # comment
DrawIndexedInstanced 4294967295 1 0 -5 0
"""

EXTREMES = ("0", "-1", "4294967295", "4294967296", "-2147483649", "2147483648", "0x7fffffffffffffff",
            "9223372036854775808", "18446744073709551616", "0xffffffff", "0x100000000", "1e309", "-1e39", "nan",
            "-0", "0x", "1_0", "0b1", "1.5", "inf", "9" * 5000, "010", "+3", "65536", "\u0663")
TOKENS = ("@nomerge", "@x", "dest=5", "dest=", "=", "#", '"', "res[99]", "res[0]", "[", "]", "verts", "opaque",
          "R16_UINT", "TRUE", "Opaque", "drawopt", "buffer", "data", "x(vertex_bits=99)", "size=", "\t", "\x00")
JSON_VALUES = (None, True, False, -1, 0, 1, 2**32, 2**63, 2**64, 10**30, 1.5, -0.0, 1e300, "x", "", "0x7fc00000",
               "0xffffffffff", [], {}, [[]], {"kind": "buffer"}, "res[0]", "R16_UINT", {"flags": ["nomerge"]},
               {"dest": 64}, ["Dispatch", 1, 1, 1], "Dispatch")


def _seed_texts() -> list[str]:
    doc = DOC.read_text(encoding="utf-8")
    prelude = re.search(r"```dstream\n(.*?)```", doc, re.S).group(1)
    examples = "\n".join(o.example for o in OPS)
    full = prelude + EXTRA + examples + "\n"
    loads(full)  # the seeds themselves are valid
    small = "drawopt 1\nbuffer b size=64\ndata b 1 2 3\nDispatch 1 2 3\nMultiDrawInstancedIndirect 2 b 0 16\n"
    return [full, prelude + examples + "\n", small]


SEEDS = _seed_texts()
SEED_STREAMS = [loads(t) for t in SEEDS]


def _accepts(data: str | bytes, fmt: str, what: str) -> str:
    """Load ``data``: 'ok' or 'error'; anything else fails the test with the reproducer."""
    try:
        s = loads(data, fmt, file="fuzz")
    except InputError:
        return "error"
    except Exception as e:  # pragma: no cover - this is the bug the fuzzer looks for
        head = data[:300] if isinstance(data, (str, bytes)) else data
        pytest.fail(f"{fmt} input ({what}) raised {type(e).__name__}: {e}\ninput head: {head!r}")
    assert isinstance(s, Stream)
    s.check()
    assert loads(dumps(s), "text") == s, what
    return "ok"


# ---------------------------------------------------------------------------- text
def _text_mutants(rng: random.Random, text: str) -> tuple[str, str | bytes]:
    lines = text.split("\n")
    body = [i for i, ln in enumerate(lines) if ln.split()]
    if not body:
        return "append", text + rng.choice(TOKENS + EXTREMES)
    i = rng.choice(body)
    toks = lines[i].split()
    kind = rng.choice(("flip", "delete_tok", "dup_tok", "swap_tok", "shuffle", "dup_line", "delete_line",
                       "truncate", "extreme", "insert_tok", "junk_line", "swap_lines"))
    if kind == "flip":
        raw = bytearray(text.encode("utf-8"))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] ^= rng.randint(1, 255)
        return kind, bytes(raw)
    if kind in ("delete_tok", "dup_tok", "swap_tok", "extreme", "insert_tok"):
        j = rng.randrange(len(toks))
        if kind == "delete_tok":
            del toks[j]
        elif kind == "dup_tok":
            toks.insert(j, toks[j])
        elif kind == "swap_tok":
            k = rng.randrange(len(toks))
            toks[j], toks[k] = toks[k], toks[j]
        elif kind == "extreme":
            nums = [k for k, t in enumerate(toks) if re.fullmatch(r"-?(0x)?[0-9a-f.]+", t)] or [j]
            toks[rng.choice(nums)] = rng.choice(EXTREMES)
        else:
            toks.insert(rng.randint(0, len(toks)), rng.choice(TOKENS + EXTREMES))
        lines[i] = " ".join(toks)
    elif kind == "shuffle":
        a = rng.randrange(len(lines))
        window = lines[a:a + rng.randint(2, 8)]
        rng.shuffle(window)
        lines[a:a + len(window)] = window
    elif kind == "swap_lines":
        k = rng.choice(body)
        lines[i], lines[k] = lines[k], lines[i]
    elif kind == "dup_line":
        lines.insert(i, lines[i])
    elif kind == "delete_line":
        del lines[i]
    elif kind == "truncate":
        return kind, text[:rng.randrange(len(text))]
    else:
        lines[i] = "".join(rng.choice("abcXYZ019 =#@[]()\",.-_\t\\") for _ in range(rng.randint(1, 30)))
    return kind, "\n".join(lines)


def test_fuzz_text() -> None:
    rng = random.Random(20261130)
    counts: Counter[str] = Counter()
    for n in range(900):
        kind, data = _text_mutants(rng, SEEDS[n % len(SEEDS)])
        counts[_accepts(data, "text", f"text #{n} {kind}")] += 1
    assert sum(counts.values()) == 900 and counts["error"] > 300 and counts["ok"] > 50, counts


# ---------------------------------------------------------------------------- JSON
def _mutate_tree(rng: random.Random, node):
    """Replace, delete or duplicate one random node of a JSON tree (in place where possible)."""
    parent, key = None, None
    cur = node
    for _ in range(rng.randint(1, 5)):
        if isinstance(cur, dict) and cur:
            parent, key = cur, rng.choice(list(cur))
        elif isinstance(cur, list) and cur:
            parent, key = cur, rng.randrange(len(cur))
        else:
            break
        cur = parent[key]
    if parent is None:
        return rng.choice(JSON_VALUES)
    op = rng.random()
    if op < 0.6:
        parent[key] = json.loads(json.dumps(rng.choice(JSON_VALUES)))
    elif op < 0.8:
        del parent[key]
    elif isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key])))
    else:
        parent[key + "x"] = parent[key]
    return node


def test_fuzz_json() -> None:
    rng = random.Random(7)
    docs = [dumps(s, "json") for s in SEED_STREAMS]
    counts: Counter[str] = Counter()
    for n in range(700):
        doc = docs[n % len(docs)]
        r = rng.random()
        if r < 0.55:
            kind = "tree"
            data: str | bytes = json.dumps(_mutate_tree(rng, json.loads(doc)))
        elif r < 0.7:
            kind = "flip"
            raw = bytearray(doc.encode())
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.choice(b'{}[],:"0a\\-.eE \n\xff')
            data = bytes(raw)
        elif r < 0.8:
            kind = "truncate"
            data = doc[:rng.randrange(len(doc))]
        else:
            kind = "text"
            data = doc
            for _ in range(rng.randint(1, 2)):
                _, data = _text_mutants(rng, data if isinstance(data, str) else data.decode("utf-8", "replace"))
        counts[_accepts(data, "json", f"json #{n} {kind}")] += 1
    assert sum(counts.values()) == 700 and counts["error"] > 250 and counts["ok"] > 50, counts


# ---------------------------------------------------------------------------- npz
def _arrays(s: Stream) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(dumps(s, "npz")), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


_CODES = np.array([o.code for o in OPS], np.int64)


def _array_mutation(rng: random.Random, a: dict[str, np.ndarray]) -> str:
    if not a:
        return "empty"
    key = rng.choice(sorted(a))
    v = a[key]
    kind = rng.choice(("values", "values", "dtype", "shape", "drop", "add", "meta", "swap"))
    if kind == "values" and v.size and v.dtype.kind in "iu":
        v = v.copy()
        flat = v.reshape(-1)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(flat.size)
            if key == "op":
                flat[i] = rng.choice(list(_CODES) + [0, 999, 65535])
            else:
                info = np.iinfo(v.dtype)
                pool = [x for x in (0, 1, -1, 16, 20, 2**31 - 1, 2**32, 2**62) if info.min <= x <= info.max]
                flat[i] = rng.choice(pool + [int(info.max), int(info.min), rng.randint(int(info.min), int(info.max))])
        a[key] = v
    elif kind == "dtype":
        a[key] = v.astype(rng.choice((np.int8, np.uint16, np.int32, np.int64, np.float64, np.uint32, ">i8")))
    elif kind == "shape":
        a[key] = rng.choice((v.reshape(-1)[: max(v.size - 1, 0)], np.concatenate([v.reshape(-1), v.reshape(-1)[:1]]),
                             v.reshape(1, -1), v.reshape(-1)))
    elif kind == "drop":
        del a[key]
    elif kind == "add":
        a[rng.choice(("data_0", "data_1", "data_99", "extra", "data_x"))] = \
            np.arange(rng.randint(0, 40), dtype=rng.choice((np.uint32, np.int64)))
    elif kind == "meta" and "meta" in a and a["meta"].dtype == np.uint8:
        try:
            meta = json.loads(a["meta"].tobytes())
        except ValueError:  # already mangled by an earlier mutation
            return "meta-skipped"
        a["meta"] = np.frombuffer(json.dumps(_mutate_tree(rng, meta)).encode(), np.uint8)
    elif kind == "swap":
        k2 = rng.choice(sorted(a))
        a[key], a[k2] = a[k2], a[key]
    return kind


def test_fuzz_npz() -> None:
    rng = random.Random(99)
    blobs = [dumps(s, "npz") for s in SEED_STREAMS]
    arrays = [_arrays(s) for s in SEED_STREAMS]
    counts: Counter[str] = Counter()
    for n in range(550):
        r = rng.random()
        if r < 0.15:
            kind = "flip"
            raw = bytearray(blobs[n % len(blobs)])
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(len(raw))] ^= rng.randint(1, 255)
            data = bytes(raw)
        elif r < 0.25:
            kind = "truncate"
            b = blobs[n % len(blobs)]
            data = b[:rng.randrange(len(b))]
        else:
            a = {k: v.copy() for k, v in arrays[n % len(arrays)].items()}
            kind = "+".join(_array_mutation(rng, a) for _ in range(rng.randint(1, 2)))
            buf = io.BytesIO()
            (np.savez_compressed if rng.random() < 0.2 else np.savez)(buf, **a)
            data = buf.getvalue()
        counts[_accepts(data, "npz", f"npz #{n} {kind}")] += 1
    assert sum(counts.values()) == 550 and counts["error"] > 250 and counts["ok"] > 20, counts


def test_fuzz_total_is_at_least_2000() -> None:
    assert 900 + 700 + 550 >= 2000

