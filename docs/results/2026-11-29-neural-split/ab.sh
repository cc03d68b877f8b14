# usage: bash _ab/ab.sh ROUNDS -- cold neural CLI at 2 cores, base vs new, alternating
export JAX_PLATFORMS=cpu TIMEFORMAT=%R
root=$PWD
for r in $(seq 1 $1); do
  for v in new base; do
    if [ $v = base ]; then cd $root/_ab/base; else cd $root; fi
    d=$(mktemp -d)
    { time JAXCC_CACHE_DIR=$d PYTHONPATH=. taskset -c 0,1 python3 $root/_ab/prof.py run --json --compiler neural $root/examples/*.py > $OUT/$v$r.json 2> $OUT/$v$r.err ; } 2> $OUT/$v$r.time
    echo "$v $r $(cat $OUT/$v$r.time) s; $(tail -1 $OUT/$v$r.err)"
    grep "choose\|_part" $OUT/$v$r.err
  done
  cmp $OUT/new$r.json $OUT/base$r.json && echo "stdout identical"
done
cd $root
