// The native loader (lib/native.js) on simulated platforms: which triple it computes (glibc
// vs musl included), where it looks and in which order, and the typed error when nothing
// fits. Each guard has its must-fire / must-not-fire pair.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { load, locate, platformTriple, PUBLISHED_TRIPLES } = require('../lib/native.js');
const { NativeBinaryNotFoundError, SandboxRouterError } = require('../lib/errors.js');
const api = require('../index.js');

const GLIBC_LDD = '#! /bin/bash\n# ldd from the GNU C Library\nTEXTDOMAIN=libc\n';
const MUSL_LDD = '#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list -- "$@"\n';
const notFound = (id) => Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });

/**
 * A simulated process. `ldd` is the text of /usr/bin/ldd (null: the file is absent);
 * `report` is what process.report.getReport() answers; `files` exist on disk; `packages`
 * maps installed package names to the path require.resolve gives.
 */
function fakeHost({ platform = 'linux', arch = 'x64', ldd = GLIBC_LDD, report = {}, env = {}, files = [], packages = {} } = {}) {
  const calls = { report: 0, required: [] };
  const host = {
    platform,
    arch,
    env,
    report: () => {
      calls.report += 1;
      if (report instanceof Error) throw report;
      return report;
    },
    readFile: (path) => {
      if (path === '/usr/bin/ldd' && ldd !== null) return ldd;
      throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
    },
    exists: (path) => files.includes(path),
    resolve: (id) => {
      if (id in packages) return packages[id];
      throw notFound(id);
    },
    require: (path) => {
      calls.required.push(path);
      return { loadedFrom: path };
    },
  };
  return { host, calls };
}

const localFile = (triple) => join(root, `sandbox-router.${triple}.node`);

test('platform triples: macOS, Windows, Linux x64/arm64 on glibc and musl', () => {
  const cases = [
    [{ platform: 'darwin', arch: 'x64' }, 'darwin-x64'],
    [{ platform: 'darwin', arch: 'arm64' }, 'darwin-arm64'],
    [{ platform: 'win32', arch: 'x64' }, 'win32-x64-msvc'],
    [{ platform: 'linux', arch: 'x64', ldd: GLIBC_LDD }, 'linux-x64-gnu'],
    [{ platform: 'linux', arch: 'x64', ldd: MUSL_LDD }, 'linux-x64-musl'],
    [{ platform: 'linux', arch: 'arm64', ldd: GLIBC_LDD }, 'linux-arm64-gnu'],
    [{ platform: 'linux', arch: 'arm64', ldd: MUSL_LDD.replace('x86_64', 'aarch64') }, 'linux-arm64-musl'],
  ];
  for (const [spec, expected] of cases) assert.equal(platformTriple(fakeHost(spec).host), expected, JSON.stringify(spec));
  assert.deepEqual(cases.map(([, t]) => t).sort(), [...PUBLISHED_TRIPLES].sort());
});

test('libc detection: a readable ldd decides without calling process.report (it is slow)', () => {
  const { host, calls } = fakeHost({ ldd: MUSL_LDD, report: { header: { glibcVersionRuntime: '2.36' } } });
  assert.equal(platformTriple(host), 'linux-x64-musl');
  assert.equal(calls.report, 0);
});

test('libc detection without ldd: the report header names glibc (must-not-fire musl) or does not (must-fire)', () => {
  const glibc = fakeHost({ ldd: null, report: { header: { glibcVersionRuntime: '2.17' }, sharedObjects: ['/lib64/libc.so.6'] } });
  assert.equal(platformTriple(glibc.host), 'linux-x64-gnu');
  assert.equal(glibc.calls.report, 1);

  const musl = fakeHost({ ldd: null, report: { header: {}, sharedObjects: ['/lib/ld-musl-x86_64.so.1', '/usr/lib/libstdc++.so.6'] } });
  assert.equal(platformTriple(musl.host), 'linux-x64-musl');
  const alpine = fakeHost({ arch: 'arm64', ldd: null, report: { header: {}, sharedObjects: ['/lib/libc.musl-aarch64.so.1'] } });
  assert.equal(platformTriple(alpine.host), 'linux-arm64-musl');
});

test('libc detection with no evidence either way (no ldd, report throws or says nothing) assumes glibc', () => {
  assert.equal(platformTriple(fakeHost({ ldd: null, report: new Error('report disabled') }).host), 'linux-x64-gnu');
  assert.equal(platformTriple(fakeHost({ ldd: null, report: { header: {} } }).host), 'linux-x64-gnu');
  // A path that merely mentions musl elsewhere is not the musl loader.
  assert.equal(platformTriple(fakeHost({ ldd: null, report: { header: {}, sharedObjects: ['/opt/notmusl/libc.so.6'] } }).host), 'linux-x64-gnu');
});

test('SANDBOX_ROUTER_NATIVE_PATH wins over a local build and the platform package', () => {
  const { host, calls } = fakeHost({
    env: { SANDBOX_ROUTER_NATIVE_PATH: '/opt/custom.node' },
    files: [localFile('linux-x64-gnu')],
    packages: { '@agent-relay/sandbox-router-linux-x64-gnu': '/nm/pkg.node' },
  });
  assert.deepEqual(load(host), { loadedFrom: '/opt/custom.node' });
  assert.deepEqual(calls.required, ['/opt/custom.node']);
});

