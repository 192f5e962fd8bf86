// The worker processes of the fleet tests (fleet, budgets-fleet, warm-fleet, rate-limits-fleet):
// a forked fixture that builds its routers, says `{ ready: true }`, then answers each
// `{ seq, … }` message with `{ seq, answer }`; and the set-up those tests share.
import { fork } from 'node:child_process';
import http from 'node:http';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startPostgres } from './postgres-server.mjs';

/**
 * Forks `__test__/fixtures/<fixture>` with `args` and adds it to `workers` (so the test can
 * kill every one at the end); resolves once it is ready, to `{ child, ask(msg) }`.
 * @param {string} fixture a file in __test__/fixtures/
 * @param {string[]} args
 * @param {Array<{ child: import('node:child_process').ChildProcess }>} workers
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, ask: (msg: object) => Promise<any> }>}
 */
export function startWorker(fixture, args, workers) {
  const child = fork(fileURLToPath(new URL(`./fixtures/${fixture}`, import.meta.url)), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let seq = 0;
  const waiting = new Map();
  const w = {
    child,
    ask: (/** @type {object} */ msg) =>
      new Promise((resolve, reject) => {
        const s = ++seq;
        waiting.set(s, resolve);
        child.send({ ...msg, seq: s }, (e) => e && reject(e));
      }),
  };
  workers.push(w);
  return new Promise((resolve, reject) => {
    child.on('message', (/** @type {any} */ m) => {
      if (m.ready) resolve(w);
      else waiting.get(m.seq)?.(m.answer);
    });
    child.on('error', reject);
  });
}

/**
 * The fleet tests' set-up, for the file that calls it: before its tests, a private PostgreSQL
 * (`databases` created in it) and an HTTP server answering with `handle` (the provider the
 * workers reach at `base`); after them, every worker killed, the server closed, the database
 * stopped. Fields are set once `before` ran.
 * @param {import('node:http').RequestListener} handle
 * @param {string[]} [databases]
 */
export function fleetHarness(handle, databases = []) {
  const h = {
    /** @type {Awaited<ReturnType<typeof startPostgres>>} */
    pg: /** @type {any} */ (null),
    base: '',
    /** @type {Array<{ child: import('node:child_process').ChildProcess }>} */
    workers: [],
  };
  /** @type {import('node:http').Server | null} */
  let server = null;
  before(async () => {
    h.pg = await startPostgres();
    for (const db of databases) await h.pg.createDatabase(db);
    const s = http.createServer(handle);
    server = s;
    await new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)));
    h.base = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (s.address()).port}`;
  });
  after(async () => {
    for (const w of h.workers) w.child.kill('SIGKILL');
    server?.closeAllConnections?.();
    server?.close();
    h.pg?.stop();
  });
  return h;
}
