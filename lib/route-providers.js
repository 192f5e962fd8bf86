'use strict';
// routeProviders(request, providers): the pure, synchronous decision over a list of
// definitions, with upstream's signature. Same core, same order, same reasons as the
// router; nothing is launched and no callback runs.

const { binding } = require('./binding.js');
const { ProviderRegistryError, SandboxRequestValidationError, callNative } = require('./errors.js');
const { serialize } = require('./serialize.js');
const { publicExplanation } = require('./router.js');

/**
 * @param {object | undefined} request
 * @param {readonly object[]} providers
 */
function routeProviders(request, providers) {
  if (!Array.isArray(providers)) {
    throw new ProviderRegistryError('routeProviders expects an array of provider definitions', 'INVALID_PROVIDER_DEFINITION', {
      field: 'providers',
    });
  }
  const json = serialize(request);
  if (json === null) {
    throw new SandboxRequestValidationError('invalid request: (root) must be serializable', 'INVALID_REQUEST', { field: '(root)' });
  }
  const defs = serialize(
    providers.map((p) =>
      p && typeof p === 'object' ? { id: p.id, capabilities: p.capabilities, signals: p.signals } : { id: null },
    ),
  );
  if (defs === null) {
    throw new ProviderRegistryError('provider definitions must be serializable', 'INVALID_PROVIDER_DEFINITION', { field: 'providers' });
  }
  const raw = JSON.parse(callNative(() => binding.routeOnce(json, defs)));
  return publicExplanation(raw);
}

module.exports = { routeProviders };