test('a local build next to package.json wins over the platform package (development)', () => {
  const { host } = fakeHost({
    platform: 'darwin',
    arch: 'arm64',
    files: [localFile('darwin-arm64')],
    packages: { '@agent-relay/sandbox-router-darwin-arm64': '/nm/pkg.node' },
  });
  assert.deepEqual(locate(host), { triple: 'darwin-arm64', source: 'local build', path: localFile('darwin-arm64') });
});

test('the matching platform package loads when there is no local build (must-not-fire: a binary fits)', () => {
  for (const triple of PUBLISHED_TRIPLES) {
    const [platform, arch, libc] = triple.split('-');
    const pkg = `@agent-relay/sandbox-router-${triple}`;
    const binary = `/app/node_modules/${pkg}/sandbox-router.${triple}.node`;
    const { host, calls } = fakeHost({
      platform,
      arch,
      ldd: libc === 'musl' ? MUSL_LDD : GLIBC_LDD,
      // Other platforms' packages are installed too (as with a lockfile shared across OSes):
      // only the matching one may be picked.
      packages: Object.fromEntries(PUBLISHED_TRIPLES.map((t) => [`@agent-relay/sandbox-router-${t}`, `/elsewhere/${t}.node`]).concat([[pkg, binary]])),
    });
    assert.deepEqual(load(host), { loadedFrom: binary }, triple);
    assert.deepEqual(calls.required, [binary]);
  }
});

test('no binary for a published triple: NativeBinaryNotFoundError with code and triple, pointing at the optional dependency (must-fire)', () => {
  const { host, calls } = fakeHost({
    arch: 'arm64',
    ldd: MUSL_LDD,
    // the wrong libc's package is installed: it must not be used
    packages: { '@agent-relay/sandbox-router-linux-arm64-gnu': '/nm/gnu.node' },
  });
  assert.throws(
    () => load(host),
    (err) => {
      assert.ok(err instanceof NativeBinaryNotFoundError);
      assert.ok(err instanceof SandboxRouterError);
      assert.equal(err.name, 'NativeBinaryNotFoundError');
      assert.equal(err.code, 'NATIVE_BINARY_NOT_FOUND');
      assert.equal(err.platform, 'linux-arm64-musl');
      assert.deepEqual(err.searched, [localFile('linux-arm64-musl'), '@agent-relay/sandbox-router-linux-arm64-musl']);
      assert.match(err.message, /no native binary for this platform \(linux-arm64-musl\)/);
      assert.match(err.message, /optional dependency/);
      assert.match(err.message, /--omit=optional/);
      assert.match(err.message, /npm install @agent-relay\/sandbox-router-linux-arm64-musl/);
      assert.match(err.message, /Rust toolchain/);
      return true;
    },
  );
  assert.deepEqual(calls.required, []);
});

test('no binary for an unpublished triple (freebsd, linux-riscv64): the error says to build from source', () => {
  for (const [spec, triple] of [
    [{ platform: 'freebsd', arch: 'x64' }, 'freebsd-x64'],
    [{ platform: 'linux', arch: 'riscv64' }, 'linux-riscv64-gnu'],
    [{ platform: 'win32', arch: 'arm64' }, 'win32-arm64-msvc'],
  ]) {
    assert.throws(
      () => load(fakeHost(spec).host),
      (err) => {
        assert.ok(err instanceof NativeBinaryNotFoundError);
        assert.equal(err.code, 'NATIVE_BINARY_NOT_FOUND');
        assert.equal(err.platform, triple);
        assert.match(err.message, new RegExp(`No prebuilt binary is published for ${triple}`));
        assert.match(err.message, /npm install && npm run build/);
        assert.match(err.message, new RegExp(`sandbox-router\\.${triple}\\.node`));
        assert.match(err.message, /SANDBOX_ROUTER_NATIVE_PATH/);
        assert.doesNotMatch(err.message, /optional dependency/);
        return true;
      },
    );
  }
});

test('a platform package that is present but broken is not reported as missing', () => {
  const { host } = fakeHost();
  host.resolve = () => {
    throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
  };
  assert.throws(() => load(host), (err) => err.code === 'EACCES');
});

test('NativeBinaryNotFoundError is exported, the same class from require and import', async () => {
  const esm = await import('../index.mjs');
  assert.equal(api.NativeBinaryNotFoundError, NativeBinaryNotFoundError);
  assert.equal(esm.NativeBinaryNotFoundError, NativeBinaryNotFoundError);
});

test('this process: the real host loads its binary (the local build in a checkout)', () => {
  const saved = process.env.SANDBOX_ROUTER_NATIVE_PATH;
  delete process.env.SANDBOX_ROUTER_NATIVE_PATH;
  try {
    const found = locate();
    assert.equal(found.triple, platformTriple());
    assert.equal(typeof load(), 'object');
  } finally {
    if (saved !== undefined) process.env.SANDBOX_ROUTER_NATIVE_PATH = saved;
  }
});
