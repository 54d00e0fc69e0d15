#!/usr/bin/env bash
# The served targets on a GPU machine, one run each, tables to $OUT (serving.md) and each run's
# output to $OUT/<name>.txt. Needs what bench/device/device_setup.sh prepared (.whl, .gpuassets carried).
#   bash bench/device/device_serving_suite.sh COMMIT [NAME ...]   (default: every run below, in order)
# Runs: q1 s1 (batch 1), burst (64 short prompts at once, twice on one server: the first burst
# after start-up, then a warm one; SmolLM2), burst16 (the same from 16 client processes instead of
# 4: shows whether the clients bound the TTFT), qburst (the burst on the Qwen3-4B shape), s64 q64
# (64 and 256 streams, a server each whose max_num_seqs is the concurrency, as the offline engine
# it is compared with), s64x2 (s64 with 2 API servers: at 64 streams one API process can be the
# limit), s64x3 (64 streams, one server with 3 API processes), s256x4 (SmolLM2 at 256 streams with 4 API servers), and the servers as a user starts
# them, API server count left at its default (auto, shown as "auto (N)"): s64d q64d (64 streams),
# s256d q256d (256 streams); s64dc8 is s64d from 8 client processes (at 64 streams the 4 clients
# each use most of a core parsing events: shows whether they bound the served rate). The other
# runs name --api-server-count 1 (bench_serving's default is auto, as vigil serve's). The ratio runs (s64, s64x2, q64, s256x4 and the d runs) take 1,536 jobs
# and two offline passes: 512-job runs last 2-5 s and vary by a fifth from run to run. Groups that
# fit a 10-minute call: q1 s1 burst qburst; the GPU tests and s256x4; s64; s64x2 q64; s64d s256d;
# q64d q256d.
set -u
commit=${1:?the commit the tree is at}
shift
out=${OUT:?where the results go}
source "$(dirname "$0")/device_env.sh"
python3 -c "import vigil.cli.main, serving.server.service.app" || exit 1  # a missing package, before any run

serve() {  # serve NAME SECONDS ARGS...: one bench_serving run
  local name=$1 limit=$2
  shift 2
  timeout "$limit" python3 -m bench.suites.bench_serving --device cuda --tokenizer-dir .gpuassets/tok \
    --modes separate --client-procs 4 --kv-cache-mb 24576 --json-dir "/tmp/json-$name" "$@" \
    > "$out/$name.txt" 2>&1
  grep "^| sep" "$out/$name.txt" || tail -n 30 "$out/$name.txt"
}

ratio_jobs=(--num-prompts 1536 --input-len 128 --output-len 256)  # the ratio runs' jobs
one=(--api-server-count 1)  # the runs measured with one API process before auto was the default
runs=${*:-q1 s1 burst s64 q64}
for run in $runs; do
  case $run in
    q1) serve q1 200 "${one[@]}" --shape qwen3-4b --concurrency 1 --num-prompts 8 --input-len 128 --output-len 256 ;;
    s1) serve s1 120 "${one[@]}" --shape smollm2-135m --concurrency 1 --num-prompts 16 --input-len 128 --output-len 256 ;;
    burst) serve burst 120 "${one[@]}" --shape smollm2-135m --concurrency 64,64 --num-prompts 64 --input-len 32 --output-len 64 ;;
    burst16) serve burst16 120 "${one[@]}" --shape smollm2-135m --concurrency 64,64 --num-prompts 64 --input-len 32 --output-len 64 \
      --client-procs 16 ;;
    qburst) serve qburst 150 "${one[@]}" --shape qwen3-4b --concurrency 64,64 --num-prompts 64 --input-len 32 --output-len 64 ;;
    s64) serve s64 330 "${one[@]}" --shape smollm2-135m --server-per-concurrency --concurrency 64,256 "${ratio_jobs[@]}" ;;
    s64x2) serve s64x2 330 --shape smollm2-135m --api-server-count 2 --server-per-concurrency --concurrency 64,256 "${ratio_jobs[@]}" ;;
    s256x4) serve s256x4 260 --shape smollm2-135m --api-server-count 4 --concurrency 256 "${ratio_jobs[@]}" ;;
    q64) serve q64 480 "${one[@]}" --shape qwen3-4b --server-per-concurrency --concurrency 64,256 "${ratio_jobs[@]}" ;;
    s64x3) serve s64x3 200 --shape smollm2-135m --api-server-count 3 --concurrency 64 "${ratio_jobs[@]}" ;;
    s64d) serve s64d 200 --shape smollm2-135m --concurrency 64 "${ratio_jobs[@]}" ;;
    s64dc8) serve s64dc8 200 --shape smollm2-135m --concurrency 64 --client-procs 8 "${ratio_jobs[@]}" ;;
    s256d) serve s256d 200 --shape smollm2-135m --concurrency 256 "${ratio_jobs[@]}" ;;
    q64d) serve q64d 300 --shape qwen3-4b --concurrency 64 "${ratio_jobs[@]}" ;;
    q256d) serve q256d 270 --shape qwen3-4b --concurrency 256 "${ratio_jobs[@]}" ;;
    *) echo "unknown run $run" ;;
  esac
done
