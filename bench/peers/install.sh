#!/usr/bin/env bash
# Installs onnxruntime-node (the ONNX Runtime peer of bench/peers/run.sh) into bench/peers/node_modules.
#
# The package's install script downloads GPU binaries, which fails without network access beyond the npm registry;
# the CPU binaries ship inside the package, so the script is skipped (ONNXRUNTIME_NODE_INSTALL=skip,
# --ignore-scripts). Nothing is written outside bench/peers/node_modules (--no-save: no package.json or lock file).
# Does nothing when onnxruntime-node 1.30.x is already there.
set -euo pipefail

version=1.30
here=$(cd "$(dirname "$0")" && pwd)
package=$here/node_modules/onnxruntime-node/package.json

die() { echo "install.sh: $*" >&2; exit 1; }
for tool in node npm; do
  command -v "$tool" >/dev/null || die "'$tool' is missing; install Node.js (Debian: apt-get install nodejs npm)"
done

if [[ -f $package ]]; then
  installed=$(node -p 'require(process.argv[1]).version' "$package")
  if [[ $installed == "$version".* ]]; then
    echo "onnxruntime-node $installed already in $here/node_modules"
    exit 0
  fi
fi

# --prefix: npm would otherwise install next to the nearest package.json or node_modules above this folder.
ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$here" --ignore-scripts --no-save --no-audit --no-fund \
  "onnxruntime-node@$version"
(cd "$here" && node -e "require('onnxruntime-node')") || die "onnxruntime-node was installed but does not load"
echo "onnxruntime-node $(node -p 'require(process.argv[1]).version' "$package") installed in $here/node_modules"
