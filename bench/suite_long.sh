#!/usr/bin/env bash
# Issue 11's whole table in one command, in one run on one machine:
#   1. the engine rows: kvs-bench --suite long (prefill at 512 to 8,192
#      tokens, decode at context 0 / 4,096 / 16,384 with the share of the
#      measured bandwidth, 8 forks x 64, KV bytes per token; llama.cpp's
#      column measured in the same run when --llama-cpp is given);
#   2. the service rows: kvs-bench-service --table restore (a 2,000-token
#      session back after a restart, page cache warm and cold, against the
#      disk's read bandwidth measured in the same run) and --table
#      grpc-prefill (prefill over gRPC against in-process, 512 and 2,000
#      tokens, with the same --kv-type on both sides).
# Each table states its targets and whether this run meets them.
#
#   bench/suite_long.sh --model M.gguf [--kv-type f16|bf16|q8_0|f32]
#       [--amx-attention] [--quick] [--runs N] [--rounds N] [--threads N]
#       [--llama-cpp LLAMA_CPP/build/bin --llama-model TWIN.gguf]
#
# The binaries come from build/bin (BIN=DIR for others). Exit code: the
# first failing step's. Takes 10 to 30 minutes (--quick skips decode at
# 16,384 tokens).
set -euo pipefail

bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/bin}
model=""
kv_type=f16
suite_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=$2; suite_args+=("$1" "$2"); shift 2 ;;
    --kv-type) kv_type=$2; suite_args+=("$1" "$2"); shift 2 ;;
    --runs | --rounds | --threads | --llama-cpp | --llama-model) suite_args+=("$1" "$2"); shift 2 ;;
    --amx-attention | --quick) suite_args+=("$1"); shift ;;
    *) echo "suite_long.sh: unknown argument (see the header for usage)" >&2; exit 2 ;;
  esac
done
if [[ -z "$model" ]]; then
  echo "usage: bench/suite_long.sh --model M.gguf [--kv-type T] [--amx-attention] [--quick] [--runs N] [--rounds N]" \
       "[--threads N] [--llama-cpp DIR --llama-model TWIN.gguf]" >&2
  exit 2
fi
for b in kvs-bench kvs-bench-service kvsessiond; do
  [[ -x "$bin/$b" ]] || { echo "suite_long.sh: $bin/$b is missing (build first, or set BIN)" >&2; exit 2; }
done

echo "## Engine rows"
"$bin/kvs-bench" --suite long "${suite_args[@]}"
echo
echo "## Restore after a restart"
"$bin/kvs-bench-service" --model "$model" --kv-type "$kv_type" --table restore --repeats 5
echo
echo "## Prefill over gRPC against in-process"
"$bin/kvs-bench-service" --model "$model" --kv-type "$kv_type" --table grpc-prefill --repeats 3
