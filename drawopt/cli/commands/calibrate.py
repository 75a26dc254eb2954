"""``drawopt calibrate -o PROFILE.json``: measure this machine's GL costs per call into a target profile.

Run it where a GPU drives EGL (on llvmpipe the figures are the CPU rasteriser's).
``drawopt optimize --target-profile PROFILE.json`` (or a profile committed as
``drawopt/targets/gl.json``, which ``--target gl`` uses) then decides with the
measured costs. Exit status: 0 written, 2 bad usage or no OpenGL context.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from drawopt.errors import UsageError

HELP = "measure per-call CPU costs through this machine's OpenGL driver and write a target profile"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="profile to write (JSON; - for stdout)")
    p.add_argument("--draws", type=int, default=20000, metavar="N",
                   help="draws (and multi-draw records) per measurement (default 20000)")
    p.add_argument("--frames", type=int, default=9, metavar="N", help="timed frames per measurement (median)")
    p.add_argument("--no-pipelines", action="store_true",
                   help="skip choosing the fastest pipeline on a reference frame")
    p.add_argument("--reference-draws", type=int, default=10000, metavar="N",
                   help="draws of the reference frame the pipelines are measured on (default 10000)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def run(args: argparse.Namespace) -> int:
    from drawopt.calibrate import calibrate
    from drawopt.ir.formats import write_text_atomic
    from drawopt.replay import available

    if not 100 <= args.draws <= 10_000_000:
        raise UsageError("--draws must be 100..10000000")
    if not 1 <= args.frames <= 1000:
        raise UsageError("--frames must be 1..1000")
    ok, why = available()
    if not ok:
        print(f"drawopt calibrate: error: {why}", file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()

    def say(msg: str) -> None:
        if tty and not args.quiet:
            sys.stderr.write(f"\rcalibrate: {msg[:60]:<60}")
            sys.stderr.flush()

    prof = calibrate(n=args.draws, frames=args.frames, pipelines=not args.no_pipelines,
                     reference_draws=args.reference_draws, progress=say)
    if tty and not args.quiet:
        sys.stderr.write("\r" + " " * 72 + "\r")
    text = json.dumps(prof, indent=2, sort_keys=True) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.output, text)
    if not args.quiet:
        out = sys.stderr if args.output == "-" else sys.stdout
        print(_verdict(prof, args.output), file=out)
    return 0


def _verdict(p: dict[str, Any], path: str) -> str:
    st = p["state_us"]
    return (f"{path}: {p['machine']['renderer']}: draw {p['draw_us'] * 1e3:.0f} ns, multi-draw "
            f"{p['mdi_call_us'] * 1e3:.0f} ns + {p['mdi_record_us'] * 1e3:.1f} ns/record, pipeline "
            f"{st.get('SetPipelineState', 0) * 1e3:.0f} ns, root constants "
            f"{st.get('SetGraphicsRoot32BitConstants', 0) * 1e3:.0f} ns; pipeline {p.get('pipeline') or '(model)'}")
