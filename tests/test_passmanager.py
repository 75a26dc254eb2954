"""The pass manager's guarantees: options checked, no pass adds a finding, outputs verify and record
how they were made; the top-level API called as users call it (issue 12, items 7, 9, 10, 11)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import drawopt
from drawopt.cli import main
from drawopt.errors import UsageError
from drawopt.ir.formats import dumps, loads
from drawopt.ir.stream import Header, Stream
from drawopt.passmanager import AnalysisManager, Pass, PassError, PassManager, PassResult, parse_pipeline
from drawopt.validate import findings

STREAM = """drawopt 1 context=graphics kind=list
buffer verts size=65536
buffer ib size=65536
target rt 64x64 R8G8B8A8_UNORM
rootsig main constants(2)
pipeline a vs=v ps=f layout=pos blend=alpha root=main params=0
pipeline o vs=v ps=f layout=pos depth=less,write root=main params=0

OMSetRenderTargets rt
SetGraphicsRootSignature main
IASetPrimitiveTopology TRIANGLELIST
IASetVertexBuffers 0 verts 0 16
IASetIndexBuffer ib R16_UINT 0
SetPipelineState a
SetGraphicsRoot32BitConstants 0 2 1 0
DrawIndexedInstanced 3 1 0 0 0
SetGraphicsRoot32BitConstants 0 2 2 0
DrawIndexedInstanced 3 1 3 0 0
SetPipelineState a
DrawIndexedInstanced 3 1 6 0 0
"""


def S() -> Stream:
    return loads(STREAM, file="<test>")


def _drop(s: Stream, name: str) -> Stream:
    """``s`` without its commands named ``name``."""
    keep = np.flatnonzero(s.op != drawopt.ir.ops.BY_NAME[name].code)
    return s.take(keep)


@dataclass(frozen=True)
class DropIndexBufferPass(Pass):
    """A wrong pass: deletes every IASetIndexBuffer (adds index-buffer-undefined findings)."""

    name: ClassVar[str] = "drop-ib"

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        return PassResult(_drop(stream, "IASetIndexBuffer"), True)


@dataclass(frozen=True)
class SwapBlendedPass(Pass):
    """A wrong pass that adds no finding: swaps the first two blended draws (the verifier rejects it)."""

    name: ClassVar[str] = "swap-blended"

    def apply(self, stream: Stream, am: AnalysisManager) -> PassResult:
        draws = np.flatnonzero(stream.op == drawopt.ir.ops.BY_NAME["DrawIndexedInstanced"].code)
        order = np.arange(len(stream))
        order[draws[0]], order[draws[1]] = draws[1], draws[0]
        return PassResult(stream.take(order), True)


def test_a_pass_that_adds_a_finding_is_rolled_back_and_named() -> None:
    s = S()
    assert findings(s) == []
    pm = PassManager([DropIndexBufferPass(), *parse_pipeline("dedupe-state")])
    out = pm.run(s)
    assert findings(out) == []
    bad, good = pm.records
    assert bad.rejected is not None and "drop-ib" in bad.rejected and "index-buffer-undefined" in bad.rejected
    assert bad.commands_after == len(s)
    assert good.rejected is None and good.modified     # the second SetPipelineState a is redundant
    assert pm.verified is True


def test_strict_mode_raises_on_an_added_finding() -> None:
    with pytest.raises(PassError, match="drop-ib.*added findings: 3 index-buffer-undefined"):
        PassManager([DropIndexBufferPass()], verify_each=True).run(S())


def test_a_wrong_rewrite_without_findings_fails_the_final_verify_and_is_dropped() -> None:
    s = S()
    pm = PassManager([SwapBlendedPass(), *parse_pipeline("dedupe-state")])
    out = pm.run(s)
    assert drawopt.verify(s, out).equivalent
    swap, dedupe = pm.records
    assert swap.rejected is not None and "swap-blended" in swap.rejected
    assert dedupe.rejected is None and len(out) == len(s) - 1
    with pytest.raises(PassError, match="after pass 'swap-blended'"):
        PassManager([SwapBlendedPass()], verify_each=True).run(s)


def test_verify_off_keeps_what_the_passes_wrote() -> None:
    # the promise is opt-out: without the final check the wrong rewrite survives (so the check is what holds it)
    s = S()
    out = PassManager([SwapBlendedPass()], verify=False).run(s)
    assert not drawopt.verify(s, out).equivalent


def test_cli_warns_and_writes_a_verified_output(tmp_path, capsys, monkeypatch) -> None:
    import drawopt.passmanager as pmod
    src = tmp_path / "in.dstream"
    src.write_text(STREAM)
    monkeypatch.setitem(pmod.PASSES, "drop-ib", f"{__name__}:DropIndexBufferPass")
    out = tmp_path / "out.dstream"
    assert main(["optimize", str(src), "-o", str(out), "--passes", "drop-ib,dedupe-state"]) == 0
    err = capsys.readouterr().err
    assert "warning: pass 'drop-ib' added findings" in err
    assert main(["verify", str(src), str(out)]) == 0
    assert main(["validate", str(out)]) == 0


@pytest.mark.parametrize("pipeline, message", [
    ("pack-x{max-instances=-1}", "max-instances must be >= 1, got -1"),
    ("pack-x{max-instances=0}", "max-instances must be >= 1, got 0"),
    ("mdi{max-count=0}", "max-count must be >= 1, got 0"),
    ("mdi{max-count=-5}", "max-count must be >= 1"),
    ("mdi{min-batch=0}", "min-batch must be >= 1"),
    ("schedule{reorder=opaque}", "unknown option 'reorder=opaque'"),
    ("flush{target=xbox-one}", "unknown option 'target=xbox-one'"),
    ("weld{min-saving=1.5}", "min-saving must be in"),
    ("gs-plan{lds-limit=0}", "lds-limit must be"),
])
def test_bad_pass_options_are_usage_errors_on_every_target(pipeline, message, tmp_path, capsys) -> None:
    for target in ("d3d12", "xbox-one", "xbox-series", "vulkan", "gl"):
        with pytest.raises(UsageError, match=message):
            parse_pipeline(pipeline, target=target)
    src = tmp_path / "in.dstream"
    src.write_text(STREAM)
    assert main(["optimize", str(src), "-o", str(tmp_path / "o.dstream"), "--passes", pipeline]) == 2
    assert message.split(" ")[0] in capsys.readouterr().err
    assert not (tmp_path / "o.dstream").exists()


def test_unset_and_valid_options() -> None:
    (m,) = parse_pipeline("mdi{max-count=64}")
    assert m.max_count == 64 and str(m) == "mdi{max-count=64}"
    (m,) = parse_pipeline("mdi")
    assert m.max_count is None and str(m) == "mdi"


@pytest.mark.parametrize("fmt", ["text", "json", "npz"])
def test_outputs_record_target_and_policy_in_every_format(fmt, tmp_path) -> None:
    s = S()
    out = drawopt.optimize(s, target="xbox-one", reorder="opaque").stream
    assert (out.header.target, out.header.reorder) == ("xbox-one", "opaque")
    assert (s.header.target, s.header.reorder) == ("", "")         # the input is not touched
    path = tmp_path / f"o.{ {'text': 'dstream', 'json': 'json', 'npz': 'npz'}[fmt] }"
    drawopt.save(out, str(path))
    back = drawopt.load(str(path))
    assert (back.header.target, back.header.reorder) == ("xbox-one", "opaque")
    # an input without them writes neither key: old files read and print unchanged
    assert "target=" not in dumps(s, "text").splitlines()[0]


def test_header_rejects_bad_provenance() -> None:
    with pytest.raises(ValueError, match="reorder must be one of"):
        Header(reorder="sometimes")
    text = STREAM.replace("kind=list", "kind=list reorder=sometimes")
    with pytest.raises(drawopt.InputError, match="<test>:1:.*reorder must be one of"):
        loads(text, file="<test>")


OPAQUE_PAIR = """drawopt 1 context=graphics kind=list{extra}
buffer verts size=65536
target rt 64x64 R8G8B8A8_UNORM
depth z 64x64 D32_FLOAT
rootsig main constants(2)
pipeline o vs=v ps=f layout=pos depth=less,write root=main params=0

