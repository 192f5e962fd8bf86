// The worker processes of the fleet tests (fleet, budgets-fleet, warm-fleet): a forked
// fixture that builds its routers, says `{ ready: true }`, then answers each `{ seq, … }`
// message with `{ seq, answer }`.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

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
