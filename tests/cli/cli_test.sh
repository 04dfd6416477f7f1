#!/usr/bin/env bash
# CLI behaviour on good inputs (bad ones are the catalogue in tests/bad_inputs): every model runs from its stored
# inputs and matches its stored output: the models gaf_make_test_models generated (their output from its
# double-precision reference), then the shared PyTorch exports when that folder exists.
#   cli_test.sh BIN GENERATED_MODELS [SHARED_MODELS]
set -u
bin=$1
models=$2
shared=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: rc=$rc (want $want), output:"
    echo "$out" | head -20
  fi
}

check info 0 "Gemm +2" -- "$bin" info "$models/mlp/model.onnx"
check random-inputs 0 "latency over 3 runs" -- "$bin" run "$models/mlp/model.onnx" --random-inputs --iterations 3
# A Loop's body fuses like a graph: explain names each of its groups with the subgraph it is in, the JSON report
# gives the scope, and --emit-code writes the body's generated kernels.
check explain-subgraph 0 "group y_body_Tanh_Sub_Mul_x5_3: 5 ops.*\(in node 'y' \(Loop\) body\)" -- \
  "$bin" explain "$models/gru_loop/model.onnx"
check report-subgraph-scope 0 '"scope": "node .y. \(Loop\) body"' -- bash -c \
  '"$1" fuse "$2" -o "$3/gru.onnx" --report "$3/gru.json" >/dev/null && cat "$3/gru.json"' _ "$bin" \
  "$models/gru_loop/model.onnx" "$tmp"
check bench-subgraph-kernels 0 "4 generated kernels, 0 fused groups run op by op" -- "$bin" bench \
  "$models/gru_loop/model.onnx" -n 3
# bench --per-group: each group's modeled and measured times and the count of agreeing signs.
check bench-per-group 0 "benefit signs \(modeled vs measured\): [0-9]+ of [0-9]+ timed groups agree" -- "$bin" \
  bench "$models/mlp/model.onnx" -n 2 --per-group --quiet
check emit-subgraph-kernels 0 "wrote 1 kernel source" -- "$bin" fuse "$models/gru_loop/model.onnx" \
  -o "$tmp/gru_emit.onnx" --emit-code "$tmp/gru_code"
# A sequence in and out (seq_scores): read from its SequenceProto, printed item by item, the SequenceMap body
# fused; random inputs cannot make a sequence, and say so.
check run-sequence 0 "per_image: seq\(float\) \[float\[3\] \{.*\}, float\[0\] \{\}, float\[5\]" -- "$bin" run \
  "$models/seq_scores/model.onnx" --inputs "$models/seq_scores/test_data_set_0"
check explain-sequence-map 0 "group per_image_body_Mul_Sigmoid_ReduceSum_0: 3 ops.*SequenceMap" -- "$bin" explain \
  "$models/seq_scores/model.onnx"
check random-sequence 1 "input 'boxes' is seq\(float\): random inputs are tensors; give its value \(--input-pb" \
  -- "$bin" run "$models/seq_scores/model.onnx" --random-inputs
# Bad inputs (a broken model, tensor, rules file, path...) are the catalogue in tests/bad_inputs.

# --save-inputs writes what ran: running from that folder gives the same outputs.
check save-inputs 0 "wrote 1 input" -- "$bin" run "$models/mlp/model.onnx" --random-inputs --seed 5 \
  --save-inputs "$tmp/saved_in" --save-outputs "$tmp/saved_out"
check rerun-saved-inputs 0 "match" -- bash -c "'$bin' run '$models/mlp/model.onnx' --inputs '$tmp/saved_in' \
  --save-outputs '$tmp/rerun_out' >/dev/null && '$bin' compare '$tmp/rerun_out/output_0.pb' '$tmp/saved_out/output_0.pb'"

# Greedy generation with the decoders gaf_make_test_models writes: fused and unfused pick the same tokens.
for d in gpt2 llama; do
  check "generate-$d" 0 "decode: 11 steps, .* tokens/s" -- "$bin" generate "$models/decoders/$d.onnx" --prompt 5,17,3 \
    -n 12 --progress
  fused_ids=$("$bin" generate "$models/decoders/$d.onnx" --prompt 5,17,3 -n 12 | grep '^ids:')
  check "generate-unfused-$d" 0 "^$fused_ids\$" -- bash -c "'$bin' generate '$models/decoders/$d.onnx' --prompt 5,17,3 \
    -n 12 -O 0 | grep '^ids:'"
done

