#!/usr/bin/env bash
# Prepares pymemcache's own integration tests (pymemcache/test/ of the sdist on PyPI) in a
# virtualenv under target/pymemcache, once. The `memcache_e2e` tests run them against the proxy.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=4.0.0
dir=target/pymemcache
if [ -f "$dir/ready-$version" ]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q --disable-pip-version-check "pymemcache==$version" "pytest==8.3.5" "pytest-timeout==2.3.1"
"$dir/venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$dir" "pymemcache==$version"
tar -xzf "$dir/pymemcache-$version.tar.gz" -C "$dir"
mv "$dir/pymemcache-$version/pymemcache/test" "$dir/test"
rm -rf "$dir/pymemcache-$version" "$dir/pymemcache-$version.tar.gz"
touch "$dir/ready-$version"
echo "pymemcache $version integration tests ready in $dir"
