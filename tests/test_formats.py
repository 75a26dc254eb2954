"""The three stream formats: round trips, canonical text, docs and schema, atomic files."""

from __future__ import annotations

import io
import json
import os
import random
import re
import stat
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from drawopt._accel import load_cext
from drawopt.errors import InputError, UsageError
from drawopt.ir import formats
from drawopt.ir.codec import f32_bits
from drawopt.ir.decls import Buffer
from drawopt.ir.formats import common, docgen, dumps, format_for, load, loads, save, sniff
from drawopt.ir.ops import OPS
from drawopt.ir.stream import Stream, StreamBuilder

sys.path.insert(0, str(Path(__file__).parent))
from strategies import F32_SPECIAL, streams  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FMTS = ("text", "json", "npz")
SCHEMA = json.loads(docgen.SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


# ---------------------------------------------------------------------------- round trips
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(max_commands=60))
def test_round_trip_every_format(s: Stream) -> None:
    for fmt in FMTS:
        assert loads(dumps(s, fmt), fmt) == s, fmt
    # chained conversions keep the value
    chained = loads(dumps(loads(dumps(loads(dumps(s, "text"), "text"), "json"), "json"), "npz"), "npz")
    assert chained == s
    text = dumps(s)
    assert dumps(loads(text)) == text  # the printer is canonical: a fixed point
    assert dumps(chained) == text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(max_commands=30, min_decls=True))
def test_json_output_validates_against_schema(s: Stream) -> None:
    VALIDATOR.validate(json.loads(dumps(s, "json")))


def test_json_writer_puts_one_command_per_line() -> None:
    s = _example_stream()
    lines = dumps(s, "json").splitlines()
    cmd_lines = [ln for ln in lines if ln.startswith('  ["')]
    assert len(cmd_lines) == len(s)
    assert [json.loads(ln.rstrip(","))[0] for ln in cmd_lines] == [c.name for c in s.commands()]


def test_float_edge_cases_round_trip_exactly() -> None:
    b = StreamBuilder()
    specials = [f"0x{v:08x}" for v in F32_SPECIAL]
    for i in range(0, len(specials), 6):
        vals = (specials[i:i + 6] + ["0"] * 6)[:6]
        b.RSSetViewports(*vals)
    b.OMSetBlendFactor(-0.0, float("inf"), float("-inf"), 1e-45)
    b.GSSetParameters("onchip", ratio=float("nan"))
    s = b.build()
    text = dumps(s)
    assert "OMSetBlendFactor 0x80000000 0x7f800000 0xff800000 0.000000000000000000000000000000000000000000001" \
        in text
    assert "ratio=0x7fc00000" in text
    for fmt in FMTS:
        s2 = loads(dumps(s, fmt), fmt)
        assert np.array_equal(s2.args, s.args), fmt
    js = json.loads(dumps(s, "json"))["commands"]
    assert js[-2][1:4] == ["0x80000000", "0x7f800000", "0xff800000"] and f32_bits(js[-2][4]) == 1
    # every float32 bit pattern of a sample survives text and JSON
    rng = np.random.default_rng(7)
    bits = np.concatenate([rng.integers(0, 2**32, 3000), np.array(F32_SPECIAL)]).astype(np.uint32)
    b = StreamBuilder()
    for i in range(0, bits.size - 3, 4):
        b.OMSetBlendFactor(*[f"0x{int(v):08x}" for v in bits[i:i + 4]])
    s = b.build()
    for fmt in ("text", "json"):
        assert np.array_equal(loads(dumps(s, fmt), fmt).args, s.args)


def test_u32_max_and_i32_extremes() -> None:
    b = StreamBuilder()
    b.DrawInstanced(2**32 - 1, 2**32 - 1, 2**32 - 1, 2**32 - 1)
    b.DrawIndexedInstanced(1, 1, 0, -(2**31), 2**32 - 1)
    b.RSSetScissorRects(-(2**31), 2**31 - 1, 0, -1)
    b.SetGraphicsRoot32BitConstants(0, 3, 2**32 - 1, 65535, 65536, dest=61)
    s = b.build()
    text = dumps(s)
    assert "DrawInstanced 4294967295 4294967295 4294967295 4294967295" in text
    assert "SetGraphicsRoot32BitConstants 0 3 0xffffffff 65535 0x10000 dest=61" in text
    for fmt in FMTS:
        assert loads(dumps(s, fmt), fmt) == s


