// The embedded local runtime: real processes, real directories. Guards are tested in
// pairs: "(must-fire)" = the guard triggers (reject / kill / truncate), "(must-not-fire)" =
// the legitimate neighbour case goes through untouched.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

import {
  createLocalRuntime,
  LocalSandboxRuntime,
  LocalRuntimeError,
  LOCAL_CAPABILITIES,
  LOCAL_ERROR_CODES,
} from '../local/index.mjs';

const require = createRequire(import.meta.url);
const cjs = require('../local/index.js');

const ROOT_PREFIX = 'sandbox-router-local-';
const tmpEntries = () => new Set(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(ROOT_PREFIX)));
let entriesBefore;
const strayPids = new Set();

before(() => {
  entriesBefore = tmpEntries();
});

after(() => {
  for (const pid of strayPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  const leaked = [...tmpEntries()].filter((n) => !entriesBefore.has(n));
  assert.deepEqual(leaked, [], 'no sandbox-router-local-* temp dir may remain');
});

/** A runtime closed when the test ends. */
function runtime(t, options) {
  const rt = createLocalRuntime(options);
  t.after(() => rt.close());
  return rt;
}

/** A scratch directory outside any sandbox, removed when the test ends. */
function scratch(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'local-runtime-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Alive = exists and is not a zombie (an orphan may linger as a zombie until reaped). */
function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return err.code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function waitGone(pid, ms = 2000) {
  const deadline = Date.now() + ms;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof LocalRuntimeError, `expected LocalRuntimeError, got ${err}`);
    assert.equal(err.code, code);
    return true;
  });
}

// ── module shape ───────────────────────────────────────────────────────────────────────

test('exports: ESM and CommonJS expose the very same objects', () => {
  assert.equal(createLocalRuntime, cjs.createLocalRuntime);
  assert.equal(LocalSandboxRuntime, cjs.LocalSandboxRuntime);
  assert.equal(LocalRuntimeError, cjs.LocalRuntimeError);
  assert.equal(LOCAL_CAPABILITIES, cjs.LOCAL_CAPABILITIES);
  const rt = createLocalRuntime();
  assert.ok(rt instanceof cjs.LocalSandboxRuntime);
  assert.equal(rt.id, 'local');
  assert.deepEqual(rt.declaredCapabilities, { warmLease: false, lifecycle: true });
  assert.ok(LOCAL_ERROR_CODES.includes('LOCAL_PATH_ESCAPE'));
});

test('capabilities: honest declaration (isolation none, egress open) and deeply frozen', () => {
  assert.deepEqual(LOCAL_CAPABILITIES, {
    supported: ['syncExec', 'fileTransfer', 'longRunningProcesses'],
    isolation: 'none',
    egress: 'open',
    stateDurability: 'ephemeral',
    timeout: { semantics: ['command-lifetime'] },
  });
  assert.ok(Object.isFrozen(LOCAL_CAPABILITIES) && Object.isFrozen(LOCAL_CAPABILITIES.supported));
});

test('capabilities: accepted by the router registry as-is', () => {
  const { InMemoryProviderRegistry } = require('../index.js');
  const rt = createLocalRuntime();
  assert.doesNotThrow(() => new InMemoryProviderRegistry([{ id: 'local', runtime: rt, capabilities: LOCAL_CAPABILITIES }]));
});

// ── options ────────────────────────────────────────────────────────────────────────────

test('options: valid options are accepted, nothing is created before launch (must-not-fire)', () => {
  const rt = createLocalRuntime({ defaultTimeoutMs: 1000, shell: '/bin/sh', maxOutputBytes: 0 });
  assert.equal(rt.rootDir, null);
});

test('options: invalid options are rejected with LOCAL_INVALID_OPTIONS (must-fire)', () => {
  for (const bad of [
    { shell: '' },
    { defaultTimeoutMs: 0 },
    { defaultTimeoutMs: Infinity },
    { maxOutputBytes: -1 },
    { maxOutputBytes: 1.5 },
    { rootDir: 42 },
    { rootdir: '/tmp' },
    'nope',
  ]) {
    assert.throws(
      () => createLocalRuntime(bad),
      (err) => err instanceof LocalRuntimeError && err.code === 'LOCAL_INVALID_OPTIONS',
      JSON.stringify(bad),
    );
  }
});

