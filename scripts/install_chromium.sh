#!/usr/bin/env bash
# Make a headless Chromium available for the browser tests of manip_view (Debian's `chromium` package).
# Prints the browser's path and exits 0, or says why it cannot and exits 1 (the tests then skip with that line).
#   scripts/install_chromium.sh        # installs with apt-get when run as root (or through sudo -n)
# CHROMIUM=/path/to/chromium overrides the search.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
find_browser() {
    for c in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
        [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; }
    done
    return 1
}
find_browser && exit 0
command -v apt-get >/dev/null 2>&1 \
    || { echo "no chromium and no apt-get on this machine: install Chromium and set CHROMIUM=..." >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "no chromium, and installing it needs root: sudo apt-get install chromium" >&2; exit 1
fi
echo "installing Debian's chromium package (apt-get install chromium; about 100 MB, once)" >&2
mkdir -p build/logs
{ "${SUDO[@]}" apt-get update -q && DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q chromium; } \
    >build/logs/apt-chromium.log 2>&1 \
    || { echo "apt-get install chromium failed (last line of build/logs/apt-chromium.log:" \
              "$(tail -n 1 build/logs/apt-chromium.log))" >&2; exit 1; }
find_browser || { echo "apt-get installed chromium but no chromium command was found" >&2; exit 1; }