# ---------------------------------------------------------------------------- the text format
EXAMPLE = """\
# a comment before the header
drawopt 1 fast_semantics=on     # keys optional
buffer   verts    size=1024 cpu
buffer   args     size=64 frontend
data     args     6 1 0 0        # first record
data     args     0x24 1 0 0
heap     res      CBV_SRV_UAV 4
view     res[0]   srv verts
rootsig  main     table(srv,1) constants(4)
pipeline opaque   vs=pull ps=lit depth=less,write root=main params=0,1 contract=x(vertex_bits=16,perdraw=1)
SetPipelineState opaque\r
SetGraphicsRoot32BitConstants 1 4 0x3f800000 0 0 0 dest=0
target   hdr      64x64 R8G8B8A8_UNORM   # declared late, used after
OMSetRenderTargets hdr
DrawInstanced 6 1 0 0 @nomerge
MultiDrawInstancedIndirect 2 args 0 16
Opaque ClearState(0,  1)   # verbatim, comment stripped
Opaque "a # b" @nomerge
"""


def _example_stream() -> Stream:
    return loads(EXAMPLE, file="ex.dstream")


def test_text_reader_features() -> None:
    s = _example_stream()
    assert s.header.fast_semantics and s.header.context == "graphics"
    assert s.decls["args"].data.tolist() == [6, 1, 0, 0, 0x24, 1, 0, 0]
    assert s.decls["verts"].data is None
    names = [c.name for c in s.commands()]
    assert names == ["SetPipelineState", "SetGraphicsRoot32BitConstants", "OMSetRenderTargets",
                     "DrawInstanced", "MultiDrawInstancedIndirect", "Opaque", "Opaque"]
    assert s.line.tolist() == [11, 12, 14, 15, 16, 17, 18]
    assert s.command(3).flags == 1
    assert s.command(5).args == ("ClearState(0,  1)",)
    assert s.command(6).args == ("a # b",) and s.command(6).flags == 1
    assert s.decls["opaque"].params == (0, 1)


def test_text_printer_is_canonical() -> None:
    text = dumps(_example_stream())
    assert text == """\
drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer   verts    size=1024 cpu
buffer   args     size=64 frontend
data     args     6 1 0 0 36 1 0 0
heap     res      CBV_SRV_UAV 4
view     res[0]   srv verts
rootsig  main     table(srv,1) constants(4)
pipeline opaque   vs=pull ps=lit depth=less,write root=main params=0,1 contract=x(vertex_bits=16,perdraw=1)
target   hdr      64x64 R8G8B8A8_UNORM

SetPipelineState opaque
SetGraphicsRoot32BitConstants 1 4 0x3f800000 0 0 0
OMSetRenderTargets hdr
DrawInstanced 6 1 0 0 @nomerge
MultiDrawInstancedIndirect 2 args 0 16
Opaque ClearState(0,  1)
Opaque "a # b" @nomerge
"""


def test_data_lines_and_empty_data() -> None:
    words = list(range(40)) + [0xFFFFFFFF]
    b = StreamBuilder()
    b.buffer("big", 4 * len(words), data=words)
    b.buffer("empty", 16, data=np.zeros(0, np.uint32))
    s = b.build()
    text = dumps(s)
    data_lines = [ln for ln in text.splitlines() if ln.startswith("data")]
    assert len(data_lines) == 4 and data_lines[-1] == "data     empty"
    assert data_lines[2].endswith("0xffffffff")
    s2 = loads(text)
    assert s2 == s and s2.decls["empty"].data is not None and s2.decls["empty"].data.size == 0


def test_pipeline_keys_printed_in_order_only_when_not_default() -> None:
    b = StreamBuilder()
    b.rootsig("rs", "constants(1)", "cbv")
    b.pipeline("c", cs="cull", uav_stage="cs")
    b.pipeline("g", vs="v", hs="h", ds="d", ps="p", layout="pos", blend="alpha", topology="patch", root="rs",
               params=(), gs_instances=2, gs_ratio=2, uav_stage="ds", contract="never_merge,no_primitive_id")
    b.pipeline("h", vs="v", ps="p", root="rs", params=None)
    b.pipeline("i", vs="v", uav_stage="vs")
    text = dumps(b.build())
    assert "pipeline c        cs=cull\n" in text
    assert ("pipeline g        vs=v hs=h ds=d ps=p layout=pos blend=alpha topology=patch root=rs params=none "
            "uav_stage=ds contract=never_merge,no_primitive_id gs_instances=2 gs_ratio=2.0\n") in text
    assert "pipeline h        vs=v ps=p root=rs\n" in text and "pipeline i        vs=v\n" in text
    assert loads(text) == b.build()
    assert loads(text.replace("ps=p root=rs\n", "ps=p root=rs params=all\n")) == b.build()


