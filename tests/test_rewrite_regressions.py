"""Regression streams from the pipeline property (tests/test_optimize_props.py, dev profile): each
is a pass whose own output failed verify or added a finding, cut down by hand to the commands that
matter. Each test fails on the code before its fix."""

from __future__ import annotations

import pytest

from drawopt import loads
from drawopt.ir.ops import BY_NAME
from drawopt.passmanager import PassManager, parse_pipeline
from drawopt.verify import verify

HEAD = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off
buffer ib size=64
buffer ibx size=64
buffer args size=64
target rt 64x64 R8G8B8A8_UNORM
pipeline x vs=pull ps=f
pipeline p vs=v ps=f layout=pos
"""


def _run(text: str, passes: str, **kw: str):
    """The pass's own output (no rollback: ``verify=False``) and its pass records."""
    s = loads(text, file="<t>")
    pm = PassManager(parse_pipeline(passes, **kw), verify=False, **kw)
    return s, pm.run(s), pm


def test_flush_does_not_rebind_an_index_buffer_written_after_the_draw() -> None:
    """The draw after ``DrawIndexedX`` reads an undefined index buffer. flush re-bound ``ib`` because
    nothing wrote it *before* the re-bind; the copy after the draw writes it, so the re-bound draw
    had a new read of a written buffer (a hazard with that copy the input did not have) and the
    output failed verify ("reads ib ... moved across the write")."""
    text = HEAD + """OMSetRenderTargets rt
IASetIndexBuffer ib R16_UINT 0
SetPipelineState x
DrawIndexedX ibx 0 R16_UINT 3 0
SetPipelineState p
DrawIndexedInstancedIndirect args 0
CopyBufferRegion ib 0 args 0 4
"""
    s, out, pm = _run(text, "flush")
    assert [r.rejected for r in pm.records if r.rejected] == []
    r = verify(s, out, reorder=pm.reorder)
    assert r.equivalent, r.reason
    ia = BY_NAME["IASetIndexBuffer"].code
    assert (out.op == ia).sum() == (s.op == ia).sum() == 1  # no re-bind


def test_verify_keys_a_draw_the_same_whatever_other_actions_see() -> None:
    """A dead IASetVertexBuffers after the last draw (what dedupe-state removes) gave the copy after it
    a vertex-window shift; the verifier then hashed the shift into the input-assembler key of every
    non-indexed draw of that stream (a shift of 0 included) and of no draw of the other, and rejected
    the draw: "input-assembler base vertex / instance differs". A record's key may not depend on
    another record's."""
    text = """drawopt 1 context=graphics kind=list fast_semantics=on auto_gpu_flush=on
buffer buf size=65536
buffer verts size=65536
target rt 64x64 R8G8B8A8_UNORM
pipeline p vs=v ps=f layout=pos
OMSetRenderTargets rt
SetPipelineState p
IASetPrimitiveTopology TRIANGLELIST
IASetVertexBuffers 0 verts 0 16
DrawInstanced 3 1 0 0
IASetVertexBuffers 0 verts 16 16
CopyBufferRegion buf 0 buf 0 4
"""
    s, out, pm = _run(text, "dedupe-state")
    assert len(out) == len(s) - 1  # the dead re-bind went
    assert [r.rejected for r in pm.records if r.rejected] == []
    r = verify(s, out, reorder=pm.reorder)
    assert r.equivalent, r.reason
    # and a real difference in the window still fails
    moved = loads(text.replace("IASetVertexBuffers 0 verts 0 16", "IASetVertexBuffers 0 verts 16 16", 1), file="<t>")
    assert not verify(s, moved, reorder=pm.reorder).equivalent


def test_schedule_keeps_a_set_a_bundle_may_still_hand_back() -> None:
    """In a bundle the compute root signature is the caller's (unknown); root constants set on it and
    then a SetComputeRootSignature leave the constants unknown, but they may still hold what was set
    (the state model keeps that set observed), and the caller's draws after ExecuteBundle see it.
    schedule compared only the end state's values (unknown on both sides), re-emitted no setter
    for it and dropped the constants: "bundle exit state: compute root constant 0[0] 0x0 != never
    set"."""
    text = """drawopt 1 context=graphics kind=bundle fast_semantics=off auto_gpu_flush=off
rootsig rs constants(1) cbv
pipeline p vs=pull
SetComputeRoot32BitConstants 0 1 0
SetPipelineState p
OMSetRenderTargets
DrawInstanced 0 0 0 0 @nomerge
SetComputeRootSignature rs
DrawIndexedInstanced 0 0 0 0 0
DrawInstanced 0 0 0 0
"""
    for reorder in ("declared", "opaque"):
        s, out, pm = _run(text, "schedule", target="xbox-one", reorder=reorder)
        assert [r.rejected for r in pm.records if r.rejected] == []
        r = verify(s, out, reorder=reorder)
        assert r.equivalent, r.reason


