#!/usr/bin/env node
// Checks a release `.node` binary before it is packed (`npm run check:binary`, and
// `scripts/build-platforms.mjs` after each build), by reading the file itself, for the
// platform its name carries (`sandbox-router.<platform>.node`, or `--platform`):
//   - Linux glibc (ELF): the machine (x86_64 / aarch64); its highest needed `GLIBC_x.y`
//     symbol version is at most the floor, 2.17 by default: the binary then loads on every
//     glibc >= 2.17 (CentOS 7, Debian 8+, Amazon Linux 2, Ubuntu 14.04+). A build linked on
//     this machine's glibc 2.36 asks for 2.34 (`pthread_create@GLIBC_2.34`) and fails to
//     dlopen on Debian 11 or Ubuntu 20.04. A weak version need (which the loader would let
//     pass) counts like any other: stricter, never laxer;
//   - Linux musl (ELF): the machine; no GLIBC_ version and no glibc library (libc.so.6,
//     libpthread.so.0, ld-linux-…) needed: a file linked against glibc does not load on Alpine;
//   - macOS (Mach-O, scripts/macho.mjs): the CPU type; a dylib or bundle; a minimum macOS at
//     most the package's (10.13 for x64, 11.0 for arm64); the napi_* functions imported by
//     dynamic lookup (Node's executable defines them: napi-rs links `-undefined
//     dynamic_lookup`) and nothing else so: any other flat-lookup import would resolve only if
//     some other image happened to define it; every library it loads is the system's
//     (/usr/lib/, /System/Library/);
//   - Windows (PE, scripts/pe.mjs): the machine; a DLL; imports only from the Node binary
//     (node.exe) and system DLLs: not vcruntime140.dll / msvcp140.dll (the Visual C++
//     redistributable, which a user's machine may lack: link the CRT statically);
//   - every format: stripped (ELF: no `.symtab`; Mach-O: no local or debug symbols).
// __test__/release.test.mjs and __test__/binary-formats.test.mjs check it on small files
// they write byte by byte, and on this machine's own build.
//
// Usage: node scripts/check-binary.mjs [--max-glibc 2.17] [--platform <platform>] <file.node>...
// A file whose name carries no platform is read as a Linux glibc binary of either machine.

import { readFileSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { EM_AARCH64, EM_X86_64, ElfFormatError, MACHINE_NAMES, hasSymtab, neededLibraries, readElf, versionNeeds } from './elf.mjs';
import { CPU_TYPE_ARM64, CPU_TYPE_X86_64, MH_BUNDLE, MH_DYLIB, MachOFormatError, isMachO, readMachO } from './macho.mjs';
import { IMAGE_FILE_MACHINE_AMD64, PeFormatError, isPe, readPe } from './pe.mjs';

/** What is neither ELF, Mach-O nor PE (by its first bytes). */
export class BinaryFormatError extends Error {
  constructor(message) {
    super(message);
    this.name = 'BinaryFormatError';
    this.code = 'BINARY_FORMAT';
  }
}

/** What each published platform's binary must be. */
export const PLATFORMS = Object.freeze({
  'linux-x64-gnu': { format: 'ELF', machine: EM_X86_64, libc: 'glibc' },
  'linux-arm64-gnu': { format: 'ELF', machine: EM_AARCH64, libc: 'glibc' },
  'linux-x64-musl': { format: 'ELF', machine: EM_X86_64, libc: 'musl' },
  'linux-arm64-musl': { format: 'ELF', machine: EM_AARCH64, libc: 'musl' },
  'darwin-x64': { format: 'Mach-O', cpuType: CPU_TYPE_X86_64, minMacos: '10.13' },
  'darwin-arm64': { format: 'Mach-O', cpuType: CPU_TYPE_ARM64, minMacos: '11.0' },
  'win32-x64-msvc': { format: 'PE', machine: IMAGE_FILE_MACHINE_AMD64 },
});

/** The platform a file's name carries (`sandbox-router.linux-arm64-gnu.node`), or null. */
export function platformOfFile(file) {
  const m = /\.([a-z0-9]+-[a-z0-9]+(?:-[a-z]+)?)\.node$/.exec(basename(file));
  return m && Object.hasOwn(PLATFORMS, m[1]) ? m[1] : null;
}

/** 'ELF', 'Mach-O' or 'PE' by the file's first bytes; a BinaryFormatError otherwise. */
export function formatOf(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new TypeError('formatOf: bytes must be a Uint8Array or Buffer');
  if (bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46) return 'ELF';
  if (isMachO(bytes)) return 'Mach-O';
  if (isPe(bytes)) return 'PE';
  throw new BinaryFormatError('not an ELF, Mach-O or PE file (unknown magic)');
}

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
  return { glibc, stripped: !hasSymtab(bytes, elf), machine: elf.machine, needed: neededLibraries(bytes, elf) };
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
  // (the glibc checks of one ELF file: floor and strip; checkBinary adds the machine)
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

// glibc's libraries: a musl build that names one of them was linked against glibc.
const GLIBC_LIBRARY = /^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libutil\.so\.1|ld-linux[-\w.]*\.so\.\d)$/;
// What a macOS binary may load: the system's libraries and frameworks.
const MACOS_SYSTEM_LIBRARY = /^\/(usr\/lib|System\/Library)\//;
// Functions a Node addon takes from the Node binary by dynamic lookup (symbol names carry
// the leading underscore of the Mach-O C mangling).
const NAPI_FUNCTION = /^_(napi|node_api)_\w+$/;
// What a Windows binary may import from: the Node binary and DLLs that ship with Windows 10
// (the UCRT's api-ms-win-crt-* sets are part of it). vcruntime140.dll is the Visual C++
// redistributable, not Windows: it is refused.
const WINDOWS_SYSTEM_DLL =
  /^(node\.exe|kernel32|kernelbase|ntdll|advapi32|bcrypt|bcryptprimitives|crypt32|ncrypt|secur32|ws2_32|mswsock|iphlpapi|userenv|user32|shell32|ole32|oleaut32|dbghelp|powrprof|psapi|synchronization|api-ms-win-[\w-]+|ucrtbase)(\.dll)?$/i;

