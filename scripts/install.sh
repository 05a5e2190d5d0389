#!/usr/bin/env bash
# Install target: builds the release binary and installs it with its manual pages.
#   scripts/install.sh [PREFIX]     default PREFIX /usr/local
# Installs PREFIX/bin/foresight and PREFIX/share/man/man1/foresight*.1 (foresight(1) and one
# page per subcommand). DESTDIR, when set, is prepended to every installed path (packaging);
# PROFILE (default release) is the cargo profile built.
set -euo pipefail
prefix="${1:-/usr/local}"
case "$prefix" in
  /*) ;;
  *) prefix="$PWD/$prefix" ;; # relative to where it is run from
esac
root="${DESTDIR:-}$prefix"
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
profile="${PROFILE:-release}"
cargo build --profile "$profile" --locked -p foresight-cli
case "$profile" in
  dev) out=debug ;;
  *) out="$profile" ;;
esac
bin="${CARGO_TARGET_DIR:-target}/$out/foresight"

man="$(mktemp -d)"
trap 'rm -rf "$man"' EXIT
"$bin" docs man --out "$man"

install -d "$root/bin" "$root/share/man/man1"
install -m 0755 "$bin" "$root/bin/foresight"
install -m 0644 "$man"/*.1 "$root/share/man/man1/"
echo "installed $root/bin/foresight and $(find "$man" -name '*.1' | wc -l) manual pages in $root/share/man/man1"
