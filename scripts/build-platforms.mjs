#!/usr/bin/env node
// Builds the release binary of each published platform (`npm run build:platforms`), the way
// the release workflow does: the workflow's build job runs this script, one `--target` a
// job, so what passes here is what it runs. Each build goes to its own target dir
// (target/platforms/<rust target>), its `.node` is copied into npm/<platform>/ (where
// scripts/pack-release.mjs takes it) and checked by reading it (scripts/check-binary.mjs).
//
// How each platform is built (docs/installing.md has the table and the reasons):
//   linux-x64-gnu     napi-rs's cross toolchain (`--use-napi-cross`: gcc with a glibc 2.17
//                     sysroot, from the npm package @napi-rs/cross-toolchain 1.0.0)
//   linux-arm64-gnu   cargo-zigbuild, `--target aarch64-unknown-linux-gnu.2.17`: zig links
//                     against its glibc 2.17 symbol stubs. (The napi-rs toolchain for arm64
//                     exists only at 1.0.3, which has no x64 toolchain package: no single
//                     version of @napi-rs/cross-toolchain serves both gnu targets.)
//   linux-*-musl      cargo-zigbuild (zig ships musl), musl linked dynamically (napi-rs adds
//                     `-C target-feature=-crt-static`)
//   darwin-*          cargo-zigbuild (zig ships libSystem's stubs and links Mach-O) with
//                     the two frameworks the dependency tree links (CoreFoundation,
//                     SystemConfiguration, through whoami) given as text stubs
//                     (scripts/macos-frameworks.mjs), since Apple's SDK cannot be fetched here
//   win32-x64-msvc    on Windows: napi build with MSVC. Elsewhere: `cargo check` for the
//                     target, every crate, build scripts included, the C of libsqlite3-sys
//                     and ring compiled by zig's clang for Windows x64 (scripts/zig-cc-windows.sh):
//                     linking needs MSVC's CRT and the Windows SDK's import libraries, which
//                     only Microsoft's servers serve.
//
// Every build uses the `dist` profile (fat LTO, one codegen unit, `strip = "symbols"`).
// Prerequisites (rustup targets, zig from PyPI, cargo-zigbuild from crates.io, qemu for the
// arm64 tests): `bash scripts/platform-toolchains.sh` (docs/development.md).
//
// Usage: node scripts/build-platforms.mjs [--target <rust target | platform>]... [--list]
//   no --target: all seven, one after the other. Prints a table (build time, size, check)
//   and writes target/platforms/summary.json.

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkFile } from './check-binary.mjs';
import { stubsDigest, writeFrameworkStubs } from './macos-frameworks.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const BINARY = 'sandbox-router';
const NAPI_BUILD = ['napi', 'build', '--platform', '--profile', 'dist', '--no-js'];

/** One entry per published platform, in napi.targets order. */
export const BUILDS = Object.freeze([
  { platform: 'linux-x64-gnu', target: 'x86_64-unknown-linux-gnu', how: 'napi-cross', args: ['--target', 'x86_64-unknown-linux-gnu', '--use-napi-cross'] },
  { platform: 'linux-arm64-gnu', target: 'aarch64-unknown-linux-gnu', how: 'zig', args: ['--target', 'aarch64-unknown-linux-gnu.2.17', '-x'] },
  { platform: 'linux-x64-musl', target: 'x86_64-unknown-linux-musl', how: 'zig', args: ['--target', 'x86_64-unknown-linux-musl', '-x'] },
  { platform: 'linux-arm64-musl', target: 'aarch64-unknown-linux-musl', how: 'zig', args: ['--target', 'aarch64-unknown-linux-musl', '-x'] },
  { platform: 'darwin-x64', target: 'x86_64-apple-darwin', how: 'zig', args: ['--target', 'x86_64-apple-darwin', '-x'], macos: '10.13' },
  { platform: 'darwin-arm64', target: 'aarch64-apple-darwin', how: 'zig', args: ['--target', 'aarch64-apple-darwin', '-x'], macos: '11.0' },
  { platform: 'win32-x64-msvc', target: 'x86_64-pc-windows-msvc', how: process.platform === 'win32' ? 'msvc' : 'check', args: ['--target', 'x86_64-pc-windows-msvc'] },
]);

const stubRoot = (base) => join(base, 'target', 'platforms', `macos-sdk-${stubsDigest()}`);
const frameworkDir = (base) => join(stubRoot(base), 'System', 'Library', 'Frameworks');

/** The build for a Rust target or a platform name; throws for anything else. */
export function findBuild(name) {
  const build = BUILDS.find((b) => b.target === name || b.platform === name);
  if (!build) throw new Error(`no release build for ${JSON.stringify(name)}: one of ${BUILDS.map((b) => b.platform).join(', ')}`);
  return build;
}

/**
 * The command and environment of one build: `{ command, args, env, output }` (`output` is
 * the `.node` the command writes, null for a compile check). Pure: the tests read it.
 */
