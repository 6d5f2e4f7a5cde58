#!/usr/bin/env bash
# The project's device check, run first whenever a GPU can be reached (through the device tool):
#   bash ../shared/gpu/prepare          # here: .gpu/whl, the wheels the device image lacks (LoadGen, ...)
#   run: command "bash bench/gpu_check.sh", carry [".gpu"], timeout_s 600
# It installs what the device image lacks from .gpu/whl (no network there), then runs STEPS in order, each with
# its own timeout inside BUDGET seconds, and prints one screen; logs and the results store land in $OUT (or
# ./gpu-check-out). STEPS (default tests,serve,bench,train,quick,gemm,rest):
#   tests  pytest -m cuda, the language-model serving cases
#   serve  a full-size llama3.1-8b (random weights) bf16 served by the static engine, Offline, 64 x 512/128
#   bench  bench/serve_vs_bare.py: the same against transformers called bare, and the build against a bare build
#   train  LLM training (full widths, 4 layers, 8k tokens) beside the bare loop (bench/train_llm.py)
#   quick  accelbench run quick --device cuda
#   gemm   an 8192^3 bf16 GEMM beside a bare event-timed loop
#   rest   pytest -m cuda, the other cases (about 3 minutes on an H200)
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
T0=$SECONDS
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
log() { echo "=== [$((SECONDS - T0)) s] $*"; }
BUDGET=${BUDGET:-540}
t() { local left=$((BUDGET - (SECONDS - T0))); (( left < 15 )) && left=1; echo $(( $1 < left ? $1 : left )); }
WHL=${WHL:-.gpu/whl}
SITE=$(mktemp -d)
if [[ -d $WHL ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHL"/*.whl \
    || exit 1
fi
export PYTHONPATH=$SITE:$PWD ACCELBENCH_HOME=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, transformers, mlperf_loadgen; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
  nproc
} 2>&1 | tee "$OUT/env.txt"
S=${STEPS:-tests,serve,bench,train,quick,gemm,shared,rest}

if [[ $S == *tests* ]]; then
  log "pytest -m cuda, the language-model serving cases"
  timeout "$(t 150)" python3 -m pytest tests/test_cuda.py -m cuda -q -p no:cacheprovider -o addopts="" -rA \
    -k "language_model or static" > "$OUT/cuda_llm_tests.log" 2>&1
  echo "rc $?"; grep -E "^(PASSED|FAILED|SKIPPED|ERROR)|passed|failed" "$OUT/cuda_llm_tests.log" | tail -12
fi

if [[ $S == *serve* ]]; then
  log "full-size llama3.1-8b (random weights) bf16, static engine, Offline 64 in flight, 512/128 tokens"
  timeout "$(t 150)" python3 -m accelbench infer llama3.1-8b --scenario offline --engine static --precision bf16 \
    --device cuda --batch-size 64 --input-tokens 512 --output-tokens 128 --json --out "$OUT/runs" \
    > "$OUT/serve_llm.json" 2> "$OUT/serve_llm.log"
  echo "rc $?"; grep -E "building|probing|ok |failed|skipped" "$OUT/serve_llm.log" | tail -6
  python3 - "$OUT/serve_llm.json" <<'PY'
import json, sys
try:
    [r] = json.load(open(sys.argv[1]))["results"]
except Exception as exc:  # noqa: BLE001
    sys.exit(f"no record: {exc}")
m = {k: v["value"] for k, v in r.get("metrics", {}).items()}
keys = ("tokens_per_second", "tpot_p99_ms", "decode_bandwidth_utilization", "decode_limit_tokens_per_second",
        "prefill_flops_utilization", "kv_cache_peak_gib")
print(r["status"], r.get("valid"), r.get("error") or "", {k: round(m[k], 3) for k in keys if k in m})
print("roofline:", {k: v for k, v in (r.get("details", {}).get("roofline") or {}).items() if k != "method"})
PY
fi

if [[ $S == *bench* ]]; then
  log "bench/serve_vs_bare.py: accelbench against transformers called bare, full-size llama3.1-8b bf16"
  timeout "$(t 200)" python3 bench/serve_vs_bare.py --device cuda --scale full --precision bf16 --batch 64 \
    --input-tokens 512 --output-tokens 128 --engines "${ENGINES:-static,static-compiled,transformers}" 2>&1 \
    | grep -vE "Warning|warn\(" | tail -8
fi

if [[ $S == *train* ]]; then
  log "LLM training: llama3.1-8b full widths, 4 layers, 8192 tokens, amp_bf16, beside the bare loop"
  timeout "$(t 200)" python3 bench/train_llm.py --device cuda --scale full --layers 4 --seq-len 8192 --batch 1 \
    --precision amp_bf16 --nproc 1 --rounds 1 --steps 12 2>&1 | tail -3
fi

if [[ $S == *quick* ]]; then
  log "accelbench run quick --device cuda"
  timeout "$(t 150)" python3 -m accelbench run quick --device cuda > "$OUT/quick.log" 2>&1
  echo "rc $?"; grep -E " ok | failed | skipped |result\(s\)" "$OUT/quick.log" | tail -25
fi

if [[ $S == *gemm* ]]; then
  log "gemm 8192^3 bf16: accelbench vs a bare event-timed loop, alternating (sustained and burst, with clocks)"
  timeout "$(t 120)" python3 bench/gemm_vs_bare.py --size 8192 --precision bf16 --device cuda --rounds 2 2>&1 | tail -3
fi

if [[ $S == *shared* ]]; then
  log "a suite of 24 gemm entries: each in its own process vs sharing one (isolated/shared)"
  timeout "$(t 90)" python3 bench/shared_process.py --device cuda --entries 24 --rounds 2 2>&1 | tail -3
fi

if [[ $S == *rest* ]]; then
  log "pytest -m cuda, the other cases (kernels, training, data, ONNX)"
  timeout "$(t 240)" python3 -m pytest tests/test_cuda.py -m cuda -q -p no:cacheprovider -o addopts="" -rA \
    -k "not language_model and not static" > "$OUT/cuda_tests.log" 2>&1
  echo "rc $?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/cuda_tests.log" | tail -12
fi

cp -f "$ACCELBENCH_HOME"/*.db "$OUT/" 2>/dev/null
log done
