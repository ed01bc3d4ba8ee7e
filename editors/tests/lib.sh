# Shared by run_vscode_e2e.sh and run_nvim_e2e.sh (sourced, not run).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${FABRIC_LS_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fabric-ls-e2e}
mkdir -p "$CACHE"
T0=$(date +%s)

log() { printf '[%4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { log "ERROR: $*"; exit 2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi
}

# Installs the Debian packages that are missing (apt-get update only when something is).
ensure_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# Stops with the command to run when Debian packages are missing (the tests never install system packages).
require_apt() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] || die "missing Debian packages: ${missing[*]}; run editors/tests/setup.sh first"
}

# `npm ci` in $1 unless node_modules already matches package-lock.json.
ensure_npm_ci() {
  local dir=$1 stamp want
  stamp="$dir/node_modules/.package-lock.sha256"
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "npm ci in ${dir#"$REPO"/}"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" >"$stamp"
  fi
}

# The interpreter that runs the server: $FABRIC_LS_PYTHON, else python3. Unless it imports the server
# from this checkout (checked outside it: `python -c` puts the working directory on sys.path), fabric-ls
# is installed into it from here, editable, with its dependencies.
ensure_fabric_python() {
  FABRIC_PYTHON=${FABRIC_LS_PYTHON:-python3}
  FABRIC_PYTHON=$(command -v "$FABRIC_PYTHON") || die "no interpreter ${FABRIC_LS_PYTHON:-python3}"
  local check='import sys, fabric_ls.lsp.serve; sys.exit(not fabric_ls.__file__.startswith(sys.argv[1]))'
  if ! (cd / && "$FABRIC_PYTHON" -c "$check" "$REPO/" 2>/dev/null); then
    log "installing fabric-ls from $REPO into $FABRIC_PYTHON"
    "$FABRIC_PYTHON" -m pip install -q -e "$REPO"
    (cd / && "$FABRIC_PYTHON" -c "$check" "$REPO/") || die "fabric-ls from $REPO does not import in $FABRIC_PYTHON"
  fi
  log "server interpreter: $FABRIC_PYTHON"
}

# A fresh workspace in $1: the fixture (pyproject.toml) and a copy of the example script with a FAB001
# seed error (a copy: the tests apply the quick fix to it).
make_workspace() {
  local dest=$1
  mkdir -p "$dest"
  cp "$REPO/editors/tests/fixture/"* "$dest/"
  cp "$REPO/examples/deepspeed_separate_setup.py" "$dest/"
  git -C "$dest" init -q 2>/dev/null || true
}
