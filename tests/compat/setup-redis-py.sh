#!/usr/bin/env bash
# Prepares redis-py's own test suite (tests/ of the redis sdist on PyPI) in a virtualenv under
# target/redis-py, once. The `redis_py_suite` test runs it against the engine.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=5.0.8
dir=target/redis-py
if [ -f "$dir/ready-$version" ]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q --disable-pip-version-check "redis==$version" "pytest==8.3.5" "pytest-timeout==2.3.1" "packaging>=24"
"$dir/venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: -d "$dir" "redis==$version"
tar -xzf "$dir/redis-$version.tar.gz" -C "$dir"
mv "$dir/redis-$version/tests" "$dir/tests"
rm -rf "$dir/redis-$version" "$dir/redis-$version.tar.gz"
touch "$dir/ready-$version"
echo "redis-py $version test suite ready in $dir"
