#!/usr/bin/env bash
# The HTML report (fuse --report r.html, and the page beside a JSON report) rendered in headless Chromium: the page
# has both graphs, its script runs without an error, and a click on a fused node shows that group's details and its
# generated code.
#   html_report_test.sh GRAPH_AUTOFUSION MODELS_DIR
set -euo pipefail
bin=$1
models=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "html_report: $*" >&2; exit 1; }

"$bin" fuse "$models/encoder/model.onnx" -O 3 --report "$tmp/r.json" >/dev/null
[[ -s $tmp/r.json && -s $tmp/r.html ]] || fail "--report r.json did not write r.json and r.html beside it"
"$bin" fuse "$models/encoder/model.onnx" -O 3 --report "$tmp/page.html" >/dev/null
[[ -s $tmp/page.html && ! -e $tmp/page.json ]] || fail "--report page.html did not write the page alone"
grep -q '<svg id="planned"' "$tmp/page.html" || fail "no graph before fusion in the page"
grep -q '<svg id="fused"' "$tmp/page.html" || fail "no fused graph in the page"
grep -q 'class="cluster"' "$tmp/page.html" || fail "no fused group drawn as a cluster"
if grep -qE '(src|href)="https?:' "$tmp/page.html"; then fail "the page loads something from the network"; fi

# profile --report: the page with what was measured (per run, and per node on the graphs).
"$bin" profile "$models/encoder/model.onnx" -O 3 --iterations 2 --quiet --report "$tmp/profile.html" >/dev/null
grep -q '<h2>Measured</h2>' "$tmp/profile.html" || fail "profile --report: no measured times in the page"
grep -q 'class="ms"' "$tmp/profile.html" || fail "profile --report: no node shows its measured time"
if "$bin" profile "$models/encoder/model.onnx" --iterations 1 --quiet --report "$tmp/p.json" >/dev/null 2>&1; then
  fail "profile --report p.json was accepted (profile writes the HTML page only)"
fi

browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || fail "no chromium to render the page (scripts/bootstrap.sh installs Debian's chromium)"
render() {  # render URL: the DOM after the scripts ran; the browser's log (console messages) in $tmp/log
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 --virtual-time-budget=5000 --dump-dom "$1" \
    2>"$tmp/log"
}
dom=$(render "file://$tmp/page.html#selftest") || { cat "$tmp/log" >&2; fail "chromium could not render the page"; }
if grep -E "Uncaught|SyntaxError|TypeError|ReferenceError" "$tmp/log"; then fail "the page's script failed"; fi
state=$(sed -n 's/.*<span id="gaf-ready"[^>]*>\([^<]*\)<.*/\1/p' <<<"$dom")
[[ $state == ready* ]] || { cat "$tmp/log" >&2; fail "the page's script did not run to its end (state '$state')"; }
[[ $state =~ clicked\ ([^ ]+)\ code\ yes ]] || fail "a click on a fused node did not show its group and code ('$state')"
group=${BASH_REMATCH[1]}
grep -q "\"name\":\"$group\"" "$tmp/page.html" || fail "the clicked group '$group' is not one of the report's groups"
echo "html_report: ok (the page renders; a click on a fused node shows group $group and its code)"
