#!/bin/sh
# The Debian packages the test suite uses, installed as root when missing, in one apt-get run
# (tests/run.sh calls this; every test that needs a package skips with the reason when it is absent).
#
#   GL       replay tests (marker `replay`): Mesa's EGL + llvmpipe (software OpenGL 4.5)
#   SCENES   glTF import tests, bench/gltf_vs_gltfpack.py: real scenes and meshoptimizer's gltfpack
#   BROWSER  the HTML report's browser test: Debian's chromium, driven by playwright (no browser download)
#   SPIRV    the capture importer reads the fixtures' SPIR-V with spirv-dis
#   CAPTURE  only with DRAWOPT_CAPTURE_TOOLS=1: what tools/capture/capture.sh needs to make captures
#
# The Python packages come from the project's extras (`pip install -e ".[test,replay]"`).
# Idempotent and quick when everything is present. Usage: sh .ci/install-system.sh [PYTHON]
# Environment: DRAWOPT_SKIP_APT=1 skips apt (e.g. no root).
set -eu

PY="${1:-python3}"
GL="libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libgles2 libopengl0 libglvnd0 libgbm1"
SCENES="assimp-testmodels gltfpack"
BROWSER="chromium"
SPIRV="spirv-tools"
CAPTURE="gfxreconstruct mesa-vulkan-drivers vulkan-tools vkd3d-demos glmark2-x11 xvfb xauth"
PKGS="$GL $SCENES $BROWSER $SPIRV"
[ "${DRAWOPT_CAPTURE_TOOLS:-0}" = "1" ] && PKGS="$PKGS $CAPTURE"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-system: Debian packages present"
elif [ "${DRAWOPT_SKIP_APT:-0}" = "1" ] || [ "$(id -u)" != "0" ]; then
    echo "install-system: not installing (no root or DRAWOPT_SKIP_APT=1):$missing" >&2
else
    echo "install-system: apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 $missing
fi

# Smoke test: an EGL context must come up (prints the renderer; never fails the script,
# the replay tests skip with the reason when no context can be made).
"$PY" - <<'PYEOF' || true
try:
    import moderngl
    ctx = moderngl.create_standalone_context(backend="egl", require=430)
    print("install-system: EGL context OK:", ctx.info["GL_RENDERER"], ctx.info["GL_VERSION"])
    ctx.release()
except Exception as e:  # noqa: BLE001
    print("install-system: no EGL context:", e)
PYEOF
