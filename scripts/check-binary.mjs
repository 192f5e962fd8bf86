#!/usr/bin/env node
// Checks a Linux glibc `.node` binary before it is packed (`npm run check:binary`):
//   - its highest `GLIBC_x.y` symbol version (from `objdump -T`) is at most the floor, 2.17
//     by default: the binary then loads on every glibc ≥ 2.17 (CentOS 7, Debian 8+, Amazon
//     Linux 2, Ubuntu 14.04+). A build linked on this machine's glibc 2.36 asks for 2.34
//     (`pthread_create@GLIBC_2.34`) and fails to dlopen on Debian 11 or Ubuntu 20.04;
//   - it is stripped: no `.symtab` section (`readelf -S`); an unstripped build is ~6 MB.
// The parsing is exported so __test__/release.test.mjs checks it on sample tool output.
//
// Usage: node scripts/check-binary.mjs [--max-glibc 2.17] <file.node>...

import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const GLIBC_FLOOR = '2.17';

const parseVersion = (v) => v.split('.').map(Number);
/** Negative, zero or positive as `a` is older than, equal to or newer than `b` ("2.2.5" < "2.17"). */
export function compareVersions(a, b) {
  const [x, y] = [parseVersion(a), parseVersion(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The highest `GLIBC_x.y[.z]` version named in `objdump -T` output, or null if none is. */
export function highestGlibc(objdumpText) {
  const versions = [...objdumpText.matchAll(/\bGLIBC_(\d+(?:\.\d+)+)\b/g)].map((m) => m[1]);
  return versions.reduce((max, v) => (max === null || compareVersions(v, max) > 0 ? v : max), null);
}

/** The symbols that need a glibc newer than `floor`, e.g. `pthread_create@GLIBC_2.34`. */
export function symbolsAbove(objdumpText, floor) {
  const out = [];
  for (const line of objdumpText.split('\n')) {
    const m = /\(?GLIBC_(\d+(?:\.\d+)+)\)?\s+(\S+)\s*$/.exec(line);
    if (m && compareVersions(m[1], floor) > 0) out.push(`${m[2]}@GLIBC_${m[1]}`);
  }
  return out;
}

/** Whether `readelf -S` output lists no `.symtab` (the static symbol table strip removes). */
export function isStripped(readelfSectionsText) {
  return !/\]\s+\.symtab\s/.test(readelfSectionsText);
}

/** Problems found in the tool output for one binary; an empty list means it passes. */
export function problems({ objdump, readelf, maxGlibc = GLIBC_FLOOR }) {
  const found = [];
  const highest = highestGlibc(objdump);
  if (highest === null) found.push('no GLIBC_ symbol versions found: not a dynamically linked glibc binary?');
  else if (compareVersions(highest, maxGlibc) > 0) {
    const offenders = symbolsAbove(objdump, maxGlibc);
    found.push(`needs GLIBC_${highest}, above the ${maxGlibc} floor (${offenders.slice(0, 8).join(', ')}${offenders.length > 8 ? ', …' : ''})`);
  }
  if (!isStripped(readelf)) found.push('not stripped: it has a .symtab section');
  return { highest, stripped: isStripped(readelf), problems: found };
}

function tool(cmd, args) {
  return execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, stdio: ['ignore', 'pipe', 'pipe'] });
}

function main(argv) {
  let maxGlibc = GLIBC_FLOOR;
  const files = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--max-glibc') maxGlibc = argv[(i += 1)];
    else files.push(argv[i]);
  }
  if (files.length === 0) {
    console.error('usage: node scripts/check-binary.mjs [--max-glibc 2.17] <file.node>...');
    return 2;
  }
  let failed = 0;
  for (const file of files) {
    const result = problems({ objdump: tool('objdump', ['-T', file]), readelf: tool('readelf', ['-S', '-W', file]), maxGlibc });
    const size = `${(statSync(file).size / 1024 / 1024).toFixed(2)} MiB`;
    const summary = `highest GLIBC_${result.highest ?? '?'} (floor ${maxGlibc}), ${result.stripped ? 'stripped' : 'not stripped'}, ${size}`;
    if (result.problems.length === 0) console.log(`ok   ${file}: ${summary}`);
    else {
      failed += 1;
      console.log(`FAIL ${file}: ${summary}\n${result.problems.map((p) => `     - ${p}`).join('\n')}`);
    }
  }
  return failed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main(process.argv.slice(2));
