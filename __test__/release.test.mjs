// What a release publishes and the checks around it, each guard with a must-fire /
// must-not-fire pair: the platform packages' metadata (npm/<triple>/), the published
// package.json (scripts/pack-release.mjs), the glibc-floor and strip check and its ELF
// reader (scripts/check-binary.mjs, scripts/elf.mjs), the workflow lint
// (scripts/lint-workflows.mjs) and the `prepare` guard (scripts/prepare.mjs). The binary itself is checked by .ci/run
// (`npm run build:dist`, `npm run check:binary`, `npm run test:consumer`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkPlatformBinaries, platformPackages, publishManifest, packRelease } from '../scripts/pack-release.mjs';
import { highestGlibc, symbolsAbove, inspectBinary, problems, compareVersions } from '../scripts/check-binary.mjs';
import { ElfFormatError } from '../scripts/elf.mjs';
import { lintFiles, workflowFiles } from '../scripts/lint-workflows.mjs';
import { shouldBuild } from '../scripts/prepare.mjs';
import { elf } from './binaries.mjs';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const { PUBLISHED_TRIPLES } = require('../lib/native.js');

// napi.targets (Rust triples) -> napi-rs platform triples, with each one's os / cpu / libc.
const TARGETS = {
  'x86_64-apple-darwin': ['darwin-x64', 'darwin', 'x64', null],
  'aarch64-apple-darwin': ['darwin-arm64', 'darwin', 'arm64', null],
  'x86_64-pc-windows-msvc': ['win32-x64-msvc', 'win32', 'x64', null],
  'x86_64-unknown-linux-gnu': ['linux-x64-gnu', 'linux', 'x64', 'glibc'],
  'x86_64-unknown-linux-musl': ['linux-x64-musl', 'linux', 'x64', 'musl'],
  'aarch64-unknown-linux-gnu': ['linux-arm64-gnu', 'linux', 'arm64', 'glibc'],
  'aarch64-unknown-linux-musl': ['linux-arm64-musl', 'linux', 'arm64', 'musl'],
};

test('napi.targets, npm/<triple>/ and the loader list the same seven platforms', () => {
  assert.deepEqual([...pkg.napi.targets].sort(), Object.keys(TARGETS).sort());
  const triples = Object.values(TARGETS).map(([t]) => t).sort();
  assert.deepEqual(platformPackages().map((p) => p.triple), triples);
  assert.deepEqual([...PUBLISHED_TRIPLES].sort(), triples);
});

test('each platform package: name, version in sync with the main package, os/cpu/libc, main and files name its .node', () => {
  for (const [triple, os, cpu, libc] of Object.values(TARGETS)) {
    const m = JSON.parse(readFileSync(join(root, 'npm', triple, 'package.json'), 'utf8'));
    const binary = `sandbox-router.${triple}.node`;
    assert.equal(m.name, `@agent-relay/sandbox-router-${triple}`);
    assert.equal(m.version, pkg.version, `npm/${triple} is at ${m.version}, the main package at ${pkg.version}`);
    assert.deepEqual(m.os, [os], triple);
    assert.deepEqual(m.cpu, [cpu], triple);
    if (libc) assert.deepEqual(m.libc, [libc], triple);
    else assert.equal(m.libc, undefined, triple);
    assert.equal(m.main, binary);
    assert.deepEqual(m.files, [binary]);
    assert.equal(m.license, pkg.license);
    assert.equal(m.scripts, undefined, `npm/${triple} must run no scripts`);
  }
});

test('the developers package.json has no optionalDependencies (npm ci rejects unpublished ones) and no install hooks', () => {
  // npm install skips an optional dependency that 404s, but npm ci refuses the lockfile
  // ("Missing: @agent-relay/sandbox-router-… from lock file"), so the platform packages are
  // added when the main package is packed (publishManifest below).
  assert.equal(pkg.optionalDependencies, undefined);
  for (const hook of ['preinstall', 'install', 'postinstall']) assert.equal(pkg.scripts[hook], undefined, hook);
  assert.ok(!pkg.files.some((f) => f.includes('.node')), 'the main package must not ship a binary');
});

