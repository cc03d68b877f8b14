#!/usr/bin/env bash
# Before/after timings of variants of jaxcc's files in one device call, one process each:
#   bash bench/ab_run.sh [--loop] [--size S] -- NAME=DIR1+DIR2 ...   (or only the variants)
# Each DIR (under $AB_VARIANTS, default _ab/variants) holds replacement files for jaxcc/
# (e.g. the files of an earlier commit: git show REV:jaxcc/lexer.py > DIR/lexer.py); NAME=
# with no DIR times the working tree as it is. Lines of bench/ab_time.py go to
# $OUT/ab.jsonl (and stdout), its stderr to $OUT/ab.err. A variant's own environment:
# AB_ENV_NAME="VAR=value ..." (e.g. AB_ENV_nomof="XLA_FLAGS=--xla_disable_hlo_passes=
# multi_output_fusion" for a variant named nomof, XLA's flags for that process alone).
set -u
opts=()
case " $* " in
*" -- "*)  # options before --, variants after
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done
  shift ;;
esac
[ $# -gt 0 ] || { echo "usage: bash bench/ab_run.sh [--loop] [--size S] -- NAME=DIR1+DIR2 ..." >&2; exit 2; }
export PYTHONPATH=. PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/abcache}
vdir=$(pwd)/${AB_VARIANTS:-_ab/variants}
out=${OUT:-/tmp/ab_out}
mkdir -p "$out" && touch "$out/ab.jsonl"
nvidia-smi -L >"$out/device.txt" 2>&1 || true
for spec in "$@"; do
  name=${spec%%=*}; dirs=${spec#*=}
  rm -rf /tmp/ab_tree && cp -r . /tmp/ab_tree
  for d in ${dirs//+/ }; do cp "$vdir/$d"/*.py /tmp/ab_tree/jaxcc/; done
  envvar="AB_ENV_${name//[^A-Za-z0-9_]/_}"
  before=$(wc -l <"$out/ab.jsonl")
  # shellcheck disable=SC2086  # the variant's VAR=value words, split on purpose
  (cd /tmp/ab_tree && env ${!envvar:-} timeout 180 python bench/ab_time.py "$name" "${opts[@]}" >>"$out/ab.jsonl" 2>>"$out/ab.err")
  rc=$?
  # a variant that dies before its line (an unknown XLA flag, the timeout) says so here
  if [ "$(wc -l <"$out/ab.jsonl")" -gt "$before" ]; then tail -1 "$out/ab.jsonl"
  else echo "{\"variant\": \"$name\", \"error\": \"exit $rc, no result (see ab.err)\"}"; fi
done
