// The published tarball: what `npm pack` ships (the file allow-list; the published
// package.json itself is checked in __test__/release.test.mjs). The full install-and-run check in a fresh project is `npm run test:consumer`
// (scripts/consumer-check.mjs); this file stays fast enough for `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

// --ignore-scripts: `npm pack` would otherwise run prepare (a cargo build).
function packedFiles() {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [report] = JSON.parse(out);
  return report.files.map((f) => f.path).sort();
}

const files = packedFiles();
const triple = require('../lib/native.js').platformTriple();

test('the tarball ships the public entry points, their types, lib/, local/ and the package metadata', () => {
  for (const required of [
    'package.json',
    'README.md',
    'LICENSE',
    'index.js',
    'index.mjs',
    'index.d.ts',
    'index.d.mts',
    'lib/native.js',
    'lib/binding.js',
    'lib/errors.js',
    'lib/router.js',
    'lib/factory.js',
    'local/index.js',
    'local/index.mjs',
    'local/index.d.ts',
    'local/index.d.mts',
  ]) {
    assert.ok(files.includes(required), `${required} is missing from the tarball: ${files.join(', ')}`);
  }
});

test('the main tarball ships no native binary: it comes from the platform package (npm/<triple>/)', () => {
  assert.deepEqual(
    files.filter((f) => f.endsWith('.node')),
    [],
    'a .node file in the main tarball would be loaded instead of the platform package binary',
  );
});

test('the tarball ships nothing beyond the allow-list (entry points, types, lib/, local/, the command line, the binary, README, LICENSE)', () => {
  const allowed = [
    /^package\.json$/,
    /^README\.md$/,
    /^LICENSE$/,
    /^index\.(js|mjs|d\.ts|d\.mts)$/,
    /^lib\/[^/]+\.js$/,
    /^local\/index\.(js|mjs|d\.ts|d\.mts)$/,
    /^bin\/sandbox-router\.mjs$/,
  ];
  const extra = files.filter((f) => !allowed.some((re) => re.test(f)));
  assert.deepEqual(extra, [], `unexpected files in the tarball: ${extra.join(', ')}`);
});

const FORBIDDEN = [
  [/(^|\/)__test__\//, 'test folder'],
  [/\.(test|spec)\.[cm]?[jt]sx?$/, 'test file'],
  [/\.map$/, 'source map'],
  [/^target\//, 'cargo build output'],
  [/^src\//, 'Rust source'],
  [/^tests\//, 'Rust tests'],
  [/^(bench|examples|docs|scripts|npm)\//, 'repository-only folder'],
  [/^\.ci\//, 'CI script'],
  [/^Cargo\.(toml|lock)$/, 'Cargo file'],
  [/^build\.rs$/, 'build script'],
  [/\.rs$/, 'Rust source'],
  [/(^|\/)\.env(\..*)?$/, 'environment file'],
  [/\.(pem|key|p12|pfx|crt|der)$/i, 'key or certificate'],
  [/(^|\/)id_(rsa|ed25519|ecdsa)/, 'SSH key'],
  [/(^|\/)\.npmrc$/, 'npm credentials file'],
  [/\.(tgz|log)$/, 'tarball or log'],
  [/^binding\.(js|d\.ts)$/, 'generated raw binding'],
  [/\.node$/, 'native binary (the platform packages carry it)'],
];
const forbiddenHits = (paths) =>
  paths.flatMap((f) => FORBIDDEN.filter(([re]) => re.test(f)).map(([, what]) => `${f} (${what})`));

test('the tarball ships no tests, sources, build output, maps or secrets-looking files', () => {
  assert.deepEqual(forbiddenHits(files), []);
});

test('the forbidden-file guard fires on each kind of file it is meant to catch (must-fire pair)', () => {
  const bad = [
    '__test__/package.test.mjs',
    'lib/router.test.js',
    'lib/router.js.map',
    'target/release/libsandbox_router.so',
    'src/lib.rs',
    'tests/routing.rs',
    'bench/bench.mjs',
    '.ci/run',
    'Cargo.toml',
    'build.rs',
    '.env',
    'local/.env.production',
    'server.pem',
    'deploy.key',
    '.npmrc',
    'agent-relay-sandbox-router-0.7.0.tgz',
    'isolate-0x1-v8.log',
    'binding.d.ts',
    `sandbox-router.${triple}.node`,
  ];
  for (const path of bad) assert.notDeepEqual(forbiddenHits([path]), [], `${path} should be caught`);
  assert.deepEqual(forbiddenHits(['index.js', 'lib/native.js', 'local/index.d.mts', 'lib/binding.js']), []);
});

// How the loader picks a binary, and its NATIVE_BINARY_NOT_FOUND error on simulated
// platforms: __test__/native-loader.test.mjs.
