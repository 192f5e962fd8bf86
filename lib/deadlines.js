'use strict';
// Launch deadlines on one timer (not a setTimeout per launch: docs/performance.md). Live entries
// form a doubly linked list ordered by deadline (with one timeout value, appending *is*
// ordering; others are inserted searching from the tail); settling unlinks in O(1), and a
// settled entry can be added again. With nothing live the timer is unref'd, not cleared: an
// idle router never keeps the process alive, and the next provision reuses it. Times are
// monotonic: a wall-clock jump neither fires deadlines early nor stretches them.

/** An entry carries `at`, `settled`, `prev`, `next` (set by `add`; declared up front, its shape never changes). */
class Deadlines {
  #head = null;
  #tail = null;
  #live = 0;
  #onExpire;
  #timer = null;
  #armedAt = Infinity;
  /** whether the armed timer is ref'd (it is while an entry is live) */
  #refd = false;

  /** @param {(entry: object) => void} onExpire called with an entry whose deadline passed */
  constructor(onExpire) {
    this.#onExpire = onExpire;
  }

  /** Tracks `entry` until it is settled or `ms` pass, whichever is first. Returns the entry. */
  add(ms, entry) {
    const at = performance.now() + ms;
    entry.at = at;
    entry.settled = false;
    let after = this.#tail;
    while (after !== null && after.at > at) after = after.prev;
    entry.prev = after;
    entry.next = after === null ? this.#head : after.next;
    if (entry.next === null) this.#tail = entry;
    else entry.next.prev = entry;
    if (after === null) this.#head = entry;
    else after.next = entry;
    this.#live++;
    if (at < this.#armedAt) this.#arm(at);
    else if (!this.#refd) {
      this.#timer.ref();
      this.#refd = true;
    }
    return entry;
  }

  /** Marks an entry settled; false if it had already expired or settled. */
  settle(entry) {
    if (entry.settled) return false;
    entry.settled = true;
    this.#unlink(entry);
    if (this.#live === 0 && this.#refd) {
      this.#timer.unref();
      this.#refd = false;
    }
    return true;
  }

  /** Number of unsettled deadlines (for tests). */
  get size() {
    return this.#live;
  }

  #unlink(entry) {
    const { prev, next } = entry;
    if (prev === null) this.#head = next;
    else prev.next = next;
    if (next === null) this.#tail = prev;
    else next.prev = prev;
    entry.prev = null;
    entry.next = null;
    this.#live--;
  }

  #arm(at) {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, at - performance.now()));
    this.#refd = true;
  }

  #fire() {
    this.#timer = null;
    this.#armedAt = Infinity;
    this.#refd = false;
    const now = performance.now();
    const due = [];
    while (this.#head !== null && this.#head.at <= now) {
      const entry = this.#head;
      entry.settled = true;
      this.#unlink(entry);
      due.push(entry);
    }
    if (this.#head !== null) this.#arm(this.#head.at);
    for (const entry of due) {
      try {
        this.#onExpire(entry);
      } catch {
        // One handler's failure must not keep the other expired entries from their handlers
        // (nor escape into the timer callback, where it would be uncaught).
      }
    }
  }
}

module.exports = { Deadlines };
