#!/bin/bash
# The H200 run of docs/performance.md ("Frames"): set up GL and the wheels, build the extensions,
# calibrate the gl target, then bench/replay_frames.py. Run from the repository root on the device
# machine with GL debs in $GL_DEBS and wheels in $WHEELS; writes under $OUT.
#   STAGES="calibrate bench" KINDS=frame DRAWS=10000,100000 bash bench/device_frames.sh
set -o pipefail
: "${OUT:=out}" "${GL_DEBS:=../gl}" "${WHEELS:=../../.whl}" "${STAGES:=calibrate bench}"
: "${KINDS:=quads,frame,gpu-driven,bundle}" "${DRAWS:=10000,100000}" "${PROFILE:=$OUT/gl.json}"
mkdir -p "$OUT"
for f in "$GL_DEBS"/*.deb; do dpkg -x "$f" /; done; ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
rm -f drawopt/*.so
python3 setup.py build_ext --inplace -j 8 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
python3 -c "from drawopt.replay import available; print(available())"
for st in $STAGES; do
  case $st in
    calibrate) timeout "${CAL_S:-240}" python3 -m drawopt calibrate -o "$OUT/gl.json" $CAL_ARGS 2>&1 | tee "$OUT/calibrate.log" ;;
    bench) timeout "${BENCH_S:-300}" python3 bench/replay_frames.py --kinds "$KINDS" --draws "$DRAWS" \
             --target-profile "$PROFILE" --profile --json "$OUT/${JSON:-frames}.json" $BENCH_ARGS 2>&1 | tee "$OUT/${JSON:-frames}.log" ;;
    budget) timeout 150 python3 bench/replay_frames.py --kinds frame --draws 100000 --targets d3d12 \
             --prim-budget 1024 --json "$OUT/budget.json" 2>&1 | tee "$OUT/budget.log" ;;
  esac
done