def test_index_range_past_2_63() -> None:
    """validate's index-range rule summed offset + indices * size in int64: past 2^63 the end wrapped
    negative and the read past the end of a 2^63-1 byte buffer went unreported (the vectorised rule
    disagreed with the per-record reference; a pass could then add such a read unseen)."""
    from drawopt.validate import findings

    text = f"""drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off
buffer big size={2**63 - 1}
target rt 64x64 R8G8B8A8_UNORM
pipeline p vs=v ps=f layout=pos
OMSetRenderTargets rt
SetPipelineState p
IASetPrimitiveTopology TRIANGLELIST
IASetIndexBuffer big R32_UINT {2**63 - 8}
DrawIndexedInstanced 3 1 0 0 0
DrawIndexedInstanced 1 1 0 0 0
"""
    found = [f for f in findings(loads(text, file="<t>")) if f.rule == "index-range"]
    assert [f.cmd for f in found] == [4]
    assert f"up to byte {2**63 + 4} " in found[0].message


def test_schedule_keeps_a_set_a_draw_may_still_read() -> None:
    """The same at a draw: root constants set on the caller's root signature stay possibly in force
    across the bundle's SetGraphicsRootSignature, and pipeline p reads them. schedule moved p's draw
    after re-emitting only the root signature ("draw 1: root constant 0[0] 0x7 != never set"); the
    final set hides it from the end-of-bundle check."""
    text = """drawopt 1 context=graphics kind=bundle fast_semantics=off auto_gpu_flush=off
target rt 64x64 R8G8B8A8_UNORM
rootsig rs constants(1) cbv
pipeline p vs=pull ps=f root=rs contract=order_independent
pipeline q vs=pull ps=f contract=order_independent
SetGraphicsRoot32BitConstants 0 1 7
SetGraphicsRootSignature rs
SetPipelineState q
OMSetRenderTargets rt
DrawInstanced 3 1 0 0
SetPipelineState p
DrawInstanced 3 1 0 0
SetPipelineState q
DrawInstanced 3 1 0 0
SetGraphicsRoot32BitConstants 0 1 9
"""
    s, out, pm = _run(text, "schedule", reorder="declared")
    assert [r.rejected for r in pm.records if r.rejected] == []
    r = verify(s, out, reorder="declared")
    assert r.equivalent, r.reason


def test_mdi_folds_an_indirect_draw_of_no_instance_without_a_finding() -> None:
    """mdi folds an indirect draw over CPU args (its index count past the index buffer, no instance)
    and a direct draw into one multi-draw over new CPU args. validate's index-range rule read the
    record's index count but not its instance count, so the folded record was an added finding
    and the pass was rolled back (an indirect record shorter than its 20 bytes was skipped)."""
    text = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off
buffer ib size=20
buffer args size=20 cpu
data args 1664959567
target rt 64x64 R8G8B8A8_UNORM
pipeline p vs=pull ps=f
OMSetRenderTargets rt
SetPipelineState p
IASetPrimitiveTopology TRIANGLELIST
IASetIndexBuffer ib R16_UINT 0
DrawIndexedInstancedIndirect args 0
DrawIndexedInstanced 3 1 0 0 0
"""
    s, out, pm = _run(text, "mdi", target="gl")
    assert [r.rejected for r in pm.records if r.rejected] == []
    assert "MultiDrawIndexedInstancedIndirect" in [c.name for c in out.commands()]
    r = verify(s, out)
    assert r.equivalent, r.reason


def test_dedupe_drops_a_table_a_root_view_replaced_after_an_opaque_command() -> None:
    """After an Opaque command, a table set, then a root view on the same parameter, then heaps:
    dedupe-state drops the dead table set; the verifier took the heaps change to bring the table
    back ("descriptor table 0 as set before line 12, or undefined ... != undefined") and the
    pass was rolled back."""
    text = HEAD + """heap h CBV_SRV_UAV 1
