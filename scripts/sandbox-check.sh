#!/usr/bin/env bash
# Commands the model runs are sandboxed with bubblewrap (SANDBOX=auto, docs/security.md). Install it
# on Debian when it is missing and we may; otherwise say plainly what that means.
set -uo pipefail

if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [ "${SANDBOX:-auto}" = "none" ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo"
fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; then
  echo "==> Installing bubblewrap, the sandbox for commands the model runs"
  export DEBIAN_FRONTEND=noninteractive
  if $SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 \
    || { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; }; then
    exit 0
  fi
fi
echo "!!  bubblewrap (bwrap) is not installed, so commands cannot be sandboxed: only users with the" >&2
echo "!!  'run unsandboxed commands' permission may run them. Install it: apt-get install bubblewrap" >&2
exit 0
