#!/usr/bin/env node
// Packs what a release publishes (`npm run pack:release`): one tarball per platform package
// (npm/<triple>/, each holding its `.node`) and the main package.
//
// Why not `npm pack` at the root? The repository's package.json is the developers' one: it
// has `prepare` (a Rust build in a checkout), dev scripts and devDependencies, and no
// optionalDependencies, because `npm ci` refuses a lockfile that lacks the platform packages
// until they are on the registry. So the main package is staged: the files `npm pack` would
// take, with a package.json that lists every platform package in optionalDependencies at the
// main version and has no scripts at all (nothing runs on a user's install). This is what
// `napi prepublish` does to package.json in the napi-rs template, without editing the
// working tree. The main tarball ships no `.node`: the binary always comes from a platform
// package (or a local build, in development).
//
// Usage: node scripts/pack-release.mjs --out <dir> [--platform <triple>]... [--all [--except <triple>]...]
//   --platform: pack these platform packages (their .node must be in npm/<triple>/);
//   --all: pack all seven and fail if a binary is missing (the release workflow);
//   --except: with --all, leave these out (on Linux, after `npm run build:platforms`:
//     `--all --except win32-x64-msvc`, whose binary only a Windows machine links);
//   neither: pack every platform package whose binary is present.
// Writes <dir>/platforms/*.tgz, <dir>/main/*.tgz and prints a JSON summary on stdout.

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkFile } from './check-binary.mjs';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// Windows: npm is npm.cmd, which Node 20.12+ spawns only through a shell.
const npmCmd = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const shell = process.platform === 'win32';

/** The platform packages under npm/: `{ triple, dir, manifest, binary }` for each. */
export function platformPackages(base = root) {
  const npmDir = join(base, 'npm');
  return readdirSync(npmDir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => {
      const dir = join(npmDir, d.name);
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      return { triple: d.name, dir, manifest, binary: join(dir, manifest.main) };
    })
    .sort((a, b) => a.triple.localeCompare(b.triple));
}

/**
 * The package.json a user installs: no scripts (so no `prepare` or install hook), no
 * devDependencies or overrides, and every platform package in optionalDependencies at the
 * main version. Throws if a platform package's version differs from the main one.
 */
export function publishManifest(pkg, platforms) {
  const out = { ...pkg };
  delete out.scripts;
  delete out.devDependencies;
  delete out.overrides;
  delete out.allowScripts; // npm's install-script policy for this checkout's devDependencies
  out.optionalDependencies = {};
  for (const { triple, manifest } of platforms) {
    if (manifest.version !== pkg.version) {
      throw new Error(`npm/${triple}/package.json is at ${manifest.version}, the main package at ${pkg.version}: keep them in sync`);
    }
    out.optionalDependencies[manifest.name] = pkg.version;
  }
  return out;
}

function npmPack(dir, destination) {
  mkdirSync(destination, { recursive: true });
  const out = execFileSync(npmCmd, ['pack', dir, '--json', '--ignore-scripts', '--pack-destination', destination], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    shell,
  });
  const [report] = JSON.parse(out);
  return { tarball: join(destination, report.filename), files: report.files.map((f) => f.path), size: report.size };
}

/**
 * The release gate on each binary about to be packed: scripts/check-binary.mjs for the
 * platform (machine, glibc floor or no glibc, Mach-O imports and minimum macOS, PE imports,
 * stripped). Throws naming every binary that fails.
 */
export function checkPlatformBinaries(platforms) {
  const failed = platforms.map((p) => checkFile(p.binary, undefined, p.triple)).filter((r) => !r.ok);
  if (failed.length > 0) raise(`refusing to pack binaries that fail the release check:\n${failed.map((r) => r.line).join('\n')}`);
}

/** Stages the main package in `<out>/stage` and packs everything; returns the summary. */
export function packRelease({ out, platforms: wanted = null, all = false, except = [] }) {
  out = resolve(out);
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const platforms = platformPackages();
  for (const t of except) if (!platforms.some((p) => p.triple === t)) raise(`no platform package npm/${t}`);
  if (except.length > 0 && !all) raise('--except goes with --all');
  const chosen = all
    ? platforms.filter((p) => !except.includes(p.triple))
    : wanted
      ? wanted.map((t) => platforms.find((p) => p.triple === t) ?? raise(`no platform package npm/${t}`))
      : platforms.filter((p) => existsSync(p.binary));
  for (const p of chosen) {
    if (!existsSync(p.binary)) raise(`${p.binary} is missing: build it (npm run build:platforms -- --target ${p.triple}) or download the workflow artifact`);
  }
  checkPlatformBinaries(chosen);

  rmSync(out, { recursive: true, force: true });
  const summary = { main: null, platforms: [] };
  for (const p of chosen) {
    const packed = npmPack(p.dir, join(out, 'platforms'));
    if (!packed.files.includes(p.manifest.main)) raise(`${packed.tarball} lacks ${p.manifest.main}`);
    summary.platforms.push({ triple: p.triple, ...packed });
  }

  // The files npm would take from the root (the `files` allow-list), copied as they are.
  const dryRun = JSON.parse(
    execFileSync(npmCmd, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], shell }),
  )[0];
  const stage = join(out, 'stage');
  for (const { path } of dryRun.files) {
    if (path === 'package.json') continue;
    if (path.endsWith('.node')) raise(`the main package would ship ${path}; binaries belong in the platform packages`);
    cpSync(join(root, path), join(stage, path));
  }
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(publishManifest(pkg, platforms), null, 2)}\n`);
  summary.main = npmPack(stage, join(out, 'main'));
  return summary;
}

function raise(message) {
  throw new Error(message);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  const value = (flag) => argv.flatMap((a, i) => (a === flag ? [argv[i + 1]] : []));
  const [out] = value('--out');
  if (!out) {
    console.error('usage: node scripts/pack-release.mjs --out <dir> [--platform <triple>]... [--all [--except <triple>]...]');
    process.exit(2);
  }
  const platforms = value('--platform');
  const summary = packRelease({ out, platforms: platforms.length > 0 ? platforms : null, all: argv.includes('--all'), except: value('--except') });
  console.log(JSON.stringify(summary, null, 2));
}
