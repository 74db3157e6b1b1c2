#!/usr/bin/env bash
# Installs what the tests need when it is missing (Debian packages, the redis-py test suite in
# a virtualenv), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_missing=()
command -v redis-server >/dev/null 2>&1 || apt_missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || apt_missing+=(redis-tools)
command -v memcached >/dev/null 2>&1 || apt_missing+=(memcached)
command -v memccapable >/dev/null 2>&1 || apt_missing+=(libmemcached-tools)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_missing+=(python3-venv)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || apt_missing+=(postgresql)
command -v runuser >/dev/null 2>&1 || apt_missing+=(util-linux)
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || apt_missing+=(chromium-driver)
command -v openssl >/dev/null 2>&1 || apt_missing+=(openssl)
command -v adduser >/dev/null 2>&1 || apt_missing+=(adduser)
command -v ip >/dev/null 2>&1 || apt_missing+=(iproute2)
command -v etcd >/dev/null 2>&1 || apt_missing+=(etcd-server)
if ((${#apt_missing[@]})); then
  echo "tests/run.sh: installing ${apt_missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi
# redis-server is the reference for tests/differential.rs and memcached for tests/memcache_e2e.rs
# (each started by the test on its own port); memccapable checks the proxy's Memcached port.
# PostgreSQL backs tests/storage_pg.rs: each test runs initdb + pg_ctl (as the postgres user)
# in a temporary directory on a free port; the package's own cluster is not used.
# Chromium and chromedriver run tests/console_browser.rs (the console's pages, headless); the
# openssl command gives its HTTPS test the hash of the certificate Chromium is to trust.
# adduser is what the Debian package's postinst makes its system user with.
# iproute2's ip makes the fault suite's hosts (tests/faults.rs): network namespaces, veth
# pairs and a bridge, made and removed by the test (CI runs as root).
# etcd-server's etcd backs etcd/tests/etcd_e2e.rs (a member of its own per test, in a
# temporary directory on free ports; the package's own service is not used).

tests/compat/setup-redis-py.sh
tests/compat/setup-pymemcache.sh
# Redis 7.0.15's TCL suite (tests/redis_tcl_suite.rs), from Debian's source package; tclsh runs it.
tests/compat/setup-redis-tcl.sh

# Style and lints: formatted as rustfmt.toml says, clippy clean (crate lints in Cargo.toml's
# [workspace.lints]), and the engine's layers only look down (ARCHITECTURE.md "Layers").
for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The engine's optional parts (storage adapters, the metrics endpoint) stay optional.
cargo clippy -p terrace-engine --no-default-features -- -D warnings
python3 tests/layers.py
# The fuzz targets (a workspace of their own, run with cargo-fuzz) still build.
cargo check --manifest-path fuzz/Cargo.toml --bins --locked

cargo test --workspace "$@"

# The Debian package: built with cargo-deb, installed, run as its units run it, purged.
tests/package/smoke.sh
