#!/usr/bin/env bash
# Install valgrind when it is missing and apt can install it, so the compile-work benchmarks
# (instructions per compile stage, counted under callgrind) are measured rather than skipped.
# Never fails: without valgrind those benchmarks skip and say how to install it.
set -uo pipefail
if command -v valgrind >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-valgrind: no apt-get here; the compile-work benchmarks will be skipped" >&2
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-valgrind: not root; run 'apt-get install valgrind' to measure compile work" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq >/dev/null && \
   apt-get install -y -qq --no-install-recommends valgrind >/dev/null; then
    echo "install-valgrind: installed $(valgrind --version 2>/dev/null || echo valgrind)" >&2
else
    echo "install-valgrind: apt-get could not install valgrind; compile work will be skipped" >&2
fi
exit 0