OMSetRenderTargets rt z
SetGraphicsRootSignature main
IASetPrimitiveTopology TRIANGLELIST
IASetVertexBuffers 0 verts 0 16
SetPipelineState o
SetGraphicsRoot32BitConstants 0 2 {first} 0
DrawInstanced 3 1 0 0
SetGraphicsRoot32BitConstants 0 2 {second} 0
DrawInstanced 3 1 0 0
"""


def test_verify_and_explain_default_to_the_recorded_policy_and_target(tmp_path, capsys) -> None:
    # two opaque depth-tested draws on one target: swapping them is correct only under --reorder opaque
    a, b = tmp_path / "a.dstream", tmp_path / "b.dstream"
    a.write_text(OPAQUE_PAIR.format(extra="", first=1, second=2))
    b.write_text(OPAQUE_PAIR.format(extra=" target=xbox-one reorder=opaque", first=2, second=1))
    assert not drawopt.verify(drawopt.load(str(a)), drawopt.load(str(b))).equivalent  # declared: observable
    assert main(["verify", str(a), str(b)]) == 0                      # the header's policy: opaque
    assert "reorder=opaque" in capsys.readouterr().out
    assert main(["verify", str(a), str(b), "--reorder", "declared"]) == 1
    capsys.readouterr()
    assert main(["explain", str(b), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["target"], got["reorder"]) == ("xbox-one", "opaque")
    assert main(["explain", str(a), "--json"]) == 0                   # an input records neither
    got = json.loads(capsys.readouterr().out)
    assert (got["target"], got["reorder"]) == ("d3d12", "declared")


def test_verify_can_be_called_any_number_of_times() -> None:
    s = S()
    for _ in range(3):
        assert drawopt.verify(s, s).equivalent
    out = drawopt.optimize(s, verify_each=True).stream       # imports the verifier package on the way
    assert len(out) < len(s)
    for _ in range(3):
        assert drawopt.verify(s, out).equivalent
        assert drawopt.verify(s, out, reorder="opaque").equivalent
    import drawopt.verify as verify_pkg
    from drawopt import verify
    assert verify(s, out).equivalent and verify_pkg.verify(s, out).equivalent
    assert callable(drawopt.verify) and drawopt.verify.VerifyResult is not None
