#!/usr/bin/env bash
# The project's device check, run first whenever a GPU can be reached (through the device tool):
#   bash ../shared/gpu/prepare          # here: .gpu/whl, the wheels the device image lacks (LoadGen, ...)
#   run: command "bash bench/gpu_check.sh", carry [".gpu"], timeout_s 600
# It installs what the device image lacks from .gpu/whl (no network there), prints its plan, then runs the STEPS
# asked for, in the order below: the most answer per second of device time first. Each step has a floor (the least
# time it needs to be worth starting) and a cap (the most it may run): a step whose floor no longer fits in what is
# left of BUDGET seconds is not started ("skipped: no time left"), the others run for at most min(cap, time left).
# The default STEPS' caps fit the default BUDGET (540 s, under the device tool's 600 s a command); the other steps
# make a second run, e.g. STEPS=serve,quick,train then STEPS=rest.
#   gemm    bench/gemm_vs_bare.py, 8192^3 bf16: accelbench beside a bare loop, sustained and burst, with clocks
#   shared  bench/shared_process.py: kernel entries each in its own process vs sharing one, figures and time
#   bench   bench/serve_vs_bare.py: full-size llama3.1-8b bf16 served by accelbench against transformers called bare
#           (ENGINES, default static,transformers; static-compiled compiles the 8B model on both sides, outside
#           the timed windows but inside the step: a run of its own, ENGINES=static-compiled STEPS=bench)
#   tests   pytest -m cuda, the language-model serving cases
#   serve   a full-size llama3.1-8b (random weights) bf16 served by the static engine, Offline, 64 x 512/128
#   quick   accelbench run quick --device cuda
#   train   LLM training (full widths, 4 layers, 8k tokens) beside the bare loop (bench/train_llm.py)
#   rest    pytest -m cuda, the other cases (about 3 minutes on an H200)
# $OUT (else ./gpu-check-out) is left flat, at most 8 plain files: summary.txt (the plan, each step's line, ran
# with its rc and seconds or skipped with why, and its key figures), one <step>.log per step that ran, and the
# results store (results.db) where it fits; run folders and JSON stay in a temporary folder.
# Without a CUDA device (no nvidia-smi, or torch sees none) every step is skipped with why. DEVICE=cpu instead runs
# the steps that have a CPU form (gemm, shared: small sizes, to check the check itself) on this machine's CPU.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
T0=$SECONDS
BUDGET=${BUDGET:-540}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-gemm,shared,bench,tests}
OUT=$(realpath -m "${OUT:-$PWD/gpu-check-out}")
[[ -z ${WHL:-} ]] || WHL=$(realpath -m "$WHL")
cd "$(dirname "$0")/.." || exit 1  # the repository's root: the steps name bench/ and tests/ from there
WHL=${WHL:-.gpu/whl}
#: seconds kept back from a step's limit: timeout's grace before it kills, and the figures read after it
RESERVE=5
ORDER=(gemm shared bench tests serve quick train rest)
declare -A FLOOR=([gemm]=30 [shared]=30 [bench]=120 [tests]=60 [serve]=90 [quick]=60 [train]=120 [rest]=120)
declare -A CAP=([gemm]=80 [shared]=70 [bench]=200 [tests]=150 [serve]=150 [quick]=150 [train]=200 [rest]=240)
#: the steps with a CPU form (DEVICE=cpu), and what that form runs
declare -A ON_CPU=(
  [gemm]="gemm 512^3 fp32 on the CPU, 1 round: the script and this check, not a figure to keep"
  [shared]="3 gemm entries on the CPU, 1 round: the script and this check, not a figure to keep"
)
declare -A WHAT=(
  [gemm]="gemm 8192^3 bf16: accelbench vs a bare loop, sustained (like with like) and burst, with clocks"
  [shared]="gemm entries each in its own process vs sharing one: figures and wall time"
  [bench]="bench/serve_vs_bare.py: accelbench against transformers called bare, full-size llama3.1-8b bf16"
  [tests]="pytest -m cuda, the language-model serving cases"
  [serve]="full-size llama3.1-8b (random weights) bf16, static engine, Offline 64 in flight, 512/128 tokens"
  [quick]="accelbench run quick --device cuda"
  [train]="LLM training: llama3.1-8b full widths, 4 layers, 8192 tokens, amp_bf16, beside the bare loop"
  [rest]="pytest -m cuda, the other cases (kernels, training, data, ONNX)"
)

