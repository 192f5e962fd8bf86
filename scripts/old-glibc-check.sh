#!/usr/bin/env bash
# Opt-in proof that the release binary runs on an older glibc than this machine's 2.36
# (`npm run test:old-glibc`; needs root, debootstrap and the Debian mirror; ~1 minute and
# ~40 MB the first time). Not part of .ci/run: `npm run check:binary` is the gate, this is
# the end-to-end evidence behind it.
#
# It bootstraps a minimal Debian 11 (glibc 2.31, one of the systems on which a default
# build fails with "GLIBC_2.32 not found") under .tmp/, copies this machine's Node.js 20
# (which needs glibc 2.28) and the package's JavaScript plus npm/linux-x64-gnu's binary into
# it, and runs the README's program there: provision on the local runtime, echo, destroy.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=npm/linux-x64-gnu/sandbox-router.linux-x64-gnu.node
[ -f "$binary" ] || { echo "old-glibc-check: $binary is missing: run npm run build:dist" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "old-glibc-check: needs debootstrap (apt-get install debootstrap) and root" >&2; exit 1; }
root="$PWD/.tmp/bullseye"
if [ ! -x "$root/usr/bin/ldd" ]; then
  debootstrap --variant=minbase bullseye "$root" http://deb.debian.org/debian >/dev/null
fi
rm -rf "$root/t" && mkdir -p "$root/t/pkg"
cp "$(command -v node)" "$root/usr/local/bin/node"
cp -r index.js index.mjs package.json lib local "$root/t/pkg/"
cp "$binary" "$root/t/pkg/"
cat >"$root/t/try.mjs" <<'EOF'
import { createSandboxRouter } from '/t/pkg/index.mjs';
import native from '/t/pkg/lib/native.js';
const router = createSandboxRouter({ providers: { local: {} } });
const sandbox = await router.provision();
try {
  const result = await router.runScript(sandbox.id, { command: 'echo hello' });
  if (result.output.trim() !== 'hello') throw new Error(`unexpected output ${JSON.stringify(result.output)}`);
} finally {
  await router.destroy(sandbox.id);
}
console.log(`${native.locate().path} ran a sandbox round trip`);
EOF
echo "$(chroot "$root" /usr/bin/ldd --version | head -1), node $(chroot "$root" /usr/local/bin/node --version)"
chroot "$root" /usr/bin/env -u NODE_EXTRA_CA_CERTS /usr/local/bin/node /t/try.mjs
# Must-fire pair: a binary linked on this machine (the development build, if there is one)
# does not load there.
dev=sandbox-router.linux-x64-gnu.node
if [ -f "$dev" ]; then
  cp "$dev" "$root/t/dev.node"
  if out=$(chroot "$root" /usr/bin/env -u NODE_EXTRA_CA_CERTS /usr/local/bin/node -e "require('/t/dev.node')" 2>&1); then
    echo "old-glibc-check: the development build loaded on glibc 2.31 too; this check proves nothing" >&2
    exit 1
  fi
  echo "the development build does not load there: needs $(grep -m1 -oE "GLIBC_[0-9.]+" <<<"$out")"
fi
