#!/usr/bin/env bash
# Installs what the boot-fidelity tests (tests/fidelity) need when missing: cloud-init (its
# `cloud-init schema` validates the rendered cloud-config), shellcheck (every boot shell
# line), nftables (the declared firewall rules inside network namespaces), iptables (the
# VMs' host firewall: COS's INPUT policy, dockerd's chains, the rules the boot adds) and
# iproute2.
# Needs root or passwordless sudo for apt-get.
set -euo pipefail
need=()
command -v cloud-init >/dev/null 2>&1 || need+=(cloud-init)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need+=(iptables)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
exec bash "$(dirname "$0")/apt_install.sh" ensure_boot_tools "${need[@]}"
