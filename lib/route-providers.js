'use strict';
// routeProviders(request, providers): the pure, synchronous decision over a list of
// definitions, with upstream's signature. Same core, same order, same reasons as the
// router; nothing is launched and no callback runs.

const { binding } = require('./binding.js');
const { ProviderRegistryError, SandboxRequestValidationError, callNative } = require('./errors.js');
const { serialize } = require('./serialize.js');
const { guarded } = require('./guard.js');
const { publicExplanation } = require('./router.js');

/**
 * @param {object | undefined} request
 * @param {readonly object[]} providers
 */
function routeProviders(request, providers) {
  // Read once, inside a guard (guard.js): the request through serialize, the definitions
  // into plain `{ id, capabilities, signals }` data.
  let defs;
  try {
    defs = guarded(() => {
      if (!Array.isArray(providers)) return undefined;
      return serialize(
        Array.from(providers, (p) => (p !== null && typeof p === 'object' ? { id: p.id, capabilities: p.capabilities, signals: p.signals } : { id: null })),
      );
    });
  } catch {
    defs = null;
  }
  if (defs === undefined) {
    throw new ProviderRegistryError('routeProviders expects an array of provider definitions', 'INVALID_PROVIDER_DEFINITION', {
      field: 'providers',
    });
  }
  if (defs === null) {
    throw new ProviderRegistryError('provider definitions must be readable and serializable', 'INVALID_PROVIDER_DEFINITION', { field: 'providers' });
  }
  const json = serialize(request);
  if (json === null) {
    throw new SandboxRequestValidationError('invalid request: (root) must be readable plain data (no cycles, throwing getters or toJSON)', 'INVALID_REQUEST', { field: '(root)' });
  }
  const raw = JSON.parse(callNative(() => binding.routeOnce(json, defs)));
  return publicExplanation(raw);
}

module.exports = { routeProviders };
