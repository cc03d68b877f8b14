#!/usr/bin/env bash
# The GPU run behind docs/neural.md sections 7-9: the paper's neural and hybrid claims
# (python -m jaxcc.neural.claims), in one device call of at most 10 minutes.
#   bash bench/hybrid_session.sh [WEIGHTS]     # default: the shipped model
# Writes $OUT/claims/{results.json,p_success.png,throughput.png} and $OUT/claims.log
# (4 files, 2 levels deep). results.json is rewritten after every stage, so a run cut
# short by the time limit still brings back what it measured. Extra options for the
# claims command go in CLAIMS_ARGS (e.g. CLAIMS_ARGS="--n 16 --big-n 1").
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
w=${1:-jaxcc/neural/weights/model.npz}
nvidia-smi -L
timeout "${LIMIT_S:-570}" python -m jaxcc.neural.claims --out "$OUT/claims" --weights "$w" \
  ${CLAIMS_ARGS:-} 2>&1 | grep -v Warning | tee "$OUT/claims.log" | tail -40
