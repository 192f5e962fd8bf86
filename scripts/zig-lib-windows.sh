#!/usr/bin/env bash
# The archiver of the Windows compile check (scripts/build-platforms.mjs): zig's lib.exe
# work-alike (`-out:x.lib a.obj …`), as cc-rs calls the archiver for an MSVC target.
set -euo pipefail
if command -v zig >/dev/null 2>&1; then exec zig lib "$@"; fi
exec python3 -m ziglang lib "$@"