view h[0] srv ib
SetPipelineState p
Opaque ClearState
SetGraphicsRootDescriptorTable 0 h[0]
SetGraphicsRootConstantBufferView 0 ib 0
SetDescriptorHeaps h
DrawInstanced 3 1 0 0
Opaque ClearState
"""
    s, out, pm = _run(text, "dedupe-state")
    assert len(out) == len(s) - 1
    r = verify(s, out)
    assert r.equivalent, r.reason


def test_schedule_keeps_the_order_of_draws_of_a_compute_pipeline_on_one_target() -> None:
    """Draws under a pipeline with only a compute shader (a no-pipeline finding in the input) on a
    depth target: the hazard graph gave a draw without a usable pipeline no depth access, so
    schedule swapped the indexed and the non-indexed indirect draw; the verifier's records have it
    write the bound depth target (what it does there is unknown) and keep them ordered. The graph
    now writes it too."""
    text = """drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off
buffer buf1 size=4
buffer buf4 size=20
depth dep5 1x1 R8G8B8A8_UNORM
pipeline pso10 cs=pull
MultiDrawInstancedIndirectAuto buf1 0 0 buf4 0 0 @nomerge
OMSetRenderTargets dep5 @nomerge
SetPipelineState pso10 @nomerge
DrawIndexedInstancedIndirect buf4 0
DrawInstancedIndirect buf4 0
"""
    s, out, pm = _run(text, "schedule", target="xbox-one", reorder="declared")
    r = verify(s, out)
    assert r.equivalent, r.reason


_ROOT_WORD = """drawopt 1 context=graphics kind={kind} fast_semantics=off auto_gpu_flush=off
rootsig rs8_a constants(1) table(srv,1) table(srv,1,srv,1,srv,1)
{before}Set{ctx}Root32BitConstants 0 1 0 dest={dest} @nomerge
Set{ctx}RootSignature rs8_a @nomerge
Set{ctx}Root32BitConstants 0 1 0 @nomerge
{after}"""


def _root_word(ctx: str, dest: int, kind: str = "list") -> str:
    """A root-constant word ``dest`` of parameter 0 set where the root signature is unknown (after
    an Opaque command in a list, at a bundle's start), then ``rs8_a`` set (parameter 0: one
    constant), word 0 set, and the state observed (an Opaque; a bundle's exit)."""
    opq = 'Opaque "ClearState" @nomerge\n'
    return _ROOT_WORD.format(kind=kind, ctx=ctx, dest=dest, before=opq if kind == "list" else "",
                             after=opq if kind == "list" else "")


@pytest.mark.parametrize("kind", ["list", "bundle"])
@pytest.mark.parametrize("ctx", ["Compute", "Graphics"])
def test_dedupe_drops_a_constant_word_the_next_root_signature_does_not_have(ctx: str, kind: str) -> None:
    """Word 62 of parameter 0 does not exist under ``rs8_a``, whichever signature was unknown
    before it, so dedupe-state drops its set and the state oracle agrees. The verifier held the
    word as "set before the signature, or undefined" at the Opaque / the bundle's exit and rejected
    the removal (a missed rewrite, rolled back; found by a property hunt in session 12); a word the
    new layout lacks is now undefined from the signature on, in both streams."""
    from drawopt.analysis.state import compare_effective_state
    s, out, pm = _run(_root_word(ctx, 62, kind), "dedupe-state", target="d3d12")
    assert len(out) == len(s) - 1
    assert compare_effective_state(s, out, refine=True) is None
    r = verify(s, out)
    assert r.equivalent, r.reason


def _held_word(ctx: str, dest: int, kind: str, keep_set: bool, after: bool = False) -> str:
    """Word ``dest`` of parameter 0 set to 7 where the root signature is unknown (``after``: once
    ``rs8_a`` is set), ``rs8_a`` set and the state observed; ``keep_set=False``: the same without
    that set (a mutant)."""
    opq = 'Opaque "ClearState" @nomerge\n' if kind == "list" else ""
    word = f"Set{ctx}Root32BitConstants 0 1 7 dest={dest} @nomerge\n" if keep_set else ""
    sig = f"Set{ctx}RootSignature rs8_a @nomerge\n"
    return (f"drawopt 1 context=graphics kind={kind} fast_semantics=off auto_gpu_flush=off\n"
            f"rootsig rs8_a constants(1) table(srv,1) table(srv,1,srv,1,srv,1)\n"
            f"{opq}{sig + word if after else word + sig}{opq}")


@pytest.mark.parametrize("kind", ["list", "bundle"])
@pytest.mark.parametrize("ctx", ["Compute", "Graphics"])
def test_verify_holds_a_word_the_next_root_signature_has(ctx: str, kind: str) -> None:
    """The mutant that shows the change above keeps what it must: word 0 (inside parameter 0's one
    constant) set where the signature is unknown is held at the Opaque / the bundle's exit ("7, or
    undefined": the unknown signature may have been ``rs8_a``), so dropping its set is rejected.
    Word 1 (past the count) and word 62 are not held: dropping their set is accepted. Set once the
    signature is known (an out-of-layout set, which the state oracle observes), word 62 is compared."""
    for dest, after, held in ((0, False, True), (1, False, False), (62, False, False), (62, True, True)):
        s = loads(_held_word(ctx, dest, kind, True, after), file="<in>")
        cut = loads(_held_word(ctx, dest, kind, False, after), file="<out>")
        assert verify(s, cut).equivalent is not held, (dest, after, verify(s, cut).reason)


def _vb_resets(first: int, second: int) -> str:
    """Slot ``first`` set to buf3, slot ``second`` to buf1, slot ``first`` to buf3 again (what
    dedupe-state drops), then an indirect draw."""
    return ("drawopt 1 context=graphics kind=list fast_semantics=off auto_gpu_flush=off\n"
            "buffer buf1 size=4\nbuffer buf3 size=20\n"
            f"IASetVertexBuffers {first} buf3 0 0\nIASetVertexBuffers {second} buf1 0 0\n"
            f"IASetVertexBuffers {first} buf3 0 0\nDrawInstancedIndirect buf3 0\n")


def test_a_vertex_buffer_slot_past_the_input_assemblers_is_an_input_error() -> None:
    """D3D12 has 32 vertex-buffer slots. The reader took any u32 slot; the analysis kept slots 32
    and 65536 apart while the verifier folded every slot from 32 on into one column, so it saw
    65536's binding in slot 32 and rejected dedupe-state's removal of the re-set of slot 32 (a
    false rejection found by the pipeline property at 300 commands, session 13); the fold could
    also equate two different slots. A slot from 32 on is now refused where it is read, and the
    verifier refuses an unchecked stream that holds one instead of folding it."""
    from drawopt.errors import InputError
    with pytest.raises(InputError, match=r"<t>:5:20: error: IASetVertexBuffers: vertex-buffer slot must be below 32"):
        loads(_vb_resets(31, 65536), file="<t>")
    s, out, pm = _run(_vb_resets(31, 30), "dedupe-state", target="xbox-one")
    assert len(out) == len(s) - 1
    r = verify(s, out)
    assert r.equivalent, r.reason
    from drawopt.ir.stream import StreamBuilder
    b = StreamBuilder()
    b.buffer("buf1", size=4)
    b.IASetVertexBuffers(40, "buf1", 0, 0)
    b.DrawInstanced(3, 1, 0, 0)
    bad = b.build(check=False)
    with pytest.raises(ValueError, match="vertex-buffer slot outside 0..31"):
        verify(bad, bad)


def _drawn_word(dest: int, kind: str, keep_set: bool, after: bool, pso: bool) -> str:
    """As :func:`_held_word` (graphics), with a draw after the root signature instead of the
    closing Opaque (``pso``: a known pipeline of ``rs8_a`` set first; else the one in force is
    unknown: the Opaque's, or a bundle's caller's)."""
    opq = 'Opaque "ClearState" @nomerge\n' if kind == "list" else ""
    word = f"SetGraphicsRoot32BitConstants 0 1 7 dest={dest} @nomerge\n" if keep_set else ""
    sig = "SetGraphicsRootSignature rs8_a @nomerge\n"
    return (f"drawopt 1 context=graphics kind={kind} fast_semantics=off auto_gpu_flush=off\n"
            "rootsig rs8_a constants(1) table(srv,1) table(srv,1,srv,1,srv,1)\n"
            "target rt 64x64 R8G8B8A8_UNORM\npipeline p vs=v ps=f root=rs8_a\n"
            f"{opq}{'SetPipelineState p' + chr(10) if pso else ''}{sig + word if after else word + sig}"
            "OMSetRenderTargets rt\nDrawInstanced 3 1 0 0\n")


@pytest.mark.parametrize("pso", [False, True])
@pytest.mark.parametrize("kind", ["list", "bundle"])
def test_a_draw_does_not_read_a_word_the_root_signature_in_force_lacks(kind: str, pso: bool) -> None:
    """A root-constant word set where the root signature is unknown and lacking from the known
    one set after it (word 1, past parameter 0's one constant; word 62) is undefined at a draw
    under that signature, as at an Opaque command: dropping its set is accepted (the draw-side
    twin of the Opaque case; a false rejection found by a property hunt in session 13, F2).
    Mutants: word 0 (inside the count) is held as "7, or undefined"; a word set once the
    signature is known is compared (the oracle observes an out-of-layout set, and a pipeline
    the stream does not know may read it)."""
    from drawopt.analysis.state import compare_effective_state
    cases = [(1, False, False), (62, False, False), (0, False, True), (0, True, True)]
    if not pso:
        cases.append((62, True, True))
    for dest, after, held in cases:
        s = loads(_drawn_word(dest, kind, True, after, pso), file="<in>")
        cut = loads(_drawn_word(dest, kind, False, after, pso), file="<out>")
        r = verify(s, cut)
        assert r.equivalent is not held, (dest, after, r.reason)
        if not held:
            assert compare_effective_state(s, cut, refine=True) is None


def test_dedupe_drops_a_constant_set_the_next_root_signature_has_no_room_for() -> None:
    """F2 as the property found it: two words of parameter 0 set after an Opaque command, then a
    root signature whose parameter 0 is a table, word 0 set again and a draw of the unknown
    pipeline. dedupe-state drops the two-word set (word 1 does not exist under ``rs6``); the
    verifier rejected it at the draw and the manager rolled the pass back."""
    text = HEAD + """rootsig rs6 table(srv,1)
OMSetRenderTargets rt
Opaque "x"
SetGraphicsRoot32BitConstants 0 2 0 0
SetGraphicsRootSignature rs6
SetGraphicsRoot32BitConstants 0 1 0
DrawInstanced 3 1 0 0
"""
    s, out, pm = _run(text, "dedupe-state", target="d3d12")
    assert len(out) == len(s) - 1
    r = verify(s, out)
    assert r.equivalent, r.reason


_CPU_ARGS = """drawopt 1 context=graphics kind=bundle fast_semantics=on auto_gpu_flush=off reorder=declared
buffer buf1-c size=4294967296 cpu
data buf1-c 0xfe0cbb12 0x2afeaa6d 0x8514b4a5 0x9660254f
buffer x size=65535
pipeline off vs=0 gs=x,y blend=min depth=never,write topology=line uav_stage=gs
SetPipelineState off
DrawIndexedInstancedIndirect buf1-c 0
DrawIndexedInstanced 2147483648 3498443109 2147483647 0 65535
CopyBufferRegion buf1-c 479898 x 0 65535
"""


def test_an_indirect_draw_does_not_read_arguments_the_cpu_wrote() -> None:
    """mdi folds an indirect draw of CPU-known arguments and a direct draw into one MDI over its
    own argument buffer. The verifier had the original read ``buf1-c`` (which a later copy
    writes) and the output not, and rejected it (a false rejection found by a property hunt in
    session 13, F4): arguments decoded from CPU-known data are in the draw's records, so the
    front end's read of them is not an access. Mutant: the draw moved below the copy reads
    arguments the GPU has written (not decodable there: a symbolic draw), still a difference."""
    s, out, pm = _run(_CPU_ARGS, "mdi", target="xbox-one")
    assert len(out) == len(s) - 1
    r = verify(s, out)
    assert r.equivalent, r.reason
    lines = _CPU_ARGS.splitlines(keepends=True)
    moved = loads("".join(lines[:6] + lines[7:] + lines[6:7]), file="<moved>")
    r = verify(s, moved)
    assert not r.equivalent, "moved below the copy"


@pytest.mark.parametrize("kind", ["list", "bundle"])
def test_a_dispatch_that_writes_nothing_keeps_its_pipeline(kind: str) -> None:
    """A dispatch whose pipeline writes nothing has no records, so moving its SetPipelineState
    below it was accepted although the dispatch then runs with no pipeline (a bundle inherits
    none): a wrong acceptance found by the held-state property (dev profile, session 13). A draw
    or dispatch with no usable pipeline is now a rule violation, counted as the keyed ones.
    Mutants: the reverse (giving a pipeline-less dispatch one) is accepted; a dispatch after an
    Opaque command (the unknown pipeline) is not counted."""
    head = (f"drawopt 1 context=graphics kind={kind} fast_semantics=off auto_gpu_flush=off\n"
            "rootsig rs constants(1)\npipeline c cs=k root=rs\n")
    a = loads(head + "SetPipelineState c\nDispatch 1 1 1\n", file="<a>")
    m = loads(head + "Dispatch 1 1 1\nSetPipelineState c\n", file="<m>")
    r = verify(a, m)
    assert not r.equivalent and "Dispatch at line 4 has no usable pipeline state" in r.reason, r.reason
    assert verify(m, a).equivalent
    # counted: after an Opaque command the pipeline is the unknown one, not none
    o = loads(head + 'Opaque "x"\nDispatch 1 1 1\n', file="<o>")
    assert verify(a, o).equivalent is False and "no usable pipeline" not in (verify(a, o).reason or "")
    assert "no usable pipeline" in verify(o, m).reason
