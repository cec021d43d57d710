#!/usr/bin/env bash
# Install and start what the test suite needs beyond Python packages.
# Idempotent: does nothing when everything is already there.
set -euo pipefail
need=()
command -v make >/dev/null || need+=(make)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)   # the SSH transport's tests start their own sshd
command -v redis-server >/dev/null || need+=(redis-server)   # leases, Celery broker, restart tests
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  else
    echo "system-deps: please install: ${need[*]}" >&2; exit 1
  fi
fi
# sshd needs its privilege-separation directory even when started by a test.
if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then mkdir -p /run/sshd && chmod 755 /run/sshd; fi
# Jobs, leases and workers need Redis on loopback: start one if none answers.
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save "" >/dev/null
fi
