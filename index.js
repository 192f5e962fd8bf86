'use strict';
// @agent-relay/sandbox-router: the public CommonJS entry. `index.mjs` re-exports these
// very objects, so classes (and `instanceof`) are identical in ESM and CommonJS.

const errors = require('./lib/errors.js');
const { asProviderId, InMemoryProviderRegistry } = require('./lib/registry.js');
const { InMemoryMappingStore, SqliteMappingStore } = require('./lib/mappings.js');
const { PostgresMappingStore } = require('./lib/postgres.js');
const { SandboxRouter, SANDBOX_ID_LABEL, SANDBOX_FLEET_LABEL } = require('./lib/router.js');
const { routeProviders } = require('./lib/route-providers.js');
const factory = require('./lib/factory.js');
const capacityReaders = require('./lib/capacity-readers.js');
const manifest = require('./lib/manifest.js');
const { jsonLinesSink } = require('./lib/decisions.js');

module.exports = {
  asProviderId,
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SqliteMappingStore,
  PostgresMappingStore,
  SandboxRouter,
  routeProviders,
  jsonLinesSink,
  SANDBOX_ID_LABEL,
  SANDBOX_FLEET_LABEL,
  createSandboxRouter: factory.createSandboxRouter,
  createProviderRuntime: factory.createProviderRuntime,
  ConfiguredSandboxRouter: factory.ConfiguredSandboxRouter,
  SUPPORTED_PROVIDERS: factory.SUPPORTED_PROVIDERS,
  DEFAULT_CAPABILITIES: factory.DEFAULT_CAPABILITIES,
  DEFAULT_SIGNALS: factory.DEFAULT_SIGNALS,
  createCapacityReader: capacityReaders.createCapacityReader,
  CAPACITY_READER_KINDS: capacityReaders.CAPACITY_READER_KINDS,
  summarizeDaytonaCapacity: capacityReaders.summarizeDaytonaCapacity,
  parseDaytonaCapacityLimits: capacityReaders.parseDaytonaCapacityLimits,
  validateManifest: manifest.validateManifest,
  planStartup: manifest.planStartup,
  planTeardown: manifest.planTeardown,
  startManifest: manifest.startManifest,
  teardownManifest: manifest.teardownManifest,
  checkIdle: manifest.checkIdle,
  ManifestStartError: manifest.ManifestStartError,
  MANIFEST_START_REASONS: manifest.MANIFEST_START_REASONS,
  SandboxRouterError: errors.SandboxRouterError,
  SandboxRequestValidationError: errors.SandboxRequestValidationError,
  RoutingNotApplicableError: errors.RoutingNotApplicableError,
  NoEligibleProviderError: errors.NoEligibleProviderError,
  ProviderRegistryError: errors.ProviderRegistryError,
  SandboxRouterConfigurationError: errors.SandboxRouterConfigurationError,
  ProviderRuntimeError: errors.ProviderRuntimeError,
  ProviderProvisioningError: errors.ProviderProvisioningError,
  ProvisioningAvailabilityError: errors.ProvisioningAvailabilityError,
  ProviderCapacityExhaustedError: errors.ProviderCapacityExhaustedError,
  BudgetExhaustedError: errors.BudgetExhaustedError,
  QueueTimeoutError: errors.QueueTimeoutError,
  ProvisionAbortedError: errors.ProvisionAbortedError,
  MappingPersistenceError: errors.MappingPersistenceError,
  SandboxNotFoundError: errors.SandboxNotFoundError,
  AcquisitionTimeoutError: errors.AcquisitionTimeoutError,
  ProviderPackageMissingError: errors.ProviderPackageMissingError,
  SandboxRouterInternalError: errors.SandboxRouterInternalError,
  NativeBinaryNotFoundError: errors.NativeBinaryNotFoundError,
};
