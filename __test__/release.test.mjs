// What a release publishes and the checks around it, each guard with a must-fire /
// must-not-fire pair: the platform packages' metadata (npm/<triple>/), the published
// package.json (scripts/pack-release.mjs), the glibc-floor and strip checker's parsing
// (scripts/check-binary.mjs), the workflow lint (scripts/lint-workflows.mjs) and the
// `prepare` guard (scripts/prepare.mjs). The binary itself is checked by .ci/run
// (`npm run build:dist`, `npm run check:binary`, `npm run test:consumer`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { platformPackages, publishManifest, packRelease } from '../scripts/pack-release.mjs';
import { highestGlibc, symbolsAbove, isStripped, problems, compareVersions } from '../scripts/check-binary.mjs';
import { lintFiles, workflowFiles } from '../scripts/lint-workflows.mjs';
import { shouldBuild } from '../scripts/prepare.mjs';

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

test('packRelease refuses to pack a platform package without its binary (must-fire)', () => {
  const missing = platformPackages().find((p) => p.triple === 'darwin-arm64');
  assert.throws(() => packRelease({ out: join(tmpdir(), 'never-written'), platforms: [missing.triple] }), /sandbox-router\.darwin-arm64\.node is missing/);
});

// Trimmed `objdump -T` output of real builds: this machine's default build, and the
// cross-built one (glibc 2.17 sysroot).
const OBJDUMP_HOST_BUILD = `
sandbox-router.linux-x64-gnu.node:     file format elf64-x86-64

DYNAMIC SYMBOL TABLE:
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) memcpy
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.34) pthread_create
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.34) dlsym
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.29) pow
0000000000000000  w   DF *UND*	0000000000000000 (GLIBC_2.18) __cxa_thread_atexit_impl
0000000000000000  w   D  *UND*	0000000000000000  Base        __gmon_start__
00000000000a1b20 g    DF .text	0000000000000123  Base        napi_register_module_v1
`;
const OBJDUMP_CROSS_BUILD = `
sandbox-router.linux-x64-gnu.node:     file format elf64-x86-64

DYNAMIC SYMBOL TABLE:
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.2.5) memcpy
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.3.2) pthread_cond_wait
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.14) memcpy
0000000000000000      DF *UND*	0000000000000000 (GLIBC_2.17) clock_gettime
0000000000000000  w   DF *UND*	0000000000000000  GLIBC_PRIVATE __libc_single_threaded
00000000000a1b20 g    DF .text	0000000000000123  Base        napi_register_module_v1
`;
const READELF_UNSTRIPPED = `
  [28] .bss              NOBITS          0000000000598000 597ff8 000010 00  WA  0   0  8
  [29] .comment          PROGBITS        0000000000000000 597ff8 00002b 01  MS  0   0  1
  [30] .symtab           SYMTAB          0000000000000000 478618 0533a0 18     32 14101  8
  [31] .strtab           STRTAB          0000000000000000 4cb9b8 0e3a47 00      0   0  1
  [32] .shstrtab         STRTAB          0000000000000000 5af3ff 00011c 00      0   0  1
`;
const READELF_STRIPPED = `
  [ 2] .dynsym           DYNSYM          00000000000002d0 0002d0 0009c0 18   A  6   1  8
  [28] .bss              NOBITS          0000000000598000 597ff8 000010 00  WA  0   0  8
  [29] .comment          PROGBITS        0000000000000000 597ff8 00002b 01  MS  0   0  1
  [30] .shstrtab         STRTAB          0000000000000000 5af3ff 00011c 00      0   0  1
`;

test('glibc versions compare numerically (2.2.5 < 2.17 < 2.34)', () => {
  assert.ok(compareVersions('2.2.5', '2.17') < 0);
  assert.ok(compareVersions('2.17', '2.3.2') > 0);
  assert.ok(compareVersions('2.34', '2.17') > 0);
  assert.equal(compareVersions('2.17', '2.17'), 0);
});

test('check-binary: a build that needs GLIBC_2.34 fails and names the symbols (must-fire)', () => {
  assert.equal(highestGlibc(OBJDUMP_HOST_BUILD), '2.34');
  assert.deepEqual(symbolsAbove(OBJDUMP_HOST_BUILD, '2.17'), ['pthread_create@GLIBC_2.34', 'dlsym@GLIBC_2.34', 'pow@GLIBC_2.29', '__cxa_thread_atexit_impl@GLIBC_2.18']);
  const result = problems({ objdump: OBJDUMP_HOST_BUILD, readelf: READELF_STRIPPED });
  assert.equal(result.problems.length, 1);
  assert.match(result.problems[0], /needs GLIBC_2\.34, above the 2\.17 floor \(pthread_create@GLIBC_2\.34/);
});

test('check-binary: a build whose highest version is 2.17 passes (must-not-fire)', () => {
  assert.equal(highestGlibc(OBJDUMP_CROSS_BUILD), '2.17');
  assert.deepEqual(symbolsAbove(OBJDUMP_CROSS_BUILD, '2.17'), []);
  assert.deepEqual(problems({ objdump: OBJDUMP_CROSS_BUILD, readelf: READELF_STRIPPED }), { highest: '2.17', stripped: true, problems: [] });
});

test('check-binary: an unstripped binary fails (must-fire), a stripped one passes (must-not-fire)', () => {
  assert.equal(isStripped(READELF_UNSTRIPPED), false);
  assert.equal(isStripped(READELF_STRIPPED), true);
  assert.deepEqual(problems({ objdump: OBJDUMP_CROSS_BUILD, readelf: READELF_UNSTRIPPED }).problems, ['not stripped: it has a .symtab section']);
});

test('check-binary: output with no GLIBC_ version at all fails (a static or non-glibc file)', () => {
  assert.equal(highestGlibc('DYNAMIC SYMBOL TABLE:\n'), null);
  assert.match(problems({ objdump: 'DYNAMIC SYMBOL TABLE:\n', readelf: READELF_STRIPPED }).problems[0], /no GLIBC_ symbol versions/);
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

test('the release workflow builds every napi target and publishes through pack-release', () => {
  const text = readFileSync(join(root, '.github', 'workflows', 'release.yml'), 'utf8');
  for (const target of pkg.napi.targets) assert.match(text, new RegExp(`target: ${target}\\n`), target);
  assert.match(text, /--use-napi-cross/);
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
