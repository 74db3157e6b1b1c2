#!/usr/bin/env bash
# Prepares Redis 7.0.15's own TCL test suite (runtest and tests/ of Debian's `redis` source
# package) under target/redis-tcl, once. The `redis_tcl_suite` test runs it against engines.
#
# apt-get reads a deb-src entry of our own, with its own lists and cache directories, so the
# system's sources and package lists stay as they are.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=7.0.15
dir=target/redis-tcl
if [ -f "$dir/ready-$version" ]; then
  exit 0
fi
command -v tclsh >/dev/null 2>&1 || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq tcl >/dev/null
}
rm -rf "$dir"
mkdir -p "$dir/apt/parts" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/download"
dir_abs=$(cd "$dir" && pwd)
cat >"$dir/apt/parts/redis-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_opts=(
  -o "Dir::Etc::SourceList=/dev/null"
  -o "Dir::Etc::SourceParts=$dir_abs/apt/parts"
  -o "Dir::State::Lists=$dir_abs/apt/lists"
  -o "Dir::Cache=$dir_abs/apt/cache"
)
apt-get -qq "${apt_opts[@]}" update
(cd "$dir/download" && apt-get -qq "${apt_opts[@]}" source --download-only redis)
orig=$(ls "$dir"/download/redis_"$version".orig.tar.* 2>/dev/null | head -n1 || true)
if [ -z "$orig" ]; then
  echo "setup-redis-tcl.sh: Debian's redis source is not $version: $(ls "$dir/download")" >&2
  exit 1
fi
tar -xf "$orig" -C "$dir"
mv "$dir/redis-$version" "$dir/redis"
rm -rf "$dir/apt" "$dir/download"
touch "$dir/ready-$version"
echo "redis $version TCL test suite ready in $dir/redis"
