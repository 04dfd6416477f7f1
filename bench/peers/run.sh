#!/usr/bin/env bash
# Side-by-side latency of ONNX Runtime and graph-autofusion on the shared test models.
#
#   bash bench/peers/run.sh [BIN]        BIN defaults to build/release/graph-autofusion (relative to the repo root)
#
# Environment: MODELS (default ../shared/models from the repo root), ROUNDS (5), THREADS (2), BATCH_MS (1000);
# OMP_* and GOMP_SPINCOUNT reach our runtime (the Makefile bounds OpenMP spinning with GOMP_SPINCOUNT=10000).
# LOADED=1 measures a shared server: one busy process per CPU but one runs for the whole run (both runtimes see it).
#
# For each MODELS/*/model.onnx (inputs test_data_set_0/input_*.pb, reference output_0.pb) it runs ROUNDS rounds;
# a round runs one after another ORT with optimisations disabled, ORT with all optimisations, ours unfused and
# ours fused (`run --opt-level 3`: fused in the process, as the written fused.onnx describes but with our own
# channels-last and gaf ops kept, which the portable file decomposes), each a fresh process timing N runs after
# one warm-up.
# N is chosen per model so that one batch of ours unfused takes about BATCH_MS. A column is the median over the
# rounds of each batch's median. fused/ORT-all is the median over the rounds of that round's ratio (each round runs
# ORT-all and ours fused back to back, see below), with the rounds' range beside it. The first round also saves the first output of every configuration and checks it
# against the reference with `BIN compare` (rtol 1e-3, atol 1e-5; ORT's raw output is wrapped in a TensorProto),
# and runs the written fused model (fused.onnx: gaf.fused functions, our gaf ops decomposed) once in ORT, checked the
# same way: what we write must run in other runtimes.
# Achieved GFLOP/s counts MatMul/Gemm/Conv flops from static shapes (of the model written at --opt-level 1, whose
# constant folding makes the shapes Swin-T computes at run time static, with attention written back as its MatMuls);
# the fp32 GEMM peak is the faster of ORT and ours on a generated 1024x1024x1024 MatMul.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/release/graph-autofusion}
models=${MODELS:-$root/../shared/models}
rounds=${ROUNDS:-5}
threads=${THREADS:-2}
batch_ms=${BATCH_MS:-1000}
rtol=1e-3
atol=1e-5

die() { echo "run.sh: $*" >&2; exit 1; }
[[ -x $bin ]] || die "no graph-autofusion binary at $bin (run 'make build' or pass its path)"
[[ -d $here/node_modules/onnxruntime-node ]] || die "onnxruntime-node is missing: run 'bash bench/peers/install.sh'"
compgen -G "$models/*/model.onnx" >/dev/null || die "no models under $models"

work=$(mktemp -d "${TMPDIR:-/tmp}/gaf-peers.XXXXXX")
loaders=()
# (kill with no process is an error, which set -e would make the script's exit status and stop the trap at)
trap 'if ((${#loaders[@]})); then kill "${loaders[@]}" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
if [[ ${LOADED:-0} == 1 ]]; then
  for ((i = 1; i < $(nproc); i++)); do
    (while :; do :; done) &
    loaders+=($!)
  done
fi
export OMP_NUM_THREADS=$threads   # our runtime (OpenMP, oneDNN) gets the same thread count as ORT's intra-op pool
start_s=$SECONDS