usage_error() { echo "gpu_check.sh: $*" >&2; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] && (( BUDGET > 0 )) || usage_error "BUDGET must be a positive number of seconds, got '$BUDGET'"
[[ $DEVICE == cuda || $DEVICE == cpu ]] || usage_error "DEVICE must be cuda or cpu, got '$DEVICE'"
declare -A ASKED=()
IFS=, read -ra _steps <<< "$STEPS"
for s in "${_steps[@]}"; do
  [[ -n ${FLOOR[$s]:-} ]] || usage_error "unknown step '$s' in STEPS (steps: ${ORDER[*]})"
  ASKED[$s]=1
done
(( ${#ASKED[@]} > 0 )) || usage_error "STEPS names no step (steps: ${ORDER[*]})"

mkdir -p "$OUT" || exit 1
for s in "${ORDER[@]}"; do rm -f "$OUT/$s.log"; done
rm -f "$OUT/summary.txt" "$OUT/results.db" "$OUT/more-steps.log"
SUMMARY=$OUT/summary.txt
WORK=$(mktemp -d)  # run folders, JSON: what $OUT does not keep
SITE=$(mktemp -d)  # the wheels installed from $WHL
ACCELBENCH_HOME=$(mktemp -d)  # the results store of this check, copied to $OUT at the end
trap 'rm -rf "$WORK" "$SITE" "$ACCELBENCH_HOME"' EXIT
say() { echo "$*" | tee -a "$SUMMARY"; }
now() { echo $((SECONDS - T0)); }
what() { if [[ $DEVICE == cpu && -n ${ON_CPU[$1]:-} ]]; then echo "${ON_CPU[$1]}"; else echo "${WHAT[$1]}"; fi; }

say "plan: budget ${BUDGET} s on ${DEVICE}; steps in order of value per second, each started only if its floor fits"
say "  the time left, run for at most its cap (or the time left):"
caps=0
for s in "${ORDER[@]}"; do
  [[ -n ${ASKED[$s]:-} ]] || continue
  caps=$((caps + CAP[$s]))
  say "$(printf '  %-7s floor %3d s  cap %3d s  %s' "$s" "${FLOOR[$s]}" "${CAP[$s]}" "$(what "$s")")"
done
if (( caps <= BUDGET )); then
  say "  caps sum to ${caps} s of the ${BUDGET} s budget"
else
  say "  caps sum to ${caps} s, over the ${BUDGET} s budget: the last steps run short or are skipped"
fi

if [[ -d $WHL ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHL"/*.whl \
    >> "$SUMMARY" 2>&1 || { say "installing $WHL failed (see above)"; exit 1; }
fi
export PYTHONPATH=$SITE:$PWD ACCELBENCH_HOME DEVICE WORK ENGINES=${ENGINES:-static,transformers}

NO_CUDA=""
if [[ $DEVICE == cuda ]]; then
  if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv 2>&1 \
      | tee -a "$SUMMARY"
  else
    NO_CUDA="nvidia-smi not found"
  fi
fi
probe=$(python3 - <<'PY' 2>&1
import importlib.metadata as meta, importlib.util, os
import torch
found = [f"torch {torch.__version__}"]
for name, dist in (("transformers", "transformers"), ("mlperf_loadgen", "mlcommons-loadgen")):
    try:  # the installed version, without the seconds of importing it
        found.append(f"{name} {meta.version(dist)}")
    except meta.PackageNotFoundError:
        found.append(f"{name} {'(no version)' if importlib.util.find_spec(name) else 'missing'}")
print(", ".join(found), f"(CUDA build {torch.version.cuda}), {os.cpu_count()} CPUs")
print("cuda: yes" if torch.cuda.is_available() else "cuda: no")
PY
)
say "$probe"
[[ $probe == *"cuda: yes"* ]] || [[ -n $NO_CUDA ]] || NO_CUDA="torch sees no CUDA device"
[[ $DEVICE == cpu ]] && NO_CUDA=""

step_gemm() {
  if [[ $DEVICE == cpu ]]; then
    python3 bench/gemm_vs_bare.py --size 512 --precision fp32 --device cpu --rounds 1 --seconds 0.2
  else
    python3 bench/gemm_vs_bare.py --size 8192 --precision bf16 --device cuda --rounds 2
  fi
}
step_shared() {
  if [[ $DEVICE == cpu ]]; then
    python3 bench/shared_process.py --device cpu --entries 3 --rounds 1
  else
    python3 bench/shared_process.py --device cuda
  fi
}
step_bench() {
  python3 bench/serve_vs_bare.py --device cuda --scale full --precision bf16 --batch 64 \
    --input-tokens 512 --output-tokens 128 --engines "$ENGINES"
}
step_tests() {
  python3 -m pytest tests/test_cuda.py -m cuda -q -p no:cacheprovider -o addopts="" -rA -k "language_model or static"
}
step_serve() {
  python3 -m accelbench infer llama3.1-8b --scenario offline --engine static --precision bf16 --device cuda \
    --batch-size 64 --input-tokens 512 --output-tokens 128 --json --out "$WORK/runs" > "$WORK/serve.json"
}
step_quick() { python3 -m accelbench run quick --device cuda --out "$WORK/runs"; }
step_train() {
  python3 bench/train_llm.py --device cuda --scale full --layers 4 --seq-len 8192 --batch 1 --precision amp_bf16 \
    --nproc 1 --rounds 1 --steps 12
}
step_rest() {
  python3 -m pytest tests/test_cuda.py -m cuda -q -p no:cacheprovider -o addopts="" -rA \
    -k "not language_model and not static"
}
export -f step_gemm step_shared step_bench step_tests step_serve step_quick step_train step_rest

# the key figures of a step that ran, from its log
figures() {
  local log=$OUT/$1.log
  case $1 in
    gemm) grep -E "^(round|gemm) " "$log" | tail -6 ;;
    shared) grep -E "^(round|figures|[0-9]+ gemm)" "$log" | tail -5 ;;
    bench) grep -vE "Warning|warn\(" "$log" | tail -8 ;;
    tests) grep -E "^(PASSED|FAILED|SKIPPED|ERROR)|passed|failed" "$log" | tail -12 ;;
    serve)
      grep -E "building|probing|ok |failed|skipped" "$log" | tail -6
      python3 - "$WORK/serve.json" <<'PY'
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
      ;;
    quick) grep -E " ok | failed | skipped |result\(s\)" "$log" | tail -25 ;;
    train) tail -3 "$log" ;;
    rest) grep -E "^(FAILED|ERROR)|passed|failed" "$log" | tail -12 ;;
  esac
}

