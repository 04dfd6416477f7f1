#!/usr/bin/env bash
# make soak (#29 item 10): long correctness runs, every one against an exact reference, 0 mismatches allowed.
#   1. selftest on SOAK_GRAPHS seeded random graphs (10,000; symbolic batch in half of them, multi-output and
#      horizontal groups at opt level 3), fused with generated kernels against unfused, in chunks of 1,000 seeds;
#   2. the ONNX conformance models unfused and fused at opt levels 1, 2 and 3 against their stored outputs;
#   3. the conformance models fused at opt level 3 under SOAK_RULES (8) random rules files: forbid and force
#      patterns over op types and categories, group size limits, skipped op types (rules change the grouping,
#      never the results).
# Prints each part's count and time; exits non-zero on any mismatch.
#   bash scripts/soak.sh [BIN_DIR]        BIN_DIR: a build folder (build/release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bins=${1:-$root/build/release}
graphs=${SOAK_GRAPHS:-10000}
rules=${SOAK_RULES:-8}
cli=$bins/graph-autofusion
conf=$bins/tests/gaf_conformance
expected=$root/tests/onnx_conformance/expected_unsupported.txt
[[ -x $cli && -x $conf ]] || { echo "soak: build first (make build): no $cli or $conf" >&2; exit 2; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/gaf-soak.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
t0=$(date +%s)

echo "soak 1/3: selftest, $graphs random graphs"
done_graphs=0 seed=1 failed=0
while ((done_graphs < graphs)); do
  n=$((graphs - done_graphs < 1000 ? graphs - done_graphs : 1000))
  line=$("$cli" selftest --graphs "$n" --seed "$seed" --quiet | tail -n 1)
  echo "  seed $seed: $line"
  [[ $line =~ ([0-9]+)\ failed ]] && ((BASH_REMATCH[1] == 0)) || { failed=1; status=1; }
  done_graphs=$((done_graphs + n)) seed=$((seed + 1))
done
t1=$(date +%s)
echo "soak 1/3: $done_graphs graphs in $((t1 - t0)) s$( ((failed)) && echo ', MISMATCHES' )"

echo "soak 2/3: conformance at opt levels 0-3"
for level in 0 1 2 3; do
  if "$conf" --opt-level "$level" --expected "$expected" >"$work/conf$level.txt" 2>&1; then
    echo "  opt $level: $(grep -E '^conformance' "$work/conf$level.txt" | tail -n 1)"
  else
    echo "  opt $level: FAILED"; tail -n 20 "$work/conf$level.txt"; status=1
  fi
done
t2=$(date +%s)
echo "soak 2/3: done in $((t2 - t1)) s"

echo "soak 3/3: conformance at opt level 3 under $rules random rules files"
ops=(Add Sub Mul Div Relu Sigmoid Tanh Exp Log Sqrt MatMul Gemm Conv Softmax LayerNormalization ReduceMean
     ReduceSum Transpose Reshape Concat Slice Gather Where Cast Erf Pow Max Min Clip BatchNormalization)
cats=(@elementwise @broadcast @injective @reduction)
pick() { local -n a=$1; echo "${a[RANDOM % ${#a[@]}]}"; }
term() { if ((RANDOM % 3 == 0)); then pick cats; else pick ops; fi; }
for ((r = 1; r <= rules; r++)); do
  RANDOM=$((r * 7919))
  {
    echo "{ \"global\": { \"max_ops_per_group\": $((2 + RANDOM % 30)), \"max_inputs_per_group\": $((2 + RANDOM % 8)),"
    echo "              \"skip_op_types\": [\"$(pick ops)\"] },"
    echo "  \"rules\": ["
    for ((k = 0; k < 4; k++)); do
      action=$([[ $((RANDOM % 2)) == 0 ]] && echo forbid || echo force)
      pattern="$(term) -> $(term)"
      ((RANDOM % 2)) && pattern="$pattern -> $(term)"
      echo "    { \"pattern\": \"$pattern\", \"action\": \"$action\", \"reason\": \"soak $r.$k\" }$([[ $k == 3 ]] || echo ,)"
    done
    echo "  ] }"
  } >"$work/rules$r.json"
  if "$conf" --opt-level 3 --rules "$work/rules$r.json" --expected "$expected" >"$work/rules$r.txt" 2>&1; then
    echo "  rules $r: $(grep -E '^conformance' "$work/rules$r.txt" | tail -n 1)"
  else
    echo "  rules $r: FAILED with:"; cat "$work/rules$r.json"; tail -n 20 "$work/rules$r.txt"; status=1
  fi
done
t3=$(date +%s)
echo "soak 3/3: done in $((t3 - t2)) s"
echo "soak: $((t3 - t0)) s in all, $([[ $status == 0 ]] && echo '0 mismatches' || echo 'FAILURES above')"
exit $status
