#!/usr/bin/env bash
# The Debian package end to end, as an operator meets it: `cargo deb` builds it from the
# release binary, `dpkg -i` installs it, the installed binaries start the way the systemd units
# start them (each unit's ExecStart, as its User; there is no systemd in CI, so the units'
# hardening is not exercised here), a Redis and a Memcached client go through the proxy and the
# console answers, then `dpkg --purge` removes it and nothing of it is left. Run as root
# (tests/run.sh runs it after the cargo tests); the packaged configuration's ports (engines
# 7001 and 7002, proxy 6379 and 11211, console 8080) must be free.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ]; then
  echo "tests/package/smoke.sh: dpkg -i needs root" >&2
  exit 1
fi
for port in 7001 7002 6379 11211 8080; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "tests/package/smoke.sh: port $port is in use; the packaged configuration needs it" >&2
    exit 1
  fi
done
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked --quiet cargo-deb --version 3.8.0

cargo build --release --locked --bin terrace
rm -rf target/man
target/release/terrace man target/man
deb=target/debian/terrace-smoke.deb
rm -f "$deb"
cargo deb --no-build --locked --output "$deb" >/dev/null
dpkg-deb --info "$deb" | grep "Package: terrace" >/dev/null

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  pkill -TERM -u terrace 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
}
cleanup() {
  stop_all
  dpkg --purge terrace >/dev/null 2>&1 || true
}
trap cleanup EXIT

dpkg -i "$deb"
test -x /usr/bin/terrace
getent passwd terrace >/dev/null
test "$(stat -c '%U %a' /var/lib/terrace)" = "terrace 750"
test "$(stat -c '%U %G %a' /etc/terrace/terrace.toml)" = "root terrace 640"
dpkg-query -W -f='${Conffiles}\n' terrace | grep /etc/terrace/terrace.toml >/dev/null
ls /usr/share/man/man1/terrace.1* /usr/share/man/man1/terrace-proxy.1* >/dev/null
for unit in terrace-engine@.service terrace-proxy.service terrace-console.service; do
  grep -q '^NoNewPrivileges=yes' "/usr/lib/systemd/system/$unit"
  grep -q '^ProtectSystem=strict' "/usr/lib/systemd/system/$unit"
done
/usr/bin/terrace --help | grep "tls-gen" >/dev/null

# Each unit's ExecStart as its User; StateDirectory= made by hand, as systemd would.
exec_start() { # UNIT [INSTANCE]
  local line
  line=$(grep '^ExecStart=' "/usr/lib/systemd/system/$1" | head -1)
  line=${line#ExecStart=}
  echo "${line//%i/${2:-}}"
}
start_unit() { # UNIT [INSTANCE]
  local cmd
  cmd=$(exec_start "$@")
  # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
  runuser -u terrace -- $cmd >"/tmp/terrace-smoke-$1${2:-}.log" 2>&1 &
  pids+=($!)
}
wait_port() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on $1" >&2
  cat /tmp/terrace-smoke-*.log >&2
  exit 1
}
for port in 7001 7002; do
  install -d -o terrace -g terrace -m 0750 "/var/lib/terrace/engine-$port"
  start_unit terrace-engine@.service "$port"
  wait_port "$port"
done
start_unit terrace-proxy.service
wait_port 6379
wait_port 11211
start_unit terrace-console.service
wait_port 8080

# Through the proxy: Redis (keys on both engines) and Memcached.
for i in $(seq 1 20); do redis-cli -p 6379 SET "smoke:$i" "v$i" >/dev/null; done
test "$(redis-cli -p 6379 GET smoke:7)" = v7
test "$(redis-cli -p 7001 DBSIZE)" -gt 0
test "$(redis-cli -p 7002 DBSIZE)" -gt 0
got=$(exec 3<>/dev/tcp/127.0.0.1/11211; printf 'set mc 0 0 2\r\nhi\r\nget mc\r\nquit\r\n' >&3; cat <&3)
case "$got" in *"VALUE mc 0 2"*hi*END*) ;; *) echo "memcached through the proxy: $got" >&2; exit 1 ;; esac
python3 -c 'import urllib.request, sys; r = urllib.request.urlopen("http://127.0.0.1:8080/login"); sys.exit(r.status != 200)'
# The engines write their state where the units say, as the terrace user.
redis-cli -p 7001 SAVE >/dev/null
test "$(stat -c '%U' /var/lib/terrace/engine-7001/dump.rdb)" = terrace

stop_all
dpkg --purge terrace
if dpkg-query -W terrace >/dev/null 2>&1; then
  echo "tests/package/smoke.sh: terrace is still installed after dpkg --purge" >&2
  exit 1
fi
for gone in /usr/bin/terrace /etc/terrace /var/lib/terrace /usr/lib/systemd/system/terrace-proxy.service /usr/share/man/man1/terrace.1.gz; do
  if [ -e "$gone" ]; then
    echo "tests/package/smoke.sh: $gone is left after dpkg --purge" >&2
    exit 1
  fi
done
echo "package smoke test: built, installed, served through the proxy, purged"
