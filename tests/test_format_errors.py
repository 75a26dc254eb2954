"""Bad inputs in every format: each gives an ``InputError`` at the right ``file:line:col``."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from drawopt.errors import InputError
from drawopt.ir.formats import dumps, loads

# ---------------------------------------------------------------------------- text
H = ("drawopt 1\nbuffer ib size=100\nbuffer vb size=64\nheap res CBV_SRV_UAV 4\nrootsig main constants(4)\n"
     "pipeline p vs=v root=main\n")  # 6 lines: the case's own line is line 7

TEXT_CASES = [
    # (id, input, expected prefix, expected message substring)
    ("malformed-decl", "drawopt 1\nbuffer\n", "t.dstream:2:8:", "expected a name after 'buffer'"),
    ("malformed-dims", H + "texture t 12x FMT\n", "t.dstream:7:11:", "expected WIDTHxHEIGHT, got '12x'"),
    ("unknown-command", H + "Foo 1 2\n", "t.dstream:7:1:",
     "unknown command 'Foo' (keep an unmodelled call as 'Opaque Foo ...', a full barrier)"),
    ("did-you-mean", H + "DrawInstance 1 1 0 0\n", "t.dstream:7:1:", "(did you mean 'DrawInstanced'?)"),
    ("wrong-case", H + "drawinstanced 1 1 0 0\n", "t.dstream:7:1:", "(did you mean 'DrawInstanced'?)"),
    ("undeclared", H + "SetPipelineState nope\n", "t.dstream:7:18:", "undeclared name 'nope'"),
    ("wrong-kind", H + "SetPipelineState ib\n", "t.dstream:7:18:", "'ib' is a buffer, expected pipeline"),
    ("too-few", H + "DrawInstanced 1 2 3\n", "t.dstream:7:21:", "DrawInstanced needs 4 arguments"),
    ("too-many", H + "DrawInstanced 1 2 3 4 5\n", "t.dstream:7:23:", "takes at most 4 arguments, got 5"),
    ("u32-overflow", H + "DrawInstanced 4294967296 1 0 0\n", "t.dstream:7:15:",
     "vertex_count 4294967296 is out of range (0..4294967295)"),
    ("u32-negative", H + "DrawInstanced 1 -1 0 0\n", "t.dstream:7:17:", "instance_count -1 is out of range"),
    ("not-a-number", H + "Dispatch 1 one 1\n", "t.dstream:7:12:", "expected an integer, got 'one'"),
    ("index-format", H + "IASetIndexBuffer ib R8_UINT 0\n", "t.dstream:7:21:",
     "format must be one of R16_UINT, R32_UINT, got 'R8_UINT'"),
    ("index-range", H + "DrawIndexedX ib 0 R16_UINT 51 0\n", "t.dstream:7:17:",
     "DrawIndexedX: indices [0, 102) is past the end of 'ib' (100 bytes)"),
    ("multidraw-range", H + "MultiDrawInstancedIndirect 2 vb 0 64\n", "t.dstream:7:33:",
     "args [0, 80) is past the end of 'vb' (64 bytes)"),
    ("multidraw-overflow", H + "MultiDrawInstancedIndirect 4294967295 vb 0 4294967292\n", "t.dstream:7:42:",
     "is past the end of 'vb'"),
    ("index-align", H + "IASetIndexBuffer ib R32_UINT 2\n", "t.dstream:7:30:",
     "offset must be a multiple of the index size"),
    ("heap-slot", H + "SetGraphicsRootDescriptorTable 0 res[4]\n", "t.dstream:7:34:",
     "slot 4 is outside heap 'res' of size 4"),
    ("f32-overflow", H + "OMSetBlendFactor 1 2 3 1e39\n", "t.dstream:7:24:", "does not fit a 32-bit float"),
    ("bad-version", "drawopt 2\n", "t.dstream:1:9:", "unsupported stream version 2 (this drawopt reads 1)"),
    ("bad-context", "drawopt 1 context=gfx\n", "t.dstream:1:11:", "context must be graphics or compute"),
    ("bad-header-key", "drawopt 1 fast=on\n", "t.dstream:1:11:", "unknown header key 'fast'"),
    ("bad-header-bool", "drawopt 1 fast_semantics=yes\n", "t.dstream:1:11:", "fast_semantics must be on or off"),
    ("no-header", "buffer a size=4\n", "t.dstream:1:1:", "expected the header line 'drawopt 1 ...'"),
    ("empty", "# nothing\n", "t.dstream:2:1:", "empty stream"),
    ("second-header", H + "drawopt 1\n", "t.dstream:7:1:", "one header line"),
    ("duplicate-decl", H + "buffer ib size=8\n", "t.dstream:7:8:", "'ib' is already declared"),
    ("consts-count", H + "SetGraphicsRoot32BitConstants 0 2 1\n", "t.dstream:7:33:",
     "count says 2 values but 1 follow"),
    ("consts-dest", H + "SetGraphicsRoot32BitConstants 0 2 1 2 dest=63\n", "t.dstream:7:39:",
     "dest + count exceeds 64 values"),
    ("unknown-flag", H + "DrawInstanced 1 1 0 0 @nomerg\n", "t.dstream:7:23:", "unknown flag '@nomerg'"),
    ("keyword-twice", H + "SetGraphicsRoot32BitConstants 0 1 1 dest=1 dest=2\n", "t.dstream:7:44:",
     "keyword 'dest=' given twice"),
    ("unknown-keyword", H + "DrawInstanced 1 1 0 0 foo=1\n", "t.dstream:7:23:", "unknown keyword foo="),
    ("too-many-heaps", H + "SetDescriptorHeaps res res res\n", "t.dstream:7:28:", "takes 1..2 heaps, got 3"),
    ("data-overflow", H + "data vb " + " ".join(["1"] * 17) + "\n", "t.dstream:7:41:",
     "data exceeds buffer 'vb' (64 bytes = 16 words)"),
    ("data-token", H + "data vb 1 zz\n", "t.dstream:7:11:", "expected a 32-bit word, got 'zz'"),
    ("data-range", H + "data vb 4294967296\n", "t.dstream:7:9:", "data word 4294967296 is out of range"),
    ("data-undeclared", H + "data nope 1\n", "t.dstream:7:6:", "undeclared buffer 'nope'"),
    ("opaque-empty", H + "Opaque   # nothing\n", "t.dstream:7:8:", "Opaque needs a non-empty text"),
    ("opaque-unterminated", H + 'Opaque "abc\n', "t.dstream:7:8:", "bad quoted Opaque text"),
    ("opaque-junk", H + 'Opaque "abc" junk\n', "t.dstream:7:14:", "only @flags may follow"),
    ("pipeline-key", H + "pipeline q vs=v blnd=alpha\n", "t.dstream:7:17:",
     "unknown pipeline key 'blnd' (did you mean 'blend'?)"),
    ("pipeline-value", H + "pipeline q vs=v blend=neon\n", "t.dstream:7:17:", "blend must be one of"),
    ("pipeline-params", H + "pipeline q vs=v root=main params=3\n", "t.dstream:7:27:", "root parameter 3 not in"),
    ("view-heap", H + "view nope[0] srv ib\n", "t.dstream:7:6:", "undeclared name 'nope'"),
    ("view-resource", H + "view res[0] srv missing\n", "t.dstream:7:17:", "undeclared name 'missing'"),
    ("heap-type", H + "heap h RTV 4\n", "t.dstream:7:8:", "type must be one of CBV_SRV_UAV, SAMPLER"),
]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("src,prefix,message", [c[1:] for c in TEXT_CASES], ids=[c[0] for c in TEXT_CASES])
def test_text_errors(monkeypatch, src: str, prefix: str, message: str, pure: bool) -> None:
    """Each error on both reader paths (the drawopt._text kernel and its pure twin)."""
    monkeypatch.setenv("DRAWOPT_PURE", "1" if pure else "0")
    with pytest.raises(InputError) as ei:
        loads(src, file="t.dstream")
    text = str(ei.value)
    assert text.startswith(prefix), text
    assert ": error: " in text and message in text, text


@pytest.mark.parametrize("variant", [lambda t: t.replace("\n", "\r\n"), lambda t: t.replace(" ", "\t"),
                                     lambda t: t.replace("\n", " # c\n"), lambda t: t.replace(" ", " \x1c ")],
                         ids=["crlf", "tabs", "comments", "separators"])
def test_text_errors_agree_on_both_paths(monkeypatch, variant) -> None:
    """Variants of every case (line ends, separators, comments) give one message on both paths."""
    for _, src, _, _ in TEXT_CASES:
        got = []
        for pure in ("0", "1"):
            monkeypatch.setenv("DRAWOPT_PURE", pure)
            with pytest.raises(InputError) as ei:
                loads(variant(src), file="t.dstream")
            got.append(str(ei.value))
        assert got[0] == got[1], src


def test_text_bad_utf8_is_located() -> None:
    with pytest.raises(InputError, match=r"^t\.dstream:2:8: error: not UTF-8 text"):
        loads(b"drawopt 1\nOpaque \xff\xfe\n", file="t.dstream")


def test_check_error_columns_follow_keywords_and_tabs() -> None:
    # columns count characters; the keyword token is blamed for a keyword argument
    with pytest.raises(InputError, match=r"^t:7:37: error: .*dest \+ count"):
        loads(H + "SetGraphicsRoot32BitConstants\t0 1 5 dest=64\n", file="t")


# ---------------------------------------------------------------------------- JSON
JD = ' "decls": [\n  {"kind": "buffer", "name": "ib", "size": 100},\n' \
     '  {"kind": "heap", "name": "res", "type": "CBV_SRV_UAV", "size": 4}\n ],\n'


def jdoc(*cmds: str, decls: str = JD) -> str:
    """A JSON stream whose first command is on line 7 (with the default decls)."""
    return '{"drawopt": 1,\n' + decls + ' "commands": [\n' + ",\n".join("  " + c for c in cmds) + "\n ]}\n"


JSON_CASES = [
    ("syntax", '{"drawopt": 1,\n "commands": [}\n', "t.json:2:15:", "JSON syntax error: Expecting value"),
    ("trailing-comma", '{"drawopt": 1,\n "commands": [["Dispatch", 1, 1, 1],]}', "t.json:2:37:",
     "JSON syntax error"),
    ("truncated", jdoc('["Dispatch", 1, 1, 1]')[:-8], "t.json:7:21:", "JSON syntax error"),
    ("top-level-array", "[1, 2]\n", "t.json:1:1:", "the top level must be an object"),
    ("no-version", '{"commands": []}', "t.json:1:1:", 'missing "drawopt": 1'),
    ("version-2", '{"drawopt": 2}', "t.json:1:13:", "unsupported stream version 2"),
    ("version-bool", '{"drawopt": true}', "t.json:1:13:", "unsupported stream version true"),
    ("unknown-key", '{"drawopt": 1, "comands": []}', "t.json:1:16:", "(did you mean 'commands'?)"),
    ("duplicate-key", '{"drawopt": 1, "drawopt": 1}', "t.json:1:16:", 'duplicate key "drawopt"'),
    ("header-value", '{"drawopt": 1, "header": {"context": "gfx"}}', "t.json:1:26:", "context must be graphics"),
    ("header-type", '{"drawopt": 1, "header": {"fast_semantics": "on"}}', "t.json:1:27:", "must be true or false"),
    ("decl-type", jdoc(decls=' "decls": [\n  {"kind": "buffer", "name": "ib", "size": "big"}\n ],\n'),
     "t.json:3:36:", "buffer.size must be an integer"),
    ("decl-kind", jdoc(decls=' "decls": [\n  {"kind": "bufer", "name": "ib", "size": 4}\n ],\n'),
     "t.json:3:3:", "declaration needs a known 'kind'"),
    ("decl-token", jdoc(decls=' "decls": [\n  {"kind": "pipeline", "name": "p", "vs": "a b"}\n ],\n'),
     "t.json:3:37:", "must be one token"),
    ("decls-not-array", '{"drawopt": 1, "decls": {}}', "t.json:1:25:", '"decls" must be an array'),
    ("command-not-array", jdoc("5"), "t.json:7:3:", 'a command is an array ["Name", args..., {options}]'),
    ("command-name-type", jdoc("[5, 1]"), "t.json:7:3:", "a command starts with its name"),
    ("unknown-command", jdoc('["Foo", 1]'), "t.json:7:3:", "unknown command 'Foo'"),
    ("float-for-int", jdoc('["Dispatch", 1.5, 1, 1]'), "t.json:7:16:", "expected an integer, got float"),
    ("bool-for-int", jdoc('["Dispatch", 1, true, 1]'), "t.json:7:19:", "expected an integer, got a boolean"),
    ("u32-overflow", jdoc('["Dispatch", 1, 1, 4294967296]'), "t.json:7:22:", "z 4294967296 is out of range"),
    ("undeclared", jdoc('["IASetIndexBuffer", "vb", "R16_UINT", 0]'), "t.json:7:24:", "undeclared name 'vb'"),
    ("index-format", jdoc('["IASetIndexBuffer", "ib", "R8_UINT", 0]'), "t.json:7:30:", "got 'R8_UINT'"),
    ("range", jdoc('["Dispatch", 1, 1, 1]', '["DrawIndexedX", "ib", 0, "R16_UINT", 51, 0]'), "t.json:8:26:",
     "indices [0, 102) is past the end of 'ib'"),
    ("bad-flag", jdoc('["Dispatch", 1, 1, 1, {"flags": ["nomerg"]}]'), "t.json:7:26:", '"flags" must be an array'),
    ("unknown-keyword", jdoc('["Dispatch", 1, 1, 1, {"dest": 1}]'), "t.json:7:26:", "unknown keyword dest="),
    ("keyword-type", jdoc('["SetGraphicsRoot32BitConstants", 0, 1, 5, {"dest": "x"}]'), "t.json:7:47:",
     "expected an integer, got 'x'"),
    ("consts-count", jdoc('["SetGraphicsRoot32BitConstants", 0, 2, 5]'), "t.json:7:40:", "count says 2 values"),
    ("opaque-empty", jdoc('["Opaque", ""]'), "t.json:7:14:", "Opaque needs a non-empty text"),
    ("opaque-arity", jdoc('["Opaque", "a", "b"]'), "t.json:7:3:", "Opaque takes exactly one string"),
    ("too-few", jdoc('["Dispatch", 1, 1]'), "t.json:7:3:", "Dispatch needs 3 arguments"),
    ("too-deep", '{"drawopt": 1, "commands": ' + "[" * 100000 + "]" * 100000 + "}", "t.json:1:1:",
     "nested too deeply"),
    ("huge-int", jdoc('["Dispatch", 1, 1, ' + "9" * 5000 + "]"), "t.json:1:1:", "Exceeds the limit"),
    ("huge-float-int", jdoc('["OMSetBlendFactor", 1, 1, 1, 1' + "0" * 400 + "]"), "t.json:7:3:", "too large"),
]


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
@pytest.mark.parametrize("src,prefix,message", [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_json_errors(monkeypatch, src: str, prefix: str, message: str, pure: bool) -> None:
    """Each error on both reader paths (the drawopt._text kernels and their pure twins)."""
    monkeypatch.setenv("DRAWOPT_PURE", "1" if pure else "0")
    with pytest.raises(InputError) as ei:
        loads(src, "json", file="t.json")
    text = str(ei.value)
    assert text.startswith(prefix + " error: "), text
    assert message in text, text


# ---------------------------------------------------------------------------- npz
GOOD_TEXT = ("drawopt 1\nbuffer ib size=100\ndata ib 1 2 3\nDispatch 1 1 1\nDispatch 2 2 2\n"
             "DrawIndexedX ib 0 R16_UINT 10 0\nOpaque X\n")
GOOD = dumps(loads(GOOD_TEXT), "npz")


def _arrays() -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(GOOD), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _npz(**changes) -> bytes:
    a = _arrays()
    for k, v in changes.items():
        if v is None:
            a.pop(k)
        else:
            a[k] = v
    b = io.BytesIO()
    np.savez(b, **a)
    return b.getvalue()


def _meta(**changes) -> np.ndarray:
    m = json.loads(_arrays()["meta"].tobytes())
    m.update(changes)
    return np.frombuffer(json.dumps(m).encode(), np.uint8)


def _claims_huge_shape() -> bytes:
    """A tiny archive whose op.npy header claims 2**40 elements."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        for k, v in _arrays().items():
            with zf.open(k + ".npy", "w") as f:
                if k == "op":
                    np.lib.format.write_array_header_1_0(f, {"descr": "<u2", "fortran_order": False,
                                                             "shape": (2**40,)})
                    f.write(b"\0" * 64)
                else:
                    np.lib.format.write_array(f, v)
    return b.getvalue()


