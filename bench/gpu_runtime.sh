#!/usr/bin/env bash
# On the NVIDIA device machine (../shared/gpu/README.md): the runtime's tests and the cost of one
# submission with stock kp 0.9.0, with our patches but the fence one, and with all our patches.
#   device run, carry .gpu:  bash bench/gpu_runtime.sh
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"
source .gpu/env.sh                                   # builds stock kp into .gpu/kp
python3 bench/submission_overhead.py stock-0.9.0 "$out/overhead_stock.json"
export PYTHONPATH=
GPU_KP=project source .gpu/env.sh
P=third_party/kompute/patches
export VKGRAD_CACHE=/tmp/vkgrad-cache
scripts/build_kp.sh python3 /tmp/kp_all > /tmp/b1.log 2>&1 &
KP_PATCHES="$P/0001* $P/0003* $P/0004* $P/0005*" scripts/build_kp.sh python3 /tmp/kp_nofence > /tmp/b2.log 2>&1 &
KP_PATCHES="$P/0002* $P/0003* $P/0004* $P/0005*" scripts/build_kp.sh python3 /tmp/kp_nobarrier > /tmp/b3.log 2>&1 &
wait; cat /tmp/b?.log
cp /tmp/kp_all/kp.cpython-*.so "$out"/
PYTHONPATH=/tmp/kp_nofence python3 bench/submission_overhead.py no-fence-patch "$out/overhead_nofence.json"
PYTHONPATH=/tmp/kp_all python3 bench/submission_overhead.py all-patches "$out/overhead_all.json"
echo "== runtime tests, all patches"
PYTHONPATH=/tmp/kp_all:. python3 -m pytest tests/test_runtime.py -q -p no:cacheprovider 2>&1 | tail -15
echo "== dependent chain WITHOUT the barrier patch (0001), 5 tries"
for i in 1 2 3 4 5; do
  PYTHONPATH=/tmp/kp_nobarrier:. python3 -m pytest tests/test_runtime.py -q -p no:cacheprovider -k dependent_chain 2>&1 | tail -1
done
echo "== demo, all patches"
PYTHONPATH=/tmp/kp_all:. python3 examples/demo.py
