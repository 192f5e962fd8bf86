'use strict';
// Decision records (router option `decisions`; docs/decisions.md): the router keeps them
// (src/core/router/decisions.rs); this file reads them for the caller, hands each new one to
// the caller's sink, and offers a sink that appends them to a file as JSON lines.

const fs = require('node:fs');
const { binding } = require('./binding.js');
const { callNative } = require('./errors.js');
const { serializeLenient, argText } = require('./serialize.js');
const { readOr } = require('./guard.js');
const { send } = require('./events.js');

/** `router.decisions(query)`: the kept records, newest first (the core reads the query strictly). */
function decisions(ctx, query) {
  return callNative(() => binding.routerDecisions(ctx.native, argText(query, 'input')));
}

/** `router.replay(record)`: the record's decision decided again by this router (the core reads the record strictly). */
function replay(ctx, record) {
  // A record's JSON text (a jsonLinesSink line) crosses as it is; an object is read once, as JSON.stringify
  // writes it (NaN as null, refused naming the field), else leniently; an unreadable value is no record.
  const text = typeof record === 'string' ? record : (readOr(() => JSON.stringify(record) ?? null, null) ?? serializeLenient(record) ?? 'null');
  return callNative(() => binding.routerReplay(ctx.native, text));
}

/** The records a provision's end kept, handed to the caller's sink (a throwing or rejecting sink changes nothing). */
function sink(ctx) {
  if (ctx.decisionSink !== null) for (const record of binding.routerTakeDecisions(ctx.native)) send(ctx.decisionSink, record);
}

/**
 * A sink that appends each record to `path` as one line of JSON, written before the provision's
 * promise settles (a failed write is the sink's: it changes nothing). After `close()`, records are dropped.
 * @param {string} path
 */
function jsonLinesSink(path) {
  if (typeof path !== 'string' || path.length === 0) callNative(() => binding.routerOptionsRefused('decisions.file'));
  let open = true;
  const write = (/** @type {unknown} */ record) => open && fs.appendFileSync(path, `${JSON.stringify(record)}\n`);
  write.close = async () => {
    open = false;
  };
  return write;
}

module.exports = { decisions, replay, sink, jsonLinesSink };
