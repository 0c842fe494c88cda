#!/usr/bin/env bash
# Install onnxruntime-node 1.30.0 into a cache folder, once.
#
#   bash bench/install_ort.sh          # -> bench/.cache/ort/node_modules/onnxruntime-node
#   KILN_ORT_CACHE=/some/dir bash bench/install_ort.sh
#
# Prints the path of the installed package folder on stdout (the last line), so callers can do
#   export ORT_NODE_MODULE="$(bash bench/install_ort.sh | tail -1)"
#
# The CPU execution provider's shared library ships inside the npm package; the package's own
# install script only fetches optional CUDA/TensorRT files, which these machines neither need nor
# can reach, so ONNXRUNTIME_NODE_INSTALL=skip turns it off.
set -euo pipefail

ORT_VERSION=1.30.0
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${KILN_ORT_CACHE:-$here/.cache/ort}"
pkg="$cache/node_modules/onnxruntime-node"

installed_version() {
    # Reads the version from the installed package.json without loading the native addon.
    [ -f "$pkg/package.json" ] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg/package.json" 2>/dev/null || true
}

if [ "$(installed_version)" = "$ORT_VERSION" ] \
   && node -e 'require(process.argv[1])' "$pkg" >/dev/null 2>&1; then
    echo "onnxruntime-node $ORT_VERSION already installed" >&2
    echo "$pkg"
    exit 0
fi

command -v node >/dev/null || { echo "install_ort.sh: node is not on PATH" >&2; exit 1; }
command -v npm >/dev/null || { echo "install_ort.sh: npm is not on PATH" >&2; exit 1; }

mkdir -p "$cache"
# A package.json of its own keeps npm from walking up into some other project's node_modules.
cp "$here/ort/package.json" "$cache/package.json"
echo "installing onnxruntime-node $ORT_VERSION into $cache" >&2
( cd "$cache" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error >&2 )

if [ "$(installed_version)" != "$ORT_VERSION" ]; then
    echo "install_ort.sh: onnxruntime-node $ORT_VERSION did not install into $pkg" >&2
    exit 1
fi
node -e 'const o = require(process.argv[1]); console.error("onnxruntime-node " + o.env.versions.common + " loads")' "$pkg"
echo "$pkg"
