#!/usr/bin/env bash
# LLM decoding side by side: graph-autofusion (fused, and unfused) against ONNX Runtime (onnxruntime-node, all
# optimisations) running the same greedy loop (prefill of the prompt, then one token per step with presents fed
# back as pasts) on GPT-2-style and LLaMA-style decoders exported the way torch.onnx.export writes them with
# dynamic axes (tests/models/decoder_exports.h; 768 wide, 12 heads, 3072 hidden, vocabulary 8192, random weights).
#
#   bash bench/llm/run.sh [BIN_DIR]      BIN_DIR defaults to build/release
#
# Environment: LAYERS (4), TOKENS ("32 256 1024"), ROUNDS (3), THREADS (2), PROMPT_TOKENS (16: the ids below,
# longer prompts go on with ids of a fixed pattern; prompt + tokens must fit the decoders' 1,280 positions).
# Each configuration runs in a fresh
# process per round, the three of a round back to back; a cell is the median over the rounds. tokens/s is the
# decode steps over their total time (the prefill, time to first token, apart); RSS is the process's peak.
# Prefill warm: the prompt's prefill re-run PREFILL_RUNS (30) times on each side's warm session after the loop,
# the median (a server's prefill latency, where time to first token is a fresh session's first run); "after
# steps" is the first of them (a new prompt right after a generation).
# bf16 and int8: ours fused with the rules' precision_mode bf16_mixed / int8_weights (weights compressed, fp32
# activations), against ORT's fp32 (ORT folds a weight-only DequantizeLinear back to fp32 weights), and int8
# against ORT's own int8: the decoder in the form onnxruntime's quantize_dynamic writes (per-column int8 weights,
# activations quantised per run: DynamicQuantizeLinear + MatMulInteger, which ORT runs as its
# DynamicQuantizeMatMul; tests/models/dynamic_int8.h), run by ort_generate.js.
# Ours computes every position's logits in the side-by-side columns (--all-logits: the model as exported, the work
# ORT does); "last logits" is the same prefill with generate's default, the last position's logits only (the
# one row greedy decoding reads, as Hugging Face's logits_to_keep), against ORT's every position.
# The ids of every fp32 run are compared with ORT's: a difference is reported (random weights give close logits, so
# float noise may flip a late token; the first tokens must agree).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bins=${1:-$root/build/release}
layers=${LAYERS:-4}
tokens=${TOKENS:-32 256 1024}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
prefill_runs=${PREFILL_RUNS:-30}
prompt_tokens=${PROMPT_TOKENS:-16}
prompt=5,17,3,42,7,9,11,13,21,34,55,89,144,233,377,610
[[ $prompt_tokens =~ ^[0-9]+$ && $prompt_tokens -ge 1 ]] || { echo "run.sh: PROMPT_TOKENS must be a positive count" >&2; exit 1; }
if ((prompt_tokens <= 16)); then
  prompt=$(cut -d, -f"1-$prompt_tokens" <<<"$prompt")
else
  prompt+=$(awk -v n="$prompt_tokens" 'BEGIN { for (i = 16; i < n; i++) printf ",%d", (i * 37) % 8000 + 1 }')
fi

die() { echo "run.sh: $*" >&2; exit 1; }
[[ -x $bins/graph-autofusion ]] || die "no graph-autofusion in $bins (run 'make build')"
[[ -x $bins/tests/gaf_make_test_models ]] || die "no tests/gaf_make_test_models in $bins (run 'make build')"
[[ -d $root/bench/peers/node_modules/onnxruntime-node ]] || die "run 'bash bench/peers/install.sh' first"
export OMP_NUM_THREADS=$threads GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}

