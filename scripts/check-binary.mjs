#!/usr/bin/env node
// Checks a Linux glibc `.node` binary before it is packed (`npm run check:binary`):
//   - its highest needed `GLIBC_x.y` symbol version is at most the floor, 2.17 by default:
//     the binary then loads on every glibc ≥ 2.17 (CentOS 7, Debian 8+, Amazon Linux 2,
//     Ubuntu 14.04+). A build linked on this machine's glibc 2.36 asks for 2.34
//     (`pthread_create@GLIBC_2.34`) and fails to dlopen on Debian 11 or Ubuntu 20.04;
//   - it is stripped: no `.symtab` section; an unstripped build is ~6 MB.
// Both are read from the file itself (scripts/elf.mjs: the version needs in .gnu.version_r,
// the symbols bound to them, the section types), so the check needs no binutils. A weak
// version need (which the loader would let pass) counts like any other: stricter, never laxer.
// __test__/release.test.mjs checks it on ELF files it writes and on this machine's build.
//
// Usage: node scripts/check-binary.mjs [--max-glibc 2.17] <file.node>...

import { readFileSync, statSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ElfFormatError, hasSymtab, readElf, versionNeeds } from './elf.mjs';

export const GLIBC_FLOOR = '2.17';
const GLIBC_VERSION = /^GLIBC_(\d+(?:\.\d+)+)$/;

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

/**
 * What the check reads from one ELF file: `{ glibc: [{ version: '2.34', symbols: [...] }], stripped }`,
 * the numbered GLIBC_ versions it needs (GLIBC_PRIVATE is not one) with the symbols bound to them.
 * Throws ElfFormatError for a file that is not a readable 64-bit ELF.
 */
export function inspectBinary(bytes) {
  const elf = readElf(bytes);
  const glibc = [];
  for (const need of versionNeeds(bytes, elf)) {
    const m = GLIBC_VERSION.exec(need.version);
    if (m) glibc.push({ version: m[1], symbols: need.symbols });
  }
  return { glibc, stripped: !hasSymtab(bytes, elf) };
}

/** The highest of the versions, or null if there are none. */
export function highestGlibc(glibc) {
  return glibc.reduce((max, { version }) => (max === null || compareVersions(version, max) > 0 ? version : max), null);
}

/** The symbols that need a glibc newer than `floor`, e.g. `pthread_create@GLIBC_2.34`, newest first. */
export function symbolsAbove(glibc, floor) {
  return glibc
    .filter(({ version }) => compareVersions(version, floor) > 0)
    .sort((a, b) => compareVersions(b.version, a.version))
    .flatMap(({ version, symbols }) => (symbols.length > 0 ? symbols.map((s) => `${s}@GLIBC_${version}`) : [`(no symbol)@GLIBC_${version}`]));
}

/** Problems found in what inspectBinary read; an empty list means the binary passes. */
export function problems({ glibc, stripped }, maxGlibc = GLIBC_FLOOR) {
  if (!GLIBC_VERSION.test(`GLIBC_${maxGlibc}`)) throw new TypeError(`not a glibc version: ${JSON.stringify(maxGlibc)}`);
  const found = [];
  const highest = highestGlibc(glibc);
  if (highest === null) found.push('no GLIBC_ symbol versions found: not a dynamically linked glibc binary?');
  else if (compareVersions(highest, maxGlibc) > 0) {
    const offenders = symbolsAbove(glibc, maxGlibc);
    found.push(`needs GLIBC_${highest}, above the ${maxGlibc} floor (${offenders.slice(0, 8).join(', ')}${offenders.length > 8 ? ', …' : ''})`);
  }
  if (!stripped) found.push('not stripped: it has a .symtab section');
  return { highest, stripped, problems: found };
}

/** Checks one file: `{ ok, line }`, the line as the command prints it. */
export function checkFile(file, maxGlibc = GLIBC_FLOOR) {
  let result;
  try {
    result = problems(inspectBinary(readFileSync(file)), maxGlibc);
  } catch (e) {
    if (e instanceof ElfFormatError) return { ok: false, line: `FAIL ${file}: ${e.message}` };
    if (typeof e?.code === 'string' && e.syscall) return { ok: false, line: `FAIL ${file}: cannot read it (${e.code})` };
    throw e;
  }
  const size = `${(statSync(file).size / 1024 / 1024).toFixed(2)} MiB`;
  const summary = `highest GLIBC_${result.highest ?? '?'} (floor ${maxGlibc}), ${result.stripped ? 'stripped' : 'not stripped'}, ${size}`;
  if (result.problems.length === 0) return { ok: true, line: `ok   ${file}: ${summary}` };
  return { ok: false, line: `FAIL ${file}: ${summary}\n${result.problems.map((p) => `     - ${p}`).join('\n')}` };
}

function main(argv) {
  let maxGlibc = GLIBC_FLOOR;
  const files = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--max-glibc') maxGlibc = argv[(i += 1)];
    else files.push(argv[i]);
  }
  if (files.length === 0 || !GLIBC_VERSION.test(`GLIBC_${maxGlibc}`)) {
    console.error('usage: node scripts/check-binary.mjs [--max-glibc 2.17] <file.node>...');
    return 2;
  }
  let failed = 0;
  for (const file of files) {
    const { ok, line } = checkFile(file, maxGlibc);
    console.log(line);
    if (!ok) failed += 1;
  }
  return failed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main(process.argv.slice(2));
