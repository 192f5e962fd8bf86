'use strict';
// Decision records (router option `decisions`; docs/decisions.md): the router keeps them
// (src/core/router/decisions.rs); this file reads them for the caller, hands each new one to
// the caller's sink, and offers a sink that appends them to a file as JSON lines.

const fs = require('node:fs');
const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');
const { textOf } = require('./options.js');

/** `router.decisions(query)`: the kept records, newest first (the core reads the query strictly). */
function decisions(ctx, query) {
  const q = query === undefined ? 'null' : (textOf(query, 'options') ?? '0');
  return callNative(() => binding.routerDecisions(ctx.native, q));
}

/** `router.replay(record)`: the record's decision decided again by this router (the core reads the record strictly). */
function replay(ctx, record) {
  const text = textOf(record, 'record') ?? '0';
  return callNative(() => binding.routerReplay(ctx.native, text));
}

/** The records a provision's end kept, handed to the caller's sink (a throwing or rejecting sink changes nothing). */
function sink(ctx) {
  const to = ctx.decisionSink;
  if (to === null) return;
  for (const record of binding.routerTakeDecisions(ctx.native)) {
    try {
      const r = to(record);
      if (r !== null && typeof r === 'object' && typeof r.then === 'function') r.then(undefined, () => {});
    } catch {
      // A sink's failure is the sink's: the provision's outcome is decided already.
    }
  }
}

/**
 * A sink that appends each record to `path` as one line of JSON (the file is opened for
 * appending on first use). `close()` flushes and closes it; records after `close()` are dropped.
 * @param {string} path
 */
function jsonLinesSink(path) {
  if (typeof path !== 'string' || path.length === 0) callNative(() => binding.routerOptionsRefused('decisions.file'));
  /** @type {fs.WriteStream | null} */
  let out = null;
  let closed = false;
  const write = (/** @type {unknown} */ record) => {
    if (closed) return;
    if (out === null) {
      out = fs.createWriteStream(path, { flags: 'a' });
      out.on('error', () => {});
    }
    out.write(`${JSON.stringify(record)}\n`);
  };
  write.close = () =>
    new Promise((resolve) => {
      closed = true;
      if (out === null) return resolve(undefined);
      out.end(() => resolve(undefined));
    });
  return write;
}

module.exports = { decisions, replay, sink, jsonLinesSink };