def test_opaque_text_forms() -> None:
    b = StreamBuilder()
    texts = ["ClearState", "a  b", "x # y", '"q"', " lead", "tab\there", "ünï", "\u2028", "@nomerge"]
    for t in texts:
        b.Opaque(t)
    b.Opaque("flagged", flags="nomerge")
    s = b.build()
    lines = dumps(s).splitlines()[-len(texts) - 1:]
    assert lines[0] == "Opaque ClearState" and lines[1] == "Opaque a  b" and lines[6] == "Opaque ünï"
    assert lines[2] == 'Opaque "x # y"' and lines[7] == 'Opaque "\\u2028"' and lines[8] == "Opaque @nomerge"
    assert lines[-1] == 'Opaque "flagged" @nomerge'
    assert loads(dumps(s)) == s


def test_fast_path_agrees_with_reference_encoder(monkeypatch) -> None:
    """The per-command fast encoders must give exactly what encode_command gives."""
    text = dumps(_doc_stream())
    fast = loads(text)
    fast_json = loads(dumps(fast, "json"), "json")

    def decline(self, vals):
        raise common.Fallback
    monkeypatch.setattr(common.Plan, "encode", decline)
    slow = loads(text)
    assert slow == fast and np.array_equal(slow.args, fast.args) and np.array_equal(slow.pool, fast.pool)
    assert loads(dumps(fast, "json"), "json") == fast_json == fast


def test_line_numbers_in_json() -> None:
    s = _example_stream()
    js = dumps(s, "json")
    s2 = loads(js, "json")
    lines = js.split("\n")
    for i, ln in enumerate(s2.line.tolist()):
        assert lines[ln - 1].lstrip().startswith('["' + s.spec(i).name + '"')


def test_npz_compacts_pool_and_strings() -> None:
    s = _example_stream()
    s.strings.insert(0, "unused")  # shift: Opaque refers by index
    s.args[s.op == 80, 0] += 1
    s2 = loads(dumps(s, "npz"), "npz")
    assert s2 == s and s2.strings == ["ClearState(0,  1)", "a # b"]
    with np.load(io.BytesIO(dumps(s, "npz")), allow_pickle=False) as z:
        assert set(z.files) == {"op", "args", "var_off", "var_len", "pool", "flags", "line", "meta", "data_1"}
        assert z["op"].dtype == np.uint16 and z["args"].shape == (len(s), 6)
        assert json.loads(z["meta"].tobytes())["decls"][1] == {"kind": "buffer", "name": "args", "size": 64,
                                                                 "frontend": True}


def test_npz_members_are_deflated_at_level_one_and_np_load_reads_them() -> None:
    """The writer deflates each ``NAME.npy`` member at zlib level 1 (numpy's savez_compressed:
    level 6, 3x the CPU for a file 26% smaller); ``level`` picks another; the arrays are the same."""
    import zipfile
    import zlib

    from drawopt.gen import generate
    from drawopt.ir.formats import npz

    s = generate("frame", 300, seed=1)
    data = dumps(s, "npz")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        assert infos and all(i.compress_type == zipfile.ZIP_DEFLATED and i.filename.endswith(".npy") for i in infos)
        for i in infos:  # the member's bytes are level 1's raw deflate stream of the .npy bytes
            h = i.header_offset
            name_len, extra_len = (int.from_bytes(data[h + k:h + k + 2], "little") for k in (26, 28))
            start = h + 30 + name_len + extra_len  # the local file header, then the deflated bytes
            c = zlib.compressobj(1, zlib.DEFLATED, -15)
            assert c.compress(zf.read(i)) + c.flush() == data[start:start + i.compress_size], i.filename
    by_level = {lv: npz.dumps_npz(s, lv) for lv in (0, 1, None)}
    assert by_level[1] == data
    ref = io.BytesIO()
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez_compressed(ref, **arrays)
    assert by_level[None] == ref.getvalue()  # numpy's own layout, byte for byte
    for blob in by_level.values():
        assert loads(blob, "npz") == s
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            assert set(z.files) == set(arrays)
            assert all(z[k].dtype == arrays[k].dtype and np.array_equal(z[k], arrays[k]) for k in arrays)
    assert len(by_level[0]) > len(by_level[1]) > len(by_level[None])


# ---------------------------------------------------------------------------- docs and schema
PRELUDE_RE = re.compile(r"```dstream\n(.*?)```", re.S)


def _doc() -> str:
    return docgen.DOC_PATH.read_text(encoding="utf-8")


def _doc_stream() -> Stream:
    prelude = PRELUDE_RE.search(_doc()).group(1)
    return loads(prelude + "\n".join(o.example for o in OPS) + "\n", file="format.md")