work=$(mktemp -d "${TMPDIR:-/tmp}/gaf-llm.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bins/tests/gaf_make_test_models" --llm "$work" "$layers" >/dev/null
echo '{"global": {"precision_mode": "bf16_mixed"}}' >"$work/bf16.json"
echo '{"global": {"precision_mode": "int8_weights"}}' >"$work/int8.json"

field() { node -e 'const o = JSON.parse(process.argv[1]); const v = o[process.argv[2]];
                   console.log(Array.isArray(v) ? v.join(",") : v)' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "# LLM decode, $layers layers, $threads threads, prompt $prompt_tokens tokens, $rounds rounds ($(date -u +%F))"
printf '| model | tokens | ORT-all tok/s | ours fused tok/s | fused/ORT | ours unfused tok/s | TTFT ORT / fused ms | prefill warm ORT / fused ms (x) | prefill after steps ORT / fused ms | last logits: TTFT / prefill warm ms (x ORT) | peak RSS ORT / fused MB | ids | bf16 tok/s (x ORT) | int8 tok/s (x ORT) | ORT int8 tok/s | int8 ours / ORT int8 |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for model in gpt2 llama; do
  for n in $tokens; do
    declare -a ort=() fused=() unfused=() ort_ttft=() fused_ttft=() ort_rss=() fused_rss=() ratio=() bf16=() int8=()
    declare -a bf16_ratio=() int8_ratio=() ort_warm=() fused_warm=() warm_ratio=() ort_after=() fused_after=()
    declare -a ort_int8=() int8_vs_ort_int8=() last_ttft=() last_warm=() last_ratio=()
    same=yes
    for ((r = 0; r < rounds; r++)); do
      o=$(node "$here/ort_generate.js" "$work/$model.onnx" --prompt "$prompt" --tokens "$n" --threads "$threads" \
            --prefill-runs "$prefill_runs")
      f=$("$bins/graph-autofusion" generate "$work/$model.onnx" --prompt "$prompt" -n "$n" --prefill-runs "$prefill_runs" \
            --all-logits --json)
      l=$("$bins/graph-autofusion" generate "$work/$model.onnx" --prompt "$prompt" -n 2 --prefill-runs "$prefill_runs" \
            --json)
      last_ttft+=("$(field "$l" prefill_ms)") last_warm+=("$(field "$l" prefill_warm_ms)")
      last_ratio+=("$(awk "BEGIN { print $(field "$l" prefill_warm_ms) / $(field "$o" prefill_warm_ms) }")")
      u=$("$bins/graph-autofusion" generate "$work/$model.onnx" --prompt "$prompt" -n "$n" -O 0 --json)
      ort+=("$(field "$o" tokens_per_s)") fused+=("$(field "$f" tokens_per_s)") unfused+=("$(field "$u" tokens_per_s)")
      ort_ttft+=("$(field "$o" prefill_ms)") fused_ttft+=("$(field "$f" prefill_ms)")
      ort_warm+=("$(field "$o" prefill_warm_ms)") fused_warm+=("$(field "$f" prefill_warm_ms)")
      ort_after+=("$(field "$o" prefill_after_steps_ms)") fused_after+=("$(field "$f" prefill_after_steps_ms)")
      warm_ratio+=("$(awk "BEGIN { print $(field "$f" prefill_warm_ms) / $(field "$o" prefill_warm_ms) }")")
      ort_rss+=("$(field "$o" peak_rss_mb)") fused_rss+=("$(field "$f" peak_rss_mb)")
      ratio+=("$(awk "BEGIN { print $(field "$f" tokens_per_s) / $(field "$o" tokens_per_s) }")")
      [[ $(field "$o" ids) == "$(field "$f" ids)" ]] || same="differ"
      b=$("$bins/graph-autofusion" generate "$work/$model.onnx" --prompt "$prompt" -n "$n" --rules "$work/bf16.json" --json)
      q=$("$bins/graph-autofusion" generate "$work/$model.onnx" --prompt "$prompt" -n "$n" --rules "$work/int8.json" --json)
      oq=$(node "$here/ort_generate.js" "$work/${model}_ort_int8.onnx" --prompt "$prompt" --tokens "$n" \
             --threads "$threads")
      bf16+=("$(field "$b" tokens_per_s)") int8+=("$(field "$q" tokens_per_s)") ort_int8+=("$(field "$oq" tokens_per_s)")
      int8_vs_ort_int8+=("$(awk "BEGIN { print $(field "$q" tokens_per_s) / $(field "$oq" tokens_per_s) }")")
      bf16_ratio+=("$(awk "BEGIN { print $(field "$b" tokens_per_s) / $(field "$o" tokens_per_s) }")")
      int8_ratio+=("$(awk "BEGIN { print $(field "$q" tokens_per_s) / $(field "$o" tokens_per_s) }")")
    done
    printf '| %s | %s | %.1f | %.1f | %.2fx | %.1f | %.1f / %.1f | %.2f / %.2f (%.2fx) | %.2f / %.2f | %.1f / %.2f (%.2fx) | %.0f / %.0f | %s | %.1f (%.2fx) | %.1f (%.2fx) | %.1f | %.2fx |\n' \
      "$model" "$n" "$(median "${ort[@]}")" "$(median "${fused[@]}")" "$(median "${ratio[@]}")" \
      "$(median "${unfused[@]}")" "$(median "${ort_ttft[@]}")" "$(median "${fused_ttft[@]}")" \
      "$(median "${ort_warm[@]}")" "$(median "${fused_warm[@]}")" "$(median "${warm_ratio[@]}")" \
      "$(median "${ort_after[@]}")" "$(median "${fused_after[@]}")" \
      "$(median "${last_ttft[@]}")" "$(median "${last_warm[@]}")" "$(median "${last_ratio[@]}")" \
      "$(median "${ort_rss[@]}")" "$(median "${fused_rss[@]}")" "$same" "$(median "${bf16[@]}")" \
      "$(median "${bf16_ratio[@]}")" "$(median "${int8[@]}")" "$(median "${int8_ratio[@]}")" \
      "$(median "${ort_int8[@]}")" "$(median "${int8_vs_ort_int8[@]}")"
  done
done
