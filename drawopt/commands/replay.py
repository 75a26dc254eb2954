"""``drawopt replay A [B]``: render streams through OpenGL (EGL, headless), time them, compare images.

Exit status: 0 rendered (and, with B, every target and GPU-written buffer the
same), 1 images differ, 2 bad input, bad usage, or no OpenGL context.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from ..errors import UsageError

HELP = "render streams through OpenGL (EGL), time them and compare their images"


def _size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)[xX](\d+)", text.strip())
    if not m or not (1 <= int(m.group(1)) <= 16384 and 1 <= int(m.group(2)) <= 16384):
        raise argparse.ArgumentTypeError(f"expected WxH (1..16384 each), got '{text}'")
    return int(m.group(1)), int(m.group(2))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="stream to render (.dstream, .json, .npz, or - for stdin)")
    p.add_argument("b", metavar="B", nargs="?", help="second stream: compare its images with A's")
    p.add_argument("--size", type=_size, default=(128, 128), metavar="WxH",
                   help="render every target at this size (default 128x128)")
    p.add_argument("--frames", type=int, default=3, metavar="N", help="timed frames; times are medians (default 3)")
    p.add_argument("--warmup-s", type=float, default=0.0, metavar="S",
                   help="replay untimed frames for S seconds first, so GPU clocks are up (default 0)")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                   help="a pixel differs when a channel differs by more than T (default 0: exact)")
    p.add_argument("--diff-dir", metavar="DIR", help="write A, B and difference PNGs of differing targets here")
    p.add_argument("--png-dir", metavar="DIR", help="write a PNG of every target of A (and B) here")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--no-native", action="store_true", help="issue GL calls from the Python loop even if the "
                                                            "compiled loop is built")
    p.add_argument("--overhead", action="store_true", help="also measure the replayer's per-call overhead")


def _load(path: str) -> Any:
    from .. import formats
    return formats.load(path)


def run(args: argparse.Namespace) -> int:
    from ..replay import ReplayOptions, available, call_overhead, compare, replay, write_pngs
    from ..replay.gl import get_context

    if args.frames < 1 or args.frames > 10000:
        raise UsageError("--frames must be 1..10000")
    if not 0.0 <= args.warmup_s <= 600.0:
        raise UsageError("--warmup-s must be 0..600")
    if args.tolerance < 0:
        raise UsageError("--tolerance must be >= 0")
    if args.b is None and args.diff_dir:
        raise UsageError("--diff-dir needs a second stream B")
    sa = _load(args.a)
    sb = _load(args.b) if args.b is not None else None
    ok, why = available()
    if not ok:
        print(f"drawopt replay: error: {why}", file=sys.stderr)
        return 2
    opts = ReplayOptions(size=args.size, native=False if args.no_native else None)
    ra = replay(sa, size=args.size, frames=args.frames, options=opts, warmup_s=args.warmup_s)
    rb = replay(sb, size=args.size, frames=args.frames, options=opts, warmup_s=args.warmup_s) \
        if sb is not None else None
    _, _, info = get_context()
    out: dict[str, Any] = {"gl": info.as_dict(), "size": list(args.size), "a": {"file": args.a, **ra.summary()}}
    if rb is not None:
        out["b"] = {"file": args.b, **rb.summary()}
    if args.overhead:
        out["overhead_ns_per_call"] = call_overhead(native=False if args.no_native else None)
    status = 0
    if rb is not None:
        cmp = compare(ra, rb, args.tolerance)
        out["compare"] = cmp.summary()
        status = 0 if cmp.same else 1
        if args.diff_dir and not cmp.same:
            out["compare"]["pngs"] = [str(p) for p in write_pngs(ra, rb, cmp, args.diff_dir)]
    if args.png_dir:
        _write_all(ra, rb, args.png_dir)
    if args.json:
        json.dump(out, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        _print(out)
    return status


def _write_all(ra: Any, rb: Any, out_dir: str) -> None:
    from pathlib import Path

    from PIL import Image

    from ..replay.api import _to_rgba8

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    for tag, r in (("a", ra), ("b", rb)):
        if r is None:
            continue
        for name, img in r.images.items():
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
            Image.fromarray(_to_rgba8(img), "RGBA").save(d / f"{safe}.{tag}.png")


def _print(out: dict[str, Any]) -> None:
    gl = out["gl"]
    print(f"renderer: {gl['renderer']} ({gl['version']})")
    for tag in ("a", "b"):
        r = out.get(tag)
        if r is None:
            continue
        print(f"{tag.upper()}: {r['file']}: {r['draw_calls']} draw calls, {r['gl_calls']} GL calls ({r['executor']}); "
              f"median of {r['frames']}: CPU submit {r['cpu_submit_ms']:.3f} ms, GPU {r['gpu_ms']:.3f} ms, "
              f"wall {r['wall_ms']:.3f} ms")
        for w, n in sorted(r["warnings"].items()):
            print(f"  warning: {w} (x{n})")
    if "overhead_ns_per_call" in out:
        o = out["overhead_ns_per_call"]
        print(f"replayer overhead per call: {o['noop_gl_ns']:.0f} ns (no-op GL call through the {o['executor']} loop)")
    cmp = out.get("compare")
    if cmp is not None:
        for t in cmp["targets"]:
            if t.get("missing_in"):
                print(f"  {t['kind']} {t['name']}: missing in {t['missing_in'].upper()}")
            elif t["differing"]:
                print(f"  {t['kind']} {t['name']}: {t['differing']} of {t['total']} differ (max |d| {t['max_abs']:g})")
            else:
                print(f"  {t['kind']} {t['name']}: same")
        print("same" if cmp["same"] else "DIFFERENT")
        for p in cmp.get("pngs", []):
            print(f"  wrote {p}")