test('publishManifest: every platform package at the main version, no scripts, no dev-only fields', () => {
  const published = publishManifest(pkg, platformPackages());
  assert.deepEqual(
    published.optionalDependencies,
    Object.fromEntries(Object.values(TARGETS).map(([t]) => [`@agent-relay/sandbox-router-${t}`, pkg.version])),
  );
  assert.equal(published.scripts, undefined);
  assert.equal(published.devDependencies, undefined);
  assert.equal(published.overrides, undefined);
  assert.ok(pkg.allowScripts, 'the checkout has an install-script policy');
  assert.equal(published.allowScripts, undefined);
  for (const key of ['name', 'version', 'main', 'module', 'types', 'exports', 'files', 'engines', 'peerDependencies', 'peerDependenciesMeta']) {
    assert.deepEqual(published[key], pkg[key], key);
  }
  assert.ok(pkg.scripts.prepare, 'the source package.json keeps its scripts');
});

test('publishManifest refuses a platform package whose version drifted (must-fire)', () => {
  const drifted = platformPackages().map((p) => (p.triple === 'linux-arm64-musl' ? { ...p, manifest: { ...p.manifest, version: '0.6.9' } } : p));
  assert.throws(() => publishManifest(pkg, drifted), /npm\/linux-arm64-musl\/package\.json is at 0\.6\.9.*keep them in sync/);
});

