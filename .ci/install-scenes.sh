#!/bin/sh
# Install what the glTF import tests and bench/gltf_vs_gltfpack.py use on a fresh Debian/Ubuntu
# machine, as root: Debian's real glTF scenes (assimp-testmodels, under /usr/share/assimp/models),
# meshoptimizer's gltfpack (the comparison) and the Python package pygltflib.
#
# Idempotent and quick when present: apt runs only when a package is missing, pip only when the
# module is missing. Usage: sh .ci/install-scenes.sh [PYTHON]   (PYTHON defaults to python3)
# Environment: DRAWOPT_SCENES_SKIP_APT=1 skips the apt step (e.g. no root).
set -eu

PY="${1:-python3}"
PKGS="assimp-testmodels gltfpack"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -n "$missing" ] && [ "${DRAWOPT_SCENES_SKIP_APT:-0}" != "1" ]; then
    echo "install-scenes: apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
else
    echo "install-scenes: assimp-testmodels, gltfpack present (or apt skipped)"
fi

if "$PY" -c "import pygltflib" 2>/dev/null; then
    echo "install-scenes: pygltflib present"
else
    echo "install-scenes: pip install pygltflib"
    "$PY" -m pip install -q "pygltflib>=1.16"
fi
