#!/usr/bin/env bash
# Installs openssh-server when sshd is missing (the ssh/fabric tests start their own sshd
# on 127.0.0.1 with keys they make). Needs root or passwordless sudo for apt-get.
set -euo pipefail
if command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; then exit 0; fi
exec bash "$(dirname "$0")/apt_install.sh" ensure_sshd openssh-server
