#!/bin/sh
# Install what the capture importer's tests (tests/test_import_capture.py) need, as root:
# spirv-tools (spirv-dis: the importer reads the fixtures' SPIR-V with it) and the Python
# package orjson (fast JSON Lines). With DRAWOPT_CAPTURE_TOOLS=1 also the Debian packages the
# capture script (tools/capture/capture.sh) needs: gfxreconstruct, lavapipe, vkcube, vkd3d-demos,
# glmark2, Xvfb (its test is marked slow and skipped without them).
#
# Idempotent and quick when everything is present. Usage: sh .ci/install-capture.sh [PYTHON]
# Environment: DRAWOPT_CAPTURE_SKIP_APT=1 skips the apt step (e.g. no root).
set -eu

PY="${1:-python3}"
PKGS="spirv-tools"
if [ "${DRAWOPT_CAPTURE_TOOLS:-0}" = "1" ]; then
    PKGS="$PKGS gfxreconstruct mesa-vulkan-drivers vulkan-tools vkd3d-demos glmark2-x11 xvfb xauth"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ] && [ "${DRAWOPT_CAPTURE_SKIP_APT:-0}" != "1" ]; then
    echo "install-capture: apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-capture: Debian packages present ($PKGS)"
fi

if "$PY" -c "import orjson" 2>/dev/null; then
    echo "install-capture: orjson present"
else
    echo "install-capture: pip install orjson"
    "$PY" -m pip install -q orjson
fi
