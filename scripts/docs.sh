#!/usr/bin/env bash
# The documentation site (docs/mkdocs.yml, pages in docs/src): installs MkDocs into
# target/docs-venv when missing (pip, 10 to 30 s), then builds the site into target/site in
# strict mode, so that a link to a missing page or anchor fails the build.
#   scripts/docs.sh          build and check
#   scripts/docs.sh serve    serve it at http://127.0.0.1:8000/, rebuilt on every change
set -euo pipefail
cd "$(dirname "$0")/.."
MKDOCS_VERSION=1.6.1
venv=target/docs-venv
if ! "$venv/bin/mkdocs" --version 2>/dev/null | grep -q "version $MKDOCS_VERSION "; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    # Debian keeps venv (ensurepip) apart, in python3-venv.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    python3 -m venv "$venv" || {
      echo "python3 -m venv failed: install Debian's python3-venv" >&2
      exit 1
    }
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "mkdocs==$MKDOCS_VERSION"
fi
case "${1:-build}" in
  build)
    # Not `-q`: strict mode counts the warnings it prints, and quiet hides them.
    status=0
    log="$("$venv/bin/mkdocs" build --strict --config-file docs/mkdocs.yml 2>&1)" || status=$?
    grep -v '^INFO' <<<"$log" || true
    [ "$status" = 0 ] && echo "documentation site built in target/site (links checked)"
    exit "$status"
    ;;
  serve) exec "$venv/bin/mkdocs" serve --strict --config-file docs/mkdocs.yml ;;
  *)
    echo "usage: scripts/docs.sh [build|serve]" >&2
    exit 2
    ;;
esac