RAN=()
SKIPPED=0
for s in "${ORDER[@]}"; do
  [[ -n ${ASKED[$s]:-} ]] || continue
  if [[ -n $NO_CUDA ]]; then
    say "[$(now) s] $s: skipped: no CUDA device ($NO_CUDA)"; SKIPPED=$((SKIPPED + 1)); continue
  fi
  if [[ $DEVICE == cpu && -z ${ON_CPU[$s]:-} ]]; then
    say "[$(now) s] $s: skipped: needs a CUDA device (DEVICE=cpu)"; SKIPPED=$((SKIPPED + 1)); continue
  fi
  left=$((BUDGET - $(now) - RESERVE))  # what a step may use: the reserve is the kill's grace and the figures
  if (( left < FLOOR[$s] )); then
    say "[$(now) s] $s: skipped: no time left (needs ${FLOOR[$s]} s, $((left < 0 ? 0 : left)) s left)"
    SKIPPED=$((SKIPPED + 1)); continue
  fi
  limit=$(( CAP[$s] < left ? CAP[$s] : left ))
  say "[$(now) s] $s: started, up to ${limit} s: $(what "$s")"
  began=$SECONDS
  timeout -k "$RESERVE" "$limit" bash -c "step_$s" > "$OUT/$s.log" 2>&1
  rc=$?
  why=""
  (( rc == 124 || rc == 137 )) && why=" (stopped at its ${limit} s limit)"
  say "[$(now) s] $s: ran: rc $rc in $((SECONDS - began)) s$why"
  RAN+=("$s")
  found=$(figures "$s" 2>&1)
  [[ -n $found ]] || found=$(tail -3 "$OUT/$s.log")  # no figures: how it ended
  [[ -z $found ]] || say "$(sed 's/^/    /' <<< "$found")"
done

# at most 8 files in $OUT: the summary, a log per step (past 7, the last ones joined in one) and the store if room
if (( ${#RAN[@]} > 7 )); then
  for s in "${RAN[@]:6}"; do
    { echo "=== $s.log"; cat "$OUT/$s.log"; } >> "$OUT/more-steps.log" && rm -f "$OUT/$s.log"
  done
fi
store=$(ls "$ACCELBENCH_HOME"/*.db 2>/dev/null | head -1)
if [[ -n $store ]] && (( $(ls -A "$OUT" | wc -l) < 8 )); then
  cp -f "$store" "$OUT/results.db"
fi
say "[$(now) s] done: ${#RAN[@]} ran, ${SKIPPED} skipped, of the ${BUDGET} s budget; $(ls -A "$OUT" | wc -l) files in $OUT"
