'use strict';
// Finds and loads the native addon: `SANDBOX_ROUTER_NATIVE_PATH` if set; else
// `sandbox-router.<triple>.node` next to package.json (what `npm run build` writes; the
// published package ships none there); else the platform package
// `@agent-relay/sandbox-router-<triple>` (an optional dependency, npm/). When none fits, a
// NativeBinaryNotFoundError names the triple and what to do. Everything asked of the process
// goes through one `host` object, so the tests can simulate other platforms and libcs.

const { join } = require('node:path');
const { existsSync, readFileSync } = require('node:fs');
const { NativeBinaryNotFoundError } = require('./error-base.js');
const { readOr } = require('./guard.js');

const ROOT = join(__dirname, '..');
const PACKAGE = '@agent-relay/sandbox-router';
const BINARY = 'sandbox-router';
/** The triples a platform package is published for (npm/<triple>/). */
const PUBLISHED_TRIPLES = Object.freeze([
  'darwin-x64',
  'darwin-arm64',
  'win32-x64-msvc',
  'linux-x64-gnu',
  'linux-x64-musl',
  'linux-arm64-gnu',
  'linux-arm64-musl',
]);

const processHost = {
  platform: process.platform,
  arch: process.arch,
  env: process.env,
  report: () => process.report.getReport(),
  readFile: (path) => readFileSync(path, 'utf8'),
  exists: existsSync,
  resolve: (id) => require.resolve(id),
  require: (path) => require(path),
};

/**
 * musl or glibc? napi-rs's two probes: `/usr/bin/ldd` names its libc (cheap, first); else the
 * diagnostic report's header has `glibcVersionRuntime` only on glibc. Unknown counts as glibc.
 */
function isMusl(host) {
  const ldd = readOr(() => host.readFile('/usr/bin/ldd').includes('musl'), null);
  if (ldd !== null) return ldd;
  // no ldd (distroless images): ask the report
  return readOr(() => {
    const report = host.report();
    if (report?.header?.glibcVersionRuntime) return false;
    return Array.isArray(report?.sharedObjects) && report.sharedObjects.some((f) => /(^|\/)(libc\.musl-|ld-musl-)/.test(f));
  }, false);
}

/** The napi-rs platform triple of `host` (this process by default), e.g. `linux-x64-gnu`. */
function platformTriple(host = processHost) {
  if (host.platform === 'linux') return `linux-${host.arch}-${isMusl(host) ? 'musl' : 'gnu'}`;
  if (host.platform === 'win32') return `win32-${host.arch}-msvc`;
  return `${host.platform}-${host.arch}`;
}

/** Where the binary for `host` is, as `{ triple, source, path }`; throws when none fits. */
function locate(host = processHost) {
  const triple = platformTriple(host);
  const override = host.env.SANDBOX_ROUTER_NATIVE_PATH;
  if (override) return { triple, source: 'SANDBOX_ROUTER_NATIVE_PATH', path: override };
  const file = `${BINARY}.${triple}.node`;
  const local = join(ROOT, file);
  if (host.exists(local)) return { triple, source: 'local build', path: local };
  const pkg = `${PACKAGE}-${triple}`;
  try {
    return { triple, source: pkg, path: host.resolve(pkg) };
  } catch (error) {
    if (error?.code !== 'MODULE_NOT_FOUND') throw error;
  }
  const build =
    `build it from source with a Rust toolchain: in a checkout of the package's source, ` +
    `npm install && npm run build writes ${file}; copy it next to ${PACKAGE}'s package.json ` +
    `or set SANDBOX_ROUTER_NATIVE_PATH to its path.`;
  const fix = PUBLISHED_TRIPLES.includes(triple)
    ? `${pkg} is an optional dependency of ${PACKAGE} and was not installed: reinstall without ` +
      `--omit=optional / --no-optional (a lockfile made on another platform can also skip it: ` +
      `delete node_modules and the lockfile, then install again), run npm install ${pkg}, or ${build}`
    : `No prebuilt binary is published for ${triple}: ${build}`;
  throw new NativeBinaryNotFoundError(
    `${PACKAGE} has no native binary for this platform (${triple}). Looked for ${local} and the package ${pkg}. ${fix}`,
    'NATIVE_BINARY_NOT_FOUND',
    { platform: triple, searched: [local, pkg] },
  );
}

/** Loads the native binding for `host` (this process by default). */
function load(host = processHost) {
  return host.require(locate(host).path);
}

module.exports = { load, locate, platformTriple, PUBLISHED_TRIPLES };
