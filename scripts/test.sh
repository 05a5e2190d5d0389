#!/usr/bin/env bash
# The README's test command: installs what a fresh Debian machine lacks (as root, with
# apt-get: Slurm and munge, Chromium and chromedriver, PostgreSQL's server binaries, gcc,
# passwd, openssl, man-db, nftables, iproute2, curl and iperf3; with pip:
# openapi-spec-validator and, in a venv, MkDocs), then checks formatting, lints, doc links
# and the documentation site's links, and runs every test. CI runs it too (.ci/run). It sets
# CI, so a test whose service is missing fails instead of skipping: without root the
# services cannot be installed, and their tests fail saying what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CI="${CI:-true}"

if ! command -v cargo >/dev/null 2>&1; then
  export PATH="$HOME/.cargo/bin:$PATH"
  command -v cargo >/dev/null 2>&1 || { echo "no Rust toolchain (cargo) on this machine" >&2; exit 1; }
fi

# Real Slurm 22.05 clusters on loopback for the Slurm integration tests (they skip without
# FORESIGHT_SLURM_CONFS). The script installs Debian's slurm-wlm and munge when missing.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  scripts/local-slurm.sh start 2 >/dev/null
  trap 'scripts/local-slurm.sh stop >/dev/null 2>&1 || true' EXIT
  # shellcheck disable=SC1091
  source "${FORESIGHT_SLURM_DIR:-/tmp/foresight-slurm}/env"
  export FORESIGHT_SLURM_CONFS
fi

# Headless Chromium and chromedriver for the dashboard's browser test
# (crates/foresight-cli/tests/cli/dashboard.rs, which fails under CI without them).
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# The security suite (crates/foresight-cli/tests/cli/security.rs) makes throwaway accounts
# (useradd) and builds a loader probe (cc); the TLS tests make certificates with openssl.
if ! { command -v cc && command -v useradd && command -v openssl; } >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc passwd openssl >/dev/null
fi

# `man`, which renders the manual pages in crates/foresight-cli/tests/cli/docs.rs.
if ! command -v man >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq man-db >/dev/null
fi

# The grid across hosts (crates/foresight-cli/tests/hosts): network namespaces joined by
# links shaped with tc and nftables, requests sent from a site's namespace with curl, and
# iperf3 for the throughput it measures (its #[ignore]d numbers).
if ! { command -v nft && command -v tc && command -v ip && command -v curl && command -v iperf3; } \
  >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables iproute2 curl iperf3 >/dev/null
fi

# The independent OpenAPI validator run by crates/foresight-cli/tests/cli/openapi.rs.
if ! command -v openapi-spec-validator >/dev/null 2>&1; then
  python3 -m pip install -q openapi-spec-validator
fi

# PostgreSQL's server binaries for the PostgreSQL store tests (crates/foresight-testkit starts
# a throwaway server per test binary; none is kept running here).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
  && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  service postgresql stop >/dev/null 2>&1 || true  # the package's own cluster is not used
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Doc comments whose links resolve (one stale link misleads every reader of the API docs).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked --quiet
# The documentation site (docs/): MkDocs into target/docs-venv, built into target/site in
# strict mode, so a link to a missing page or anchor fails here (about 30 s with the install).
scripts/docs.sh
# Every test, then how many tests each binary ran (a binary that ran none is as visible as
# one that failed).
log="$(mktemp)"
set +e
cargo test --workspace --profile ci --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^ *(Running|Doc-tests) /{bin=$NF; gsub(/[()]/, "", bin); sub(/.*\//, "", bin)}
     /^test result:/{print "  " bin ": " $4 " passed, " $6 " failed, " $8 " ignored";
                     p += $4; f += $6}
     END {print "the tests each binary ran are above; all of them:"; print "total: " p " passed, " f " failed"}' "$log"
rm -f "$log"
exit "$status"