check_models() {  # check_models SET DIR: every DIR/<name>/model.onnx against its test_data_set_0
  local set=$1 m name
  for m in "$2"/*/; do
    name=$set-$(basename "$m")
    [ -f "$m/model.onnx" ] || continue
    check "run-$name" 0 "wrote [0-9]+ output" -- "$bin" run "$m/model.onnx" \
      --input-pb "$m/test_data_set_0/input_0.pb" --save-outputs "$tmp/$name"
    check "match-$name" 0 "match" -- "$bin" compare "$tmp/$name/output_0.pb" \
      "$m/test_data_set_0/output_0.pb" --rtol 1e-3 --atol 1e-5
    # Fused in memory (opt level 3: rewrites, channels-last convolutions, generated kernels) and written fused
    # (portable ONNX, our own ops decomposed), both still match the stored output.
    check "run-fused-$name" 0 "wrote [0-9]+ output" -- "$bin" run "$m/model.onnx" --opt-level 3 \
      --input-pb "$m/test_data_set_0/input_0.pb" --save-outputs "$tmp/$name-fused"
    check "match-fused-$name" 0 "match" -- "$bin" compare "$tmp/$name-fused/output_0.pb" \
      "$m/test_data_set_0/output_0.pb" --rtol 1e-3 --atol 1e-5
    check "fuse-write-$name" 0 "wrote" -- "$bin" --input "$m/model.onnx" --output "$tmp/$name-fused.onnx" -O 3
    check "run-written-$name" 0 "wrote [0-9]+ output" -- "$bin" run "$tmp/$name-fused.onnx" \
      --input-pb "$m/test_data_set_0/input_0.pb" --save-outputs "$tmp/$name-written"
    check "match-written-$name" 0 "match" -- "$bin" compare "$tmp/$name-written/output_0.pb" \
      "$m/test_data_set_0/output_0.pb" --rtol 1e-3 --atol 1e-5
  done
}
check_models generated "$models"
if [ -n "$shared" ] && [ -d "$shared" ]; then
  check_models shared "$shared"
else
  echo "cli: no shared models at ${shared:-(none given)}: their checks skipped"
fi
# Two processes filling one empty kernel cache at once: each compiles under its own temporary names and renames
# into place, so both load a verified library (no "damaged" warning) and give the same answer.
enc=$models/encoder
for i in 1 2; do
  XDG_CACHE_HOME="$tmp/shared_cache" "$bin" run "$enc/model.onnx" -O 3 --input-pb "$enc/test_data_set_0/input_0.pb" \
    --save-outputs "$tmp/race$i" >"$tmp/race$i.log" 2>&1 &
done
wait
check cache-race-match 0 "match" -- "$bin" compare "$tmp/race1/output_0.pb" "$tmp/race2/output_0.pb" --rtol 0 --atol 0
check cache-race-clean 0 "^1 entries, 0 warnings, 0 temporaries$" -- bash -c "echo \$(ls '$tmp'/shared_cache/graph-autofusion/*/*.entry \
  | wc -l) entries, \$(cat '$tmp'/race?.log | grep -c damaged) warnings, \$(find '$tmp/shared_cache' -name '*.tmp.*' | wc -l) temporaries"
check profile 0 "by op type" -- "$bin" profile "$models/mlp/model.onnx" -O 3 --iterations 2
# --top 0 lists every node in run order: the unfused MLP's Erf sits between its two Gemms
check profile-all 0 "Gemm +fc1 .* Erf .* Gemm +fc2" -- \
  bash -c '"$1" profile "$2" --iterations 1 --top 0 | tr "\n" " "' _ "$bin" "$models/mlp/model.onnx"
# --trace writes the profiled runs as a Chrome trace (Perfetto, chrome://tracing) that parses as JSON with events
check profile-trace 0 "^trace ok$" -- bash -c '"$1" profile "$2" --iterations 1 --trace "$3" >/dev/null && /usr/bin/python3 \
  -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"traceEvents\"]" "$3" && echo trace ok' \
  _ "$bin" "$models/mlp/model.onnx" "$tmp/profile-trace.json"

# calibrate: a target file the planner then reads.
check calibrate 0 "wrote .*cal.json" -- "$bin" calibrate --quick -o "$tmp/cal.json"
check calibrated-target 0 "Fused [0-9]+ operators" -- "$bin" explain "$models/encoder/model.onnx" --target "$tmp/cal.json"
# opt: named passes text in, text out; the result parses back; a misspelt pass is one error listing the known.
printf '<ir_version: 8, opset_import: ["" : 17]>\ng (float[2,8] x) => (float[2,8] y) {\n  one = Constant <value = float {1.0}> ()\n  two = Constant <value = float {2.0}> ()\n  s = Add(one, two)\n  y = Mul(x, s)\n}\n' >"$tmp/opt_in.txt"
check opt-fold 0 "float \{3\}" -- "$bin" opt "$tmp/opt_in.txt" --passes constant-to-initializer,constant-folding -o "$tmp/opt_out.txt" \
  --dump-after constant-folding
