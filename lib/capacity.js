'use strict';
// `router.getCapacity()`: every pool's capacity reader, read concurrently within the capacity
// deadline, each answer validated natively (src/core/capacity.rs). Only reads: nothing is
// launched, started or created. A provision's capacity steps are driver.js's.

const { binding } = require('./binding.js');
const { viewOf } = require('./registry.js');
const { measure } = require('./driver.js');

/** Every pool with a reader, by id (in id order): its validated measurement. */
async function getCapacity(ctx) {
  const withReader = viewOf(ctx).definitions.filter((d) => d.capacity);
  const reads = await Promise.all(withReader.map((d) => measure(d, ctx.capacityTimeoutMs)));
  const byId = withReader.map((d, i) => [d.id, reads[i]]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const out = {};
  for (const [id, m] of byId) out[id] = binding.validateMeasurement(m.json, m.read);
  return out;
}

module.exports = { getCapacity };