def test_docs_and_schema_are_current() -> None:
    assert docgen.doc_with_table(_doc()) == _doc(), "run: python -m drawopt.ir.formats.docgen"
    assert docgen.schema_text() == docgen.SCHEMA_PATH.read_text(encoding="utf-8"), \
        "run: python -m drawopt.ir.formats.docgen"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_every_command_documented_and_every_example_parses() -> None:
    doc = _doc()
    prelude = PRELUDE_RE.search(doc).group(1)
    examples = re.findall(r"^\| \d+ \| `(\w+)` \|.*?\| `([^`]+)` \|", doc, re.M)
    assert [n for n, _ in examples] == [o.name for o in OPS]
    for name, example in examples:
        assert f"`{name}`" in doc
        s = loads(prelude + example + "\n", file="format.md")
        assert s.command(len(s) - 1).name == name
        assert dumps(s).rstrip("\n").split("\n")[-1].split()[0] == name
    s = _doc_stream()
    assert len(s) == len(OPS)
    VALIDATOR.validate(json.loads(dumps(s, "json")))
    assert loads(dumps(s, "npz"), "npz") == s


def test_json_example_in_docs_loads_and_validates() -> None:
    block = re.search(r"```json\n(.*?)```", _doc(), re.S).group(1)
    s = loads(block, "json", file="format.md")
    VALIDATOR.validate(json.loads(block))
    assert [c.name for c in s.commands()][-1] == "Opaque" and s.command(4).flags == 1


def test_schema_rejects_what_the_reader_rejects() -> None:
    good = json.loads(dumps(_example_stream(), "json"))
    VALIDATOR.validate(good)
    for mutate in (lambda d: d["commands"].append(["DrawInstanced", 1, 2, 3]),
                   lambda d: d["commands"].append(["DrawInstanced", 1, 2, 3, 4294967296]),
                   lambda d: d["commands"].append(["IASetIndexBuffer", "verts", "R8_UINT", 0]),
                   lambda d: d["commands"].append(["Nope"]),
                   lambda d: d["decls"].append({"kind": "heap", "name": "h", "type": "RTV", "size": 1}),
                   lambda d: d.update(extra=1)):
        bad = json.loads(json.dumps(good))
        mutate(bad)
        assert not VALIDATOR.is_valid(bad)
        with pytest.raises(InputError):
            loads(json.dumps(bad), "json")


# ---------------------------------------------------------------------------- files
def test_format_for_and_sniff() -> None:
    assert format_for("a.dstream") == "text" and format_for("a.TXT") == "text"
    assert format_for(Path("x/a.json")) == "json" and format_for("a.npz") == "npz"
    with pytest.raises(UsageError, match="cannot tell the format"):
        format_for("a.bin")
    assert sniff(b"PK\x03\x04") == "npz" and sniff(b" \n{") == "json" and sniff(b"drawopt 1") == "text"
    assert sniff(b"\xef\xbb\xbf{") == "json"
    with pytest.raises(UsageError):
        dumps(_example_stream(), "yaml")
    with pytest.raises(UsageError):
        loads("drawopt 1", "npz")


@pytest.mark.parametrize("fmt", FMTS)
def test_save_and_load_files(tmp_path: Path, fmt: str) -> None:
    s = _example_stream()
    ext = {"text": ".dstream", "json": ".json", "npz": ".npz"}[fmt]
    p = tmp_path / ("frame" + ext)
    save(s, p)
    assert load(p) == s and load(str(p), fmt) == s
    assert sorted(os.listdir(tmp_path)) == ["frame" + ext]
    other = tmp_path / "frame.dat"
    save(s, other, fmt)
    assert load(other, fmt) == s


def test_save_is_atomic_and_keeps_mode(tmp_path: Path, monkeypatch) -> None:
    s = _example_stream()
    p = tmp_path / "out.dstream"
    p.write_text("old\n")
    os.chmod(p, 0o640)
    save(s, p)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640 and load(p) == s

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(UsageError, match="No space left"):
        save(_doc_stream(), p)
    monkeypatch.undo()
    assert load(p) == s  # old content intact
    assert sorted(os.listdir(tmp_path)) == ["out.dstream"]  # no temp file left
    with pytest.raises(UsageError, match="cannot write"):
        save(s, tmp_path / "missing-dir" / "x.dstream")


def test_save_never_writes_an_unencodable_stream(tmp_path: Path) -> None:
    s = _example_stream()
    s.decls.replace(Buffer("args", 64, False, None, True))
    s.decls["opaque"].vs = "has space"  # not representable as a token
    p = tmp_path / "x.dstream"
    with pytest.raises(ValueError, match="one token"):
        save(s, p)
    assert not p.exists() and os.listdir(tmp_path) == []


def test_stdin_and_stdout(monkeypatch, capsysbinary) -> None:
    s = _example_stream()
    for fmt in FMTS:
        data = dumps(s, fmt)
        raw = data if isinstance(data, bytes) else data.encode()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
        assert load("-") == s  # sniffed
        save(s, "-", fmt)
        assert capsysbinary.readouterr().out == raw
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"drawopt 1\nFoo\n")))
    with pytest.raises(InputError, match=r"^<stdin>:2:1: error: unknown command 'Foo'"):
        load("-")


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.dstream:1:1: error: cannot read file"):
        load(tmp_path / "nope.dstream")


