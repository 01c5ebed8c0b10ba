#!/usr/bin/env bash
# Host fidelity for Pi: the real Pi coding agent drives our extension and `agentnotify pi`
# (tests/hosts/test_pi.py, docs/HOSTS.md).
#
#   bash tests/hosts/pi.sh                      # pinned Pi, binaries from target/debug
#   bash tests/hosts/pi.sh PiRpcTests           # one class (or Class.test_name)
#
# Installs the pinned npm package into target/npm/pi-coding-agent-<version>/ (never
# globally) when it is not there yet, builds the binaries unless AGENTNOTIFY_BIN_DIR names
# them, and runs test_pi.py. Exits non-zero on any failure.
set -euo pipefail

PINNED_PI=0.73.1

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
version=${HOST_PI_VERSION:-$PINNED_PI}
dir="${CARGO_TARGET_DIR:-$repo/target}/npm/pi-coding-agent-$version"
export PI_BIN="$dir/node_modules/.bin/pi"

if ! "$PI_BIN" --version 2>&1 | grep -qxF "$version"; then  # (Pi prints it on stderr)
  echo "hosts: installing @mariozechner/pi-coding-agent@$version" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error "@mariozechner/pi-coding-agent@$version" >&2
fi

if [ -z "${AGENTNOTIFY_BIN_DIR:-}" ]; then
  (cd "$repo" && cargo build --locked --quiet --bins)
  export AGENTNOTIFY_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug"
fi

exec python3 "$here/test_pi.py" "$@"
