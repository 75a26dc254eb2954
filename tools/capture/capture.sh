#!/usr/bin/env bash
# Capture real programs with GFXReconstruct on Mesa's lavapipe (software Vulkan) under Xvfb and
# write the test fixtures: tests/data/captures/NAME/{NAME.jsonl.gz, shaders/sh<handle>, PROVENANCE.md}.
#
#   bash tools/capture/capture.sh [OUT_DIR]     (default OUT_DIR: tests/data/captures)
#
# Programs: vkcube (Vulkan), vkd3d-gears (D3D12 through vkd3d), glmark2 scenes "ideas" and
# "desktop" (OpenGL through Mesa's zink). Each is captured for a few frames only (the layer's
# GFXRECON_CAPTURE_FRAMES range: the capture starts with a state snapshot, then those frames),
# converted with gfxrecon-convert (JSON Lines, gzipped) and its shaders extracted with
# gfxrecon-extract. Needs root for the apt step (skipped when the packages are present).
# See tools/capture/README.md for the traps this script avoids.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-tests/data/captures}"
# the Debian packages (gfxreconstruct, lavapipe, vkcube, vkd3d-demos, glmark2, Xvfb, spirv-tools)
DRAWOPT_CAPTURE_TOOLS=1 sh .ci/install-system.sh

WORK="$(mktemp -d /tmp/drawopt-capture.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export XDG_RUNTIME_DIR="$WORK/xdg"      # Mesa's WSI and Xvfb want one; none exists in a bare shell
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
XVFB=(xvfb-run -a -s "-screen 0 1024x768x24")
ZINK=(GALLIUM_DRIVER=zink LIBGL_ALWAYS_SOFTWARE=1 MESA_LOADER_DRIVER_OVERRIDE=zink)

# capture NAME FRAMES COMMAND...: the layer's variables are set with `env` *inside* xvfb-run,
# so that only the program loads the layer (Xvfb itself would otherwise be captured too and
# truncate the capture file when it exits).
capture() {
    local name="$1" frames="$2"; shift 2
    local gfxr="$WORK/$name.gfxr"
    "${XVFB[@]}" env VK_INSTANCE_LAYERS=VK_LAYER_LUNARG_gfxreconstruct \
        GFXRECON_CAPTURE_FILE="$gfxr" GFXRECON_CAPTURE_FILE_TIMESTAMP=false \
        GFXRECON_CAPTURE_FRAMES="$frames" GFXRECON_LOG_LEVEL=error "$@" >"$WORK/$name.log" 2>&1 || true
    local got
    got="$(ls "$WORK/${name}"_frames_*.gfxr 2>/dev/null | head -1)"
    if [ -z "$got" ]; then echo "capture: $name: no capture written (see $WORK/$name.log)" >&2; cat "$WORK/$name.log" >&2; exit 1; fi
    local dest="$OUT/$name"
    rm -rf "$dest" && mkdir -p "$dest/shaders"
    gfxrecon-convert --output "$WORK/$name.jsonl" "$got" >/dev/null 2>&1
    # the header names the temporary .gfxr: keep only its file name (reproducible fixtures)
    sed -i '1s#"source-path":"[^"]*/\([^"/]*\)"#"source-path":"\1"#' "$WORK/$name.jsonl"
    gzip -9 -n -c "$WORK/$name.jsonl" >"$dest/$name.jsonl.gz"
    gfxrecon-extract --dir "$dest/shaders" "$got" >/dev/null 2>&1
    {
        echo "# $name"
        echo
        echo "A GFXReconstruct capture of frames $frames of \`$*\`, converted to JSON Lines."
        echo
        echo "| | |"
        echo "|---|---|"
        echo "| program | \`$PROG\` (Debian package \`$PKG\` $(dpkg-query -W -f='${Version}' "$PKG")) |"
        echo "| licence | $LICENCE (the capture holds the program's shaders and API calls) |"
        echo "| capture layer | gfxreconstruct $(dpkg-query -W -f='${Version}' gfxreconstruct), GFXRECON_CAPTURE_FRAMES=$frames |"
        echo "| driver | mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers) (lavapipe)$EXTRA |"
        echo "| files | \`$name.jsonl.gz\` (\`gfxrecon-convert\`, gzipped), \`shaders/sh<handle>\` (\`gfxrecon-extract --dir\`) |"
        echo
        echo "Made by \`bash tools/capture/capture.sh\`; the exact command:"
        echo
        echo '```'
        echo "xvfb-run -a -s \"-screen 0 1024x768x24\" env VK_INSTANCE_LAYERS=VK_LAYER_LUNARG_gfxreconstruct \\"
        echo "    GFXRECON_CAPTURE_FILE=$name.gfxr GFXRECON_CAPTURE_FILE_TIMESTAMP=false GFXRECON_CAPTURE_FRAMES=$frames \\"
        echo "    GFXRECON_LOG_LEVEL=error $*"
        echo "gfxrecon-convert --output $name.jsonl ${name}_frames_${frames/-/_through_}.gfxr"
        echo "gfxrecon-extract --dir shaders ${name}_frames_${frames/-/_through_}.gfxr"
        echo '```'
    } >"$dest/PROVENANCE.md"
    echo "capture: $dest: $(stat -c %s "$dest/$name.jsonl.gz") bytes, $(ls "$dest/shaders" | wc -l) shaders"
}

PROG=vkcube PKG=vulkan-tools LICENCE="Apache-2.0" EXTRA="" capture vkcube 3-4 vkcube --c 6
PROG=vkd3d-gears PKG=vkd3d-demos LICENCE="LGPL-2.1-or-later" EXTRA="; vkd3d (D3D12 over Vulkan)" \
    capture vkd3d-gears 3-4 timeout 20 vkd3d-gears
for scene in ideas desktop; do
    PROG="glmark2 (scene $scene)" PKG=glmark2-x11 LICENCE="GPL-3.0-or-later" EXTRA="; GL through zink (${ZINK[*]})" \
        capture "glmark2-$scene" 4-5 env "${ZINK[@]}" glmark2 -s 320x240 -b "$scene:duration=2"
done