def test_write_text_atomic(tmp_path: Path) -> None:
    formats.write_text_atomic(tmp_path / "r.json", "{}\n")
    assert (tmp_path / "r.json").read_text() == "{}\n"


# ---------------------------------------------------------------------------- speed
def _frame_text(draws: int) -> str:
    head = ("drawopt 1 fast_semantics=on\nbuffer ib size=67108864\ntarget hdr 1920x1080 R16G16B16A16_FLOAT\n"
            "depth zbuf 1920x1080 D32_FLOAT\nheap res CBV_SRV_UAV 4096\nrootsig main table(srv,1) constants(4)\n"
            "pipeline p0 vs=pull ps=lit root=main\npipeline p1 vs=pull ps=lit2 root=main\n"
            "OMSetRenderTargets hdr zbuf\nSetGraphicsRootSignature main\nIASetIndexBuffer ib R16_UINT 0\n")
    body = "".join(f"SetPipelineState p{i & 1}\nSetGraphicsRootDescriptorTable 0 res[{i & 4095}]\n"
                   f"SetGraphicsRoot32BitConstants 1 4 0x3f800000 {i} 0 0\nDrawIndexedInstanced 36 1 {i * 36} 0 0\n"
                   for i in range(draws))
    return head + body


def test_parse_small_frame() -> None:
    """A 5,000-draw frame (20k lines) reads and prints back; speed figures are in bench/run.py, not here."""
    text = _frame_text(5000)
    s = loads(text)
    assert len(s) == 20003 and loads(dumps(s)) == s


@pytest.mark.slow
def test_parse_and_print_100k_draws() -> None:
    """A 100,000-draw frame (~400k lines) reads and prints whole (its lines per second: bench/run.py)."""
    text = _frame_text(100_000)
    s = loads(text)
    out = dumps(s)
    assert len(s) == 400_003 and out.count("\n") == 400_000 + 11 + 1



# ---------------------------------------------------------------------------- compiled kernels vs pure twins
# drawopt._text (cext/_text.pyx) reads the common .dstream lines and prints text and JSON commands; its
# pure twins (text._PureScanner, the Python printers) are the previous implementation. Every stream,
# byte and error message must be the same on both paths.
HAS_TEXT_CEXT = load_cext("_text", pure=False) is not None
needs_cext = pytest.mark.skipif(not HAS_TEXT_CEXT, reason="drawopt._text not built")
GOLDEN_FILES = sorted((ROOT / "examples").glob("*.dstream")) + sorted((ROOT / "tests" / "golden").glob("*/*.dstream"))


def _on_path(monkeypatch, pure: bool, fn, *args):
    """``fn(*args)`` with the compiled kernels (pure=False) or the pure twins; an ``InputError``
    comes back as its message."""
    monkeypatch.setenv("DRAWOPT_PURE", "1" if pure else "0")
    try:
        return fn(*args)
    except InputError as e:
        return f"InputError: {e}"
    finally:
        monkeypatch.delenv("DRAWOPT_PURE")


def _columns(s: Stream | str) -> object:
    """Everything a read stream holds, source lines and pool layout included."""
    if isinstance(s, str):
        return s
    data = [None if getattr(d, "data", None) is None else d.data.tolist() for d in s.decls]
    return (s.header, list(s.decls), data, s.strings, s.op.dtype, s.args.dtype, s.pool.dtype,
            *[a.tolist() for a in (s.op, s.args, s.var_off, s.var_len, s.pool, s.flags, s.line)])


def _agree(monkeypatch, text: str, what: str, fmt: str = "text") -> Stream | str:
    """Read ``text`` on both paths and print the result in text and JSON on both: all must agree."""
    got = [_on_path(monkeypatch, pure, loads, text, fmt) for pure in (False, True)]
    assert _columns(got[0]) == _columns(got[1]), what
    if isinstance(got[0], Stream):
        for fmt in ("text", "json"):
            a, b = (_on_path(monkeypatch, pure, dumps, got[0], fmt) for pure in (False, True))
            assert a == b, (what, fmt)
    return got[0]


