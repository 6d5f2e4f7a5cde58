#!/usr/bin/env bash
# the runs of the v6.0 tree: LoadGen 6.0.15 (v6.0 seeds), official profile, short duration unless said
set -u
cd /tmp/sub60
export ACCELBENCH_HOME=/tmp/sub60/home
AB="/tmp/lg60/bin/python -m accelbench"
R="infer resnet50 --scale tiny --backend onnxruntime --profile official"
L="infer llama3.1-8b --scale tiny --profile official"
for s in offline server singlestream multistream; do
  $AB $R --scenario $s --duration 5 2>&1 | grep -E "^\s+(ok|failed|skipped)"
  $AB $R --scenario $s --mode accuracy 2>&1 | grep -E "^\s+(ok|failed|skipped)"
  $AB $R --scenario $s --duration 5 --audit TEST01 2>&1 | grep -E "^\s+(ok|failed|skipped)"
  $AB $R --scenario $s --duration 5 --audit TEST04 2>&1 | grep -E "^\s+(ok|failed|skipped)"
done
for s in offline server; do
  $AB $L --scenario $s --duration 5 2>&1 | grep -E "^\s+(ok|failed|skipped)"
  $AB $L --scenario $s --mode accuracy 2>&1 | grep -E "^\s+(ok|failed|skipped)"
  $AB $L --scenario $s --audit TEST06 2>&1 | grep -E "^\s+(ok|failed|skipped)"
done
echo SHORT-DONE
