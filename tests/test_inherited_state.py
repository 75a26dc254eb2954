"""State a bundle inherits from its caller, and values a rewrite may refine (issue 13's trust lead).

Hand-written streams, none of them in the generator's reach before this file:

* **Verifier bug (fixed):** a column no stream sets was "never set" on both sides, so a
  root-signature change or a kind change in a bundle that makes the caller's root arguments
  undefined went unseen: at the bundle's end the verifier also mapped every "lost" value to
  "never set". Three rewrites it accepted, each wrong (docs/verification.md: "What a bundle
  inherits is not undefined"): switching the root signature away and back, setting an
  inherited constants parameter as a table first, and the same before a draw of the bundle.
* **Not a bug (decided):** dedupe-state removes a descriptor-table set whose table the next
  heaps change makes undefined, before a partial root-constants set on the same parameter.
  Before, the words the constants set does not write are undefined (the table replaced them);
  after, they hold the earlier (or the caller's) words. Undefined may become anything, so the
  translation validator accepts it; the state oracle of the tests agrees with ``refine=True``,
  and rejects the reverse direction as the verifier does.
"""

from __future__ import annotations

import pytest

from drawopt.analysis.state import compare_effective_state, refines
from drawopt.ir import formats
from drawopt.ir.stream import Stream
from drawopt.passes.dedupe_state import DedupeStatePass
from drawopt.passmanager import AnalysisManager
from drawopt.verify import verify

BUNDLE = "drawopt 1 context=graphics kind=bundle fast_semantics=off auto_gpu_flush=off\n"
LIST = "drawopt 1 context=graphics fast_semantics=off auto_gpu_flush=off\n"
DECLS = """texture  t0    1x1 R8G8B8A8_UNORM
heap     h0    CBV_SRV_UAV 1
heap     h1    CBV_SRV_UAV 1
view     h0[0] srv t0
view     h1[0] srv t0
"""
SIGS = """rootsig  A     constants(2)
rootsig  B     constants(2)
pipeline p     vs=v ps=p root=A
"""


def _s(header: str, body: str, sigs: str = "") -> Stream:
    return formats.loads(header + DECLS + sigs + "\n" + body)


# (original, wrong rewrite, the words of the verifier's reason)
WRONG = {
    "root signature away and back at the bundle's end": (
        _s(BUNDLE, "SetGraphicsRootSignature A\n", SIGS),
        _s(BUNDLE, "SetGraphicsRootSignature A\nSetGraphicsRootSignature B\nSetGraphicsRootSignature A\n", SIGS),
        "bundle exit state: root constant 0[0] never set (the caller's value) != undefined (the root signature"),
    "inherited constants set as a table first": (
        _s(BUNDLE, "SetGraphicsRoot32BitConstants 0 1 0\n"),
        _s(BUNDLE, "SetGraphicsRootDescriptorTable 0 h0[0]\nSetGraphicsRoot32BitConstants 0 1 0\n"),
        "bundle exit state: root constant 0[1] never set (the caller's value) != undefined (the root argument was"),
    "root signature away and back before a draw of the bundle": (
        _s(BUNDLE, "SetGraphicsRootSignature A\nSetPipelineState p\nDrawInstanced 3 1 0 0\n", SIGS),
        _s(BUNDLE, "SetGraphicsRootSignature A\nSetGraphicsRootSignature B\nSetGraphicsRootSignature A\n"
                   "SetPipelineState p\nDrawInstanced 3 1 0 0\n", SIGS),
        "root constant 0[0] never set (the caller's value) != undefined (the root signature changed"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_the_verifier_rejects_losing_what_a_bundle_inherits(case: str) -> None:
    original, wrong, reason = WRONG[case]
    res = verify(original, wrong)
    assert not res.equivalent and reason in res.reason, res.reason
    assert compare_effective_state(original, wrong, refine=True) is not None  # the oracle agrees
    assert verify(original, original).equivalent and verify(wrong, wrong).equivalent


@pytest.mark.parametrize("case", sorted(WRONG))
def test_losing_an_inherited_value_the_other_way_is_a_refinement(case: str) -> None:
    """The same pairs reversed: a value undefined in the original may be anything after."""
    original, wrong, _ = WRONG[case]
    assert verify(wrong, original).equivalent
    assert compare_effective_state(wrong, original, refine=True) is None


REFINED = {  # dedupe-state's input: it removes the one descriptor-table set
    "bundle that sets its heaps twice": _s(
        BUNDLE, "SetDescriptorHeaps h0\nSetGraphicsRootDescriptorTable 0 h0[0]\nSetDescriptorHeaps h1\n"
                "SetGraphicsRoot32BitConstants 0 1 0\n"),
    "list with a table between two constants sets": _s(
        LIST, "SetGraphicsRootSignature A\nSetPipelineState p\nSetDescriptorHeaps h0\n"
              "SetGraphicsRoot32BitConstants 0 2 7 8\nDrawInstanced 3 1 0 0\n"
              "SetGraphicsRootDescriptorTable 0 h0[0]\nSetDescriptorHeaps h1\n"
              "SetGraphicsRoot32BitConstants 0 1 5\nDrawInstanced 3 1 0 0\n", SIGS),
}


@pytest.mark.parametrize("case", sorted(REFINED))
def test_dedupe_drops_a_table_set_whose_only_effect_is_to_make_words_undefined(case: str) -> None:
    s = REFINED[case]
    out = DedupeStatePass().apply(s, AnalysisManager()).stream
    names = [c.name for c in out.commands()]
    assert len(out) == len(s) - 1 and "SetGraphicsRootDescriptorTable" not in names, names
    assert verify(s, out).equivalent
    strict = compare_effective_state(s, out)
    assert strict is not None and "root0 differs" in strict   # words undefined before, defined after
    assert compare_effective_state(s, out, refine=True) is None
    back = verify(out, s)   # defined words becoming undefined is a difference
    assert not back.equivalent and "!= undefined (the root argument was set as another kind" in back.reason
    assert compare_effective_state(out, s, refine=True) is not None


@pytest.mark.parametrize(("x", "y", "ok"), [
    (None, ("constants", (1,)), True),
    (("constants", (5,)), ("constants", (5, 8)), True),
    (("constants", (5, None)), ("constants", (5, 3)), True),
    (("constants", (5,)), ("constants", (6, 8)), False),
    (("constants", (5, 8)), ("constants", (5,)), False),
    (("constants", (5, None)), ("constants", (5,)), True),
    (("constants", (5,)), ("constants", (5,), "<unknown>"), True),
    (("constants", (5,), "<unknown>"), ("constants", (5,)), False),
    (("constants", (5,), "<unknown>"), ("constants", (5, 1), "<unknown>"), False),
    (("constants", (5,)), ("table", "h0", 0), False),
    ("<unknown>", None, False),
    (("table", "h0", 0), ("table", "h0", 0), True),
])
def test_refines(x: object, y: object, ok: bool) -> None:
    assert refines(x, y) is ok
