#!/bin/bash
# bench/run.py on a quiet machine (the workplace's device host), pinned to 2 cores as the CI/dev
# machine has: the shared dev machine's load (3-8 on 2 cores) swamps the figures. Run from the
# repository root; writes $OUT/bench*.json and the logs. The host is another CPU than the dev
# machine's, so its figures say where the code stands, not whether the dev machine meets a target.
#   CORES=0,1 SIZES=10000,100000 KINDS_1M= JSON=bench-small bash bench/device_bench.sh
set -o pipefail
: "${OUT:=out}" "${CORES:=0,1}" "${SIZES:=10000,100000,1000000}" "${KINDS_1M:=quads,gpu-driven}"
: "${JSON:=bench}" "${REPEAT:=3}" "${BENCH_S:=560}"
mkdir -p "$OUT"
[ -e drawopt/passes ] || ln -s ../passes drawopt/passes   # drawopt.passes without an install
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
rm -f drawopt/*.so
python3 setup.py build_ext --inplace -j 8 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
python3 -c "import numpy, networkx, Cython; print('numpy', numpy.__version__, 'networkx', networkx.__version__, 'Cython', Cython.__version__)"
timeout "$BENCH_S" taskset -c "$CORES" python3 bench/run.py --sizes "$SIZES" --kinds-1m "$KINDS_1M" \
    --repeat "$REPEAT" --json "$OUT/$JSON.json" 2>&1 | tee "$OUT/$JSON.log"