@needs_cext
def test_compiled_and_pure_agree_on_examples_golden_files_and_generated(monkeypatch) -> None:
    from drawopt.gen import KINDS, generate

    assert GOLDEN_FILES
    for p in GOLDEN_FILES:
        text = p.read_text(encoding="utf-8")
        s = _agree(monkeypatch, text, p.name)
        assert isinstance(s, Stream), s
        _agree(monkeypatch, dumps(s), p.name + " (printed)")
        js = [_on_path(monkeypatch, pure, dumps, s, "json") for pure in (False, True)]
        assert js[0] == js[1]
        assert _agree(monkeypatch, js[0], p.name + " (JSON)", "json") == s
        if p.name.endswith(".out.dstream"):  # written by the printer: its fixed point, byte for byte
            assert _on_path(monkeypatch, False, dumps, s) == text, p
    for kind in KINDS:
        for seed in (1, 2):
            s = generate(kind, 400, seed=seed)
            text = _on_path(monkeypatch, True, dumps, s)
            assert _on_path(monkeypatch, False, dumps, s) == text, kind
            assert _columns(_agree(monkeypatch, text, kind)) == _columns(_on_path(monkeypatch, True, loads, text))
            _agree(monkeypatch, dumps(s, "json"), kind, "json")


@needs_cext
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(streams(max_commands=60))
def test_compiled_and_pure_agree_on_random_streams(monkeypatch, s: Stream) -> None:
    text = _on_path(monkeypatch, True, dumps, s)
    assert _on_path(monkeypatch, False, dumps, s) == text
    assert _on_path(monkeypatch, False, dumps, s, "json") == _on_path(monkeypatch, True, dumps, s, "json")
    assert _agree(monkeypatch, text, "random") == s
    assert _agree(monkeypatch, _on_path(monkeypatch, True, dumps, s, "json"), "random", "json") == s


# tokens that probe every fast form and every way out of it
_TRICKY = ("0", "1", "-1", "-0", "00", "01", "007", "1_0", "+3", "0x", "0x1F", "0X1f", "0xffffffff", "0x100000000",
           "0x7fffffffffffffff", "0x8000000000000000", "0x00000000000000000001", "4294967295", "4294967296",
           "2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807",
           "9223372036854775808", "999999999999999999", "1000000000000000000", "0b1", "0o7", "1.5", "-0.0",
           "1.", ".5", "1e5", "1E-3", "1e", "1e+", "3.4028235e38", "3.4028234e38", "1e39", "-1e39", "1e-46",
           "inf", "nan", "-inf", "TRUE", "true", "FALSE", "false", "True", "2", "\u0663", "\uff11", "1\u00a0",
           "vb", "ib", "p", "main", "res", "res[0]", "res[3]", "res[4]", "res[00]", "res[0]]", "res[]", "[0]",
           "res[x]", "samp[0]", "nope", "nope[0]", "R16_UINT", "R32_UINT", "R8_UINT", "TRIANGLELIST",
           "onchip", "null", "CS_PARTIAL_FLUSH", "DEFAULT", "COMMON", "RENDER_TARGET", "rt", "z",
           "dest=0", "dest=2", "dest=64", "dest=", "dest=x", "vps=64", "pps=0x10", "ratio=0.5", "ratio=nan",
           "lds=1", "foo=1", "=1", "@nomerge", "@nomerg", "@", "@nomerge=1", "#", "a#b", "\x00", "\x1c", "\x0b")
_TRICKY_HEAD = ("drawopt 1\nbuffer ib size=100\nbuffer vb size=64 frontend\nheap res CBV_SRV_UAV 4\n"
                "heap samp SAMPLER 2\nrootsig main constants(4)\npipeline p vs=v root=main\n"
                "target rt 64x64 R8G8B8A8_UNORM\ndepth z 64x64 D32_FLOAT\ntexture tex 4x4 BC7_UNORM\n")


_GOOD = {"u32": ("0", "1", "4", "36", "0x10", "65536", "4294967295"), "i32": ("-5", "0", "-2147483648", "2147483647"),
         "u64": ("0", "4", "16"), "f32": ("0", "1", "0.5", "-0", "1e3", "0x3f800000", "1920", "0x7fc00000"),
         "bool": ("TRUE", "FALSE", "true", "false", "0", "1"), "buffer": ("vb", "ib"), "pipeline": ("p",),
         "rootsig": ("main",), "heap": ("res", "samp"), "target": ("rt",), "depth": ("z",), "texture": ("tex",),
         "heapref": ("res[0]", "res[3]", "samp[1]")}


def _token(rng: random.Random, a) -> str:
    """A token for argument ``a``: mostly one of its good forms, sometimes a tricky one."""
    if rng.random() < 0.12:
        return rng.choice(_TRICKY)
    if a.kind == "enum":
        return rng.choice(a.values)
    if a.kind == "ref":
        kinds = ("buffer",) if "buffer" in a.ref and rng.random() < 0.8 else a.ref
        return rng.choice(_GOOD[rng.choice(kinds)])
    return rng.choice(_GOOD[a.kind])


