#!/usr/bin/env bash
# The GPU runs behind docs/neural.md, in parts that each fit one 10-minute device call.
#   bash bench/neural_session.sh train SECONDS   # resume out/ckpt (carried), export $OUT/model.npz
#   bash bench/neural_session.sh eval            # pass@k, hand-written, throughput -> $OUT/eval
#   bash bench/neural_session.sh rl SECONDS      # fine-tune shipped weights from execution
#   bash bench/neural_session.sh rl_eval SECONDS # fine-tune on levels 3-5; greedy pass@1 before/after
#   bash bench/neural_session.sh judge           # pass@16 on every level, 512 programs each
#   bash bench/neural_session.sh throughput      # candidates/s at k = 16, 256, 1000 (typed mask)
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 JAXCC_CACHE_DIR=$PWD/.jax_cache
part=$1
nvidia-smi -L
case $part in
train)
  # out/ is git-ignored: a call made while the machine is still warm finds the
  # checkpoint of the call before and resumes it exactly
  # INIT=weights.npz goes on from trained weights (fresh optimizer, all levels mixed)
  # TEXTBOOK=1 mixes in level 4, textbook-style programs (train.TEXTBOOK_CYCLE)
  # LONG=1 mixes in level 5, long level-3 programs, as well (train.LONG_CYCLE)
  # CYCLE=1,3,4,5,2,3,4,5 weighs the levels otherwise (train.level_of)
  # HARD=hard.json mixes in mined programs (python -m jaxcc.neural.mine), HARD_FRAC of each batch
  # CONFIG=long: the model reading 768 source tokens (INIT weights of base grow to it)
  python -m jaxcc.neural.train --out "${CKPT:-out/ckpt2}" --config "${CONFIG:-base}" \
    --steps "${STEPS:-32000}" --batch "${BATCH:-64}" --reuse "${REUSE:-2}" \
    --seed "${SEED:-0}" --lr "${LR:-0.001}" --warmup "${WARMUP:-500}" ${INIT:+--init "$INIT"} \
    ${TEXTBOOK:+--textbook} ${LONG:+--long} ${CYCLE:+--cycle "$CYCLE"} ${HARD:+--hard "$HARD" --hard-frac "${HARD_FRAC:-0.25}"} \
    --time-limit "$2" --workers 15 --eval-every 2000 --ckpt-every 1000000 \
    --export "$OUT/model.npz" 2>&1 | tr '\r' '\n' | awk '/heldout|stopped|rror|attention/ || NR % 400 == 0'
  cp "${CKPT:-out/ckpt2}"/meta.json "${CKPT:-out/ckpt2}"/curves.png "$OUT/"
  cp "$OUT"/model.npz "$OUT"/model.json out/ ;;  # for an eval call on the same machine
eval)
  w=${W:-jaxcc/neural/weights/model.npz}
  python -m jaxcc.neural.evaluate --out "$OUT/eval" --weights "$w" --n "${N:-128}" --k 16 --probes 128 --levels "${LEVELS:-0,1,2,3,4}" \
    --throughput 2>&1 | grep -v Warning ;;
judge)
  # pass@k of the shipped weights on every level, two processes side by side (each
  # compiles its own sampler shapes on the host's cores while the other runs on the GPU;
  # --tiers 256,768 --by-length: two sampling budgets, so four compiles a process)
  export XLA_PYTHON_CLIENT_MEM_FRACTION=0.45
  w=${W:-jaxcc/neural/weights/model.npz}
  i=0
  for levels in ${LEVEL_GROUPS:-0,1,2 3,4}; do
    timeout "${LIMIT:-540}" python -m jaxcc.neural.evaluate --out "$OUT/j$i" --weights "$w" \
      --n "${N:-512}" --k 16 --probes 128 --levels "$levels" --handwritten '' --batch "${BATCH:-64}" \
      --tiers "${TIERS:-256,768}" --by-length --cache "$PWD/.jax_cache" >"$OUT/j$i.log" 2>&1 &
    i=$((i + 1))
  done
  wait
  grep -h "^[0-9] {" "$OUT"/j*.log ;;
throughput)
  # candidates per second with the typed mask (as jaxcc run --compiler neural samples)
  python - <<'PY' 2>&1 | grep -v Warning | tee "$OUT/throughput.jsonl"
import json
from jaxcc.neural import api, evaluate, weights
cfg, params = weights.load(weights.DEFAULT)
nl = api.NEURAL_LIMITS
srcs = evaluate.throughput_sources(nl)
for k in (16, 256, 1000):
    for row in evaluate.throughput(cfg, params, srcs, nl, ks=(k,), typed=True):
        print(json.dumps(row), flush=True)
PY
  ;;
rl_eval)
  # fine-tune the shipped weights from execution (levels with misses, one budget: one
  # compile), beside greedy pass@1 of the shipped weights on every level (which also
  # fills the compile cache), then greedy pass@1 of the fine-tuned weights
  export XLA_PYTHON_CLIENT_MEM_FRACTION=0.45
  ev="--n ${N:-512} --k 0 --probes 128 --levels 0,1,2,3,4,5 --handwritten '' --tiers 256,768 --by-length --cache $PWD/.jax_cache"
  mkdir -p "$OUT/rl"
  timeout 400 python -m jaxcc.neural.finetune --export "$OUT/rl/model.npz" --time-limit "$2" \
    --levels "${LEVELS:-3,4,5}" --tier 768,1280 >"$OUT/rl.log" 2>&1 &
  eval timeout 400 python -m jaxcc.neural.evaluate --out "$OUT/before" $ev >"$OUT/before.log" 2>&1 &
  wait
  eval timeout 200 python -m jaxcc.neural.evaluate --out "$OUT/after" --weights "$OUT/rl/model.npz" $ev \
    >"$OUT/after.log" 2>&1
  rm -f "$OUT"/before/eval_programs.npz "$OUT"/after/eval_programs.npz
  tail -n 3 "$OUT/rl.log"; grep -h "^[0-9] {" "$OUT/before.log" "$OUT/after.log" ;;
rl)
  python -m jaxcc.neural.finetune --export "$OUT/rl_model.npz" --time-limit "$2" \
    --levels "${LEVELS:-0,1}" 2>&1 | awk 'NR%10==1 || /rror/' ;;
esac
