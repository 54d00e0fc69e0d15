#!/usr/bin/env bash
# The model families of per-layer geometry and experts on a GPU machine: their GPU tests, then
# decode throughput of random weights of three real shapes against the memory roofline. Tables to
# $OUT (throughput.md, one run per shape), each step's output to $OUT/<step>.txt.
# Needs the .whl wheels of bench/device/device_setup.sh carried (no tokenizer: the runs feed token ids).
#   bash bench/device/device_models_suite.sh COMMIT [STEP ...]   (default: tests gemma qwen gptoss)
# Steps:
#   tests     the GPU tests of the families' kernels against the torch path (attention sinks,
#             per-layer geometry, the grouped expert GEMM) and of each family's tiny checkpoint
#             through the engine on CUDA against transformers (Mistral, Gemma 3/4, Qwen3-MoE,
#             gpt-oss)
#   gputests  every GPU test (tests/serving/gpu; the tensor-parallel ones skip on one GPU)
#   gemma     bench_throughput, gemma4-12b-like (sliding layers 256 wide, full layers 512 wide with
#             one KV head), HF random weights on the GPU
#   qwen      bench_throughput, qwen3-30b-a3b (128 experts, top-8), HF random weights on the GPU
#             (its stacked experts are taken without a copy: ~61 GB once)
#   gptoss    bench_throughput, gpt-oss-20b-like (32 experts, top-4, sinks, sliding + full),
#             weights made on the host (--weights host: the expert conversion would need ~84 GB
#             of GPU memory with an HF model beside the engine)
# Every throughput step: batches 1, 16 and 64; 128-token prompts, 256 new tokens; async
# scheduling on; one timed pass; no HF comparison. Groups that fit a 10-minute call: tests gemma;
# qwen; gptoss; gputests.
set -u
commit=${1:?the commit the tree is at}
shift
out=${OUT:?where the results go}
source "$(dirname "$0")/device_env.sh"
python3 -c "import bench.suites.bench_throughput, transformers" || exit 1  # a missing package, first

step() {  # step NAME SECONDS COMMAND...: one run under a time limit
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s (limit $limit s)"
  local summary="^\||passed|failed|error"
  if grep -qE "$summary" "$out/$name.txt"; then
    grep -E "$summary" "$out/$name.txt" | tail -n 40
  else
    tail -n 30 "$out/$name.txt"
  fi
}

pytest_gpu=(python3 -m pytest -q -p no:cacheprovider -rfEs)
tput=(python3 -m bench.suites.bench_throughput --device cuda --batches 1,16,64 --prompt 128 --new 256
  --no-hf --async-scheduling on --passes 1)
steps=${*:-tests gemma qwen gptoss}
for s in $steps; do
  case $s in
    tests) step tests-models 240 "${pytest_gpu[@]}" tests/serving/gpu/test_attention_sinks.py \
      tests/serving/gpu/test_attention_geometry.py tests/serving/gpu/test_moe_gemm.py \
      tests/serving/gpu/test_families_gpu.py ;;
    gputests) step tests-gpu 540 "${pytest_gpu[@]}" tests/serving/gpu ;;
    gemma) step throughput-gemma4-12b-like 240 "${tput[@]}" --shapes gemma4-12b-like ;;
    qwen) step throughput-qwen3-30b-a3b 420 "${tput[@]}" --shapes qwen3-30b-a3b ;;
    gptoss) step throughput-gpt-oss-20b-like 480 "${tput[@]}" --shapes gpt-oss-20b-like \
      --weights host ;;
    *) echo "unknown step $s" ;;
  esac
done
