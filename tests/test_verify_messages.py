"""The verifier's mismatch messages say what is true: a read that one side does not make is
"does not read it", never "0 write(s)" (which is a read before any write). The message of a read
moved across a write, through verify, is tests/test_verify.py's test_write_after_read_is_a_hazard."""

from __future__ import annotations

from drawopt.verify.compare import read_count_diff


def test_a_missing_read_is_not_a_read_before_any_write() -> None:
    assert read_count_diff("tex", 2, -1) == \
        "reads tex after 2 write(s) in the original but does not read it in the optimized"
    assert read_count_diff("tex", -1, 1) == \
        "does not read tex in the original but reads it after 1 write(s) in the optimized"
    for a, b in ((2, -1), (-1, 0), (-1, 3)):
        msg = read_count_diff("tex", a, b, "line 9")
        assert "does not read" in msg and "moved across" not in msg   # no write was moved across
        assert f"after {max(a, b)} write(s)" in msg and "after -1" not in msg
    assert read_count_diff("tex", 0, -1).startswith("reads tex after 0 write(s) in the original")