const mib = (n) => `${(n / 1024 / 1024).toFixed(2)} MiB`;
const newerMacos = (a, b) => compareVersions(a, b) > 0;

/**
 * Checks the bytes of one binary for `platform` (a key of PLATFORMS, or null: a Linux glibc
 * binary of either machine). Returns `{ platform, format, facts, problems }`: `facts` is the
 * one-line summary of what was read, `problems` empty when it passes. Throws ElfFormatError,
 * MachOFormatError, PeFormatError or BinaryFormatError (each with a `code`) for a file that
 * cannot be read, and a TypeError for a platform or floor that does not exist.
 */
export function checkBinary(bytes, platform = null, { maxGlibc = GLIBC_FLOOR } = {}) {
  if (platform !== null && !Object.hasOwn(PLATFORMS, platform)) throw new TypeError(`not a published platform: ${JSON.stringify(platform)}`);
  const want = platform ? PLATFORMS[platform] : { format: 'ELF', machine: null, libc: 'glibc' };
  const format = formatOf(bytes);
  if (format !== want.format) {
    return { platform, format, facts: `${format} file`, problems: [`is a ${format} file; a ${platform} binary is ${want.format}`] };
  }
  if (format === 'ELF') return checkElf(bytes, platform, want, maxGlibc);
  if (format === 'Mach-O') return checkMachO(bytes, platform, want);
  return checkPe(bytes, platform, want);
}

function checkElf(bytes, platform, want, maxGlibc) {
  const info = inspectBinary(bytes);
  const found = [];
  const machine = MACHINE_NAMES[info.machine] ?? `e_machine ${info.machine}`;
  if (want.machine !== null && info.machine !== want.machine) found.push(`machine is ${machine}, a ${platform} binary is ${MACHINE_NAMES[want.machine]}`);
  let facts;
  if (want.libc === 'glibc') {
    const glibc = problems(info, maxGlibc);
    found.push(...glibc.problems.filter((p) => !p.startsWith('not stripped')));
    facts = `highest GLIBC_${glibc.highest ?? '?'} (floor ${maxGlibc})`;
  } else {
    const versions = info.glibc.map((g) => `GLIBC_${g.version}`);
    if (versions.length > 0) found.push(`needs glibc symbol versions (${versions.slice(0, 4).join(', ')}): linked against glibc, not musl`);
    const glibcFiles = info.needed.filter((n) => GLIBC_LIBRARY.test(n));
    if (glibcFiles.length > 0) found.push(`needs glibc's ${glibcFiles.join(', ')}: linked against glibc, not musl`);
    if (info.needed.length === 0) found.push('names no shared library (DT_NEEDED): a musl addon links musl dynamically (libc.so)');
    facts = `no glibc symbol, needs ${info.needed.join(', ') || 'nothing'}`;
  }
  if (!info.stripped) found.push('not stripped: it has a .symtab section');
  const head = platform ? `ELF ${machine}, ` : '';
  return { platform, format: 'ELF', facts: `${head}${facts}, ${info.stripped ? 'stripped' : 'not stripped'}`, problems: found };
}