// ── launch ─────────────────────────────────────────────────────────────────────────────

test('launch: creates a private directory (mode 0700) under a lazily created temp root', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch({ name: 'x', labels: { a: '1' } });
  assert.match(h.id, /^local-[0-9a-f]{16}$/);
  assert.equal(h.state, 'started');
  assert.ok(!Number.isNaN(Date.parse(h.createdAt)));
  assert.equal(h.homeDir, h.workdir);
  assert.equal(path.dirname(h.homeDir), fs.realpathSync(rt.rootDir));
  assert.ok(path.basename(rt.rootDir).startsWith(ROOT_PREFIX));
  const st = fs.statSync(h.homeDir);
  assert.ok(st.isDirectory());
  assert.equal(st.mode & 0o777, 0o700);
  const h2 = await rt.launchDetached();
  assert.notEqual(h2.id, h.id);
  assert.deepEqual(await rt.getById(h.id), h);
  assert.equal(await rt.getById('local-0000000000000000'), null);
});

// ── runScript ──────────────────────────────────────────────────────────────────────────

test('runScript: echo returns stdout and exitCode 0 (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'echo hello; pwd' });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, `hello\n${h.workdir}\n`);
  assert.equal(r.stderr, '');
  assert.equal(r.output, r.stdout);
  assert.equal(r.timedOut, false);
});

test('runScript: nonzero exit code is reported, not thrown (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'exit 7' });
  assert.equal(r.exitCode, 7);
  assert.equal(r.timedOut, false);
});

test('runScript: stderr is captured; output is stdout followed by stderr', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'echo err >&2; echo out' });
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.output, 'out\nerr\n');
  assert.equal(r.exitCode, 0);
});

test('runScript: launch env and call env reach the command, call env wins, HOME is the sandbox', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch({ env: { A: 'from-launch', B: 'from-launch' } });
  const r = await rt.runScript(h, { command: 'printf "%s|%s|%s|%s" "$A" "$B" "$C" "$HOME"', env: { B: 'from-call', C: 'c' } });
  assert.equal(r.stdout, `from-launch|from-call|c|${h.homeDir}`);
});

test('runScript: the host environment does not leak beyond PATH (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  process.env.LOCAL_RUNTIME_TEST_SECRET = 'leak';
  t.after(() => delete process.env.LOCAL_RUNTIME_TEST_SECRET);
  const r = await rt.runScript(h, { command: 'printf "%s" "${LOCAL_RUNTIME_TEST_SECRET:-unset}"' });
  assert.equal(r.stdout, 'unset');
});

test('timeout: a command within its timeout is not killed (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'sleep 0.1; echo done', timeoutMs: 5000 });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'done\n');
  assert.equal(r.timedOut, false);
  assert.doesNotMatch(r.stderr, /LOCAL_TIMEOUT/);
});

test('timeout: sleep 30 and its grandchild are killed quickly; resolves with exitCode null (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const started = Date.now();
  // The inner sh is the child of the spawned shell; its `sleep` is the grandchild.
  const r = await rt.runScript(h, { command: `sh -c 'sleep 30 & echo $!; wait'`, timeoutMs: 300 });
  const elapsed = Date.now() - started;
  const grandchild = Number(r.stdout.trim());
  assert.ok(Number.isInteger(grandchild) && grandchild > 0, `grandchild pid in ${JSON.stringify(r.stdout)}`);
  strayPids.add(grandchild);
  assert.ok(elapsed < 2000, `took ${elapsed} ms`);
  assert.equal(r.exitCode, null);
  assert.equal(r.timedOut, true);
  assert.equal(r.signal, 'SIGKILL');
  assert.match(r.stderr, /\[LOCAL_TIMEOUT\] command timed out after 300 ms/);
  assert.ok(r.output.endsWith(r.stderr));
  assert.ok(await waitGone(grandchild), `grandchild ${grandchild} still alive`);
});

