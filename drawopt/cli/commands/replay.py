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

from drawopt.errors import UsageError

HELP = "render streams through OpenGL (EGL), time them and compare their images"


def _size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)[xX](\d+)", text.strip())
    if not m or not (1 <= int(m.group(1)) <= 16384 and 1 <= int(m.group(2)) <= 16384):
        raise argparse.ArgumentTypeError(f"expected WxH (1..16384 each), got '{text}'")
    return int(m.group(1)), int(m.group(2))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="stream to render (.dstream, .json, .npz, or - for stdin)")
    p.add_argument("b", metavar="B", nargs="?", help="second stream: compare its images with A's")
    p.add_argument("--size", type=_size, default=None, metavar="WxH",
                   help="render every target at this size (default: 1280x720 on a GPU, 128x128 on llvmpipe)")
    p.add_argument("--frames", type=int, default=None, metavar="N",
                   help="timed frames; times are medians (default: 9 on a GPU, 1 on llvmpipe)")
    p.add_argument("--warmup-s", type=float, default=None, metavar="S",
                   help="replay untimed frames for S seconds first, so GPU clocks are up (default: 1 on a GPU, "
                        "0 and no warm-up frame on llvmpipe)")
    p.add_argument("--content", choices=("light", "full"), default="light",
                   help="light (default): squeeze the index ranges of synthesized index buffers so GPU time "
                        "follows the command stream; full: draw every index (docs/replay.md, Content)")
    p.add_argument("--index-scale", type=int, default=None, metavar="K",
                   help="light content's squeeze factor (default: chosen from A; B always uses A's)")
    p.add_argument("--profile", nargs="?", type=int, const=5, default=None, metavar="N",
                   help="also profile N frames (default 5): CPU time per stream command kind and GL call "
                        "(compiled loop), per multi-draw record, GPU time per pass (timer queries)")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                   help="a pixel differs when a channel differs by more than T (default 0: exact)")
    p.add_argument("--diff-dir", metavar="DIR", help="write A, B and difference PNGs of differing targets here")
    p.add_argument("--png-dir", metavar="DIR", help="write a PNG of every target of A (and B) here")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--no-native", action="store_true", help="issue GL calls from the Python loop even if the "
                                                            "compiled loop is built")
    p.add_argument("--overhead", action="store_true", help="also measure the replayer's per-call overhead")


def _load(path: str) -> Any:
    from drawopt.ir import formats
    return formats.load(path)


def run(args: argparse.Namespace) -> int:
    from drawopt.replay import ReplayOptions, available, call_overhead, compare, replay_interleaved, write_pngs
    from drawopt.replay.api import machine_defaults
    from drawopt.replay.executor import index_scale_for
    from drawopt.replay.gl import get_context

    if args.frames is not None and not 1 <= args.frames <= 10000:
        raise UsageError("--frames must be 1..10000")
    if args.warmup_s is not None and not 0.0 <= args.warmup_s <= 600.0:
        raise UsageError("--warmup-s must be 0..600")
    if args.index_scale is not None and args.index_scale < 1:
        raise UsageError("--index-scale must be >= 1")
    if args.profile is not None and not 1 <= args.profile <= 1000:
        raise UsageError("--profile must be 1..1000 frames")
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
    _, _, info = get_context()
    dflt = machine_defaults(info.renderer)
    size = args.size or dflt["size"]
    frames = args.frames or dflt["frames"]
    warmup_s = dflt["warmup_s"] if args.warmup_s is None else args.warmup_s
    native = False if args.no_native else None
    scale = args.index_scale or (index_scale_for(sa, dflt["prim_budget"]) if args.content == "light" else 1)
    opts = ReplayOptions(size=size, native=native, content=args.content, index_scale=scale)
    streams = [sa] if sb is None else [sa, sb]
    with _Status() as st:  # A's and B's timed frames interleaved: both under the same conditions
        got = replay_interleaved(streams, [opts] * len(streams), frames=frames, warmup=dflt["warmup"],
                                 warmup_s=warmup_s, profile=args.profile or False, progress=st.say)
    ra, rb = got[0], (got[1] if sb is not None else None)
    out: dict[str, Any] = {"gl": info.as_dict(), "size": list(size), "a": {"file": args.a, **ra.summary()}}
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


class _Status:
    """One status line on stderr (only on a terminal): which stream, which stage, elapsed time."""

    def __init__(self) -> None:
        import time
        self.on = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self._time = time.perf_counter

    def say(self, msg: str) -> None:
        if self.on:
            sys.stderr.write(f"\rreplay {msg} ({self._time() - self.t0:.1f} s){' ' * 20}")
            sys.stderr.flush()

    def __enter__(self) -> _Status:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.on:
            sys.stderr.write("\r" + " " * 72 + "\r")
            sys.stderr.flush()


def _write_all(ra: Any, rb: Any, out_dir: str) -> None:
    from pathlib import Path

    from PIL import Image

    from drawopt.replay.api import _to_rgba8

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
        content = r["content"] + (f" x1/{r['index_scale']}" if r["index_scale"] > 1 else "")
        print(f"{tag.upper()}: {r['file']}: {r['draw_calls']} draw calls, {r['gl_calls']} GL calls ({r['executor']}, "
              f"{content} content); median of {r['frames']}: CPU submit {r['cpu_submit_ms']:.3f} ms, "
              f"GPU {r['gpu_ms']:.3f} ms, wall {r['wall_ms']:.3f} ms")
        for w, n in sorted(r["warnings"].items()):
            print(f"  warning: {w} (x{n})")
        if "profile" in r:
            from drawopt.replay.profile import format_profile
            for line in format_profile(r["profile"]):
                print(line)
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
