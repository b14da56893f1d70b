#!/usr/bin/env bash
# Installs a headless browser for the step-score viewer's browser test (tests/commands/test_viewer.py): Debian's `chromium`
# package, where no chromium is found ($ARES_CHROMIUM, or chromium / chromium-browser / google-chrome on the PATH).
# Needs apt-get, as root or with password-less sudo. Never fails the caller: when the browser cannot be installed
# the browser test skips and says why (under CI, where $CI is set, it fails instead).
set -uo pipefail
if [ -n "${ARES_CHROMIUM:-}" ] && command -v "$ARES_CHROMIUM" >/dev/null 2>&1; then
  exit 0
fi
for name in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "WARNING: no chromium and no apt-get: install Chromium (or set ARES_CHROMIUM) for the viewer's browser test"
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    echo "WARNING: installing chromium needs root (apt-get): the viewer's browser test will skip"
    exit 0
  fi
fi
log=$(mktemp "${TMPDIR:-/tmp}/install-chromium.XXXXXX")
echo "Installing Debian's chromium for the viewer's browser test (once; log: $log)"
if ! { "${sudo[@]}" apt-get update -q && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q chromium; } \
    >"$log" 2>&1; then
  tail -n 5 "$log"
  echo "WARNING: installing chromium failed; the viewer's browser test will skip"
  exit 0
fi
rm -f "$log"
exit 0
