#!/usr/bin/env bash
# ctest layering: no #include of the tree points to a higher layer (check_includes.py with cmake/layers.txt), and
# the check catches one: an IR file including the runtime's session.h in a scratch tree.
#   layering_test.sh SOURCE_DIR
set -euo pipefail
root=$1
here=$(cd "$(dirname "$0")" && pwd)
python3 "$here/check_includes.py" "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/ir" "$tmp/include/gaf"
cp "$root/cmake/layers.txt" "$tmp/layers.txt"
printf '#include "gaf/graph.h"\n#include "gaf/session.h"\n' >"$tmp/src/ir/upward.cc"
if out=$(python3 "$here/check_includes.py" "$tmp" --layers "$tmp/layers.txt"); then
  echo "layering: an upward include went unnoticed: $out"
  exit 1
fi
grep -q '^src/ir/upward.cc:2: ir includes gaf/session.h, of layer runtime above it$' <<<"$out" ||
  { echo "layering: unexpected report: $out"; exit 1; }
echo "layering: an upward include is caught"
