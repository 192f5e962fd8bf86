'use strict';
// Loads the native addon. Order: `SANDBOX_ROUTER_NATIVE_PATH` if set, then
// `sandbox-router.<triple>.node` next to package.json (the published tarball embeds the
// host binary there, and `npm run build` writes it there), then the per-platform package
// `@agent-relay/sandbox-router-<triple>` (the napi-rs layout under npm/, for platforms
// with a published prebuilt). When none fits, the error names the platform triple and the
// two ways out, instead of a bare "cannot find module".

const { join } = require('node:path');
const { existsSync, readFileSync } = require('node:fs');

function isMusl() {
  if (process.platform !== 'linux') return false;
  try {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
    if (report && report.header && report.header.glibcVersionRuntime) return false;
  } catch {
    // fall through to the file check
  }
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    return true;
  }
}

/** The napi-rs platform triple of this process, e.g. `linux-x64-gnu`. */
function platformTriple() {
  const { platform, arch } = process;
  if (platform === 'linux') return `linux-${arch}-${isMusl() ? 'musl' : 'gnu'}`;
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function load(triple = platformTriple()) {
  const local = join(__dirname, '..', `sandbox-router.${triple}.node`);
  const attempts = [];
  if (process.env.SANDBOX_ROUTER_NATIVE_PATH) {
    return require(process.env.SANDBOX_ROUTER_NATIVE_PATH);
  }
  if (existsSync(local)) {
    return require(local);
  }
  attempts.push(local);
  const pkg = `@agent-relay/sandbox-router-${triple}`;
  try {
    return require(pkg);
  } catch (error) {
    if (error && error.code !== 'MODULE_NOT_FOUND') throw error;
    attempts.push(pkg);
  }
  const file = `sandbox-router.${triple}.node`;
  const err = new Error(
    `@agent-relay/sandbox-router has no native binary for this platform (${triple}). ` +
      `Looked for ${attempts.join(' and ')}. To fix it, either ` +
      `(1) install the prebuilt platform package, if one is published for ${triple}: npm install ${pkg}; or ` +
      `(2) build from source with a Rust toolchain: in a checkout of the package's source, run npm run build ` +
      `(it writes ${file} next to package.json), then copy ${file} to ${join(__dirname, '..')} ` +
      `or set SANDBOX_ROUTER_NATIVE_PATH to its path.`,
  );
  err.code = 'NATIVE_BINARY_NOT_FOUND';
  err.platform = triple;
  throw err;
}

module.exports = { load, platformTriple };