# json FILE_OR_TEXT FIELD.PATH: one field of a JSON object; arrays print as a,b,c.
json() {
  node -e 'const fs = require("fs"), [src, key] = process.argv.slice(1);
           let v = JSON.parse(src.startsWith("{") ? src : fs.readFileSync(src, "utf8"));
           for (const k of key.split(".")) v = v[k];
           console.log(String(v));' "$1" "$2"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# ort_run MODEL OPT N SAVE IN...: prints ort_bench.js's JSON line; SAVE ("" for none) gets the raw first output.
ort_run() {
  local model=$1 opt=$2 n=$3 save=$4
  shift 4
  node "$here/ort_bench.js" "$model" --opt "$opt" --threads "$threads" --iterations "$n" \
       ${save:+--save-output "$save"} --input-pb "$@" || die "$model: ort_bench.js --opt $opt failed"
}
# ours_run MODEL N SAVE_DIR OPT_LEVEL IN...: prints the median latency in ms; SAVE_DIR ("" for none) gets the outputs.
ours_run() {
  local model=$1 n=$2 save=$3 opt=$4 out ms
  shift 4
  out=$("$bin" run "$model" --opt-level "$opt" --iterations "$n" ${save:+--save-outputs "$save"} --input-pb "$@") ||
    die "$model: graph-autofusion run failed"
  ms=$(sed -n 's/^latency over [0-9]* runs: min [0-9.]* ms, median \([0-9.]*\) ms.*/\1/p' <<<"$out")
  [[ -n $ms ]] || die "$model: no latency line in the output of graph-autofusion run"
  echo "$ms"
}
# iterations MS: runs per batch so that a batch takes about batch_ms.
iterations() {
  awk -v ms="$1" -v b="$batch_ms" 'BEGIN { n = int(b / ms + 0.5); print (n < 5 ? 5 : n > 500 ? 500 : n) }'
}
# check ACTUAL.pb REF.pb: "<max abs error> / <max rel error>", then " MISMATCH" when BIN compare says so.
check() {
  local line verdict=""
  line=$("$bin" compare "$1" "$2" --rtol "$rtol" --atol "$atol" || true)
  [[ $line =~ max\ abs\ error\ ([^,]+),\ max\ rel\ error\ ([^;]+) ]] || die "$1: compare failed: $line"
  [[ $line == match:* ]] || verdict=" MISMATCH"
  echo "${BASH_REMATCH[1]} / ${BASH_REMATCH[2]}$verdict"
}
# ort_pb JSON RAW PB: wraps ort_bench.js's raw first output (described by its JSON line) in a TensorProto file.
ort_pb() {
  local type
  type=$(json "$1" output.type)
  [[ $type == float32 ]] || die "$1: ORT output is $type, only float32 is compared"
  node "$here/onnx_tool.js" raw-to-pb "$2" "$3" --dims "$(json "$1" output.dims)" >/dev/null
}

# ---- fp32 GEMM peak ------------------------------------------------------------------------------------------------
node "$here/onnx_tool.js" matmul-model "$work/gemm" --size 1024 >/dev/null
gemm_flops=$(calc %.0f "2 * 1024 ^ 3")
ms=$(ours_run "$work/gemm/model.onnx" 3 "" 0 "$work/gemm/input_0.pb")
gemm_n=$(iterations "$ms")
echo "== fp32 GEMM 1024x1024x1024: $gemm_n runs per batch" >&2
gemm_ort=() gemm_ours=()
for ((r = 0; r < rounds; r++)); do
  j=$(ort_run "$work/gemm/model.onnx" all "$gemm_n" "" "$work/gemm/input_0.pb")
  gemm_ort+=("$(json "$j" median_ms)")
  gemm_ours+=("$(ours_run "$work/gemm/model.onnx" "$gemm_n" "" 0 "$work/gemm/input_0.pb")")
done
gemm_ort_gflops=$(calc %.1f "$gemm_flops / $(median "${gemm_ort[@]}") / 1e6")
gemm_ours_gflops=$(calc %.1f "$gemm_flops / $(median "${gemm_ours[@]}") / 1e6")
peak=$(awk -v a="$gemm_ort_gflops" -v b="$gemm_ours_gflops" 'BEGIN { print (a > b ? a : b) }')

# gflops MS: "<GFLOP/s> (<% of peak>)" of the current model's flops in MS milliseconds.
gflops() {
  awk -v f="$flops" -v ms="$1" -v p="$peak" 'BEGIN { g = f / ms / 1e6; printf "%.1f (%.0f%%)", g, 100 * g / p }'
}

# ---- models --------------------------------------------------------------------------------------------------------
table=() perf=() errs=()
for model in "$models"/*/model.onnx; do
  dir=$(dirname "$model")
  name=$(basename "$dir")
  in=("$dir"/test_data_set_0/input_*.pb)
  ref=$dir/test_data_set_0/output_0.pb
  w=$work/$name
  mkdir -p "$w"

  # A model we cannot fuse or export gets a row saying so; the other models still run.
  if ! log=$("$bin" --input "$model" --output "$w/fused.onnx" --opt-level 3 --report "$w/report.json" 2>&1 &&
             "$bin" --input "$model" --output "$w/shapes.onnx" --opt-level 1 2>&1); then  # value_info for all values
    failure=$(grep -m1 -i error <<<"$log" || tail -n1 <<<"$log")
    echo "== $name: skipped, graph-autofusion failed: $failure" >&2
    table+=("| $name | graph-autofusion failed to fuse or export: $failure |")
    continue
  fi
  j=$(node "$here/onnx_tool.js" flops "$w/shapes.onnx")
  flops=$(json "$j" flops)
  [[ $(json "$j" unknown) == "" ]] || echo "== $name flops: no static shapes for $(json "$j" unknown) (not counted)" >&2
  ms=$(ours_run "$model" 3 "" 0 "${in[@]}")
  n=$(iterations "$ms")
  echo "== $name: $n runs per batch" >&2

  t_ort_off=() t_ort_all=() t_unfused=() t_fused=() ratios=()
  for ((r = 0; r < rounds; r++)); do
    save=""                            # the first round also saves outputs, as $w/<configuration>*
    [[ $r == 0 ]] && save=$w
    # Each compared pair runs back to back (ORT-disabled with ours unfused, ORT-all with ours fused), ORT first in
    # even rounds and ours first in odd ones: the load of this shared machine drifts over seconds, and a pair
    # measured within one batch of each other sees about the same load.
    order=(off unfused all fused)
    ((r % 2 == 0)) || order=(unfused off fused all)
    for step in "${order[@]}"; do
      case $step in
        off) j_off=$(ort_run "$model" disabled "$n" "${save:+$w/ort_disabled.raw}" "${in[@]}")
             t_ort_off+=("$(json "$j_off" median_ms)") ;;
        all) j_all=$(ort_run "$model" all "$n" "${save:+$w/ort_all.raw}" "${in[@]}")
             t_ort_all+=("$(json "$j_all" median_ms)") ;;
        unfused) t_unfused+=("$(ours_run "$model" "$n" "${save:+$w/unfused}" 0 "${in[@]}")") ;;
        fused) t_fused+=("$(ours_run "$model" "$n" "${save:+$w/fused}" 3 "${in[@]}")") ;;
      esac
    done
    ratios+=("$(calc %.4f "${t_fused[r]} / ${t_ort_all[r]}")")
    if [[ -n $save ]]; then
      ort_nodes=$(json "$j_all" nodes)
      ort_pb "$j_off" "$w/ort_disabled.raw" "$w/ort_disabled.pb"
      ort_pb "$j_all" "$w/ort_all.raw" "$w/ort_all.pb"
    fi
    printf '   round %d: ORT-disabled %.2f ms, ORT-all %.2f ms, unfused %.2f ms, fused %.2f ms, fused/ORT-all %.2f\n' \
           $((r + 1)) "${t_ort_off[r]}" "${t_ort_all[r]}" "${t_unfused[r]}" "${t_fused[r]}" "${ratios[r]}" >&2
  done

  m_off=$(median "${t_ort_off[@]}")
  m_all=$(median "${t_ort_all[@]}")
  m_unfused=$(median "${t_unfused[@]}")
  m_fused=$(median "${t_fused[@]}")
  err_fused=$(check "$w/fused/output_0.pb" "$ref")
  # The written fused model (gaf.fused functions, our gaf ops decomposed) must run in ONNX Runtime as well.
  if j_ff=$(node "$here/ort_bench.js" "$w/fused.onnx" --opt all --threads "$threads" --iterations 1 \
                 --save-output "$w/ort_ours.raw" --input-pb "${in[@]}" 2>"$w/ort_ours.err"); then
    ort_pb "$j_ff" "$w/ort_ours.raw" "$w/ort_ours.pb"
    err_ort_ours=$(check "$w/ort_ours.pb" "$ref")
  else
    err_ort_ours="ORT refused it: $(tail -n1 "$w/ort_ours.err" | cut -c1-120)"
  fi
  table+=("| $name | $(calc %.2f "$m_off") | $(calc %.2f "$m_all") | $(calc %.2f "$m_unfused") \
| $(calc %.2f "$m_fused") | $(calc %.2f "$(median "${ratios[@]}")") \
($(printf '%s\n' "${ratios[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }')) | $ort_nodes vs $(json "$w/report.json" after.kernels) \
| ${err_fused#* / } |")
  perf+=("| $name | $(calc %.2f "$flops / 1e9") | $n | $(gflops "$m_all") | $(gflops "$m_fused") |")
  errs+=("| $name | $(check "$w/ort_disabled.pb" "$ref") | $(check "$w/ort_all.pb" "$ref") \
| $(check "$w/unfused/output_0.pb" "$ref") | $err_fused | $err_ort_ours |")
done

# ---- report ----------------------------------------------------------------------------------------------------------
echo
ort_version=$(json "$here/node_modules/onnxruntime-node/package.json" version)
echo "graph-autofusion vs ONNX Runtime $ort_version (CPU EP), $threads threads, $(nproc) CPUs," \
     "median of $rounds rounds of per-batch medians; ours ran with OMP_NUM_THREADS=$threads" \
     "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-(unset)} GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-(unset)}" \
     "$( ((${#loaders[@]})) && echo "; loaded: ${#loaders[@]} busy process(es) ran throughout")"
echo
echo "| model | ORT-disabled ms | ORT-all ms | ours unfused ms | ours fused ms | fused/ORT-all (rounds)" \
     "| kernels ORT-all vs ours | max rel err (ours fused) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${table[@]}"
echo
echo "fp32 GEMM 1024x1024x1024: ORT $gemm_ort_gflops GFLOP/s, ours $gemm_ours_gflops GFLOP/s; peak = $peak GFLOP/s"
echo
echo "| model | GFLOP (MatMul/Gemm/Conv) | runs per batch | ORT-all GFLOP/s (% of peak)" \
     "| ours fused GFLOP/s (% of peak) |"
echo "|---|---:|---:|---:|---:|"
printf '%s\n' "${perf[@]}"
echo
echo "max abs / max rel error against the stored reference output; the relative error is per element, so it is"
echo "large where the reference is near zero. MISMATCH: some element is outside |a - e| <= $atol + $rtol * |e|."
echo
echo "| model | ORT-disabled | ORT-all | ours unfused | ours fused | ORT running our fused.onnx |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${errs[@]}"
echo
echo "total $((SECONDS - start_s)) s"
