'use strict';
// Bounded awaits: every await on a caller's callback or a runtime call has a deadline.

const { thenable } = require('./guard.js');

const TIMED_OUT = Symbol('timed-out');
/** setTimeout's longest delay; a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Awaits `value` for at most `ms`; resolves to TIMED_OUT after that. Never rejects on
 * timeout; rejects when `value` rejects, or when it cannot be read (a hostile thenable).
 */
function within(value, ms) {
  let isThenable;
  try {
    isThenable = thenable(value);
  } catch {
    return Promise.reject(new Error('unreadable answer'));
  }
  if (!isThenable) return Promise.resolve(value);
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(resolve, Math.min(ms, MAX_TIMER_MS), TIMED_OUT);
  });
  return Promise.race([value, timeout]).finally(() => clearTimeout(timer));
}

/** Whether `call()` settled within `ms` (a throw or a rejection: false). Never rejects. */
async function okWithin(call, ms) {
  try {
    return (await within(call(), ms)) !== TIMED_OUT;
  } catch {
    return false;
  }
}

/** What `call()` resolved to within `ms`; null when it timed out, threw, rejected or was nullish. */
async function answerWithin(call, ms) {
  try {
    const v = await within(call(), ms);
    return v === TIMED_OUT ? null : (v ?? null);
  } catch {
    return null;
  }
}

module.exports = { within, okWithin, answerWithin, TIMED_OUT };
