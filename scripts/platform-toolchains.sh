#!/usr/bin/env bash
# Installs what `npm run build:platforms` and `npm run test:arm64` need on a Debian/Ubuntu
# x64 machine (`npm run setup:platforms`; idempotent, about 2 minutes from nothing, most of
# it compiling cargo-zigbuild). Every piece comes from a package registry these machines
# reach:
#   rustup    the standard library of the six other targets;
#   PyPI      zig 0.14.1 (the `ziglang` wheel; cargo-zigbuild runs it as `python3 -m ziglang`):
#             the C compiler and linker of the zig builds, with its own musl, glibc 2.17
#             stubs, libSystem stubs and mingw-w64 headers;
#   crates.io cargo-zigbuild (pinned);
#   apt       qemu-user-static, libc6-arm64-cross, libstdc++6-arm64-cross: the arm64 Node
#             under emulation (test:arm64 only; skipped with --no-apt or when not root).
# The release workflow's build job runs this script too (without apt).
set -euo pipefail
ZIG_VERSION=0.14.1
CARGO_ZIGBUILD_VERSION=0.24.1
TARGETS=(aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc)
apt=1
for arg in "$@"; do
  case "$arg" in
    --no-apt) apt=0 ;;
    *) echo "usage: bash scripts/platform-toolchains.sh [--no-apt]" >&2; exit 2 ;;
  esac
done

rustup target add "${TARGETS[@]}"

if ! python3 -m ziglang version 2>/dev/null | grep -qx "$ZIG_VERSION"; then
  python3 -m pip install --disable-pip-version-check "ziglang==$ZIG_VERSION"
fi
echo "zig $(python3 -m ziglang version)"

if ! cargo zigbuild --help >/dev/null 2>&1 || ! cargo install --list | grep -q "^cargo-zigbuild v$CARGO_ZIGBUILD_VERSION:"; then
  cargo install --locked cargo-zigbuild --version "$CARGO_ZIGBUILD_VERSION"
fi

if [ "$apt" = 1 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "platform-toolchains: not root: skipping apt (qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross, for test:arm64)" >&2
  elif ! dpkg -s qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross
  fi
fi
echo "platform-toolchains: ready"
