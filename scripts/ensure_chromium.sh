#!/usr/bin/env bash
# Installs headless Chromium (Debian package `chromium`) when missing: tests/report renders
# the HTML reports in it and checks what a person sees in the first screen (1280×800).
# Needs root or passwordless sudo for apt-get.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi
exec bash "$(dirname "$0")/apt_install.sh" ensure_chromium chromium fonts-dejavu-core
