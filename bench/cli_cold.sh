#!/usr/bin/env bash
# Cold and warm `jaxcc run` on this machine (issue 14's compile time, issue 17's budgets):
# `while True: pass` and examples/collatz.py with an empty persistent cache, with the
# compiler's default (split jits on several threads for a small batch off the CPU) and
# with JAXCC_SPLIT_COMPILE=0 (one jit; on the CPU the variable changes nothing), then
# warm runs. One JSON line per run in $OUT/cold.jsonl (wall / user / sys seconds of the
# `jaxcc run` process, exit status, the last stderr line); the per-jit XLA compile and
# tracing lines of each cold run in $OUT/compiles_NAME.txt.
#   bash bench/cli_cold.sh                     # cold and warm, split and one jit
#   CLI_COLD_SET=exec bash bench/cli_cold.sh   # warm runs with and without exec_cache
#   CLI_COLD_SET=timeout bash bench/cli_cold.sh  # the default --timeout: cold and warm
#   CLI_COLD_SET=examples bash bench/cli_cold.sh  # --json examples/*.py and collatz.py, and CPython
set -uo pipefail
export PYTHONPATH=${PYTHONPATH:-.} PYTHONUNBUFFERED=1
out=${OUT:-/tmp/cli_cold}
mkdir -p "$out"
inf=$(mktemp -d)/inf.py
printf 'while True:\n    pass\n' >"$inf"
nvidia-smi -L 2>/dev/null | tee "$out/device.txt"

run() {  # run NAME CACHE_DIR ENV... -- ARGS...
  local name=$1 cache=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  env "${envs[@]}" JAXCC_CACHE_DIR="$cache" JAX_LOG_COMPILES=1 \
    python bench/cli_cold_run.py "$name" "$out" "$@"
}

c=$(mktemp -d)
if [ "${CLI_COLD_SET:-all}" = timeout ]; then
  # the default time limit (cli.DefaultTimeout): a runaway, the examples and a loop of a
  # million iterations (~1.5e7 instructions), each cold (empty cache) and then warm
  mil=$(dirname "$inf")/million.py
  printf 's = 0\ni = 0\nwhile i < 1000000:\n    s = (s * 31 + i) %% 1000003\n    i = i + 1\nprint(s)\n' >"$mil"
  run inf_cold "$c/a" -- "$inf"
  run examples_json_cold "$c/b" -- --json examples/*.py
  run million_cold "$c/c" -- "$mil"
  run inf_warm "$c/a" -- "$inf"
  run examples_json_warm "$c/b" -- --json examples/*.py
  run million_warm "$c/c" -- "$mil"
  run inf_warm2 "$c/a" -- "$inf"
  exit 0
fi
if [ "${CLI_COLD_SET:-all}" = examples ]; then
  # issue 14's first symptom: `jaxcc run --json examples/*.py` cold and warm (its output
  # kept in $OUT/examples.json), collatz.py cold and warm, and CPython running each
  # example in its own process, one after another (cpython.json). The CLI's defaults: on
  # a GPU machine `--device auto` runs so few files on the host's CPU (CLI_DEVICE=default
  # times the GPU instead)
  dev=(--device "${CLI_DEVICE:-auto}")
  run examples_json_cold "$c/b" -- "${dev[@]}" --json examples/*.py
  run examples_json_warm "$c/b" -- "${dev[@]}" --json examples/*.py
  run collatz_cold "$c/c" -- "${dev[@]}" examples/collatz.py
  run collatz_warm "$c/c" -- "${dev[@]}" examples/collatz.py
  JAXCC_CACHE_DIR="$c/b" python -m jaxcc run "${dev[@]}" --json examples/*.py >"$out/examples.json"
  python - "$out/cpython.json" examples/*.py <<'PY'
import json, subprocess, sys, time
t0 = time.perf_counter()
outs = {f: subprocess.run([sys.executable, f], capture_output=True, text=True).stdout
        for f in sys.argv[2:]}
with open(sys.argv[1], "w") as f:
    json.dump({"wall_s": round(time.perf_counter() - t0, 3), "stdout": outs}, f)
PY
  exit 0
fi
if [ "${CLI_COLD_SET:-all}" = exec ]; then
  # the executable cache (jaxcc/exec_cache.py): warm runs with it (the default) and
  # without it (JAXCC_EXEC_CACHE=0: the persistent compilation cache alone)
  run inf_cold_split "$c/b" -- "$inf"
  run inf_warm_exec "$c/b" -- "$inf"
  run inf_warm_noexec "$c/b" JAXCC_EXEC_CACHE=0 -- "$inf"
  run collatz_cold_split "$c/c" -- examples/collatz.py
  run collatz_warm_exec "$c/c" -- examples/collatz.py
  run collatz_warm_noexec "$c/c" JAXCC_EXEC_CACHE=0 -- examples/collatz.py
  run collatz_warm_exec2 "$c/c" -- examples/collatz.py
  run examples_json_cold_split "$c/e" -- --json examples/*.py
  run examples_json_warm_exec "$c/e" -- --json examples/*.py
  exit 0
fi
run inf_cold_onejit "$c/a" JAXCC_SPLIT_COMPILE=0 -- "$inf"
run inf_cold_split "$c/b" JAXCC_SPLIT_COMPILE=1 -- "$inf"
run collatz_cold_split "$c/c" JAXCC_SPLIT_COMPILE=1 -- examples/collatz.py
run collatz_cold_onejit "$c/d" JAXCC_SPLIT_COMPILE=0 -- examples/collatz.py
run inf_warm_split "$c/b" JAXCC_SPLIT_COMPILE=1 -- "$inf"
run collatz_warm_split "$c/c" JAXCC_SPLIT_COMPILE=1 -- examples/collatz.py
run examples_json_cold_split "$c/e" JAXCC_SPLIT_COMPILE=1 -- --json examples/*.py
