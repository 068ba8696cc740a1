#!/usr/bin/env bash
# Install Debian's chromium (and iproute2, whose `ip` brings up loopback in the test's own
# network namespace) when missing and apt can install them, so the dashboard and report
# screenshots are checked in a headless browser with the network cut off rather than skipped.
# Never fails: without chromium those checks skip and say how to install it.
set -uo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here; the browser checks will be skipped" >&2
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-chromium: not root; run 'apt-get install ${missing[*]}' for the browser checks" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq >/dev/null && \
   apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    echo "install-chromium: installed ${missing[*]}" >&2
else
    echo "install-chromium: apt-get could not install ${missing[*]}; browser checks skip" >&2
fi
exit 0