export function buildCommand(build, { base = root, env = process.env } = {}) {
  const targetDir = join(base, 'target', 'platforms', build.target);
  const extra = {};
  if (build.macos) {
    // The minimum macOS the binary asks for (LC_BUILD_VERSION), and where the linker finds
    // the framework stubs (scripts/macos-frameworks.mjs). Not SDKROOT: cargo-zigbuild would
    // make it zig's sysroot, and zig would then look there for libSystem too. On a macOS
    // host the real SDK is used and the stubs are not needed.
    extra.MACOSX_DEPLOYMENT_TARGET = build.macos;
    if (process.platform !== 'darwin') {
      extra.RUSTFLAGS = [env.RUSTFLAGS, `-C link-arg=-F${frameworkDir(base)}`].filter(Boolean).join(' ');
    }
  }
  if (build.target === 'x86_64-pc-windows-msvc') {
    // The MSVC CRT linked statically: otherwise the DLL imports vcruntime140.dll (the Visual
    // C++ redistributable), which Node's own installer does not bring and many machines lack.
    // Set through RUSTFLAGS (napi sets no RUSTFLAGS of its own for this target without --strip).
    extra.RUSTFLAGS = [env.RUSTFLAGS, '-C target-feature=+crt-static'].filter(Boolean).join(' ');
  }
  if (build.how === 'check') {
    // The C compiler and the archiver (lib.exe's command line: `-out:x.lib a.obj …`).
    extra.CC_x86_64_pc_windows_msvc = join(base, 'scripts', 'zig-cc-windows.sh');
    extra.AR_x86_64_pc_windows_msvc = join(base, 'scripts', 'zig-lib-windows.sh');
    return {
      command: 'cargo',
      args: ['check', '--lib', '--profile', 'dist', '--target', build.target, '--target-dir', targetDir],
      env: extra,
      output: null,
    };
  }
  return {
    command: 'npx',
    args: [...NAPI_BUILD, ...build.args, '--target-dir', targetDir, '--output-dir', join(targetDir, 'out')],
    env: extra,
    output: join(targetDir, 'out', `${BINARY}.${build.platform}.node`),
  };
}

function run(build) {
  const { command, args, env, output } = buildCommand(build);
  if (build.macos && process.platform !== 'darwin') writeFrameworkStubs(stubRoot(root));
  console.log(`\n== ${build.platform} (${build.target}, ${build.how}): ${command} ${args.join(' ')}`);
  for (const [k, v] of Object.entries(env)) console.log(`   ${k}=${v}`);
  const t0 = Date.now();
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env }, shell: process.platform === 'win32' });
  const seconds = Math.round((Date.now() - t0) / 1000);
  if (r.status !== 0) return { platform: build.platform, how: build.how, seconds, ok: false, line: `${command} exited with ${r.status ?? r.signal}` };
  if (output === null) return { platform: build.platform, how: build.how, seconds, ok: true, line: 'compile check passed (not linked here)' };
  const dest = join(root, 'npm', build.platform, `${BINARY}.${build.platform}.node`);
  copyFileSync(output, dest);
  const { ok, line } = checkFile(dest);
  console.log(line);
  return { platform: build.platform, how: build.how, seconds, ok, bytes: statSync(dest).size, line: line.split('\n')[0].replace(/^(ok {3}|FAIL )\S+: /, '') };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  if (argv.includes('--list')) {
    for (const b of BUILDS) {
      const { command, args, env } = buildCommand(b);
      console.log(`${b.platform}\t${Object.entries(env).map(([k, v]) => `${k}=${v} `).join('')}${command} ${args.join(' ')}`);
    }
    process.exit(0);
  }
  const names = argv.flatMap((a, i) => (a === '--target' ? [argv[i + 1]] : []));
  if (argv.some((a, i) => a !== '--target' && argv[i - 1] !== '--target')) {
    console.error('usage: node scripts/build-platforms.mjs [--target <rust target | platform>]... [--list]');
    process.exit(2);
  }
  const builds = names.length > 0 ? names.map(findBuild) : BUILDS;
  const results = builds.map(run);
  const summaryFile = join(root, 'target', 'platforms', 'summary.json');
  mkdirSync(dirname(summaryFile), { recursive: true });
  const previous = existsSync(summaryFile) ? JSON.parse(readFileSync(summaryFile, 'utf8')) : {};
  for (const r of results) previous[r.platform] = { ...r, at: new Date().toISOString() };
  writeFileSync(summaryFile, `${JSON.stringify(previous, null, 2)}\n`);
  console.log('\nplatform          how         time   size       result');
  for (const r of results) {
    const size = r.bytes ? `${(r.bytes / 1024 / 1024).toFixed(2)} MiB` : '-';
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.platform.padEnd(17)} ${r.how.padEnd(10)} ${String(r.seconds).padStart(4)} s  ${size.padEnd(9)}  ${r.line}`);
  }
  process.exit(results.every((r) => r.ok) ? 0 : 1);
}
