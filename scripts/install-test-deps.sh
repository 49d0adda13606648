#!/usr/bin/env bash
# Installs what the test suite needs beyond PyPI: Debian's chromium for the inspector's browser tests.
# Idempotent; the tests that need chromium are skipped with a reason only if this cannot install it.
set -u
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    echo "installing Debian chromium for browser tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "warning: could not install chromium; browser tests will fail"
  fi
fi
exit 0
