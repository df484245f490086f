#!/usr/bin/env bash
# apt_install.sh WHO PACKAGE...: installs Debian packages with apt-get, as root or through
# passwordless sudo; WHO names the calling script in what it prints. Nothing to do without
# packages. The ensure_*.sh scripts work out what is missing and call this.
set -euo pipefail
who=$1
shift
if [ $# -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "$who: $* missing and I cannot install without root." >&2
    echo "  install them (e.g. 'sudo apt-get install -y $*') and retry." >&2
    exit 1
  fi
fi
echo "$who: installing $* (apt-get)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
