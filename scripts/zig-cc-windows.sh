#!/usr/bin/env bash
# The C compiler of the Windows compile check on a
# non-Windows host (scripts/build-platforms.mjs, win32-x64-msvc): zig's clang compiling for
# Windows x64 against the mingw-w64 headers zig ships. Why not clang in MSVC mode? Its
# headers are the Windows SDK's and MSVC's, which only Microsoft's servers serve; mingw-w64's
# headers clash with clang's MSVC intrinsics (intrin.h) when mixed. So the C sources of
# libsqlite3-sys and ring are compiled to Windows x64 COFF objects here (every file, with
# the target's `_WIN32` code paths), and in MSVC mode by the release workflow's Windows job.
#
# cc-rs calls it with `--target=x86_64-pc-windows-msvc`: that is swapped for zig's
# `-target x86_64-windows-gnu`. Zig comes from PyPI (`python3 -m ziglang`) or PATH.
set -euo pipefail
zig=(zig)
command -v zig >/dev/null 2>&1 || zig=(python3 -m ziglang)
args=()
for a in "$@"; do
  case "$a" in
    --target=*|-target=*) ;;
    *) args+=("$a") ;;
  esac
done
exec "${zig[@]}" cc -target x86_64-windows-gnu "${args[@]}"