test('output: under maxOutputBytes nothing is truncated (must-not-fire)', async (t) => {
  const rt = runtime(t, { maxOutputBytes: 10 });
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'printf 0123456789' });
  assert.equal(r.stdout, '0123456789');
  assert.equal(r.truncated, false);
});

test('output: beyond maxOutputBytes the stream is truncated and noted (must-fire)', async (t) => {
  const rt = runtime(t, { maxOutputBytes: 10 });
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'printf 0123456789abcdef' });
  assert.equal(r.stdout, '0123456789');
  assert.equal(r.truncated, true);
  assert.match(r.stderr, /\[LOCAL_OUTPUT_TRUNCATED\] stdout truncated at 10 bytes \(6 bytes dropped\)/);
  assert.equal(r.exitCode, 0);
});

test('runScript: unknown sandbox is rejected with LOCAL_SANDBOX_NOT_FOUND (must-fire)', async (t) => {
  const rt = runtime(t);
  await rejectsWith(rt.runScript({ id: 'local-0000000000000000' }, { command: 'true' }), 'LOCAL_SANDBOX_NOT_FOUND');
});

test('runScript: a missing shell is rejected with LOCAL_SPAWN_FAILED (must-fire)', async (t) => {
  const rt = runtime(t, { shell: '/nonexistent/sh' });
  const h = await rt.launch();
  await rejectsWith(rt.runScript(h, { command: 'true' }), 'LOCAL_SPAWN_FAILED');
});

// ── uploadBundle ───────────────────────────────────────────────────────────────────────

test('upload: relative path inside the sandbox is written; string = content, Buffer = bytes (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  await rt.uploadBundle(h, {
    files: [
      { source: 'hello', destination: 'a/b/c.txt' },
      { source: Buffer.from([0, 1, 2, 255]), destination: 'bin.dat' },
      { source: 'inside', destination: 'x/../y.txt' }, // `..` that stays inside is fine
    ],
  });
  assert.equal(fs.readFileSync(path.join(h.homeDir, 'a/b/c.txt'), 'utf8'), 'hello');
  assert.deepEqual([...fs.readFileSync(path.join(h.homeDir, 'bin.dat'))], [0, 1, 2, 255]);
  assert.equal(fs.readFileSync(path.join(h.homeDir, 'y.txt'), 'utf8'), 'inside');
  const r = await rt.runScript(h, { command: 'cat a/b/c.txt' });
  assert.equal(r.stdout, 'hello');
});

test('upload: ../ escape is rejected and nothing is written (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const name = `escape-${path.basename(h.homeDir)}.txt`;
  await rejectsWith(
    rt.uploadBundle(h, {
      files: [
        { source: 'ok', destination: 'first.txt' },
        { source: 'bad', destination: `../${name}` },
      ],
    }),
    'LOCAL_PATH_ESCAPE',
  );
  assert.equal(fs.existsSync(path.join(path.dirname(h.homeDir), name)), false);
  assert.equal(fs.existsSync(path.join(h.homeDir, 'first.txt')), false, 'validated before writing anything');
  await rejectsWith(rt.uploadBundle(h, { files: [{ source: 'bad', destination: 'a/../../x' }] }), 'LOCAL_PATH_ESCAPE');
  await rejectsWith(rt.uploadBundle(h, { files: [{ source: 'bad', destination: '.' }] }), 'LOCAL_PATH_ESCAPE');
});

test('upload: absolute path inside the sandbox (under homeDir) is written (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const dest = path.join(h.homeDir, 'abs/inside.txt');
  await rt.uploadBundle(h, { files: [{ source: 'abs', destination: dest }] });
  assert.equal(fs.readFileSync(dest, 'utf8'), 'abs');
});

