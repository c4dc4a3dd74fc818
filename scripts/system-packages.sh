#!/usr/bin/env bash
# Install the Debian packages the test suite uses, when they are missing.
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The browser tests drive the headless shell (tests/browser/conftest.py): far less CPU per page.
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
# nginx: tests/deploy/test_deploy.py checks the site the guide installs with `nginx -t`.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
# Node.js runs the test OpenID Connect provider (tests/oidc) and the MCP reference server
# (tests/mcp_everything).
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "Missing system packages: ${need[*]}. Install them as root (apt-get install ${need[*]}) and re-run." >&2
    exit 1
  fi
fi
echo "==> Installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
