#!/usr/bin/env bash
# bench/perm_check.py with passes switched off one at a time (run on the device machine).
source bench/gpu_env.sh >/dev/null
for d in none memory fuse_horizontal fuse simplify,cse; do
  echo "== disabled: $d"
  VKGRAD_DISABLE_PASSES=$([ "$d" = none ] && echo "" || echo "$d") python3 bench/perm_check.py 2>&1 | grep "n=300 permutation"
done
VKGRAD_MAX_IN_FLIGHT=0 python3 bench/perm_check.py 2>&1 | grep "n=300 permutation" | sed 's/^/in flight 0: /'