test('upload: absolute path outside the sandbox is rejected (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const other = await rt.launch();
  const outside = scratch(t);
  for (const dest of [path.join(outside, 'x.txt'), path.join(other.homeDir, 'x.txt'), `${h.homeDir}-sibling/x.txt`]) {
    await rejectsWith(rt.uploadBundle(h, { files: [{ source: 'bad', destination: dest }] }), 'LOCAL_PATH_ESCAPE');
  }
  assert.deepEqual(fs.readdirSync(outside), []);
  assert.deepEqual(fs.readdirSync(other.homeDir), []);
});

test('upload: a symlinked directory pointing inside the sandbox is followed (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  fs.mkdirSync(path.join(h.homeDir, 'real'));
  fs.symlinkSync(path.join(h.homeDir, 'real'), path.join(h.homeDir, 'link'));
  await rt.uploadBundle(h, { files: [{ source: 'via link', destination: 'link/sub/f.txt' }] });
  assert.equal(fs.readFileSync(path.join(h.homeDir, 'real/sub/f.txt'), 'utf8'), 'via link');
});

test('upload: a symlinked directory pointing outside is refused, nothing created outside (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const outside = scratch(t);
  fs.symlinkSync(outside, path.join(h.homeDir, 'evil'));
  await rejectsWith(rt.uploadBundle(h, { files: [{ source: 'bad', destination: 'evil/f.txt' }] }), 'LOCAL_PATH_ESCAPE');
  await rejectsWith(rt.uploadBundle(h, { files: [{ source: 'bad', destination: 'evil/new/dir/f.txt' }] }), 'LOCAL_PATH_ESCAPE');
  await rejectsWith(
    rt.uploadBundle(h, { files: [{ source: 'bad', destination: path.join(h.homeDir, 'evil/f.txt') }] }),
    'LOCAL_PATH_ESCAPE',
  );
  assert.deepEqual(fs.readdirSync(outside), [], 'mkdir -p must not have created anything outside');
});

test('upload: a final-component symlink to an outside file is replaced, never written through (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const outside = scratch(t);
  const victim = path.join(outside, 'victim.txt');
  fs.writeFileSync(victim, 'original');
  fs.symlinkSync(victim, path.join(h.homeDir, 'f.txt'));
  await rt.uploadBundle(h, { files: [{ source: 'new', destination: 'f.txt' }] });
  assert.equal(fs.readFileSync(victim, 'utf8'), 'original');
  assert.ok(fs.lstatSync(path.join(h.homeDir, 'f.txt')).isFile());
  assert.equal(fs.readFileSync(path.join(h.homeDir, 'f.txt'), 'utf8'), 'new');
});

test('upload: a non-string/Buffer source is rejected (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  await rejectsWith(rt.uploadBundle(h, { files: [{ source: 42, destination: 'x' }] }), 'LOCAL_INVALID_ARGUMENT');
});

// ── labels ─────────────────────────────────────────────────────────────────────────────

test('labels: sandboxes carrying every given label are found and counted (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const a = await rt.launch({ labels: { pool: 'p1', owner: 'me' } });
  const b = await rt.launch({ labels: { pool: 'p1', owner: 'you' } });
  await rt.launch({ labels: { pool: 'p2', owner: 'me' } });
  assert.deepEqual((await rt.findAllByLabels({ pool: 'p1' })).map((h) => h.id), [a.id, b.id]);
  assert.deepEqual((await rt.findAllByLabels({ pool: 'p1', owner: 'me' })).map((h) => h.id), [a.id]);
  assert.equal((await rt.findByLabels({ pool: 'p1' })).id, a.id);
  assert.equal(await rt.countByLabels({ pool: 'p1' }), 2);
  assert.equal(await rt.countByLabels({ owner: 'me' }), 2);
  // limit, excludeIds, maxCount, states
  assert.deepEqual((await rt.findAllByLabels({ pool: 'p1' }, { limit: 1 })).map((h) => h.id), [a.id]);
  assert.deepEqual((await rt.findAllByLabels({ pool: 'p1' }, { excludeIds: [a.id] })).map((h) => h.id), [b.id]);
  assert.equal((await rt.findByLabels({ pool: 'p1' }, { excludeIds: [a.id] })).id, b.id);
  assert.equal(await rt.countByLabels({}, { maxCount: 2 }), 2);
  assert.equal(await rt.countByLabels({}), 3);
  await rt.stop(b);
  assert.deepEqual((await rt.findAllByLabels({ pool: 'p1' }, { states: ['started'] })).map((h) => h.id), [a.id]);
  assert.equal(await rt.countByLabels({ pool: 'p1' }), 2, 'stopped sandboxes are live');
});

