'use strict';
// Launch deadlines on one timer.
//
// Why not a setTimeout per launch? Creating and clearing a timer costs about as much as
// the rest of a provision's JS work on this seam. Launches share a queue ordered by
// deadline (with one timeout value, insertion order *is* deadline order; other values are
// inserted in place) and one timer armed for the earliest live entry. Settled entries are
// dropped from the head as they settle, and when nothing is live the timer is cleared, so
// an idle router never keeps the process alive.

class Deadlines {
  /** @type {{ at: number, settled: boolean }[]} */
  #q = [];
  #onExpire;
  #head = 0;
  #live = 0;
  #timer = null;
  #armedAt = Infinity;

  /** @param {(entry: object) => void} onExpire called with an entry whose deadline passed */
  constructor(onExpire) {
    this.#onExpire = onExpire;
  }

  /**
   * Tracks `entry` (any object; `at` and `settled` are set on it) until it is settled or
   * `ms` pass, whichever is first. Returns the entry.
   */
  add(ms, entry) {
    entry.at = Date.now() + ms;
    entry.settled = false;
    const q = this.#q;
    let i = q.length;
    while (i > this.#head && q[i - 1].at > entry.at) i--;
    if (i === q.length) q.push(entry);
    else q.splice(i, 0, entry);
    this.#live++;
    if (entry.at < this.#armedAt) this.#arm(entry.at);
    return entry;
  }

  /** Marks an entry settled; false if it had already expired or settled. */
  settle(entry) {
    if (entry.settled) return false;
    entry.settled = true;
    this.#live--;
    this.#compact();
    return true;
  }

  /** Number of unsettled deadlines (for tests). */
  get size() {
    return this.#live;
  }

  #compact() {
    const q = this.#q;
    while (this.#head < q.length && q[this.#head].settled) this.#head++;
    if (this.#live === 0) {
      this.#q = [];
      this.#head = 0;
      if (this.#timer !== null) clearTimeout(this.#timer);
      this.#timer = null;
      this.#armedAt = Infinity;
    } else if (this.#head > 1024 && this.#head * 2 > q.length) {
      this.#q = q.slice(this.#head);
      this.#head = 0;
    }
  }

  #arm(at) {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, at - Date.now()));
  }

  #fire() {
    this.#timer = null;
    this.#armedAt = Infinity;
    const now = Date.now();
    const q = this.#q;
    const due = [];
    while (this.#head < q.length && (q[this.#head].settled || q[this.#head].at <= now)) {
      const entry = q[this.#head++];
      if (!entry.settled) due.push(entry);
    }
    for (const entry of due) {
      entry.settled = true;
      this.#live--;
    }
    this.#compact();
    if (this.#live > 0) this.#arm(this.#q[this.#head].at);
    for (const entry of due) this.#onExpire(entry);
  }
}

module.exports = { Deadlines };
