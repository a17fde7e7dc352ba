#!/usr/bin/env bash
# One device-machine session: `bash bench/gpu_run.sh STEP...` (carry .gpu). Each step runs with
# its own time limit and the next runs whatever happened. The device tool returns at most 8
# files, so logs and JSON are written to a work folder and come back as $OUT/results.tgz.
source bench/gpu_env.sh
export PYTHONUNBUFFERED=1
final=$OUT
export OUT=/tmp/vkgrad-results
mkdir -p "$OUT"
trap 'tar -czf "$final/results.tgz" -C "$OUT" .' EXIT
run() {   # name limit_s command...
  local name=$1 limit=$2; shift 2
  echo "=== $name ($(date +%T))"
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "=== $name rc=$?"
  tail -n 25 "$OUT/$name.log"
  tar -czf "$final/results.tgz" -C "$OUT" .   # after every step: a run cut short keeps these
}
for step in "$@"; do
  case $step in
    tests) run tests 240 python3 -m pytest -q -p no:cacheprovider tests/test_attention_kernels.py \
             tests/test_scan_kernels.py tests/test_nn.py tests/test_async.py tests/test_runtime.py \
             tests/test_fusion_vulkan.py tests/test_jit.py tests/test_kernels.py tests/test_matmul.py \
             tests/test_debug_nans.py tests/test_check_kernels.py tests/test_long_run.py \
             tests/test_reliability.py tests/test_fastpath.py tests/test_vulkan_ops.py ;;
    suite) PYTHONPATH=$PYTHONPATH:$PWD/.gpu/pylib run suite ${SUITE_LIMIT:-540} python3 -m pytest -q -p no:cacheprovider \
             --junitxml="$OUT/suite.xml" tests --ignore=tests/test_notebook.py ${SUITE_ARGS:-} ;;
    permcheck) run permcheck 60 python3 bench/perm_check.py ;;
    longrun) run longrun 200 python3 bench/long_run.py --out "$OUT/long_run.json" ;;
    fuzz) PYTHONPATH=$PYTHONPATH:$PWD/.gpu/pylib run fuzz 150 python3 -m pytest -q -p no:cacheprovider tests/test_fuzz.py ;;
    attention) run attention 200 python3 bench/bench_attention.py --sweep --budget 80 ;;
    attnpaths) run attnpaths ${ATTNPATHS_LIMIT:-200} python3 bench/bench_attention_paths.py --rounds 5 ${ATTNPATHS_ARGS:-} ;;
    attnhalf) run attnhalf ${ATTNHALF_LIMIT:-240} python3 bench/bench_attention_paths.py --rounds 5 --dtype ${ATTNHALF_DTYPE:-f16} ${ATTNHALF_ARGS:-} ;;
    scan) run scan 90 python3 bench/bench_scan.py ;;
    conv) run conv 400 python3 bench/bench_conv.py --rounds 5 ;;
    convsweep) run convsweep 300 python3 bench/bench_conv.py --rounds 5 --sweep --no-resnet ;;
    convdirect) run convdirect 300 python3 bench/bench_conv.py --rounds 5 --direct --only none ;;
    convr18) run convr18 300 python3 bench/bench_conv.py --rounds 3 --no-resnet --only r18_ ;;
    transformer) run transformer 240 python3 bench/bench_transformer.py --rounds 5 --steps 10 ;;
    mlp100) run mlp100 150 python3 bench/bench_mlp.py ;;
    mlphooks) for d in fuse_multi_output fuse_multi_output,fuse_epilogues,fuse_producers; do
                VKGRAD_DISABLE_PASSES=$d run "mlp_off_${d//,/_}" 100 python3 bench/bench_mlp.py \
                  --peers none --rounds 3 --label "passes off: $d"; done ;;
    mlp1) run mlp1 150 python3 bench/bench_mlp.py --read-every 1 ;;
    call) run call 90 python3 bench/profile_call.py ;;
    calllm) run calllm 60 python3 bench/profile_call.py --lm transformer ;;
    compile) run compile 120 python3 bench/bench_compile.py ;;
    fusion) run fusion 200 python3 bench/bench_fusion.py ;;
    steptime) run steptime 200 bash -c 'python3 bench/step_time.py --model transformer --steps 50 && python3 bench/step_time.py --model mamba --steps 50' ;;
    rebind) run rebind 200 bash -c 'for b in same host device; do python3 bench/step_time.py --model transformer --steps 30 --batches $b; done' ;;
    lm) run lm 280 python3 bench/bench_lm.py ;;
    lmt) run lmt ${LMT_LIMIT:-200} python3 bench/bench_lm.py --models transformer ;;
    lmmed) run lmmed ${LMMED_LIMIT:-160} python3 bench/bench_lm.py --preset medium --models transformer --steps 10 ;;
    convquick) run convquick 60 python3 bench/bench_conv.py --rounds 3 --no-resnet \
             --only c64_56_s1,c128_28_s1,c256_14_s2 ;;
    lmbf16) run lmbf16 280 python3 bench/bench_lm.py --preset medium --precision bf16 --models transformer --steps 10 ;;
    matmul) run matmul 150 python3 bench/bench_matmul.py --only tf_qkv,tf_qkv_dX,tf_qkv_dW,tf_fc,tf_fc_dX,tf_fc_dW,tf_out,tf_out_dX,tf_out_dW,tf_scores,tf_scores_qkT,tf_pv,mlp_x@w1,mlp_h@w2,mlp_dw2=hT@g,mlp_dh=g@w2T,mlp_dw1=xT@g,mlp_h@w3,mlp_dh2=g@w3T,mlp_dw3=hT@g ;;
    hooks) run hooks 150 python3 bench/bench_matmul_hooks.py ;;
    coopattn) run coopattn ${COOPATTN_LIMIT:-150} python3 bench/coop_attention_probe.py \
             --out "$OUT/coopattention_$(date +%F).json" ;;
    coopbwd) run coopbwd ${COOPBWD_LIMIT:-300} python3 bench/coop_attention_bwd_probe.py ${COOPBWD_ARGS:-} \
             --out "$OUT/coopattnbwd_$(date +%F).json" ;;
    occupancy) run occupancy 120 python3 bench/occupancy_probe.py --out "$OUT/occupancy_$(date +%F).json" ;;
    coop) run coop 200 python3 bench/coop_matmul_probe.py ${COOP_ARGS:-} --out "$OUT/coop_matmul_$(date +%F).json" ;;
    barriers) run barriers ${BARRIERS_LIMIT:-200} python3 bench/bench_barriers.py --rounds 5 --steps 20 ;;
    takegrad) run takegrad 40 python3 bench/bench_take_grad.py --out "$OUT/take_grad_$(date +%F).json" ;;
    half) run half 150 python3 bench/bench_half.py --runs 10 --out "$OUT/half_$(date +%F).json" ;;
    mp) run mp 280 python3 bench/bench_mixed_precision.py --preset small --backend vulkan --out "$OUT/mp_$(date +%F).json" ;;
    controlflow) run controlflow 200 python3 bench/bench_control_flow.py --rounds 5 --bodies rnn --loops secondary ;;
    scancompile) run scancompile 400 python3 bench/bench_control_flow.py --compile-only --compile-rounds 3 ;;
    while) run while 120 python3 bench/bench_while.py --rounds 7 ;;
    case) run case 90 python3 bench/check_case.py ${CASES:-conv2d_pairs_lhs_dilation} ;;
    dataparallel) run dataparallel 560 python3 bench/bench_data_parallel.py --ranks ${RANKS:-1,2} \
             --preset ${PRESETS:-small,medium} --steps 10 --rounds 3 --timeout 250 ;;
  esac
done
