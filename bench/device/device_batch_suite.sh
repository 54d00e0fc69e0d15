#!/usr/bin/env bash
# The engine at batch on a GPU machine, in one call of under 10 minutes (the steps' limits add up
# to 9): where a batch decode step's GPU time goes, prefill speed and its cost to running decodes,
# and decode throughput against the roofline. Tables to $OUT (profile_step.md, prefill.md,
# throughput.md), each step's output to $OUT/<step>.txt: 7 files, within the 8 a call brings back.
# Needs the .whl wheels of bench/device/device_setup.sh carried (no tokenizer: the runs feed token ids).
#   bash bench/device/device_batch_suite.sh COMMIT [STEP ...]   (default: every step below, in order)
# Steps:
#   kq       bench_profile_step --kernels, Qwen3-4B at 64 and 256 sequences (one engine)
#   ks       bench_profile_step --kernels, SmolLM2-135M at 64 sequences
#   prefill  bench_prefill, Qwen3-4B: 4,096-token prompts at batch 1 and 16, and 32 decode streams'
#            TPOT alone and while one is chunked in, at the engine's token budget (2,048) and 8,192
#   tput     bench_throughput, Qwen3-4B and SmolLM2-135M at 64 and 256, async scheduling on, three
#            pinned passes each (prompt 128 + 512 new tokens), no HF comparison
set -u
commit=${1:?the commit the tree is at}
shift
out=${OUT:?where the results go}
source "$(dirname "$0")/device_env.sh"
# a missing package, before any run
python3 -c "import bench.suites.bench_profile_step, bench.suites.bench_prefill, bench.suites.bench_throughput" || exit 1

step() {  # step NAME SECONDS MODULE ARGS...: one benchmark under a time limit
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" python3 -m "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s (limit $limit s)"
  grep "^|" "$out/$name.txt" || tail -n 30 "$out/$name.txt"
}

steps=${*:-kq ks prefill tput}
for s in $steps; do
  case $s in
    kq) step kernels-qwen3-4b 150 bench.suites.bench_profile_step --shape qwen3-4b --batch 64,256 --kernels ;;
    ks) step kernels-smollm2-135m 60 bench.suites.bench_profile_step --shape smollm2-135m --batch 64 --kernels ;;
    prefill) step prefill-qwen3-4b 130 bench.suites.bench_prefill --shape qwen3-4b --batches 1,16 --streams 32 \
      --max-num-batched-tokens 2048,8192 ;;
    tput) step throughput 200 bench.suites.bench_throughput --shapes qwen3-4b,smollm2-135m --batches 64,256 --no-hf \
      --async-scheduling on --passes 3 ;;
    *) echo "unknown step $s" ;;
  esac
done
