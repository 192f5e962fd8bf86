// The release-binary check for every platform (scripts/check-binary.mjs over the ELF,
// Mach-O and PE readers), on small exact files written by __test__/binaries.mjs, each
// guard with a must-fire / must-not-fire pair; the readers' typed errors on malformed files;
// the build script's commands (scripts/build-platforms.mjs) and the binaries it left in npm/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BinaryFormatError, PLATFORMS, checkBinary, checkFile, formatOf, platformOfFile } from '../scripts/check-binary.mjs';
import { MachOFormatError, readMachO } from '../scripts/macho.mjs';
import { PeFormatError, readPe } from '../scripts/pe.mjs';
import { BUILDS, buildCommand, findBuild } from '../scripts/build-platforms.mjs';
import { FRAMEWORKS, frameworkStub } from '../scripts/macos-frameworks.mjs';
import { EMULATION_BOUND, RUST_EMULATION_BOUND, judge, suiteFiles, tapFailures } from '../scripts/test-arm64.mjs';
import { elf, macho, pe } from './binaries.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const EM_AARCH64 = 183;
const ARM64 = 0x0100000c;
const DYNAMIC = 0xfe;

const GLIBC_217 = {
  needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.17'] }],
  symbols: [['memcpy', 'GLIBC_2.17'], ['napi_register_module_v1', null]],
  needed: ['libc.so.6', 'libgcc_s.so.1'],
};
const MUSL = { symbols: [['memcpy', null], ['napi_register_module_v1', null]], needed: ['libgcc_s.so.1', 'libc.so'] };
const NAPI = [['_napi_create_object', DYNAMIC], ['_napi_module_register', DYNAMIC], ['_node_api_symbol_for', DYNAMIC]];
const LIBSYSTEM = [['_memcpy', 1], ['_pthread_create', 1]];
const SYSTEM_DLLS = [
  { dll: 'KERNEL32.dll', functions: ['GetLastError', 'CreateFileW'] },
  { dll: 'ntdll.dll', functions: ['NtReadFile'] },
  { dll: 'api-ms-win-core-synch-l1-2-0.dll', functions: ['WaitOnAddress'] },
  { dll: 'WS2_32.dll', functions: ['#3'] },
  { dll: 'bcryptprimitives.dll', functions: ['ProcessPrng'] },
];

const problemsOf = (bytes, platform) => checkBinary(bytes, platform).problems;
const fires = (bytes, platform, pattern) => {
  const found = problemsOf(bytes, platform);
  assert.ok(found.some((p) => pattern.test(p)), `expected a problem matching ${pattern}, got ${JSON.stringify(found)}`);
};

test('the platform table covers napi.targets, and a file name carries its platform', () => {
  assert.deepEqual(Object.keys(PLATFORMS).sort(), BUILDS.map((b) => b.platform).sort());
  assert.deepEqual(BUILDS.map((b) => b.target).sort(), [...pkg.napi.targets].sort());
  assert.equal(platformOfFile('/x/npm/linux-arm64-gnu/sandbox-router.linux-arm64-gnu.node'), 'linux-arm64-gnu');
  assert.equal(platformOfFile('sandbox-router.win32-x64-msvc.node'), 'win32-x64-msvc');
  assert.equal(platformOfFile('sandbox-router.freebsd-x64.node'), null);
  assert.equal(platformOfFile('cross.node'), null);
});

test('must-fire: an x86_64 ELF checked as linux-arm64-gnu is refused; must-not-fire: an aarch64 one at GLIBC_2.17 passes', () => {
  fires(elf(GLIBC_217), 'linux-arm64-gnu', /machine is x86_64, a linux-arm64-gnu binary is aarch64/);
  assert.deepEqual(problemsOf(elf({ ...GLIBC_217, machine: EM_AARCH64 }), 'linux-arm64-gnu'), []);
  assert.match(checkBinary(elf({ ...GLIBC_217, machine: EM_AARCH64 }), 'linux-arm64-gnu').facts, /^ELF aarch64, highest GLIBC_2\.17 \(floor 2\.17\), stripped$/);
  assert.deepEqual(problemsOf(elf(GLIBC_217), 'linux-x64-gnu'), []);
});