test('labels: non-matching and destroyed sandboxes are not found (must-fire)', async (t) => {
  const rt = runtime(t);
  const a = await rt.launch({ labels: { pool: 'p1', owner: 'me' } });
  assert.deepEqual(await rt.findAllByLabels({ pool: 'p9' }), []);
  assert.deepEqual(await rt.findAllByLabels({ pool: 'p1', owner: 'you' }), [], 'AND, not OR');
  assert.deepEqual(await rt.findAllByLabels({ missing: '' }), [], 'absent label ≠ empty value');
  assert.equal(await rt.findByLabels({ pool: 'p9' }), null);
  assert.equal(await rt.countByLabels({ pool: 'p9' }), 0);
  await rt.destroy(a);
  assert.deepEqual(await rt.findAllByLabels({ pool: 'p1' }), []);
  assert.equal(await rt.countByLabels({ pool: 'p1' }), 0);
  assert.equal(await rt.getById(a.id), null);
});

// ── lifecycle ──────────────────────────────────────────────────────────────────────────

test('runScript: a background process survives the command that started it (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'sleep 30 >/dev/null 2>&1 & echo $!', timeoutMs: 5000 });
  const pid = Number(r.stdout.trim());
  strayPids.add(pid);
  assert.equal(r.exitCode, 0);
  await new Promise((res) => setTimeout(res, 50));
  assert.ok(isAlive(pid), 'longRunningProcesses: background work outlives runScript');
});

test('destroy: kills a running background process, removes the dir; second destroy does not throw (must-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const keep = await rt.launch();
  const r = await rt.runScript(h, { command: 'sleep 30 >/dev/null 2>&1 & echo $!' });
  const pid = Number(r.stdout.trim());
  strayPids.add(pid);
  assert.ok(isAlive(pid));
  await rt.destroy(h);
  assert.ok(await waitGone(pid), `background pid ${pid} survived destroy`);
  assert.equal(fs.existsSync(h.homeDir), false);
  await assert.doesNotReject(rt.destroy(h));
  assert.ok(fs.existsSync(keep.homeDir), 'other sandboxes untouched');
  await rejectsWith(rt.runScript(h, { command: 'true' }), 'LOCAL_SANDBOX_NOT_FOUND');
});

test('destroy: an in-flight command is killed and resolves with exitCode null', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const running = rt.runScript(h, { command: 'sleep 30' });
  await new Promise((res) => setTimeout(res, 50));
  await rt.destroy(h);
  const r = await running;
  assert.equal(r.exitCode, null);
  assert.match(r.stderr, /\[LOCAL_KILLED\] .*destroyed/);
});

test('destroy: an unknown handle does not throw (must-not-fire)', async (t) => {
  const rt = runtime(t);
  await assert.doesNotReject(rt.destroy({ id: 'local-ffffffffffffffff' }));
  await assert.doesNotReject(rt.destroy({ id: 'local-ffffffffffffffff', homeDir: '/' }));
});

test('stop/start: stop kills processes and blocks exec (must-fire); start allows it again (must-not-fire)', async (t) => {
  const rt = runtime(t);
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'sleep 30 >/dev/null 2>&1 & echo $!' });
  const pid = Number(r.stdout.trim());
  strayPids.add(pid);
  await rt.stop(h);
  assert.ok(await waitGone(pid), 'stop kills background processes');
  assert.equal((await rt.getById(h.id)).state, 'stopped');
  await rejectsWith(rt.runScript(h, { command: 'true' }), 'LOCAL_SANDBOX_STOPPED');
  assert.ok(fs.existsSync(h.homeDir), 'stop keeps the files');
  const started = await rt.start(h);
  assert.equal(started.state, 'started');
  assert.equal((await rt.runScript(h, { command: 'echo back' })).stdout, 'back\n');
});

