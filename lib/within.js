'use strict';
// Bounded awaits: every await on a caller's callback or a runtime call has a deadline.

const { binding } = require('./binding.js');
const { thenable, readOr, methodOf } = require('./guard.js');

const TIMED_OUT = Symbol('timed-out');
/** setTimeout's longest delay; a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Awaits `value` for at most `ms`, then resolves to TIMED_OUT; rejects when `value` rejects or cannot be read. */
function within(value, ms) {
  const isThenable = readOr(() => thenable(value), null);
  if (isThenable === null) return Promise.reject(new Error('unreadable answer'));
  if (!isThenable) return Promise.resolve(value);
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.min(ms, MAX_TIMER_MS), TIMED_OUT);
  });
  return Promise.race([value, timeout]).finally(() => clearTimeout(timer));
}

/** What `await call()` gives, or `fallback` when it throws or rejects (no bound of its own). Never rejects. */
async function awaitOr(call, fallback) {
  try {
    return await call();
  } catch {
    return fallback;
  }
}

/** Whether `call()` settled within `ms` (a throw or a rejection: false). Never rejects. */
async function okWithin(call, ms) {
  return (await awaitOr(() => within(call(), ms), TIMED_OUT)) !== TIMED_OUT;
}

/** What `call()` resolved to within `ms`; null when it timed out, threw, rejected or was nullish. */
async function answerWithin(call, ms) {
  const v = await awaitOr(() => within(call(), ms), null);
  return v === TIMED_OUT ? null : (v ?? null);
}

/**
 * How `call()` settled within `ms` (0: unbounded), `how` a `ReconcileSettled`. Never rejects.
 * @returns {Promise<[number, any, unknown]>}
 */
async function settledWithin(call, ms) {
  try {
    const v = ms === 0 ? await call() : await within(call(), ms);
    if (v === TIMED_OUT) return [binding.ReconcileSettled.TimedOut, undefined, undefined];
    return [v === null || v === undefined ? binding.ReconcileSettled.Nothing : binding.ReconcileSettled.Value, v, undefined];
  } catch (error) {
    return [binding.ReconcileSettled.Threw, undefined, error];
  }
}

/**
 * `runtime.getById(id, { owned: true })` within `ms` (its method read once), as `settledWithin`
 * answers (owned: on some adapters an attached handle's destroy only forgets the sandbox); no
 * `getById`: `NoMethod`, the provider id as the handle.
 * @returns {Promise<[number, any, unknown]>}
 */
function lookupOwned(runtime, providerSandboxId, ms) {
  const getById = methodOf(runtime, 'getById');
  if (getById === undefined) return Promise.resolve([binding.ReconcileSettled.NoMethod, { id: providerSandboxId }, undefined]);
  return settledWithin(() => getById.call(runtime, providerSandboxId, { owned: true }), ms);
}

module.exports = { within, awaitOr, okWithin, answerWithin, settledWithin, lookupOwned, TIMED_OUT };
