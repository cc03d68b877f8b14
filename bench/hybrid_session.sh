#!/usr/bin/env bash
# The GPU runs behind docs/neural.md section 9: the paper's neural and hybrid claims
# (python -m jaxcc.neural.claims), in two parts that each fit one 10-minute device call.
#   bash bench/hybrid_session.sh claims [WEIGHTS]  # p_correct, P_success(k), k_99, wrong-but-accepted,
#                                                  # learned code -> $OUT/claims/
#   bash bench/hybrid_session.sh timing [WEIGHTS]  # eq. 9-11 and 14: neural path, deterministic
#                                                  # compiler, router, hybrid, CPython -> $OUT/timing/
# Each part writes $OUT/<part>/results.json and its PNGs and $OUT/<part>.log (at most 4
# files, 2 levels deep). results.json is rewritten after every stage, so a part cut short
# by the time limit still brings back what it measured. Extra options for the claims
# command go in CLAIMS_ARGS (e.g. CLAIMS_ARGS="--n 16 --big-n 1"); WEIGHTS defaults to
# the shipped model.
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
part=$1
w=${2:-jaxcc/neural/weights/model.npz}
case $part in
claims) opts="--no-timing" ;;
timing) opts="--timing-only" ;;
*) echo "usage: bash bench/hybrid_session.sh claims|timing [WEIGHTS]"; exit 2 ;;
esac
nvidia-smi -L
timeout "${LIMIT_S:-570}" python -m jaxcc.neural.claims --out "$OUT/$part" --weights "$w" $opts \
  ${CLAIMS_ARGS:-} 2>&1 | grep -v Warning | tee "$OUT/$part.log" | tail -40
