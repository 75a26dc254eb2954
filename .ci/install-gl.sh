#!/bin/sh
# Install what the replay tests (tests/test_replay.py, marker `replay`) need on a
# fresh Debian/Ubuntu machine, as root: Mesa's EGL + llvmpipe (software OpenGL 4.5)
# and the Python packages moderngl, glcontext and pillow.
#
# Idempotent: apt runs only when a library is missing, pip only when a module is
# missing. Usage: sh .ci/install-gl.sh [PYTHON]   (PYTHON defaults to python3)
# Environment: DRAWOPT_GL_SKIP_APT=1 skips the apt step (e.g. no root).
set -eu

PY="${1:-python3}"
PKGS="libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libgles2 libopengl0 libglvnd0 libgbm1"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ] && [ "${DRAWOPT_GL_SKIP_APT:-0}" != "1" ]; then
    echo "install-gl: apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-gl: Mesa EGL/llvmpipe packages present"
fi

need=""
"$PY" -c "import moderngl" 2>/dev/null || need="$need moderngl"
"$PY" -c "import glcontext" 2>/dev/null || need="$need glcontext"
"$PY" -c "import PIL" 2>/dev/null || need="$need pillow"
if [ -n "$need" ]; then
    echo "install-gl: pip install$need"
    # shellcheck disable=SC2086
    "$PY" -m pip install -q $need
else
    echo "install-gl: moderngl, glcontext, pillow present"
fi

# Smoke test: an EGL context must come up (prints the renderer; never fails the script,
# the tests skip with the reason when no context can be made).
"$PY" - <<'EOF' || true
try:
    import moderngl
    ctx = moderngl.create_standalone_context(backend="egl", require=430)
    print("install-gl: EGL context OK:", ctx.info["GL_RENDERER"], ctx.info["GL_VERSION"])
    ctx.release()
except Exception as e:  # noqa: BLE001
    print("install-gl: no EGL context:", e)
EOF