def _tricky_line(rng: random.Random) -> str:
    sp = rng.choice([o for o in OPS if o.name != "Opaque"])
    toks = [sp.name if rng.random() < 0.97 else rng.choice(("Data", "vb", "drawopt", "Opaque"))]
    if rng.random() < 0.08:
        toks = ["data", rng.choice(("vb", "vb", "ib", "res", "nope"))]
        toks += [_token(rng, sp.args[0]) if sp.args and rng.random() < 0.3 else rng.choice(_GOOD["u32"])
                 for _ in range(rng.randint(0, 17))]
    else:
        positional = [a for a in sp.args if not a.keyword]
        keywords = [a for a in sp.args if a.keyword]
        take = len(positional) if rng.random() < 0.85 else rng.randint(0, len(positional))
        toks += [_token(rng, a) for a in positional[:take]]
        if sp.var is not None:
            k = rng.randint(sp.var_min, min(sp.var_max, 6)) if rng.random() < 0.9 else rng.randint(0, 70)
            if sp.name.endswith("32BitConstants") and len(toks) > 2 and rng.random() < 0.9:
                toks[2] = str(k)  # the count that matches
            toks += [_token(rng, sp.var) for _ in range(k)]
        for a in keywords:
            if rng.random() < 0.4:
                toks.insert(rng.randint(1, len(toks)), a.name + "=" + _token(rng, a))
        if rng.random() < 0.15:
            toks.insert(rng.randint(1, len(toks)), rng.choice(("@nomerge", "@nomerge", "@x", "foo=1")))
        if rng.random() < 0.1:
            toks.insert(rng.randint(1, len(toks)), rng.choice(_TRICKY))
    sep = rng.choice((" ", " ", " ", "\t", "  ", "\r", "\x0c", "\x1f", "\u00a0"))
    return sep.join(toks) + rng.choice(("", "", "", "\r", " # note", "#x", " \u00e9"))


@needs_cext
def test_compiled_and_pure_agree_on_tricky_lines(monkeypatch) -> None:
    """Single command lines of every opcode with edge tokens, separators and comments: the kernel
    gives the pure reader's stream or its exact error."""
    rng = random.Random(13)
    outcomes = Counter()
    for n in range(1500):
        lines = [_tricky_line(rng) for _ in range(rng.choice((1, 1, 1, 3)))]
        got = _agree(monkeypatch, _TRICKY_HEAD + "\n".join(lines) + "\n", f"#{n}: {lines!r}")
        outcomes["error" if isinstance(got, str) else "ok"] += 1
    assert outcomes["ok"] > 200 and outcomes["error"] > 200, outcomes


_JSON_TRICKY = (0, 1, -1, 2, 16, 36, 65536, 2**31, 2**32 - 1, 2**32, -(2**31) - 1, 2**63 - 1, 2**63, 10**30, True,
                False, None, 0.0, -0.0, 0.5, 1.0, 1920.0, 1e39, float("inf"), float("nan"), "0", "1", "0x10",
                "0x3f800000", "1_0", " 1", "1.5", "TRUE", "true", "vb", "ib", "p", "main", "res", "res[0]",
                "res[4]", "samp[1]", "nope", "R16_UINT", "onchip", "caf\u00e9", "\ud800", [], [1], {},
                {"dest": 2}, {"dest": 64}, {"dest": "2"}, {"dest": True}, {"flags": ["nomerge"]}, {"flags": []},
                {"flags": ["x"]}, {"flags": "nomerge"}, {"foo": 1}, {"vps": 64, "ratio": 0.5, "flags": ["nomerge"]},
                {"ratio": "0x7fc00000"}, {"lds": 2**32})


@needs_cext
def test_compiled_and_pure_agree_on_tricky_json_commands(monkeypatch) -> None:
    """JSON command arrays of every opcode with edge values (types, ranges, strings spelling numbers,
    options objects): the kernel gives the pure reader's stream or its exact error."""
    head = json.loads(dumps(loads(_TRICKY_HEAD), "json"))
    rng = random.Random(17)
    outcomes = Counter()
    for n in range(1200):
        cmds = []
        for _ in range(rng.choice((1, 1, 3))):
            toks = _tricky_line(rng).split()
            el = [toks[0] if rng.random() < 0.97 else rng.choice((5, "Nope", "Opaque", None))]
            for t in toks[1:]:
                r = rng.random()
                if r < 0.06:
                    el.append(json.loads(json.dumps(rng.choice(_JSON_TRICKY))))
                elif t.startswith(("@", "#")) or "=" in t:
                    continue
                else:
                    try:
                        el.append(int(t, 0) if r < 0.95 else float(t))
                    except ValueError:
                        el.append(t)
            if rng.random() < 0.15:
                el.append(json.loads(json.dumps(rng.choice([v for v in _JSON_TRICKY if isinstance(v, dict)]))))
            cmds.append(el if rng.random() < 0.98 else rng.choice(({}, 5, "x", [])))
        doc = json.dumps({**head, "commands": cmds})
        got = _agree(monkeypatch, doc, f"#{n}: {cmds!r}", "json")
        outcomes["error" if isinstance(got, str) else "ok"] += 1
    assert outcomes["ok"] > 100 and outcomes["error"] > 200, outcomes


