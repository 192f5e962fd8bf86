'use strict';
// Every error a caller can catch: one base class, named subclasses, a stable `code` (fields:
// index.d.ts), in one CommonJS module that index.js and index.mjs both hand out, so `instanceof`
// holds from either. Errors carry only codes, ids, operations and field paths: never a
// provider's message, stack or cause, never a credential.

const { SandboxRouterError, NativeBinaryNotFoundError, isRouterError } = require('./error-base.js');
const { binding } = require('./binding.js');

/** The request is malformed: `field` names the offending field. Nothing was called. */
class SandboxRequestValidationError extends SandboxRouterError {}
/** The request is for fleet placement / node affinity / no sandbox: not routed. */
class RoutingNotApplicableError extends SandboxRouterError {}
/** No pool can serve the request. Nothing will change by retrying as-is. */
class NoEligibleProviderError extends SandboxRouterError {}
/** A provider definition or id is invalid, or an id is registered twice. */
class ProviderRegistryError extends SandboxRouterError {}
/** Router or factory options are invalid. */
class SandboxRouterConfigurationError extends SandboxRouterError {}
/**
 * `PROVIDER_RUNTIME_ERROR`, or `OPERATION_TIMEOUT` (`timeoutMs`): only `providerId`, `operation`
 * and an SDK error's `facts` (numeric `status`, `errorClass`; never text). Code, message: the core's.
 */
class ProviderRuntimeError extends SandboxRouterError {
  constructor(providerId, operation, timeoutMs, facts) {
    const deadline = timeoutMs === undefined ? undefined : Number(timeoutMs);
    const { code, message } = binding.providerRuntimeError(`${providerId}`, `${operation}`, deadline);
    super(message, code, timeoutMs === undefined ? { providerId, operation, ...facts } : { providerId, operation, timeoutMs });
  }
}
/** Acquisition failed terminally or exhausted its attempts; `attempts` lists sanitized codes. */
class ProviderProvisioningError extends SandboxRouterError {}
/** The credential-readiness port threw or answered a non-boolean. */
class ProvisioningAvailabilityError extends SandboxRouterError {}
/** Capacity routing found no pool with room. Retry later: capacity changes. */
class ProviderCapacityExhaustedError extends SandboxRouterError {}
/** A budget refused the provision (`BUDGET_EXHAUSTED`, `BUDGET_STORE_UNAVAILABLE`); fields: index.d.ts. */
class BudgetExhaustedError extends SandboxRouterError {}
/** A sandbox was acquired but its mapping could not be stored; `cleanup` says what happened. */
class MappingPersistenceError extends SandboxRouterError {}
/** No mapping exists for this `sbx_…` id. */
class SandboxNotFoundError extends SandboxRouterError {}
/** A launch did not settle within `acquisitionTimeoutMs`; the sandbox may exist. */
class AcquisitionTimeoutError extends SandboxRouterError {}
/** A built-in provider's optional package is not installed, or failed to load (`missingModule`). */
class ProviderPackageMissingError extends SandboxRouterError {}
/** `PROVIDER_OPERATION_UNSUPPORTED`: the installed adapter does not implement a port method. */
class ProviderOperationUnsupportedError extends ProviderPackageMissingError {}
/**
 * `MANIFEST_START_FAILED`: `process` and `reason` (MANIFEST_START_REASONS); what was started
 * has been torn down (`teardown`). Never carries command output; the message is the core's.
 */
class ManifestStartError extends SandboxRouterError {
  constructor(processName, reason, details = {}) {
    const { code, message } = binding.manifestStartError(`${processName}`, `${reason}`);
    super(message, code, { process: processName, reason, ...details });
  }
}
/** `QUEUE_TIMEOUT`: waited `queue.maxWaitMs` and no pool freed (`retryable`, `waitedMs`, `capacityRejections`). */
class QueueTimeoutError extends SandboxRouterError {}
/** `ABORTED` (the provision's signal fired before its launch) or `ROUTER_CLOSED` (closed while it waited). */
class ProvisionAbortedError extends SandboxRouterError {}
/** A bug in the router itself (e.g. a caught native panic). */
class SandboxRouterInternalError extends SandboxRouterError {}

/** The classes the native core may name (`errorClass`), by name: the core's `ErrorClass` list (tests check both). */
const NATIVE_CLASSES = Object.freeze({
  SandboxRequestValidationError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
  ProviderProvisioningError,
  ProviderCapacityExhaustedError,
  AcquisitionTimeoutError,
  MappingPersistenceError,
  BudgetExhaustedError,
  SandboxRouterInternalError,
  ProviderPackageMissingError,
  ProviderOperationUnsupportedError,
  ProvisioningAvailabilityError,
  ProviderRuntimeError,
  SandboxNotFoundError,
  QueueTimeoutError,
  ProvisionAbortedError,
});

/**
 * A native error (src/binding/error.rs `NativeError`, returned or thrown: both read the same way)
 * as an instance of the class it names; anything else (a bug) is an internal error, its text lost.
 */
function fromNative(error) {
  if (error === null || typeof error !== 'object' || typeof error.errorClass !== 'string' || typeof error.code !== 'string') {
    return internalError();
  }
  const { errorClass, code, message, ...details } = error;
  const Cls = Object.hasOwn(NATIVE_CLASSES, errorClass) ? NATIVE_CLASSES[errorClass] : SandboxRouterInternalError;
  // The base constructor with the named class as `new.target`: every class is built the
  // same way, whatever its own constructor takes.
  return Reflect.construct(SandboxRouterError, [String(message), code, details], Cls);
}

/** The core's internal error: a bug in the router, without any text but its own. */
function internalError() {
  return fromNative(binding.internalError());
}

/** The code of an error the router settles a call with: ours, else (a bug) the internal error's. */
function codeOf(error) {
  return isRouterError(error) && typeof error.code === 'string' ? error.code : internalError().code;
}

/** Calls `fn`, rethrowing native failures as typed errors (and our own errors as they are). */
function callNative(fn) {
  try {
    return fn();
  } catch (error) {
    throw isRouterError(error) ? error : fromNative(error);
  }
}

/**
 * Throws the typed error the binding call `fn` throws (`notJsonError`, …); its return is a bug of ours.
 * @param {() => unknown} fn
 * @returns {never}
 */
function refuse(fn) {
  callNative(fn);
  throw internalError();
}

module.exports = {
  SandboxRouterError,
  QueueTimeoutError,
  ProvisionAbortedError,
  SandboxRequestValidationError,
  RoutingNotApplicableError,
  NoEligibleProviderError,
  ProviderRegistryError,
  SandboxRouterConfigurationError,
  ProviderRuntimeError,
  ProviderProvisioningError,
  ProvisioningAvailabilityError,
  ProviderCapacityExhaustedError,
  BudgetExhaustedError,
  MappingPersistenceError,
  SandboxNotFoundError,
  AcquisitionTimeoutError,
  ProviderPackageMissingError,
  ProviderOperationUnsupportedError,
  ManifestStartError,
  SandboxRouterInternalError,
  NativeBinaryNotFoundError,
  NATIVE_CLASSES,
  fromNative,
  callNative,
  refuse,
  codeOf,
  isRouterError,
};