test('the packed main package: its package.json has the optionalDependencies and no scripts; it ships no .node', () => {
  const out = mkdtempSync(join(tmpdir(), 'sandbox-router-pack-'));
  try {
    const summary = packRelease({ out, platforms: [] });
    assert.deepEqual(summary.platforms, []);
    assert.deepEqual(summary.main.files.filter((f) => f.endsWith('.node')), []);
    assert.ok(summary.main.files.includes('lib/native.js'));
    assert.ok(!summary.main.files.some((f) => f.startsWith('scripts/')));
    const packed = JSON.parse(execFileSync('tar', ['-xzOf', summary.main.tarball, 'package/package.json'], { encoding: 'utf8' }));
    assert.equal(packed.version, pkg.version);
    assert.equal(Object.keys(packed.optionalDependencies).length, 7);
    for (const [name, range] of Object.entries(packed.optionalDependencies)) {
      assert.match(name, /^@agent-relay\/sandbox-router-(darwin|win32|linux)-/);
      assert.equal(range, pkg.version);
    }
    assert.equal(packed.scripts, undefined, 'npm 11 warns about install scripts; a prepare would try to build Rust');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

const unbuilt = platformPackages().find((p) => !existsSync(p.binary));
test('packRelease refuses to pack a platform package without its binary (must-fire)', { skip: !unbuilt && 'every platform binary is present' }, () => {
  const escaped = unbuilt.triple.replace(/[-]/g, '\\-');
  assert.throws(() => packRelease({ out: join(tmpdir(), 'never-written'), platforms: [unbuilt.triple] }), new RegExp(`sandbox-router\\.${escaped}\\.node is missing`));
  assert.throws(() => packRelease({ out: join(tmpdir(), 'never-written'), all: true }), /is missing/);
  assert.throws(() => packRelease({ out: join(tmpdir(), 'never-written'), except: [unbuilt.triple] }), /--except goes with --all/);
});

test('must-fire: packRelease\'s gate refuses a binary that fails its platform\'s check; must-not-fire: one that passes', () => {
  const base = mkdtempSync(join(tmpdir(), 'sandbox-router-gate-'));
  try {
    for (const [triple, bytes] of [
      ['linux-arm64-gnu', elf({ machine: 183, needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.17'] }], symbols: [['memcpy', 'GLIBC_2.17']] })],
      ['linux-x64-musl', elf({ needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.17'] }], symbols: [['memcpy', 'GLIBC_2.17']], needed: ['libc.so.6'] })],
    ]) {
      mkdirSync(join(base, 'npm', triple), { recursive: true });
      writeFileSync(join(base, 'npm', triple, 'package.json'), JSON.stringify({ name: `x-${triple}`, version: '1.0.0', main: `sandbox-router.${triple}.node` }));
      writeFileSync(join(base, 'npm', triple, `sandbox-router.${triple}.node`), bytes);
    }
    const [arm, musl] = platformPackages(base);
    assert.doesNotThrow(() => checkPlatformBinaries([arm]));
    assert.throws(() => checkPlatformBinaries([arm, musl]), (e) => /refusing to pack binaries that fail the release check:\nFAIL .*linux-x64-musl\.node: .*\n.*linked against glibc, not musl/.test(e.message) && !/linux-arm64-gnu\.node/.test(e.message));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

// Shaped like real builds: this machine's default build (glibc 2.36 links 2.34's
// pthread_create) and the cross-built one (glibc 2.17 sysroot).
const HOST_BUILD = {
  needs: [
    { file: 'libc.so.6', versions: ['GLIBC_2.2.5', 'GLIBC_2.34', 'GLIBC_2.18'] },
    { file: 'libm.so.6', versions: ['GLIBC_2.29'] },
  ],
  symbols: [
    ['memcpy', 'GLIBC_2.2.5'],
    ['pthread_create', 'GLIBC_2.34'],
    ['dlsym', 'GLIBC_2.34'],
    ['pow', 'GLIBC_2.29'],
    ['__cxa_thread_atexit_impl', 'GLIBC_2.18'],
    ['__gmon_start__', null],
    ['napi_register_module_v1', null],
  ],
};
const CROSS_BUILD = {
  needs: [
    { file: 'libc.so.6', versions: ['GLIBC_2.2.5', 'GLIBC_2.14', 'GLIBC_2.17', 'GLIBC_PRIVATE'] },
    { file: 'libpthread.so.0', versions: ['GLIBC_2.3.2'] },
  ],
  symbols: [
    ['memcpy', 'GLIBC_2.2.5'],
    ['pthread_cond_wait', 'GLIBC_2.3.2'],
    ['memcpy', 'GLIBC_2.14'],
    ['clock_gettime', 'GLIBC_2.17'],
    ['__libc_single_threaded', 'GLIBC_PRIVATE'],
    ['napi_register_module_v1', null],
  ],
};

test('glibc versions compare numerically (2.2.5 < 2.17 < 2.34)', () => {
  assert.ok(compareVersions('2.2.5', '2.17') < 0);
  assert.ok(compareVersions('2.17', '2.3.2') > 0);
  assert.ok(compareVersions('2.34', '2.17') > 0);
  assert.equal(compareVersions('2.17', '2.17'), 0);
});

test('check-binary: a build that needs GLIBC_2.34 fails and names the symbols (must-fire)', () => {
  const info = inspectBinary(elf(HOST_BUILD));
  assert.deepEqual(info.glibc, [
    { version: '2.2.5', symbols: ['memcpy'] },
    { version: '2.34', symbols: ['pthread_create', 'dlsym'] },
    { version: '2.18', symbols: ['__cxa_thread_atexit_impl'] },
    { version: '2.29', symbols: ['pow'] },
  ]);
  assert.equal(highestGlibc(info.glibc), '2.34');
  assert.deepEqual(symbolsAbove(info.glibc, '2.17'), ['pthread_create@GLIBC_2.34', 'dlsym@GLIBC_2.34', 'pow@GLIBC_2.29', '__cxa_thread_atexit_impl@GLIBC_2.18']);
  const result = problems(info);
  assert.equal(result.problems.length, 1);
  assert.match(result.problems[0], /needs GLIBC_2\.34, above the 2\.17 floor \(pthread_create@GLIBC_2\.34, dlsym@GLIBC_2\.34, pow/);
  // a version needed with no symbol bound to it still stops the loader
  const bare = inspectBinary(elf({ needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.2.5', 'GLIBC_2.38'] }], symbols: [['memcpy', 'GLIBC_2.2.5']] }));
  assert.match(problems(bare).problems[0], /needs GLIBC_2\.38, above the 2\.17 floor \(\(no symbol\)@GLIBC_2\.38\)/);
});

test('check-binary: a build whose highest version is 2.17 passes (must-not-fire); GLIBC_PRIVATE is not a version', () => {
  const info = inspectBinary(elf(CROSS_BUILD));
  assert.equal(highestGlibc(info.glibc), '2.17');
  assert.deepEqual(symbolsAbove(info.glibc, '2.17'), []);
  assert.deepEqual(problems(info), { highest: '2.17', stripped: true, problems: [] });
  // the same file read in the other byte order
  assert.deepEqual(inspectBinary(elf({ ...CROSS_BUILD, bigEndian: true })), info);
  assert.deepEqual(inspectBinary(elf({ ...HOST_BUILD, bigEndian: true })), inspectBinary(elf(HOST_BUILD)));
});

test('check-binary: an unstripped binary fails (must-fire), a stripped one passes (must-not-fire)', () => {
  assert.equal(inspectBinary(elf({ ...CROSS_BUILD, symtab: true })).stripped, false);
  assert.deepEqual(problems(inspectBinary(elf({ ...CROSS_BUILD, symtab: true }))).problems, ['not stripped: it has a .symtab section']);
  assert.equal(inspectBinary(elf(CROSS_BUILD)).stripped, true);
});

test('check-binary: a file that needs no GLIBC_ version fails (a static or non-glibc file)', () => {
  const info = inspectBinary(elf({ symbols: [['napi_register_module_v1', null]] }));
  assert.deepEqual(info.glibc, []);
  assert.equal(highestGlibc(info.glibc), null);
  assert.match(problems(info).problems[0], /no GLIBC_ symbol versions/);
  assert.match(problems(inspectBinary(elf({ needs: [{ file: 'libc.so.6', versions: ['GLIBC_PRIVATE'] }] }))).problems[0], /no GLIBC_ symbol versions/);
});

test('check-binary: what is not a readable ELF64 file is an ElfFormatError (typed), bad arguments a TypeError', () => {
  const good = elf(CROSS_BUILD);
  const bad = (bytes, pattern) => assert.throws(() => inspectBinary(bytes), (e) => e instanceof ElfFormatError && e.code === 'ELF_FORMAT' && pattern.test(e.message), String(pattern));
  bad(Buffer.from('#!/bin/sh\necho not a binary\n'.padEnd(80)), /not an ELF file/);
  const elf32 = Buffer.from(good);
  elf32[4] = 1;
  bad(elf32, /not a 64-bit ELF/);
  bad(good.subarray(0, good.length - 10), /section header \d+ lies past the end|section table/);
  const farSection = Buffer.from(good);
  const v = new DataView(farSection.buffer, farSection.byteOffset);
  const shoff = Number(v.getBigUint64(0x28, true));
  v.setBigUint64(shoff + 64 + 32, 1n << 40n, true); // .dynstr's size
  bad(farSection, /section 1 .* lies past the end of the file/);
  const badName = Buffer.from(good);
  new DataView(badName.buffer, badName.byteOffset).setUint32(shoff + 64 + 64 + 0, 0xfffff, true); // .dynsym's name offset
  bad(badName, /string offset \d+ is outside section/);
  const loop = elf({ needs: [{ file: 'libc.so.6', versions: ['GLIBC_2.2.5'] }] });
  const lv = new DataView(loop.buffer, loop.byteOffset);
  const lshoff = Number(lv.getBigUint64(0x28, true));
  const vr = Number(lv.getBigUint64(lshoff + 4 * 64 + 24, true)); // .gnu.version_r's offset
  lv.setUint32(vr + 8, 4096, true); // vn_aux points past the section
  bad(loop, /Vernaux entry at \d+ lies outside section 4/);
  assert.throws(() => inspectBinary(/** @type {any} */ ('not bytes')), TypeError);
  assert.throws(() => problems(inspectBinary(good), '2.17; rm -rf'), TypeError);
  // must-not-fire: the untouched file reads
  assert.equal(highestGlibc(inspectBinary(good).glibc), '2.17');
});

test('check-binary (the command): exit 0 for a passing file, 1 for a failing or unreadable one, 2 for bad arguments', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-check-binary-'));
  const cli = (...args) => spawnSync(process.execPath, [join(root, 'scripts', 'check-binary.mjs'), ...args], { encoding: 'utf8' });
  try {
    const pass = join(dir, 'cross.node');
    const fail = join(dir, 'host.node');
    const junk = join(dir, 'junk.node');
    writeFileSync(pass, elf(CROSS_BUILD));
    writeFileSync(fail, elf({ ...HOST_BUILD, symtab: true }));
    writeFileSync(junk, 'not an ELF file at all, just text that is long enough to have a header');
    const ok = cli(pass);
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /^ok {3}.*cross\.node: highest GLIBC_2\.17 \(floor 2\.17\), stripped/);
    const no = cli(pass, fail);
    assert.equal(no.status, 1);
    assert.match(no.stdout, /FAIL .*host\.node: highest GLIBC_2\.34 \(floor 2\.17\), not stripped[\s\S]*pthread_create@GLIBC_2\.34[\s\S]*not stripped: it has a \.symtab section/);
    const unreadable = cli(junk);
    assert.equal(unreadable.status, 1);
    assert.match(unreadable.stdout, /FAIL .*junk\.node: not an ELF, Mach-O or PE file \(unknown magic\) \(BINARY_FORMAT\)/);
    assert.equal(unreadable.stderr, '');
    assert.equal(cli(fail, '--max-glibc', '2.34').stdout.includes('needs GLIBC'), false, 'a higher floor lets 2.34 pass');
    const missing = cli(join(dir, 'absent.node'));
    assert.equal(missing.status, 1);
    assert.match(missing.stdout, /FAIL .*absent\.node: cannot read it \(ENOENT\)/);
    assert.equal(cli().status, 2);
    assert.equal(cli('--max-glibc', 'latest', pass).status, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('check-binary reads this machine\'s own build of the addon (a real linker\'s output)', { skip: process.platform !== 'linux' && 'the local build is ELF only on Linux' }, () => {
  const { path: built } = require('../lib/native.js').locate();
  const info = inspectBinary(readFileSync(built));
  const highest = highestGlibc(info.glibc);
  assert.notEqual(highest, null, 'a glibc build needs GLIBC_ versions (a musl build would not: run on glibc)');
  const all = info.glibc.flatMap((g) => g.symbols);
  for (const symbol of ['memcpy', 'pthread_create']) assert.ok(all.includes(symbol), symbol);
  // must-not-fire: at its own highest version the floor passes; must-fire: one below, it fails
  assert.equal(problems(info, highest).problems.some((p) => p.startsWith('needs GLIBC_')), false);
  const [major, minor] = highest.split('.').map(Number);
  const below = minor > 0 ? `${major}.${minor - 1}` : `${major - 1}.99`;
  const fired = problems(info, below).problems.find((p) => p.startsWith('needs GLIBC_'));
  assert.match(fired ?? '', new RegExp(`needs GLIBC_${highest.replace(/\./g, '\\.')}, above the ${below.replace(/\./g, '\\.')} floor \\(\\S+@GLIBC_`));
});

test('actionlint passes the release workflow (must-not-fire) and catches a broken copy of it (must-fire)', async () => {
  const files = workflowFiles();
  assert.ok(files.some((f) => f.endsWith(`${sep}release.yml`)), files.join(', '));
  assert.deepEqual(await lintFiles(files), []);

  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-actionlint-'));
  try {
    const broken = join(dir, 'release.yml');
    const text = readFileSync(join(root, '.github', 'workflows', 'release.yml'), 'utf8');
    // a matrix key that does not exist, and a job that needs a job that does not exist
    const mutated = text.replace('--target ${{ matrix.settings.target }}', '--target ${{ matrix.settings.triple }}').replace('      - test-linux\n', '      - test-linux\n      - test-freebsd\n');
    assert.notEqual(mutated, text);
    writeFileSync(broken, mutated);
    const findings = await lintFiles([broken]);
    assert.ok(findings.some((f) => /triple/.test(f.message)), JSON.stringify(findings));
    assert.ok(findings.some((f) => /test-freebsd/.test(f.message)), JSON.stringify(findings));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the release workflow builds every napi target with the build script developers run, and publishes through pack-release', () => {
  const text = readFileSync(join(root, '.github', 'workflows', 'release.yml'), 'utf8');
  for (const target of pkg.napi.targets) assert.match(text, new RegExp(`target: ${target}\\n +platform: ${TARGETS[target][0]}\\n`), target);
  assert.match(text, /run: node scripts\/build-platforms\.mjs --target \$\{\{ matrix\.settings\.target \}\}\n/);
  assert.match(text, /run: bash scripts\/platform-toolchains\.sh --no-apt\n/);
  assert.doesNotMatch(text, /napi build/, 'no build command of its own: the script holds them');
  assert.match(text, /run: npm run test:arm64 -- --consumer\n/);
  assert.match(text, /needs:\n(\s+- [\w-]+\n)*\s+- test-arm64-emulated\n/, 'publish waits for the arm64 suite under qemu');
  assert.match(text, /node scripts\/pack-release\.mjs --out release --all/);
  assert.match(text, /npm ci --ignore-scripts/);
});

test('prepare builds in a git checkout with sources (must-fire) and nowhere else (must-not-fire)', () => {
  const tree = (...paths) => (p) => paths.some((x) => p === join('/src/repo', x));
  assert.deepEqual(shouldBuild('/src/repo', tree('.git', 'src', 'Cargo.toml')).build, true);
  assert.equal(shouldBuild('/src/repo', tree('src', 'Cargo.toml')).build, false, 'an unpacked tarball has no .git');
  assert.equal(shouldBuild('/src/repo', tree('.git')).build, false, 'no Rust sources');
  const nested = join('/app', 'node_modules', '@agent-relay', 'sandbox-router');
  assert.match(shouldBuild(nested, () => true).reason, /node_modules/);
  assert.equal(shouldBuild(nested, () => true).build, false);
});

test('prepare really skips outside a checkout: a copy of the script in a bare folder builds nothing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-router-prepare-'));
  try {
    mkdirSync(join(dir, 'scripts'));
    writeFileSync(join(dir, 'scripts', 'prepare.mjs'), readFileSync(join(root, 'scripts', 'prepare.mjs')));
    const out = execFileSync(process.execPath, [join(dir, 'scripts', 'prepare.mjs')], { encoding: 'utf8' });
    assert.match(out, /skipping the native build: not a git checkout/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
