'use strict';
// Sandbox ids: `sbx_` + 32 lowercase hex from the OS CSPRNG, made by the native core in
// batches of 64 (one native call per 64 ids; each id is still 128 fresh random bits).

const { binding } = require('./binding.js');

const ID_LENGTH = 36;
const BATCH = 64;
let batch = '';
let offset = 0;

/** A fresh `sbx_…` id. */
function nextSandboxId() {
  if (offset >= batch.length) {
    batch = binding.sandboxIds(BATCH);
    offset = 0;
  }
  const id = batch.slice(offset, offset + ID_LENGTH);
  offset += ID_LENGTH;
  return id;
}

module.exports = { nextSandboxId };
