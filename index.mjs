// ESM entry: re-exports the very objects of the CommonJS entry, so classes and
// instanceof are identical from import and require.
import cjs from './index.js';

export const {
  asProviderId,
  InMemoryProviderRegistry,
  InMemoryMappingStore,
  SandboxRouter,
  routeProviders,
  SANDBOX_ID_LABEL,
  createSandboxRouter,
  createProviderRuntime,
  ConfiguredSandboxRouter,
  SUPPORTED_PROVIDERS,
  DEFAULT_CAPABILITIES,
  DEFAULT_SIGNALS,
  createCapacityReader,
  CAPACITY_READER_KINDS,
  summarizeDaytonaCapacity,
  parseDaytonaCapacityLimits,
  SandboxRouterError,
  SandboxRequestValidationError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
  ProviderRuntimeError,
  ProviderProvisioningError,
  ProvisioningAvailabilityError,
  ProviderCapacityExhaustedError,
  MappingPersistenceError,
  SandboxNotFoundError,
  AcquisitionTimeoutError,
  ProviderPackageMissingError,
  SandboxRouterInternalError,
} = cjs;

export default cjs;
