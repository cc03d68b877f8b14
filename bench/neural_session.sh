#!/usr/bin/env bash
# The GPU runs behind docs/neural.md, in parts that each fit one 10-minute device call.
#   bash bench/neural_session.sh train SECONDS   # resume out/ckpt (carried), export $OUT/model.npz
#   bash bench/neural_session.sh eval            # pass@k, hand-written, throughput -> $OUT/eval
#   bash bench/neural_session.sh rl SECONDS      # fine-tune shipped weights from execution
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
rl)
  python -m jaxcc.neural.finetune --export "$OUT/rl_model.npz" --time-limit "$2" \
    --levels "${LEVELS:-0,1}" 2>&1 | awk 'NR%10==1 || /rror/' ;;
esac
