#!/usr/bin/env bash
# Installs what the boot-fidelity tests (tests/fidelity) need when missing: cloud-init (its
# `cloud-init schema` validates the rendered cloud-config), shellcheck (every boot shell
# line), nftables (the declared firewall rules inside network namespaces) and iproute2.
# Needs root or passwordless sudo for apt-get.
set -euo pipefail
need=()
command -v cloud-init >/dev/null 2>&1 || need+=(cloud-init)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "ensure_boot_tools: ${need[*]} missing and I cannot install without root." >&2
    echo "  install them (e.g. 'sudo apt-get install -y ${need[*]}') and retry." >&2
    exit 1
  fi
fi
echo "ensure_boot_tools: installing ${need[*]} (apt-get)"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