def _pickled() -> bytes:
    b = io.BytesIO()
    a = _arrays()
    a["op"] = np.array([{}, 1, 2, 3], dtype=object)
    np.savez(b, **a)  # numpy pickles the object array
    return b.getvalue()


def _args_with(i: int, j: int, v: int) -> np.ndarray:
    args = _arrays()["args"].copy()
    args[i, j] = v
    return args


NPZ_CASES = [
    ("truncated", lambda: GOOD[:len(GOOD) // 2], "t.npz:1:1:", "corrupt .npz archive"),
    ("not-zip", lambda: b"hello world", "t.npz:1:1:", "not an .npz archive"),
    ("plain-npy", lambda: (lambda b: (np.save(b, np.arange(3)), b.getvalue())[1])(io.BytesIO()), "t.npz:1:1:",
     "not an .npz archive"),
    ("pickled-object-array", _pickled, "t.npz:1:1:", "array 'op' holds objects"),
    ("wrong-dtype", lambda: _npz(op=_arrays()["op"].astype(np.int32)), "t.npz:1:1:",
     "array 'op' has dtype int32, expected uint16"),
    ("wrong-shape", lambda: _npz(args=_arrays()["args"][:, :5]), "t.npz:1:1:",
     "array 'args' has shape (4, 5), expected (4, 6)"),
    ("missing-array", lambda: _npz(pool=None), "t.npz:1:1:", "missing array(s) pool"),
    ("extra-array", lambda: _npz(junk=np.zeros(1)), "t.npz:1:1:", "unexpected array 'junk'"),
    ("huge-shape", _claims_huge_shape, "t.npz:1:1:", "1099511627776 commands is more than this reader accepts"),
    ("check-range", lambda: _npz(args=_args_with(2, 3, 1000)), "t.npz:3:1:",
     "DrawIndexedX: indices [0, 2000) is past the end of 'ib'"),
    ("unknown-opcode", lambda: _npz(op=np.array([48, 48, 999, 80], np.uint16)), "t.npz:3:1:", "unknown opcode 999"),
    ("var-overflow", lambda: _npz(var_off=np.array([0, 2**63 - 1, 0, 0], np.int64),
                                  var_len=np.array([0, 5, 0, 0], np.int32)), "t.npz:2:1:",
     "outside the pool of 0 values"),
    ("meta-syntax", lambda: _npz(meta=np.frombuffer(b"{nope", np.uint8)), "t.npz:1:1:", "meta: JSON syntax error"),
    ("meta-utf8", lambda: _npz(meta=np.frombuffer(b"\xff\xfe", np.uint8)), "t.npz:1:1:", "meta: not UTF-8"),
    ("meta-version", lambda: _npz(meta=_meta(drawopt=2)), "t.npz:1:1:", "unsupported stream version 2"),
    ("meta-decl", lambda: _npz(meta=_meta(decls=[{"kind": "buffer", "name": "ib", "size": -1}])), "t.npz:1:1:",
     "meta: declaration 0: buffer 'ib': size must be in 1..2^63-1"),
    ("meta-data", lambda: _npz(meta=_meta(decls=[{"kind": "buffer", "name": "ib", "size": 100, "data": [1]}])),
     "t.npz:1:1:", "buffer data belongs in the array data_0"),
    ("data-no-decl", lambda: _npz(data_5=np.zeros(1, np.uint32)), "t.npz:1:1:", "array data_5 names no declaration"),
    ("data-too-big", lambda: _npz(data_0=np.zeros(26, np.uint32)), "t.npz:1:1:", "104 bytes of data exceed"),
    ("missing-string", lambda: _npz(meta=_meta(strings=[])), "t.npz:4:1:", "refers to a missing string"),
    ("bad-flag-bits", lambda: _npz(flags=np.array([0, 2, 0, 0], np.uint8)), "t.npz:2:1:", "unknown flag bits"),
]


@pytest.mark.parametrize("make,prefix,message", [c[1:] for c in NPZ_CASES], ids=[c[0] for c in NPZ_CASES])
def test_npz_errors(make, prefix: str, message: str) -> None:
    with pytest.raises(InputError) as ei:
        loads(make(), "npz", file="t.npz")
    text = str(ei.value)
    assert text.startswith(prefix + " error: "), text
    assert message in text, text


def test_npz_other_byte_order_is_accepted() -> None:
    s = loads(_npz(op=_arrays()["op"].astype(">u2"), args=_arrays()["args"].astype(">i8")), "npz")
    assert s == loads(GOOD_TEXT)


# ---------------------------------------------------------------------------- contracts: lift lists
# Root parameters: 0 constants(4), 1 srv, 2 table(srv,1), 3 cbv. Each case: the contract, the text the
# error's column must point at (the bad lift item, or the value at fault) and the message.
LIFT_HEAD = "drawopt 1\nrootsig main constants(4) srv table(srv,1) cbv\n"
LIFT_CASES = [
    ("not-an-item", "draw_data(perdraw=1,lift=0.0+0.x)", "0.x)", "lift item '0.x' is not P or P.k"),
    ("prefix-c", "draw_data(perdraw=1,lift=c0.1)", "c0.1)", "lift item 'c0.1' is not P or P.k"),
    ("prefix-r", "x(vertex_bits=16,perdraw=3,lift=0.0+r1)", "r1)", "lift item 'r1' is not P or P.k"),
    ("negative", "draw_data(perdraw=1,lift=-1)", "-1)", "lift item '-1' is not P or P.k"),
    ("empty-item", "draw_data(perdraw=1,lift=0.0++0.1)", "+0.1)", "lift list has an empty item"),
    ("trailing-plus", "draw_data(perdraw=1,lift=0.0+)", ")", "lift list has an empty item"),
    ("twice", "draw_data(perdraw=1,lift=0.1+0.1)", "0.1)", "lift item '0.1' is listed twice"),
    ("twice-p-is-p0", "draw_data(perdraw=1,lift=0+0.0)", "0.0)", "lift item '0.0' is listed twice"),
    ("names-perdraw", "draw_data(perdraw=1,lift=0.0+1)", "1)", "lift item '1' names the perdraw parameter"),
    ("x-names-perdraw", "x(vertex_bits=16,perdraw=3,lift=3.0,base=none)", "3.0,",
     "contract x: lift item '3.0' names the perdraw parameter"),
    ("no-such-param", "draw_data(perdraw=1,lift=4)", "4)",
     "lift item '4' does not name a root parameter other than perdraw ('main' has 4)"),
    ("constants-word", "draw_data(perdraw=1,lift=0.4)", "0.4)",
     "lift item '0.4': root parameter 0 (constants(4)) has no value 4"),
    ("table-word", "draw_data(perdraw=1,lift=2.1)", "2.1)",
     "lift item '2.1': root parameter 2 (table(srv,1)) has no value 1"),
    ("view-word", "draw_data(perdraw=1,lift=3.2)", "3.2)", "lift item '3.2': root parameter 3 (cbv) has no value 2"),
    ("second-clause", "x(vertex_bits=16,perdraw=3,lift=0.0),draw_data(perdraw=1,lift=0.0+2.1)", "2.1)",
     "contract draw_data: lift item '2.1'"),
    ("perdraw-range", "no_primitive_id,draw_data(perdraw=4,lift=0.0)", "4,",
     "contract draw_data: perdraw=4 is not a root"),
]


def _lift_line(contract: str, root: bool = True) -> str:
    return f"pipeline q vs=v{' root=main' if root else ''} contract={contract}\n"


def _col_text(line: str, col: int) -> str:
    return line[col - 1:]


@pytest.mark.parametrize("contract,at,message", [c[1:] for c in LIFT_CASES], ids=[c[0] for c in LIFT_CASES])
def test_bad_lift_list_text_cli(tmp_path, capsys, contract: str, at: str, message: str) -> None:
    """A bad ``lift=`` list (or ``perdraw=``) is a load error: exit 2, ``file:3:col`` at the value."""
    from drawopt.cli import main

    line = _lift_line(contract)
    src = tmp_path / "bad.dstream"
    src.write_text(LIFT_HEAD + line)
    assert main(["convert", str(src), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    loc, _, rest = err.partition(": error: ")
    file, ln, col = loc.rsplit(":", 2)
    assert (file, ln) == (str(src), "3") and message in rest and "Traceback" not in err, err
    assert _col_text(line, int(col)).startswith(at), (err, _col_text(line, int(col)))
    assert not (tmp_path / "out.json").exists()


def test_bad_lift_list_exact_location() -> None:
    with pytest.raises(InputError, match=r"^t\.dstream:3:65: error: pipeline 'q': contract draw_data: "
                                         r"lift item '0\.x' is not P or P\.k$"):
        loads(LIFT_HEAD + _lift_line("draw_data(perdraw=1,lift=0.0+0.x)"), file="t.dstream")
    with pytest.raises(InputError, match=r"^t:3:48: error: pipeline 'q': contract x: lift= needs root="):
        loads(LIFT_HEAD + _lift_line("x(vertex_bits=16,lift=0)", root=False), file="t")


def _lift_json(contract: str) -> tuple[str, str]:
    """A JSON stream with the pipeline on line 4, and that line."""
    line = f'  {{"kind": "pipeline", "name": "q", "vs": "v", "root": "main", "contract": "{contract}"}}'
    return ('{"drawopt": 1,\n "decls": [\n  {"kind": "rootsig", "name": "main", '
            '"params": ["constants(4)", "srv", "table(srv,1)", "cbv"]},\n' + line + '\n ],\n "commands": []}\n'), line


@pytest.mark.parametrize("contract,at,message", [c[1:] for c in LIFT_CASES], ids=[c[0] for c in LIFT_CASES])
def test_bad_lift_list_json_cli(tmp_path, capsys, contract: str, at: str, message: str) -> None:
    from drawopt.cli import main

    doc, line = _lift_json(contract)
    src = tmp_path / "bad.json"
    src.write_text(doc)
    assert main(["convert", str(src), str(tmp_path / "out.dstream")]) == 2
    err = capsys.readouterr().err
    loc, _, rest = err.partition(": error: ")
    file, ln, col = loc.rsplit(":", 2)
    assert (file, ln) == (str(src), "4") and rest.startswith("declaration 1: ") and message in rest, err
    assert _col_text(line, int(col)).startswith(at), (err, _col_text(line, int(col)))


def test_bad_lift_list_json_with_escapes_points_at_the_member() -> None:
    """Where the contract string is written with escapes, the error points at its member."""
    doc, line = _lift_json("draw_data(perdraw=1,lift=0.0+0.x)")
    doc = doc.replace("perdraw=1", "perdr\\u0061w=1")
    with pytest.raises(InputError, match=r"^t\.json:4:64: error: declaration 1: .*lift item '0\.x'"):
        loads(doc, "json", file="t.json")
    assert _col_text(line, 64).startswith('"contract": ')


@pytest.mark.parametrize("contract,message", [(c[1], c[3]) for c in LIFT_CASES], ids=[c[0] for c in LIFT_CASES])
def test_bad_lift_list_npz(contract: str, message: str) -> None:
    a = _arrays_of(dumps(loads(LIFT_HEAD + _lift_line("draw_data(perdraw=1,lift=0.0)")), "npz"))
    m = json.loads(a["meta"].tobytes())
    m["decls"][1]["contract"] = contract
    a["meta"] = np.frombuffer(json.dumps(m).encode(), np.uint8)
    b = io.BytesIO()
    np.savez(b, **a)
    with pytest.raises(InputError) as ei:
        loads(b.getvalue(), "npz", file="t.npz")
    assert str(ei.value).startswith("t.npz:1:1: error: meta: declaration 1: ") and message in str(ei.value)


def _arrays_of(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_good_lift_lists_load_and_round_trip() -> None:
    """The documented forms load, in every format, and keep their text."""
    text = LIFT_HEAD + _lift_line("x(vertex_bits=16,perdraw=3,lift=0+0.1+1.1+2),draw_data(perdraw=1,lift=0.3+3.1)")
    s = loads(text)
    for fmt in ("text", "json", "npz"):
        assert loads(dumps(s, fmt), fmt) == s
    assert s.decls["q"].contract.x.lift_text == "0+0.1+1.1+2"
