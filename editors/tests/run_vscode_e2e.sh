#!/usr/bin/env bash
# End-to-end test of vscode-client/ in a real VS Code: builds the .vsix (with the server bundled in it),
# installs it into code-server 4.100.3 (VS Code 1.100.3), opens the example script in headless Chromium
# and checks the diagnostic, the Problems panel, hover, the Ctrl+. quick fix, the restart command, the
# settings, the interpreter choice (setting, else the Python extension's environment), the bundled server
# in a bare virtualenv, fabricLs.importStrategy and the "needs Python 3.9" message.
#
# Needs what editors/tests/setup.sh installs (Debian packages, code-server@4.100.3 into $CACHE); it says so
# and stops when something is missing. It runs `npm ci` in vscode-client/ and editors/tests/vscode/ itself.
# Environment: FABRIC_LS_PYTHON (interpreter for the server, default python3), FABRIC_LS_E2E_CACHE
# (default ~/.cache/fabric-ls-e2e), UPDATE_README_SCREENSHOT=1 (refresh vscode-client/images/screenshot.png).
# Result: tests/artifacts/vscode/result.json and screenshots; exit code 0 when every step passed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CODE_SERVER_VERSION=4.100.3

require_apt chromium ripgrep libkrb5-dev build-essential python3-venv
ensure_fabric_python

CODE_SERVER_DIR="$CACHE/code-server-$CODE_SERVER_VERSION"
CODE_SERVER="$CODE_SERVER_DIR/node_modules/.bin/code-server"
XDG_CONFIG_HOME="$CACHE/xdg" "$CODE_SERVER" --version 2>/dev/null | grep -q "^$CODE_SERVER_VERSION " ||
  die "no code-server $CODE_SERVER_VERSION in $CODE_SERVER_DIR: run editors/tests/setup.sh first"

# A virtualenv with nothing but the standard library: the bundled server must run in it.
BARE_VENV="$CACHE/bare-venv"
[ -x "$BARE_VENV/bin/python" ] || python3 -m venv --without-pip "$BARE_VENV"

# A Python older than 3.9, for the "needs Python 3.9" notification: a real one when this machine has one
# (python3.8, or pyenv's), else a stand-in that answers the extension's probe as Python 3.8 would.
OLD_PYTHON=""
for candidate in $(command -v python3.8 python3.7 2>/dev/null) "$HOME"/.pyenv/versions/3.{8,7,6}*/bin/python; do
  if [ -x "$candidate" ] && "$candidate" -c 'import sys; sys.exit(not sys.version_info < (3, 9))' 2>/dev/null; then
    OLD_PYTHON=$candidate
    break
  fi
done
if [ -z "$OLD_PYTHON" ]; then
  OLD_PYTHON="$CACHE/python3.8-stand-in"
  printf '#!/bin/sh\necho "$0"\necho 3.8.18\nexit 4\n' >"$OLD_PYTHON"
  chmod +x "$OLD_PYTHON"
fi
log "Python older than 3.9: $OLD_PYTHON"

CLIENT="$REPO/vscode-client"
ensure_npm_ci "$CLIENT"
ensure_npm_ci "$REPO/editors/tests/vscode"
log "type check, lint, package the extension"
(cd "$CLIENT" && npm run --silent typecheck && npm run --silent lint && npm run --silent package >/dev/null)
VSIX="$CLIENT/fabric-ls.vsix"

E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/fabric-ls-vscode-e2e.XXXXXX")
trap 'rm -rf "$E2E_DIR"' EXIT
mkdir -p "$E2E_DIR/tmp" "$E2E_DIR/home"
# ms-python.python cannot be installed offline: a stand-in offers the part of its API the client uses.
STAND_IN_VSIX="$E2E_DIR/python-extension-stand-in.vsix"
(cd "$REPO/editors/tests/vscode/python-extension-stand-in" &&
  "$CLIENT/node_modules/.bin/vsce" package --allow-missing-repository --skip-license -o "$STAND_IN_VSIX" >/dev/null)

log "installing $(basename "$VSIX") and the Python extension stand-in into code-server"
for vsix in "$VSIX" "$STAND_IN_VSIX"; do
  HOME="$E2E_DIR/home" XDG_CONFIG_HOME="$E2E_DIR/home/.config" "$CODE_SERVER" --user-data-dir "$E2E_DIR/user-data" \
    --extensions-dir "$E2E_DIR/extensions" --install-extension "$vsix" >/dev/null
done
ls "$E2E_DIR/extensions" | grep -q '^fabric-ls\.fabric-ls-' || die "the extension did not install"
ls "$E2E_DIR/extensions" | grep -q '^ms-python\.python-' || die "the Python extension stand-in did not install"

make_workspace "$E2E_DIR/workspace"
cp "$REPO/tests/notebooks/mixed_precision_backward.ipynb" "$E2E_DIR/workspace/train.ipynb"
ARTIFACTS="$REPO/tests/artifacts/vscode"
rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"

README_SCREENSHOT=""
[ "${UPDATE_README_SCREENSHOT:-}" = 1 ] && README_SCREENSHOT="$CLIENT/images/screenshot.png"

log "running the browser test"
rc=0
CODE_SERVER="$CODE_SERVER" E2E_DIR="$E2E_DIR" WORKSPACE="$E2E_DIR/workspace" SCRIPT=deepspeed_separate_setup.py NOTEBOOK=train.ipynb \
  FABRIC_PYTHON="$FABRIC_PYTHON" BARE_PYTHON="$BARE_VENV/bin/python" OLD_PYTHON="$OLD_PYTHON" ARTIFACTS="$ARTIFACTS" \
  README_SCREENSHOT="$README_SCREENSHOT" node "$REPO/editors/tests/vscode/e2e.mjs" || rc=$?

# Workspace trust on (the test above runs with --disable-workspace-trust): Restricted Mode, then Trust.
TRUST_ARTIFACTS="$REPO/tests/artifacts/vscode-trust"
rm -rf "$TRUST_ARTIFACTS"
mkdir -p "$TRUST_ARTIFACTS"
log "running the workspace trust test"
CODE_SERVER="$CODE_SERVER" E2E_DIR="$E2E_DIR" FABRIC_PYTHON="$FABRIC_PYTHON" ARTIFACTS="$TRUST_ARTIFACTS" \
  node "$REPO/editors/tests/vscode/trust_e2e.mjs" || rc=$?
log "done (exit $rc)"
exit $rc
