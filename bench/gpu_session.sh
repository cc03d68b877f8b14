#!/usr/bin/env bash
# The GPU runs behind docs/benchmarks.md, in parts that each fit one 10-minute device call.
# usage: bench/gpu_session.sh PART OUTDIR   (PART: a, b, scaling or stages; OUTDIR is kept between parts)
# Each entry group runs under its own timeout, so one slow group cannot lose the others;
# rows accumulate in OUTDIR/results.json (bench/run.py keeps rows of entries not re-run).
set -uo pipefail
part=$1
out=$2
export PYTHONPATH=. PYTHONUNBUFFERED=1
cache=${JAXCC_BENCH_CACHE:-/tmp/jaxcc_bench_cache}
mkdir -p "$out"
nvidia-smi -L >"$out/device_$part.txt" 2>&1 || true
r() { local t=$1; shift; echo "== $* (timeout $t s)"; timeout "$t" python bench/run.py --out "$out" --cache "$cache" "$@"; echo "== rc=$?"; }
case $part in
a)
  r 70 --only cpython,cpython_pool,reference --sizes small,medium,large
  r 90 --only vm --sizes small,medium,large --batches 1,4096,65536,262144 --entry-budget-s 80
  r 200 --only loop --sizes small,medium --batches 1,256,4096,65536 --entry-budget-s 190
  r 90 --only compile --sizes small,medium --batches 1,4096,65536 --entry-budget-s 80
  r 60 --only latency,memory --sizes small --batches 1,4096
  ;;
b)
  r 80 --only lexer --sizes small,medium,large --batches 1,4096,65536 --entry-budget-s 70
  r 60 --only parser --sizes small,medium,large --batches 1,4096,65536 --entry-budget-s 50
  r 100 --only middle --sizes small,medium,large --batches 1,4096,65536 --entry-budget-s 90
  r 90 --only cpu_centric --sizes small,medium --batches 1,256,4096 --entry-budget-s 80
  r 60 --only examples
  r 120 --only xla_compile
  ;;
scaling)  # on a machine of 2 or more GPUs; also what parts a and b ran out of time for
  r 240 --only scaling --entry-budget-s 220
  r 110 --only middle --sizes small,medium,large --batches 1,4096,65536 --entry-budget-s 60
  r 80 --only compile --sizes medium --batches 1,4096,65536 --entry-budget-s 60
  r 130 --only examples
  ;;
stages)  # issue 14's breakdown, kernel by kernel, the headline, and each stage's HLO
  r 260 --only breakdown,loop,cpython_pool --sizes small,medium --batches 65536
  r 120 --only breakdown --sizes small --batches 65536 --trace /tmp/jaxcc_trace --out "$out/trace"
  echo "== stage HLO"; timeout 150 python bench/stage_hlo.py --out "$out/hlo" --batch 65536 \
    && gzip -9 "$out"/hlo/*.txt
  ;;
esac
