#!/usr/bin/env bash
# Install and start what the test suite needs beyond Python packages.
# Idempotent: installs only what is missing, starts only what is not running.
set -euo pipefail

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "system-deps: please install: $*" >&2
    return 1
  fi
  if [ -z "${_apt_updated:-}" ]; then
    apt-get update -qq || true
    _apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

need=()
command -v make >/dev/null || need+=(make)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)   # the SSH transport's tests start their own sshd
command -v redis-server >/dev/null || need+=(redis-server)   # leases, Celery broker, restart tests
[ -x /usr/sbin/ser2net ] || need+=(ser2net)   # tests/test_peer_ser2net.py exports PTY boards through it
[ -x /usr/sbin/dnsmasq ] || need+=(dnsmasq-base)   # netboot start serves DHCP/TFTP with it (netns tests)
[ -x /bin/busybox ] || need+=(busybox-static)   # udhcpc and tftp as the netboot tests' target
command -v ip >/dev/null || need+=(iproute2)   # the netns tests build their wire with ip netns/veth
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)   # the QEMU board netboots in tests
[ -f /usr/lib/ipxe/qemu/pxe-e1000.rom ] || need+=(ipxe-qemu)   # its NIC's iPXE ROM
command -v systemd-analyze >/dev/null || need+=(systemd)   # panio setup verifies the worker's unit offline
command -v useradd >/dev/null || need+=(passwd)   # the setup test provisions a fresh user as its "host"
command -v ssh >/dev/null || need+=(openssh-client)   # Ansible reaches hosts with OpenSSH's client
command -v tesseract >/dev/null || need+=(tesseract-ocr)   # video read (OCR)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ] || need+=(fonts-dejavu-core)   # the simulated screen's font
[ -x /usr/bin/chromium ] || need+=(chromium)   # tests/test_dashboard_browser.py: the dashboard in a real browser
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)   # ... driven by Selenium
command -v adb >/dev/null || need+=(adb)   # the adb channel's tests: Debian's adb client against the simulated Android device
if [ ${#need[@]} -gt 0 ]; then
  echo "system-deps: installing ${need[*]}"
  apt_install "${need[@]}"
fi

# Redis on 127.0.0.1:6379 (tests use their own key prefixes).
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  echo "system-deps: starting redis on 127.0.0.1:6379"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "${TMPDIR:-/tmp}" --logfile "${TMPDIR:-/tmp}/panio-ci-redis.log"
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break; sleep 0.1; done
fi

# PostgreSQL (optional: its tests skip, saying why, when it is absent).
if command -v pg_ctlcluster >/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "system-deps: starting postgresql"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
# sshd needs its privilege-separation directory even when started by a test.
if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -p /run/sshd && chmod 755 /run/sshd; fi

# The QEMU board's kernel and initramfs, cached under the state dir (no kernel is installed).
"$(dirname "$0")/qemu-board-image.sh" || echo "system-deps: the QEMU board image could not be built; its tests skip" >&2
