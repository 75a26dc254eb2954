"""The typed rewrite contract (``drawopt.ir.decls.Contract``): parsed and checked once, its
fields, the facts derived from it, its printed form in every format, and each bad clause's error."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace

import pytest

import drawopt
from drawopt.errors import InputError
from drawopt.ir.decls import (
    CONTRACT_CLAUSES,
    CONTRACT_FLAGS,
    PERDRAW_CLAUSES,
    Contract,
    PerDrawClause,
    Pipeline,
    format_contract,
    parse_contract,
)

HEAD = "drawopt 1\nrootsig main constants(4) srv table(srv,1) cbv\n"


def _line(contract: str, root: bool = True) -> str:
    return f"pipeline q vs=v{' root=main' if root else ''} contract={contract}\n"


def _json(contract: str) -> str:
    obj = {"kind": "pipeline", "name": "q", "vs": "v", "root": "main", "contract": contract}
    return ('{"drawopt": 1,\n "decls": [\n  {"kind": "rootsig", "name": "main", '
            '"params": ["constants(4)", "srv", "table(srv,1)", "cbv"]},\n  ' + json.dumps(obj) + '\n ],\n'
            ' "commands": []}\n')


def test_fields_of_every_clause() -> None:
    c = Contract("x(vertex_bits=20,perdraw=1,lift=0.1+2,max_index=60000,base=vertex),"
                 "instance_data(perdraw=3,lift=0.3),draw_data(perdraw=1),"
                 "no_primitive_id,no_vertex_id,order_independent,never_merge")
    assert c.x == PerDrawClause("x", 1, "0.1+2", 20, 60000, "vertex")
    assert c.instance_data == PerDrawClause("instance_data", 3, "0.3")
    assert c.draw_data == PerDrawClause("draw_data", 1)
    assert (c.no_primitive_id, c.no_vertex_id, c.order_independent, c.never_merge) == (True,) * 4
    assert c.names == ("x", "instance_data", "draw_data", *CONTRACT_FLAGS)
    assert set(c.names) == set(CONTRACT_CLAUSES) and PERDRAW_CLAUSES == ("x", "instance_data", "draw_data")
    # the typed values: integers, the lift items; defaults where a key is not written
    assert c.x.lift == ((0, 1), (2, 0)) and c.x.lift_params == (0, 2) and c.x.named_params == (0, 1, 2)
    assert c.x.record_words == 4 and c.draw_data.record_words == 2 and c.draw_data.lift == ()
    bare = Contract("x(vertex_bits=16)").x
    assert (bare.perdraw, bare.max_index, bare.base, bare.lift_text, bare.named_params) == (None, None, "none", "", ())
    assert (c.instance_data.vertex_bits, c.instance_data.max_index, c.instance_data.base) == (None, None, "none")


def test_empty_contract_promises_nothing() -> None:
    for c in (Contract(), Contract(""), Pipeline("p", vs="v").contract):
        assert not c and c.text == "" and c.clauses == () and c.names == () and c.array is None
        assert not (c.no_primitive_id or c.no_vertex_id or c.order_independent or c.never_merge)
        assert c.perdraw_params == () and c.x is None


def test_derived_facts() -> None:
    both = Contract("draw_data(perdraw=2,lift=0.0),instance_data(perdraw=2),x(vertex_bits=16,perdraw=3)")
    assert [k.name for k in both.clauses] == ["x", "instance_data", "draw_data"]   # PERDRAW_CLAUSES order
    assert both.array is both.instance_data                                        # instance_data governs
    assert both.perdraw_params == (3, 2)                                           # no repeats
    assert both.clause("draw_data") is both.draw_data and Contract().clause("x") is None
    with pytest.raises(KeyError):
        both.clause("never_merge")
    assert Contract("draw_data(perdraw=1)").array.name == "draw_data"
    # the pipeline's facts: x applies only where it pulls its vertices
    pulled = Pipeline("p", vs="v", contract="x(vertex_bits=16,perdraw=1),draw_data(perdraw=2)")
    layout = replace(pulled, layout="pos")
    assert pulled.x_clause is pulled.contract.x and layout.x_clause is None
    assert pulled.array_clause == "draw_data" and pulled.x_vertex_bits == 16 and pulled.perdraw_params == (1, 2)


def test_contract_is_frozen_and_compares_by_value() -> None:
    c = parse_contract("no_primitive_id,x(vertex_bits=16)")
    with pytest.raises(FrozenInstanceError):
        c.no_primitive_id = False  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        c.x.perdraw = 3  # type: ignore[misc]
    assert c == Contract("no_primitive_id,x(vertex_bits=16),") and hash(c) == hash(Contract(c.text))
    assert c != Contract("x(vertex_bits=16),no_primitive_id")   # spelled differently: printed differently
    assert repr(c) == "Contract('no_primitive_id,x(vertex_bits=16)')" and str(c) == format_contract(c) == c.text
    with pytest.raises(ValueError):
        replace(c, x=None)   # the fields follow the text; a contract is rebuilt from text
    assert replace(c, text="never_merge").never_merge


def test_pipeline_takes_a_contract_or_its_text() -> None:
    c = Contract("never_merge")
    assert Pipeline("p", vs="v", contract=c).contract is c
    assert Pipeline("p", vs="v", contract="never_merge").contract == c
    with pytest.raises(TypeError, match="contract must be a Contract or its text"):
        Pipeline("p", vs="v", contract={"never_merge": {}})  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "x(vertex_bits=16,perdraw=3,lift=0+0.1+1.1+2),draw_data(perdraw=1,lift=0.3+3.1)",
    "x(vertex_bits=016,perdraw=3,lift=0+0.1)",                      # values as written
    "x(vertex_bits=16,lift=1.0,base=vertex,max_index=4095,perdraw=3)",  # keys in the order written
    "never_merge,no_primitive_id,order_independent",                 # clauses in the order written
    "instance_data(perdraw=1,lift=2)",
])
def test_printed_form_round_trips_in_every_format(text: str) -> None:
    s = drawopt.loads(HEAD + _line(text))
    assert s.decls["q"].contract.text == text
    assert drawopt.dumps(s).splitlines()[-1].endswith(f"contract={text}")
    assert json.loads(drawopt.dumps(s, "json"))["decls"][-1]["contract"] == text
    for fmt in ("text", "json", "npz"):
        back = drawopt.loads(drawopt.dumps(s, fmt), fmt)
        assert back == s and back.decls["q"].contract.text == text


def test_printed_form_is_normalised() -> None:
    """What the reader accepts beside the grammar (a trailing comma, empty parentheses, blanks
    around the JSON string) is not printed."""
    assert Contract("no_primitive_id(),").text == "no_primitive_id"
    s = drawopt.loads(_json(" x(vertex_bits=16) "), "json")
    assert drawopt.dumps(s).splitlines()[-1].endswith("contract=x(vertex_bits=16)")


# (contract, column in `pipeline q vs=v root=main contract=...` (27: the contract= token), message)
BAD = [
    ("wave_magic", 27, "unknown contract clause 'wave_magic' (known: x, instance_data, draw_data, "
                       "no_primitive_id, no_vertex_id, order_independent, never_merge)"),
    ("x", 27, "contract x: missing vertex_bits"),
    ("x(perdraw=1)", 27, "contract x: missing vertex_bits"),
    ("instance_data(lift=0)", 27, "contract instance_data: missing perdraw"),
    ("draw_data", 27, "contract draw_data: missing perdraw"),
    ("x(vertex_bits=40)", 27, "contract x: vertex_bits must be 1..31"),
    ("x(vertex_bits=0)", 27, "contract x: vertex_bits must be 1..31"),
    ("x(vertex_bits=a)", 27, "contract x: vertex_bits must be an integer"),
    ("x(vertex_bits=16,perdraw=a)", 27, "contract x: perdraw must be an integer"),
    ("x(vertex_bits=16,max_index=-1)", 27, "contract x: max_index must be an integer"),
    ("draw_data(perdraw=1.5)", 27, "contract draw_data: perdraw must be an integer"),
    ("x(vertex_bits=16,foo=1)", 27, "contract x: unknown key 'foo'"),
    ("draw_data(perdraw=1,vertex_bits=16)", 27, "contract draw_data: unknown key 'vertex_bits'"),
    ("no_primitive_id(a=1)", 27, "contract no_primitive_id: unknown key 'a'"),
    ("x(vertex_bits=16,perdraw)", 27, "contract x: expected key=value, got 'perdraw'"),
    ("draw_data(perdraw=1,lift=)", 27, "contract draw_data: expected key=value, got 'lift='"),
    ("x(vertex_bits=16),x(vertex_bits=16)", 27, "contract clause 'x' given twice"),
    ("never_merge,never_merge", 27, "contract clause 'never_merge' given twice"),
    ("x(vertex_bits=16)junk", 27, "bad contract near 'junk'"),
    ("x(vertex_bits=16),,no_primitive_id", 27, "bad contract near ',no_primitive_id'"),
    # new in the typed contract: these loaded before (base=foo then meant none; the last key won)
    ("x(vertex_bits=16,perdraw=1,base=foo)", 27, "contract x: base must be none or vertex"),
    ("x(vertex_bits=16,perdraw=1,base=vertex,base=none)", 27, "contract x: key 'base' given twice"),
    # checked against the root signature when the pipeline is declared: at the value at fault
    ("draw_data(perdraw=9)", 54, "pipeline 'q': contract draw_data: perdraw=9 is not a root parameter"),
    ("x(vertex_bits=16,perdraw=7,lift=0.x)", 61, "pipeline 'q': contract x: perdraw=7 is not a root parameter"),
    ("draw_data(perdraw=1,lift=0.x)", 61, "pipeline 'q': contract draw_data: lift item '0.x' is not P or P.k"),
    ("x(vertex_bits=16,perdraw=1,lift=0.0+1)", 72, "pipeline 'q': contract x: lift item '1' names the perdraw "
                                                   "parameter (items name root parameters other than perdraw)"),
]


@pytest.mark.parametrize("contract,col,message", BAD, ids=[b[0] for b in BAD])
def test_bad_clause_text(contract: str, col: int, message: str) -> None:
    with pytest.raises(InputError) as e:
        drawopt.loads(HEAD + _line(contract), file="t.dstream")
    assert str(e.value) == f"t.dstream:3:{col}: error: {message}"


@pytest.mark.parametrize("contract,col,message", BAD, ids=[b[0] for b in BAD])
def test_bad_clause_json(contract: str, col: int, message: str) -> None:
    with pytest.raises(InputError) as e:
        drawopt.loads(_json(contract), "json", file="t.json")
    line = _json(contract).splitlines()[3]
    # a syntax error points at the "contract" member, a value at fault at its place in the string
    where = line.index('"contract"') + 1 if col == 27 else \
        line.index('"contract": "') + len('"contract": "') + 1 + col - 27 - len("contract=")
    assert str(e.value) == f"t.json:4:{where}: error: declaration 1: {message}"


@pytest.mark.parametrize("contract,col,message", [b for b in BAD if b[1] == 27], ids=[b[0] for b in BAD if b[1] == 27])
def test_bad_clause_library(contract: str, col: int, message: str) -> None:
    """A syntax error is a ValueError of the contract itself, before any root signature."""
    with pytest.raises(ValueError) as e:
        Contract(contract)
    assert str(e.value) == message
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        Pipeline("q", vs="v", contract=contract)


def test_bad_clause_without_root() -> None:
    with pytest.raises(InputError) as e:
        drawopt.loads(HEAD + _line("x(vertex_bits=16,perdraw=1)", root=False), file="t")
    assert str(e.value) == ("t:3:51: error: pipeline 'q': contract x: perdraw=1 is not a root parameter "
                            "(the pipeline has no root=)")
    with pytest.raises(InputError) as e:
        drawopt.loads(HEAD + _line("x(vertex_bits=16,lift=0)", root=False), file="t")
    assert str(e.value) == ("t:3:48: error: pipeline 'q': contract x: lift= needs root= "
                            "(lift items name root parameters)")
