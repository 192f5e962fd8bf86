#!/usr/bin/env node
// The `prepare` script: builds the native addon (`npm run build`) only in a source checkout,
// so that a fresh clone works with `npm install && npm run demo`.
//
// Why guard it? npm runs `prepare` after a plain `npm install` in the project itself, but
// also when it installs the package from a git URL or a folder. Only a checkout has the Rust
// sources and wants a Rust build. Users never reach this file: the published package.json has
// no scripts (scripts/pack-release.mjs strips them) and scripts/ is not in the tarball.
// `npm ci --ignore-scripts` skips it too (the release workflow's test jobs do that, then
// test the binary the build job made).

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Whether `root` is a source checkout to build in, and why (or why not). */
export function shouldBuild(root, exists = existsSync) {
  if (root.split(sep).includes('node_modules')) return { build: false, reason: 'installed as a dependency (inside node_modules)' };
  if (!exists(join(root, '.git'))) return { build: false, reason: 'not a git checkout (no .git)' };
  if (!exists(join(root, 'src')) || !exists(join(root, 'Cargo.toml'))) return { build: false, reason: 'no Rust sources (src/, Cargo.toml)' };
  return { build: true, reason: 'git checkout with Rust sources' };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const { build, reason } = shouldBuild(root);
  if (!build) {
    console.log(`prepare: skipping the native build: ${reason}`);
  } else {
    const cargo = spawnSync('cargo', ['--version'], { encoding: 'utf8' });
    if (cargo.status !== 0) {
      console.error(
        'prepare: building the native addon needs a Rust toolchain (1.85+, https://rustup.rs), and `cargo` was not found.\n' +
          'Install Rust and run npm install again, or point SANDBOX_ROUTER_NATIVE_PATH at a prebuilt sandbox-router.<triple>.node.',
      );
      process.exit(1);
    }
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const r = spawnSync(npm, ['run', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
    process.exit(r.status ?? 1);
  }
}