check opt-reparse 0 "s = Constant" -- "$bin" opt "$tmp/opt_out.txt" --passes dead-code-elimination
# --external-data: the weights beside the model, which loads and runs from there.
check external-data-write 0 "wrote .*ext.onnx.data" -- "$bin" fuse "$models/mlp/model.onnx" -O 2 -o "$tmp/ext.onnx" \
  --external-data
check external-data-run 0 "latency over 1 runs" -- "$bin" run "$tmp/ext.onnx" --random-inputs --iterations 1
# Graph dumps into a folder whose name has a quote: graphviz runs from an argument vector, not through a shell.
check dump-graph-quote 0 "wrote" -- "$bin" fuse "$models/mlp/model.onnx" -O 2 -o "$tmp/dumped.onnx" \
  --dump-graph "$tmp/it's dumped"
check dump-graph-files 0 "^after.dot" -- ls "$tmp/it's dumped"
if command -v dot >/dev/null; then
  check dump-graph-svg 0 "^after.svg" -- ls "$tmp/it's dumped"
fi
# The CUDA plan of every model the tests carry (and the shared ones when present), its kernels compiled by NVRTC
# for sm_90: no GPU needed. A build without the toolkit says so instead.
if "$bin" run "$models/mlp/model.onnx" --device cuda --dry-run 2>&1 | grep -q "this build has no CUDA"; then
  echo "cli: this build has no CUDA backend: the CUDA dry runs skipped"
else
  # NVRTC, cuBLASLt and cuDNN are opened when the backend needs them, never linked: a CPU run does not map them.
  check cuda-libraries-not-linked 0 "^0$" -- bash -c 'ldd "$1" | grep -cE "libcublasLt|libcudnn|libnvrtc" || true' _ "$bin"
  for m in "$models"/mlp "$models"/convnet "$models"/encoder ${shared:+"$shared"/*/}; do
    [ -f "$m/model.onnx" ] || continue
    check "cuda-dry-run-$(basename "$m")" 0 "^dry run: [0-9]+ steps" -- "$bin" run "$m/model.onnx" --device cuda -O 2 --dry-run
  done
  # 16-bit storage: the products on bfloat16 / float16 operands, every kernel's 16-bit loads and stores compiled.
  echo '{"global": {"precision_mode": "bf16_mixed"}}' >"$tmp/bf16.json"
  echo '{"global": {"precision_mode": "fp16_mixed"}}' >"$tmp/fp16.json"
  echo '{"global": {"precision_mode": "int8_weights"}}' >"$tmp/int8.json"
  for m in "$models"/mlp "$models"/convnet "$models"/encoder; do
    check "cuda-dry-run-bf16-$(basename "$m")" 0 "(cuBLASLt|cuDNN conv) bfloat16" -- "$bin" run "$m/model.onnx" \
      --device cuda -O 2 --rules "$tmp/bf16.json" --dry-run
    check "cuda-dry-run-fp16-$(basename "$m")" 0 "(cuBLASLt|cuDNN conv) float16" -- "$bin" run "$m/model.onnx" \
      --device cuda -O 2 --rules "$tmp/fp16.json" --dry-run
    # The GPU's 16-bit plan run by the CPU runtime: within the mode's tolerance of the fp32 model.
    check "cuda-plan-bf16-on-cpu-$(basename "$m")" 0 "bf16_mixed storage" -- "$bin" verify "$m/model.onnx" \
      --target cuda-h200 --rules "$tmp/bf16.json"
    check "cuda-plan-fp16-on-cpu-$(basename "$m")" 0 "fp16_mixed storage" -- "$bin" verify "$m/model.onnx" \
      --target cuda-h200 --rules "$tmp/fp16.json"
  done
  check cuda-int8-refused 1 "^error: precision_mode int8_weights: the CUDA backend has no int8 products" -- \
    "$bin" run "$models/mlp/model.onnx" --device cuda -O 2 --rules "$tmp/int8.json" --dry-run
fi
# --device cuda: on a machine without a GPU (or a build without the toolkit) one line saying so and exit 1; with
# one, the generated model runs and verifies against the CPU.
if "$bin" run "$models/mlp/model.onnx" --device cuda -O 2 --random-inputs >/dev/null 2>&1; then
  check cuda-run 0 "kernels per run" -- "$bin" run "$models/mlp/model.onnx" --device cuda -O 2 --random-inputs --iterations 3
  check cuda-verify 0 "matches the CPU" -- "$bin" verify "$models/encoder/model.onnx" --device cuda
else
  check cuda-absent 1 "^error: --device cuda: (no CUDA|this build has no CUDA)" -- "$bin" run "$models/mlp/model.onnx" \
    --device cuda -O 2 --random-inputs
  check cuda-absent-one-line 0 "^1$" -- bash -c '"$1" verify "$2" --device cuda 2>&1 | wc -l' _ "$bin" "$models/mlp/model.onnx"
fi

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