test('must-fire: a gnu build above GLIBC_2.17 or unstripped is refused per platform; must-not-fire: the same file at 2.17, stripped', () => {
  const newer = { ...GLIBC_217, machine: EM_AARCH64, needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.17', 'GLIBC_2.34'] }], symbols: [['pthread_create', 'GLIBC_2.34']] };
  fires(elf(newer), 'linux-arm64-gnu', /needs GLIBC_2\.34, above the 2\.17 floor \(pthread_create@GLIBC_2\.34\)/);
  fires(elf({ ...GLIBC_217, machine: EM_AARCH64, symtab: true }), 'linux-arm64-gnu', /^not stripped: it has a \.symtab section$/);
  assert.deepEqual(problemsOf(elf({ ...GLIBC_217, machine: EM_AARCH64 }), 'linux-arm64-gnu'), []);
});

test('must-fire: a musl binary linked against glibc (GLIBC_ versions, libc.so.6) is refused; must-not-fire: one that needs libc.so only passes', () => {
  fires(elf(GLIBC_217), 'linux-x64-musl', /needs glibc symbol versions \(GLIBC_2\.17\): linked against glibc, not musl/);
  fires(elf({ ...MUSL, needed: ['libc.so.6'] }), 'linux-x64-musl', /needs glibc's libc\.so\.6: linked against glibc, not musl/);
  fires(elf({ ...MUSL, needed: ['ld-linux-aarch64.so.1', 'libc.so'], machine: EM_AARCH64 }), 'linux-arm64-musl', /needs glibc's ld-linux-aarch64\.so\.1/);
  fires(elf({ ...MUSL, needed: [] }), 'linux-x64-musl', /names no shared library/);
  fires(elf(MUSL), 'linux-arm64-musl', /machine is x86_64/);
  assert.deepEqual(problemsOf(elf(MUSL), 'linux-x64-musl'), []);
  assert.deepEqual(problemsOf(elf({ ...MUSL, machine: EM_AARCH64 }), 'linux-arm64-musl'), []);
  assert.match(checkBinary(elf(MUSL), 'linux-x64-musl').facts, /no glibc symbol, needs libgcc_s\.so\.1, libc\.so, stripped/);
});

test('must-fire: a file of the wrong format for its platform is refused; must-not-fire: each format checked as its own', () => {
  fires(macho({ imports: NAPI }), 'linux-x64-gnu', /is a Mach-O file; a linux-x64-gnu binary is ELF/);
  fires(elf(GLIBC_217), 'darwin-x64', /is a ELF file; a darwin-x64 binary is Mach-O/);
  fires(elf(GLIBC_217), 'win32-x64-msvc', /a win32-x64-msvc binary is PE/);
  assert.equal(formatOf(elf(GLIBC_217)), 'ELF');
  assert.equal(formatOf(macho()), 'Mach-O');
  assert.equal(formatOf(pe()), 'PE');
});

test('must-fire: a Mach-O with a non-napi import by dynamic lookup is refused; must-not-fire: napi imports by dynamic lookup and libSystem imports pass', () => {
  fires(macho({ imports: [...NAPI, ['_CFRelease', DYNAMIC]] }), 'darwin-x64', /imports by dynamic lookup what is not a napi function \(_CFRelease\)/);
  fires(macho({ imports: [['_uv_default_loop', DYNAMIC]] }), 'darwin-x64', /not a napi function \(_uv_default_loop\)/);
  const good = macho({ imports: [...NAPI, ...LIBSYSTEM] });
  assert.deepEqual(problemsOf(good, 'darwin-x64'), []);
  assert.match(checkBinary(good, 'darwin-x64').facts, /^Mach-O x86_64, macOS >= 10\.13 \(floor 10\.13\), 3 napi imports by dynamic lookup, loads libSystem\.B\.dylib, stripped$/);
});

test('must-fire: a Mach-O import bound to no library (ordinal 0) is refused; must-not-fire: the same symbol bound to its framework', () => {
  const cf = ['/usr/lib/libSystem.B.dylib', '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation'];
  fires(macho({ cpuType: ARM64, minMacos: '11.0', dylibs: cf, imports: [['_CFRelease', 0], ['_memcpy', 1]] }), 'darwin-arm64', /imports that no library provides \(ordinal 0: _CFRelease\)/);
  assert.deepEqual(problemsOf(macho({ cpuType: ARM64, minMacos: '11.0', dylibs: cf, imports: [['_CFRelease', 2], ['_memcpy', 1]] }), 'darwin-arm64'), []);
});

test('must-fire: napi functions bound to a library (not looked up in the Node process) are refused; must-not-fire: by dynamic lookup', () => {
  fires(macho({ dylibs: ['/usr/lib/libSystem.B.dylib', '/usr/lib/libnode.dylib'], imports: [['_napi_create_object', 2]] }), 'darwin-x64', /binds napi functions to a library \(_napi_create_object from \/usr\/lib\/libnode\.dylib\)/);
  assert.deepEqual(problemsOf(macho({ imports: [['_napi_create_object', DYNAMIC]] }), 'darwin-x64'), []);
});

test('must-fire: a Mach-O that loads a library outside the system is refused; must-not-fire: libSystem and the frameworks', () => {
  fires(macho({ dylibs: ['/usr/lib/libSystem.B.dylib', '/opt/homebrew/lib/libsqlite3.dylib'], imports: [['_sqlite3_open', 2]] }), 'darwin-arm64', /loads libraries that are not the system's: \/opt\/homebrew\/lib\/libsqlite3\.dylib/);
  fires(macho({ dylibs: ['@rpath/libfoo.dylib'], cpuType: ARM64, minMacos: '11.0' }), 'darwin-arm64', /not the system's: @rpath\/libfoo\.dylib/);
  const frameworks = ['/usr/lib/libSystem.B.dylib', '/usr/lib/libiconv.2.dylib', ...Object.keys(FRAMEWORKS).map((f) => `/System/Library/Frameworks/${f}.framework/Versions/A/${f}`)];
  assert.deepEqual(problemsOf(macho({ cpuType: ARM64, minMacos: '11.0', dylibs: frameworks, imports: NAPI }), 'darwin-arm64'), []);
});

test('must-fire: a Mach-O for the other CPU, a newer macOS than the package\'s, or none, is refused; must-not-fire: at the floor', () => {
  fires(macho({ imports: NAPI }), 'darwin-arm64', /CPU type is x86_64, a darwin-arm64 binary is arm64/);
  fires(macho({ minMacos: '10.15' }), 'darwin-x64', /needs macOS 10\.15, newer than the package's 10\.13/);
  fires(macho({ cpuType: ARM64, minMacos: '12.0.1' }), 'darwin-arm64', /needs macOS 12\.0\.1, newer than the package's 11\.0/);
  fires(macho({ minMacos: null }), 'darwin-x64', /no minimum macOS version/);
  assert.deepEqual(problemsOf(macho({ minMacos: '10.13' }), 'darwin-x64'), []);
  assert.deepEqual(problemsOf(macho({ minMacos: '10.12', versionMin: true }), 'darwin-x64'), [], 'LC_VERSION_MIN_MACOSX is read too');
  assert.deepEqual(problemsOf(macho({ cpuType: ARM64, minMacos: '11.0' }), 'darwin-arm64'), []);
});

test('must-fire: an unstripped Mach-O (local or debug symbols) or one that is not a dylib/bundle is refused; must-not-fire: stripped dylib and bundle', () => {
  fires(macho({ locals: 3 }), 'darwin-x64', /not stripped: 3 local and 0 debug symbols/);
  fires(macho({ stabs: 2 }), 'darwin-x64', /not stripped: 0 local and 2 debug symbols/);
  fires(macho({ fileType: 2 }), 'darwin-x64', /file type 2 is neither MH_DYLIB nor MH_BUNDLE/);
  assert.deepEqual(problemsOf(macho({ fileType: 6 }), 'darwin-x64'), []);
  assert.deepEqual(problemsOf(macho({ fileType: 8 }), 'darwin-x64'), []);
});

test('must-fire: a PE that imports the Visual C++ runtime or another non-system DLL is refused; must-not-fire: system DLLs and node.exe', () => {
  const vc = pe({ imports: [...SYSTEM_DLLS, { dll: 'VCRUNTIME140.dll', functions: ['memcpy'] }] });
  fires(vc, 'win32-x64-msvc', /imports from DLLs that are neither Node's nor Windows': VCRUNTIME140\.dll \(the Visual C\+\+ runtime: build with -C target-feature=\+crt-static\)/);
  fires(pe({ delayed: [{ dll: 'libnode.dll', functions: ['napi_create_object'] }] }), 'win32-x64-msvc', /neither Node's nor Windows': libnode\.dll$/);
  const good = pe({ imports: SYSTEM_DLLS, delayed: [{ dll: 'node.exe', functions: ['napi_create_object'] }] });
  assert.deepEqual(problemsOf(good, 'win32-x64-msvc'), []);
  assert.match(checkBinary(good, 'win32-x64-msvc').facts, /^PE x86_64 DLL, imports from KERNEL32\.dll, ntdll\.dll, api-ms-win-core-synch-l1-2-0\.dll, WS2_32\.dll, bcryptprimitives\.dll, node\.exe$/);
  assert.deepEqual(readPe(good).imports.find((i) => i.dll === 'WS2_32.dll').functions, ['#3']);
});

test('must-fire: a PE for another machine, or not a DLL, is refused; must-not-fire: an x86_64 DLL', () => {
  fires(pe({ machine: 0xaa64 }), 'win32-x64-msvc', /machine is arm64, a win32-x64-msvc binary is x86_64/);
  fires(pe({ dll: false }), 'win32-x64-msvc', /not a DLL/);
  assert.deepEqual(problemsOf(pe(), 'win32-x64-msvc'), []);
});

test('malformed Mach-O files are MachOFormatError (code MACHO_FORMAT), never a wrong answer', () => {
  const bad = (bytes, pattern) =>
    assert.throws(() => readMachO(bytes), (e) => e instanceof MachOFormatError && e.code === 'MACHO_FORMAT' && pattern.test(e.message), String(pattern));
  const good = macho({ imports: [...NAPI, ...LIBSYSTEM], locals: 1 });
  bad(good.subarray(0, 20), /shorter than a mach_header_64/);
  bad(good.subarray(0, 48), /the load commands \(\d+ bytes\) lie past the end/);
  bad(good.subarray(0, good.length - 30), /the string table .* lies past the end|the symbol table .* lies past the end/);
  const fat = Buffer.from(good);
  fat.writeUInt32BE(0xcafebabe, 0);
  bad(fat, /universal \(fat\)/);
  const thin32 = Buffer.from(good);
  thin32.writeUInt32LE(0xfeedface, 0);
  bad(thin32, /32-bit Mach-O/);
  const big = Buffer.from(good);
  big.writeUInt32BE(0xfeedfacf, 0);
  bad(big, /big-endian/);
  const zeroSize = Buffer.from(good);
  zeroSize.writeUInt32LE(0, 32 + 4); // the first load command's size
  bad(zeroSize, /load command 0 \(0x32\) has a bad size 0/);
  const ordinal = macho({ imports: [['_memcpy', 7]] });
  bad(ordinal, /names library ordinal 7, but the file loads 1 libraries/);
  const name = Buffer.from(good);
  name.writeUInt32LE(4096, 32 + 24 + 8); // the dylib name's offset, past its command
  bad(name, /load command 1: string offset \d+ is outside its table/);
  assert.throws(() => readMachO('not bytes'), TypeError);
  // must-not-fire: the untouched file reads
  assert.equal(readMachO(good).imports.length, 5);
});

test('malformed PE files are PeFormatError (code PE_FORMAT), never a wrong answer', () => {
  const bad = (bytes, pattern) => assert.throws(() => readPe(bytes), (e) => e instanceof PeFormatError && e.code === 'PE_FORMAT' && pattern.test(e.message), String(pattern));
  const good = pe({ imports: SYSTEM_DLLS });
  bad(Buffer.from('MZ'.padEnd(100, '\0')), /no PE\\0\\0 signature/);
  bad(good.subarray(0, 0x60), /the optional header at \d+ lies past the end/);
  bad(pe({ optionalMagic: 0x10b }), /not a PE32\+ image \(optional header magic 0x10b\)/);
  const farDirectory = Buffer.from(good);
  farDirectory.writeUInt32LE(0x9000, 0x40 + 24 + 112 + 8); // the import table's RVA
  bad(farDirectory, /the import table \(RVA 0x9000\) is in no section/);
  const farName = Buffer.from(good);
  farName.writeUInt32LE(0x5000, 0x200 + 12); // the first descriptor's DLL name RVA
  bad(farName, /an imported DLL name \(RVA 0x5000\) is in no section/);
  bad(good.subarray(0, 0x210), /lies past its section's data|lies past the end/);
  bad(Buffer.from('MZ'), /not a PE file/);
  bad(Buffer.from('ZM'.padEnd(100, '\0')), /not a PE file \(no MZ header\)/);
  assert.throws(() => readPe('MZ'), TypeError);
  // must-not-fire: the untouched file reads
  assert.equal(readPe(good).imports.length, SYSTEM_DLLS.length);
});

test('must-fire: what is neither ELF, Mach-O nor PE is a BinaryFormatError; must-not-fire: each magic is recognised', () => {
  assert.throws(() => checkBinary(Buffer.from('#!/bin/sh\necho hi\n'), 'linux-x64-gnu'), (e) => e instanceof BinaryFormatError && e.code === 'BINARY_FORMAT');
  assert.throws(() => checkBinary(elf(GLIBC_217), 'freebsd-x64'), TypeError);
  for (const bytes of [elf(GLIBC_217), macho(), pe()]) assert.doesNotThrow(() => formatOf(bytes));
});

test('check-binary (the command): the platform comes from the file name or --platform; exit 1 and a typed error line for a bad file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-formats-'));
  const cli = (...args) => spawnSync(process.execPath, [join(root, 'scripts', 'check-binary.mjs'), ...args], { encoding: 'utf8' });
  try {
    const write = (name, bytes) => {
      writeFileSync(join(dir, name), bytes);
      return join(dir, name);
    };
    const arm = write('sandbox-router.linux-arm64-gnu.node', elf({ ...GLIBC_217, machine: EM_AARCH64 }));
    const mac = write('sandbox-router.darwin-arm64.node', macho({ cpuType: ARM64, minMacos: '11.0', imports: NAPI }));
    const win = write('sandbox-router.win32-x64-msvc.node', pe({ imports: [{ dll: 'vcruntime140.dll', functions: ['memset'] }] }));
    const broken = write('sandbox-router.darwin-x64.node', macho().subarray(0, 40));
    const ok = cli(arm, mac);
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /^ok {3}.*linux-arm64-gnu\.node: linux-arm64-gnu: ELF aarch64, highest GLIBC_2\.17/m);
    assert.match(ok.stdout, /^ok {3}.*darwin-arm64\.node: darwin-arm64: Mach-O arm64, macOS >= 11\.0/m);
    const no = cli(win);
    assert.equal(no.status, 1);
    assert.match(no.stdout, /FAIL .*win32-x64-msvc\.node: win32-x64-msvc: PE x86_64 DLL, imports from vcruntime140\.dll[\s\S]*- imports from DLLs that are neither/);
    const unreadable = cli(broken);
    assert.equal(unreadable.status, 1);
    assert.match(unreadable.stdout, /FAIL .*darwin-x64\.node: the load commands .* \(MACHO_FORMAT\)/);
    assert.equal(cli('--platform', 'linux-x64-gnu', arm).status, 1, '--platform overrides the name (an aarch64 file is not x64)');
    assert.equal(cli('--platform', 'linux-sparc-gnu', arm).status, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the binaries in npm/<platform>/ (those built here) pass their platform\'s check', { skip: !BUILDS.some((b) => existsSync(join(root, 'npm', b.platform, `sandbox-router.${b.platform}.node`))) && 'no platform binary built (npm run build:platforms)' }, () => {
  for (const { platform } of BUILDS) {
    const file = join(root, 'npm', platform, `sandbox-router.${platform}.node`);
    if (!existsSync(file)) continue;
    const { ok, line } = checkFile(file);
    assert.ok(ok, line);
    assert.equal(checkBinary(readFileSync(file), platform).format, PLATFORMS[platform].format);
  }
});

test('build-platforms: one command per platform, the arm64 gnu build at glibc 2.17, macOS floors as the check\'s, Windows CRT static', () => {
  const base = '/repo';
  const cmd = (p) => buildCommand(findBuild(p), { base, env: {} });
  const arm = cmd('linux-arm64-gnu');
  assert.equal(arm.command, 'npx');
  assert.deepEqual(arm.args.slice(0, 6), ['napi', 'build', '--platform', '--profile', 'dist', '--no-js']);
  assert.ok(arm.args.join(' ').includes('--target aarch64-unknown-linux-gnu.2.17 -x'), arm.args.join(' '));
  assert.ok(arm.args.join(' ').includes('--target-dir /repo/target/platforms/aarch64-unknown-linux-gnu'));
  assert.equal(arm.output, '/repo/target/platforms/aarch64-unknown-linux-gnu/out/sandbox-router.linux-arm64-gnu.node');
  assert.ok(cmd('linux-x64-gnu').args.includes('--use-napi-cross'));
  for (const p of ['linux-x64-musl', 'linux-arm64-musl', 'darwin-x64', 'darwin-arm64']) assert.ok(cmd(p).args.includes('-x'), p);
  for (const p of ['darwin-x64', 'darwin-arm64']) assert.equal(cmd(p).env.MACOSX_DEPLOYMENT_TARGET, PLATFORMS[p].minMacos, p);
  const win = cmd('win32-x64-msvc');
  assert.match(win.env.RUSTFLAGS, /-C target-feature=\+crt-static/);
  if (process.platform !== 'win32') {
    assert.deepEqual([win.command, ...win.args.slice(0, 2)], ['cargo', 'check', '--lib']);
    assert.equal(win.output, null);
  }
  assert.equal(buildCommand(findBuild('x86_64-unknown-linux-gnu'), { base, env: {} }).args.join(' '), cmd('linux-x64-gnu').args.join(' '));
  assert.throws(() => findBuild('linux-sparc-gnu'), /no release build for "linux-sparc-gnu"/);
  // The user's RUSTFLAGS are kept, not replaced.
  assert.match(buildCommand(findBuild('win32-x64-msvc'), { base, env: { RUSTFLAGS: '-C opt-level=2' } }).env.RUSTFLAGS, /^-C opt-level=2 -C target-feature=\+crt-static$/);
});

test('macOS framework stubs name the frameworks\' install paths and export what the addon imports', () => {
  assert.ok(FRAMEWORKS.CoreFoundation.includes('_CFRelease'));
  assert.deepEqual(FRAMEWORKS.SystemConfiguration, ['_SCDynamicStoreCopyComputerName']);
  for (const name of Object.keys(FRAMEWORKS)) {
    const text = frameworkStub(name);
    assert.ok(text.includes(`    symbols:         [ ${FRAMEWORKS[name].join(', ')} ]`), text);
    assert.match(text, /^--- !tapi-tbd\ntbd-version: {5}4\n/);
    assert.ok(text.includes(`install-name:    '/System/Library/Frameworks/${name}.framework/Versions/A/${name}'`), text);
    assert.ok(text.endsWith('...\n'));
  }
});

test('test:arm64 runs the files test:js runs', () => {
  const globbed = spawnSync('bash', ['-c', 'ls -1 __test__/*.test.mjs; ls -1 __test__/*.test.cjs'], { cwd: root, encoding: 'utf8' }).stdout.trim().split('\n');
  assert.deepEqual(suiteFiles(), globbed);
  assert.match(pkg.scripts['test:js'], /__test__\/\*\.test\.mjs __test__\/\*\.test\.cjs/);
});

const TAP = `TAP version 13
# Subtest: budgets fleet: four processes, one PostgreSQL, one budget
    # Subtest: no overspend must-fire: 4 × 250 concurrent provisions
    not ok 1 - no overspend must-fire: 4 × 250 concurrent provisions
      ---
      ...
    # Subtest: a passing child
    ok 2 - a passing child
not ok 1 - budgets fleet: four processes, one PostgreSQL, one budget
# Subtest: routes by capability
ok 2 - routes by capability
# Subtest: skipped one
ok 3 - skipped one # SKIP not on arm64
# Subtest: a todo
not ok 3 - a todo # TODO not yet
# Subtest: runs the js block at docs/fleets.md:120
not ok 4 - runs the js block at docs/fleets.md:120
  ---
  error: |-
    docs/fleets.md:120 exited SIGKILL:
  ...
# Subtest: runs the js block at README.md:87
not ok 5 - runs the js block at README.md:87
  ---
  error: |-
    README.md:87 exited 1: TypeError: x is not a function
  ...
`;

test('must-fire: test:arm64 fails on a failure outside EMULATION_BOUND; must-not-fire: a listed test (or its subtests) failing is tolerated', () => {
  const failures = tapFailures(TAP);
  assert.deepEqual(failures.map((f) => f.path), [
    ['budgets fleet: four processes, one PostgreSQL, one budget', 'no overspend must-fire: 4 × 250 concurrent provisions'],
    ['budgets fleet: four processes, one PostgreSQL, one budget'],
    ['runs the js block at docs/fleets.md:120'],
    ['runs the js block at README.md:87'],
  ]);
  // a documented program killed by the clock is tolerated; one that failed on its own is not
  assert.deepEqual(judge(failures).unexpected.map((f) => f.name), ['runs the js block at README.md:87']);
  assert.equal(judge(failures).known.length, 3);
  assert.match(failures[2].detail, /exited SIGKILL/);
  const other = tapFailures(TAP.replace('ok 2 - routes by capability', 'not ok 2 - routes by capability'));
  assert.deepEqual(judge(other).unexpected.map((f) => f.name), ['routes by capability', 'runs the js block at README.md:87']);
  assert.deepEqual(judge(failures, {}, []).unexpected.length, 4, 'nothing is tolerated that is not listed; a failing todo is no failure');
  for (const reason of [...Object.values(EMULATION_BOUND), ...Object.values(RUST_EMULATION_BOUND)]) assert.match(reason, /\d/, 'each reason names the bound it exceeds');
});
