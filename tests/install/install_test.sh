#!/usr/bin/env bash
# The installed library (#27 item 3): cmake --install into a fresh prefix, then the example in examples/ built
# against that prefix alone, once through find_package(graph_autofusion) and once through pkg-config, and run on a
# model. Nothing may come from the build or source tree.
#   install_test.sh BUILD_DIR SOURCE_DIR MODEL
set -euo pipefail
build=$1
src=$2
model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in bin/graph-autofusion lib/libgaf.a include/gaf/session.h lib/cmake/graph_autofusion/graph_autofusionConfig.cmake \
  lib/pkgconfig/graph_autofusion.pc; do
  [ -e "$prefix/$f" ] || { echo "install: $f missing"; exit 1; }
done
[ ! -e "$prefix/include/gaf/../../src" ] || { echo "install: internal sources installed"; exit 1; }

# find_package
cmake -S "$src/examples" -B "$tmp/ex" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/ex" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
if grep -q -- "-I$src/include" "$tmp/ex/compile_commands.json"; then
  echo "install: the example compiled against the source tree's headers"
  exit 1
fi
out=$("$tmp/ex/run_model" "$model")
echo "$out"
grep -q "Fused" <<<"$out" && grep -qE "^[^:]+: float\[" <<<"$out" || { echo "install: unexpected output"; exit 1; }

# pkg-config
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs graph_autofusion)
grep -q -- "-I$prefix/lib/pkgconfig/../../include" <<<"$flags" || { echo "install: pkg-config flags: $flags"; exit 1; }
# shellcheck disable=SC2086  # the flags are words
c++ "$src/examples/run_model.cc" $flags -o "$tmp/run_model_pc"
"$tmp/run_model_pc" "$model" | grep -q "Fused" || { echo "install: the pkg-config build does not run"; exit 1; }
echo "install: find_package and pkg-config builds run"