function checkMachO(bytes, platform, want) {
  const m = readMachO(bytes);
  const found = [];
  if (m.cpuType !== want.cpuType) found.push(`CPU type is ${m.cpu}, a ${platform} binary is ${PLATFORMS[platform].cpuType === CPU_TYPE_ARM64 ? 'arm64' : 'x86_64'}`);
  if (m.fileType !== MH_DYLIB && m.fileType !== MH_BUNDLE) found.push(`file type ${m.fileType} is neither MH_DYLIB nor MH_BUNDLE: not loadable by dlopen`);
  if (m.minMacos === null) found.push('no minimum macOS version (LC_BUILD_VERSION / LC_VERSION_MIN_MACOSX)');
  else if (newerMacos(m.minMacos, want.minMacos)) found.push(`needs macOS ${m.minMacos}, newer than the package's ${want.minMacos} (MACOSX_DEPLOYMENT_TARGET)`);
  const flat = m.imports.filter((i) => i.library === 'dynamic lookup' || i.library === 'executable');
  const strays = flat.filter((i) => !NAPI_FUNCTION.test(i.name)).map((i) => i.name);
  if (strays.length > 0) found.push(`imports by dynamic lookup what is not a napi function (${strays.slice(0, 6).join(', ')}${strays.length > 6 ? ', …' : ''}): nothing guarantees the process defines it`);
  const boundNapi = m.imports.filter((i) => NAPI_FUNCTION.test(i.name) && !flat.includes(i)).map((i) => `${i.name} from ${i.library}`);
  if (boundNapi.length > 0) found.push(`binds napi functions to a library (${boundNapi.slice(0, 3).join(', ')}): they must be looked up in the Node process (-undefined dynamic_lookup)`);
  // Ordinal 0 (SELF_LIBRARY_ORDINAL) on an undefined symbol: the linker bound it to no
  // library, so dyld looks for it in this very image, which does not define it.
  const unbound = m.imports.filter((i) => i.library === 'self').map((i) => i.name);
  if (unbound.length > 0) found.push(`imports that no library provides (ordinal 0: ${unbound.slice(0, 6).join(', ')}${unbound.length > 6 ? ', …' : ''}): a framework stub lacks them?`);
  const foreign = m.dylibs.map((d) => d.name).filter((n) => !MACOS_SYSTEM_LIBRARY.test(n));
  if (foreign.length > 0) found.push(`loads libraries that are not the system's: ${foreign.join(', ')}`);
  const stripped = m.localSymbols === 0 && m.stabs === 0;
  if (!stripped) found.push(`not stripped: ${m.localSymbols} local and ${m.stabs} debug symbols`);
  const napi = flat.length - strays.length;
  const facts = `Mach-O ${m.cpu}, macOS >= ${m.minMacos ?? '?'} (floor ${want.minMacos}), ${napi} napi imports by dynamic lookup, loads ${m.dylibs.map((d) => basename(d.name)).join(', ') || 'nothing'}, ${stripped ? 'stripped' : 'not stripped'}`;
  return { platform, format: 'Mach-O', facts, problems: found };
}

function checkPe(bytes, platform, want) {
  const pe = readPe(bytes);
  const found = [];
  if (pe.machine !== want.machine) found.push(`machine is ${pe.cpu}, a ${platform} binary is x86_64`);
  if (!pe.dll) found.push('not a DLL (IMAGE_FILE_DLL is not set)');
  const foreign = pe.imports.filter((i) => !WINDOWS_SYSTEM_DLL.test(i.dll)).map((i) => i.dll);
  if (foreign.length > 0) {
    const crt = foreign.some((d) => /^(vcruntime|msvcp)\d+/i.test(d)) ? ' (the Visual C++ runtime: build with -C target-feature=+crt-static)' : '';
    found.push(`imports from DLLs that are neither Node's nor Windows': ${foreign.join(', ')}${crt}`);
  }
  const facts = `PE ${pe.cpu} ${pe.dll ? 'DLL' : 'image'}, imports from ${pe.imports.map((i) => i.dll).join(', ') || 'nothing'}`;
  return { platform, format: 'PE', facts, problems: found };
}

/** Checks one file: `{ ok, line }`, the line as the command prints it. */
export function checkFile(file, maxGlibc = GLIBC_FLOOR, platform = platformOfFile(file)) {
  let result;
  try {
    result = checkBinary(readFileSync(file), platform, { maxGlibc });
  } catch (e) {
    if (e instanceof ElfFormatError || e instanceof MachOFormatError || e instanceof PeFormatError || e instanceof BinaryFormatError) {
      return { ok: false, line: `FAIL ${file}: ${e.message} (${e.code})` };
    }
    if (typeof e?.code === 'string' && e.syscall) return { ok: false, line: `FAIL ${file}: cannot read it (${e.code})` };
    throw e;
  }
  const summary = `${platform ? `${platform}: ` : ''}${result.facts}, ${mib(statSync(file).size)}`;
  if (result.problems.length === 0) return { ok: true, line: `ok   ${file}: ${summary}` };
  return { ok: false, line: `FAIL ${file}: ${summary}\n${result.problems.map((p) => `     - ${p}`).join('\n')}` };
}

const USAGE = 'usage: node scripts/check-binary.mjs [--max-glibc 2.17] [--platform <platform>] <file.node>...';

function main(argv) {
  let maxGlibc = GLIBC_FLOOR;
  let platform;
  const files = [];
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--max-glibc') maxGlibc = argv[(i += 1)];
    else if (argv[i] === '--platform') platform = argv[(i += 1)];
    else files.push(argv[i]);
  }
  if (files.length === 0 || !GLIBC_VERSION.test(`GLIBC_${maxGlibc}`) || (platform !== undefined && !Object.hasOwn(PLATFORMS, platform))) {
    console.error(USAGE);
    return 2;
  }
  let failed = 0;
  for (const file of files) {
    const { ok, line } = checkFile(file, maxGlibc, platform ?? platformOfFile(file));
    console.log(line);
    if (!ok) failed += 1;
  }
  return failed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main(process.argv.slice(2));
