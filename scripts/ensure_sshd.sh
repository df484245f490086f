#!/usr/bin/env bash
# Installs openssh-server when sshd is missing (the ssh/fabric tests start their own sshd
# on 127.0.0.1 with keys they make). Needs root or passwordless sudo for apt-get.
set -euo pipefail
if command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "ensure_sshd: sshd is missing and I cannot install it without root." >&2
    echo "  install openssh-server (e.g. 'sudo apt-get install -y openssh-server') and retry." >&2
    exit 1
  fi
fi
echo "ensure_sshd: installing openssh-server (apt-get)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssh-server >/dev/null
