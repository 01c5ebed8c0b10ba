#!/usr/bin/env bash
# Host fidelity suite: the real Claude Code and Codex drive our hook (see docs/HOSTS.md).
#
#   bash tests/hosts/run.sh                     # pinned hosts, binaries from target/debug
#   bash tests/hosts/run.sh CodexTests          # one class (or Class.test_name)
#   HOST_CLAUDE_VERSION=latest HOST_CODEX_VERSION=0.170.0 bash tests/hosts/run.sh
#
# Installs each host from npm into tests/hosts/.hosts/<host>-<version>/ (git-ignored) when
# it is not there yet, builds the binaries unless AGENTNOTIFY_BIN_DIR names them, and runs
# test_hosts.py. Exits non-zero on any failure; AGENTNOTIFY_HOST_TESTS=0 skips (and says so).
set -euo pipefail

# The versions the suite is pinned to. Override with HOST_CLAUDE_VERSION / HOST_CODEX_VERSION
# (an exact version, or a dist-tag / range such as `latest`).
PINNED_CLAUDE=2.1.328
PINNED_CODEX=0.169.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [ "${AGENTNOTIFY_HOST_TESTS:-1}" = 0 ]; then
  echo "hosts: SKIPPED the whole host fidelity suite (AGENTNOTIFY_HOST_TESTS=0)"
  exit 0
fi

say() { echo "hosts: $*" >&2; }

# An exact version for a spec: `2.1.328` stays as is; `latest`, `next`, `^2` are resolved.
resolve() {
  local package=$1 spec=$2
  if [[ $spec =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "$spec"
    return
  fi
  npm view "$package@$spec" version --json 2>/dev/null \
    | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v[-1] if isinstance(v,list) else v)'
}

# The first of the given executables that reports `version`.
working() {
  local version=$1 exe
  shift
  for exe in "$@"; do
    if [ -x "$exe" ] && "$exe" --version 2>/dev/null | grep -qF "$version"; then
      echo "$exe"
      return 0
    fi
  done
  return 1
}

# Installs `package@version` into its own folder unless it is there; prints the executable.
# Claude Code's npm package puts its native binary (from an optional platform package) in
# place with an install script; if npm did not run that script, the platform package's
# binary is used directly.
install_host() {
  local name=$1 package=$2 version=$3 bin=$4
  local dir="$here/.hosts/$name-$version"
  local candidates=("$dir/node_modules/.bin/$bin" "$dir"/node_modules/"$package"-linux-*/"$bin")
  if ! working "$version" "${candidates[@]}" >/dev/null; then
    say "installing $package@$version"
    rm -rf "$dir"
    mkdir -p "$dir"
    # No lock file: the version is exact, and the platform binaries it pulls in are
    # pinned exactly by the package itself (optional dependencies on the npm registry).
    npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error "$package@$version" >&2
  fi
  candidates=("$dir/node_modules/.bin/$bin" "$dir"/node_modules/"$package"-linux-*/"$bin")
  if ! working "$version" "${candidates[@]}"; then
    say "$package@$version did not install a working '$bin' in $dir"
    "$dir/node_modules/.bin/$bin" --version >&2 || true
    exit 1
  fi
}

claude_version=$(resolve @anthropic-ai/claude-code "${HOST_CLAUDE_VERSION:-$PINNED_CLAUDE}")
codex_version=$(resolve @openai/codex "${HOST_CODEX_VERSION:-$PINNED_CODEX}")
[ -n "$claude_version" ] && [ -n "$codex_version" ] || { say "cannot resolve the host versions"; exit 1; }
export CLAUDE_BIN CODEX_BIN
CLAUDE_BIN=$(install_host claude @anthropic-ai/claude-code "$claude_version" claude)
CODEX_BIN=$(install_host codex @openai/codex "$codex_version" codex)

if [ -z "${AGENTNOTIFY_BIN_DIR:-}" ]; then
  (cd "$repo" && cargo build --locked --quiet --bins)
  export AGENTNOTIFY_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/debug"
fi

if ! command -v tmux >/dev/null && [ "${HOSTS_TUI:-1}" != 0 ]; then
  say "tmux is missing (needed for the Claude and Codex TUI cases); installing it"
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq tmux >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq tmux; }) >&2 || true
  fi
fi

# Hermes Agent (PyPI, in its own venv under target/) runs with the whole suite only; a
# failure there still lets the Claude and Codex cases run, and fails the suite after them.
hermes_status=0
if [ $# -eq 0 ]; then
  bash "$here/run_hermes.sh" || hermes_status=$?
fi

python3 "$here/test_hosts.py" "$@"
exit "$hermes_status"
