#!/usr/bin/env bash
# Cold and warm `jaxcc run` on this machine (issue 14's compile time, issue 17's budgets):
# `while True: pass` and examples/collatz.py with an empty persistent cache, with the
# compiler's default (split jits on several threads for a small batch off the CPU) and
# with JAXCC_SPLIT_COMPILE=0 (one jit), then warm runs. One JSON line per run in
# $OUT/cold.jsonl (wall / user / sys seconds, exit status, the last stderr line);
# per-jit XLA compile times of two cold runs in $OUT/compiles_*.txt.
#   bash bench/cli_cold.sh
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
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  env "${envs[@]}" JAXCC_CACHE_DIR="$cache" JAX_LOG_COMPILES=1 \
    /usr/bin/time -f '%e %U %S' -o /tmp/time.txt python -m jaxcc run "$@" \
    >/tmp/stdout.txt 2>/tmp/stderr.txt
  rc=$?
  t1=$(date +%s.%N)
  read -r wall user sys </tmp/time.txt
  grep -E "Finished XLA compilation|Finished tracing|Compiling " /tmp/stderr.txt \
    >"$out/compiles_$name.txt" 2>/dev/null || true
  last=$(grep -v -E "^(W|I)[0-9]{4}|Finished|Compiling|jax_log_compiles" /tmp/stderr.txt | tail -1 |
    tr -d '"\\' | cut -c1-200)
  printf '{"run": "%s", "wall_s": %s, "user_s": %s, "sys_s": %s, "exit": %d, "stdout_lines": %d, "stderr_last": "%s"}\n' \
    "$name" "$wall" "$user" "$sys" "$rc" "$(wc -l </tmp/stdout.txt)" "$last" | tee -a "$out/cold.jsonl"
}

c=$(mktemp -d)
run inf_cold_onejit "$c/a" JAXCC_SPLIT_COMPILE=0 -- "$inf"
run inf_cold_split "$c/b" JAXCC_SPLIT_COMPILE=1 -- "$inf"
run collatz_cold_split "$c/c" JAXCC_SPLIT_COMPILE=1 -- examples/collatz.py
run collatz_cold_onejit "$c/d" JAXCC_SPLIT_COMPILE=0 -- examples/collatz.py
run inf_warm_split "$c/b" JAXCC_SPLIT_COMPILE=1 -- "$inf"
run collatz_warm_split "$c/c" JAXCC_SPLIT_COMPILE=1 -- examples/collatz.py
run examples_json_cold_split "$c/e" JAXCC_SPLIT_COMPILE=1 -- --json examples/*.py
rm -f "$out"/compiles_inf_warm* "$out"/compiles_collatz_warm* "$out"/compiles_examples*