test('close: destroys everything, removes the temp root, unregisters the exit hook; launch then rejects', async () => {
  const exitListeners = process.listenerCount('exit');
  const rt = createLocalRuntime();
  const h = await rt.launch();
  const r = await rt.runScript(h, { command: 'sleep 30 >/dev/null 2>&1 & echo $!' });
  const pid = Number(r.stdout.trim());
  strayPids.add(pid);
  const root = rt.rootDir;
  assert.ok(fs.existsSync(root));
  await rt.close();
  assert.equal(fs.existsSync(root), false);
  assert.equal(rt.rootDir, null);
  assert.ok(await waitGone(pid));
  assert.equal(process.listenerCount('exit'), exitListeners);
  await rejectsWith(rt.launch(), 'LOCAL_CLOSED');
  await assert.doesNotReject(rt.close(), 'idempotent');
});

test('close: a caller-provided rootDir is kept, only its sandboxes are removed (must-not-fire)', async (t) => {
  const root = scratch(t);
  const rt = createLocalRuntime({ rootDir: root });
  const h = await rt.launch();
  assert.equal(path.dirname(h.homeDir), fs.realpathSync(root));
  await rt.close();
  assert.ok(fs.existsSync(root));
  assert.deepEqual(fs.readdirSync(root), []);
});

test('records on disk must-fire: a runtime over the same rootDir finds, runs in and destroys a sandbox another runtime recorded there', async (t) => {
  const root = scratch(t);
  const first = createLocalRuntime({ rootDir: root });
  const h = await first.launch({ labels: { 'agent-relay-sbx-fleet': 'f', team: 'a' } });
  assert.ok(fs.existsSync(path.join(root, `${h.id}.json`)), 'the record sits beside the directory');
  assert.deepEqual(h.labels, { 'agent-relay-sbx-fleet': 'f', team: 'a' }, 'handles carry their labels');
  // A second runtime stands in for a new process after the first one died.
  const second = createLocalRuntime({ rootDir: root });
  const found = await second.findAllByLabels({ 'agent-relay-sbx-fleet': 'f' });
  assert.deepEqual(found.map((x) => [x.id, x.labels.team]), [[h.id, 'a']]);
  assert.equal(await second.countByLabels({ team: 'a' }), 1);
  const owned = await second.getById(h.id, { owned: true });
  assert.equal(owned.id, h.id);
  assert.equal((await second.runScript(owned, { command: 'echo hi' })).stdout, 'hi\n');
  await second.destroy(owned);
  assert.deepEqual(fs.readdirSync(root), [], 'directory and record removed');
  await first.close();
  await second.close();
});

test('records on disk must-not-fire: runtimes with private temporary roots never see each other\'s sandboxes', async () => {
  const a = createLocalRuntime();
  const b = createLocalRuntime();
  const h = await a.launch({ labels: { k: 'v' } });
  assert.deepEqual(await b.findAllByLabels({ k: 'v' }), []);
  assert.equal(await b.getById(h.id), null);
  await a.close();
  await b.close();
});

test('records on disk must-fire: a record whose directory was never made (a process killed in between) is found and destroyed', async (t) => {
  const root = scratch(t);
  const id = 'local-00000000000000ab';
  fs.writeFileSync(path.join(root, `${id}.json`), JSON.stringify({ id, name: null, labels: { x: 'y' }, createdAt: '2026-01-01T00:00:00.000Z' }));
  const rt = createLocalRuntime({ rootDir: root });
  assert.deepEqual((await rt.findAllByLabels({ x: 'y' })).map((h) => [h.id, h.createdAt]), [[id, '2026-01-01T00:00:00.000Z']]);
  await rt.destroy({ id });
  assert.deepEqual(fs.readdirSync(root), []);
  await rt.close();
});
