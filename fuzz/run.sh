#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS on its corpus (make fuzz).
#   run.sh BUILD_DIR SECONDS          FUZZ_TARGETS: the targets to run (default: all six)
set -euo pipefail
build=$(cd "$1" && pwd)
seconds=$2
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=$build/corpus
findings=$build/findings
targets=${FUZZ_TARGETS:-onnx_loader onnx_text emitter rules target tensor_proto}
for t in $targets; do mkdir -p "$corpus/$t"; done
mkdir -p "$findings"
"$build/tests/gaf_make_test_models" "$build/seed_models" >/dev/null
find "$build/seed_models" -name model.onnx | while read -r f; do cp "$f" "$corpus/onnx_loader/$(echo "$f" | tr / _)"; done
if [ -d /usr/share/libonnx-testdata/data/node ]; then
  # (a process substitution: find's SIGPIPE when head has enough is no error of this script)
  mapfile -t conformance < <(find /usr/share/libonnx-testdata/data/node -name model.onnx | sort | head -400)
  for f in "${conformance[@]}"; do cp "$f" "$corpus/onnx_loader/$(echo "$f" | tr / _)"; done
fi
for t in onnx_text emitter rules target tensor_proto; do
  if [[ -d $corpus/$t ]]; then cp "$root"/fuzz/corpus/$t/* "$corpus/$t/"; fi
done
status=0
for t in $targets; do
  echo "fuzz: $t for ${seconds} s"
  (cd "$findings" && "$build/fuzz/gaf_fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=60 \
    -print_final_stats=1 "$corpus/$t" 2>&1 | grep -E "^#|stat::|ERROR|SUMMARY|finding" | tail -8) || status=1
done
ls "$findings" | grep -E "^(crash|leak|timeout|oom)-" && { echo "fuzz: findings in $findings"; status=1; }
exit $status