@needs_cext
def test_compiled_and_pure_agree_on_fuzzed_json(monkeypatch) -> None:
    import test_fuzz

    rng = random.Random(3)
    docs = [dumps(s, "json") for s in test_fuzz.SEED_STREAMS]
    for n in range(400):
        doc = docs[n % len(docs)]
        if rng.random() < 0.7:
            doc = json.dumps(test_fuzz._mutate_tree(rng, json.loads(doc)))
        else:
            raw = bytearray(doc.encode())
            for _ in range(rng.randint(1, 3)):
                raw[rng.randrange(len(raw))] = rng.choice(b'{}[],:"0a\\-.eE \n')
            doc = raw.decode("utf-8", "replace")
        _agree(monkeypatch, doc, f"json #{n}", "json")


@needs_cext
def test_compiled_and_pure_agree_on_fuzzed_texts(monkeypatch) -> None:
    import test_fuzz

    rng = random.Random(7)
    for n in range(600):
        kind, data = test_fuzz._text_mutants(rng, test_fuzz.SEEDS[n % len(test_fuzz.SEEDS)])
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
        _agree(monkeypatch, data, f"#{n} {kind}")


@needs_cext
def test_kernel_reads_keywords_flags_and_data_itself(monkeypatch) -> None:
    """The reference path is only taken for lines the kernel cannot read (so the agreement tests
    above exercise the kernel, and large frames do not fall back to Python)."""
    from drawopt.gen import generate
    from drawopt.ir.formats import text as text_mod

    calls = Counter()
    real = text_mod._Reader.slow_command

    def counted(self, sp, toks, lineno):
        calls[sp.name] += 1
        return real(self, sp, toks, lineno)
    monkeypatch.setattr(text_mod._Reader, "slow_command", counted)
    monkeypatch.setenv("DRAWOPT_PURE", "0")
    from drawopt.ir.formats import jsonfmt

    def declined(*args):
        calls["json"] += 1
        raise common.Fallback
    monkeypatch.setattr(common.Plan, "encode", declined)  # the JSON reader's Python path starts here
    for kind in ("frame", "quads", "gpu-driven"):
        s = generate(kind, 300, seed=1)
        assert loads(dumps(s)) == s and loads(dumps(s, "json"), "json") == s
    s = loads(EXAMPLE.replace("Opaque", "# Opaque") + "GSSetParameters onchip vps=64 ratio=0.5 @nomerge\n"
              "RSSetViewports 0 0 1920 1080\nCSEnableAutomaticGpuFlush TRUE\nDrawInstanced 0x10 1 0 0\n")
    assert len(s) == 9 and s.command(5).flags == 1
    assert loads(dumps(s, "json"), "json") == s
    assert calls == {}, calls
    monkeypatch.setattr(jsonfmt, "_slow_command", lambda *a: (_ for _ in ()).throw(AssertionError(a)))
    assert loads(dumps(s, "json"), "json") == s
    assert loads(H_DECLINED) == loads(H_DECLINED.replace("1_0", "10"))
    assert calls == {"DrawInstanced": 1}


H_DECLINED = "drawopt 1\nDrawInstanced 1_0 1 0 0\n"


def test_printers_agree_on_values_without_a_canonical_token(monkeypatch) -> None:
    """Unchecked streams (a pass's intermediate result, say): the kernel hands commands with names or
    enumerants out of range to the Python printer, so both paths print -- or fail -- alike."""
    s = loads("drawopt 1\nbuffer b size=64\nheap h SAMPLER 2\nIASetIndexBuffer b R16_UINT 0\n"
              "SetDescriptorHeaps h\nSetGraphicsRootDescriptorTable 0 h[1]\nDispatch 1 2 3\nOpaque x\n")
    cases = []
    for cmd, col, v in ((0, 0, -1), (0, 1, -1), (0, 1, 7), (2, 1, -1 << 32), (2, 1, 5 << 32), (3, 0, -(2**63)),
                        (3, 1, 2**63 - 1), (4, 0, 0)):
        t = s.copy()
        t.args[cmd, col] = v
        cases.append(t)
    t = s.copy()
    t.flags[3] = 3
    cases.append(t)
    t = s.copy()
    t.op[3] = 999
    cases.append(t)
    for t in cases:
        for fmt in ("text", "json"):
            got = []
            for pure in (False, True):
                try:
                    got.append(_on_path(monkeypatch, pure, dumps, t, fmt))
                except Exception as e:  # noqa: BLE001 - the same exception on both paths is the point
                    got.append(f"{type(e).__name__}: {e}")
            assert got[0] == got[1], (fmt, got)
