'use strict';
// Every error a caller can catch: one base class, named subclasses, a stable `code`.
// These classes live in one CommonJS module that both `index.js` and `index.mjs` hand
// out, so `instanceof` holds the same way from either module system.
//
// Errors carry only what we put in them: codes, provider ids, operations, field paths.
// Never a provider's message, stack or cause, never a credential.

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
 * A provider runtime call failed (`PROVIDER_RUNTIME_ERROR`), or did not settle within the
 * router's operation deadline (`OPERATION_TIMEOUT`, with `timeoutMs`: outcome unknown).
 * Holds only `providerId` and `operation`. Its code and message are the core's
 * (`providerRuntimeError`), for the router's errors and a caller's alike.
 */
class ProviderRuntimeError extends SandboxRouterError {
  /**
   * @param {string} providerId
   * @param {string} operation
   * @param {number} [timeoutMs] set for OPERATION_TIMEOUT
   * @param {{ status?: number, errorClass?: string }} [facts] what the credential-first
   *   surface keeps of an SDK error: its numeric HTTP status and its class name, never text
   */
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
/**
 * A budget refused the provision (`BUDGET_EXHAUSTED`: no candidate's cost fitted;
 * `BUDGET_STORE_UNAVAILABLE`: the shared ledger could not be asked). `rule`, `key`
 * (`{ label, value }`), `dimension`, `limit`, `used`, `reserved`, `resetsAt`, and
 * `retryable`: true only when the launches in flight could free room.
 */
class BudgetExhaustedError extends SandboxRouterError {}
/** A sandbox was acquired but its mapping could not be stored; `cleanup` says what happened. */
class MappingPersistenceError extends SandboxRouterError {}
/** No mapping exists for this `sbx_…` id. */
class SandboxNotFoundError extends SandboxRouterError {}
/** A launch did not settle within `acquisitionTimeoutMs`; the sandbox may exist. */
class AcquisitionTimeoutError extends SandboxRouterError {}
/**
 * A built-in provider's optional package could not be loaded: `PROVIDER_PACKAGE_MISSING`
 * (not installed) or `PROVIDER_PACKAGE_LOAD_FAILED` (installed, but it failed to load; with
 * `missingModule` when a module it needs is absent).
 */
class ProviderPackageMissingError extends SandboxRouterError {}
/** `PROVIDER_OPERATION_UNSUPPORTED`: the installed adapter does not implement a port method. */
class ProviderOperationUnsupportedError extends ProviderPackageMissingError {}
/**
 * A manifest could not be made useful (`MANIFEST_START_FAILED`). `process` names the
 * failing process, `reason` is one of `MANIFEST_START_REASONS`; what was started has been
 * torn down (`teardown` is the report). Never carries command output. Its message is the
 * core's (`manifestStartError`).
 */
class ManifestStartError extends SandboxRouterError {
  /**
   * @param {string} processName
   * @param {string} reason one of MANIFEST_START_REASONS
   * @param {Record<string, unknown>} [details]
   */
  constructor(processName, reason, details = {}) {
    const { code, message } = binding.manifestStartError(`${processName}`, `${reason}`);
    super(message, code, { process: processName, reason, ...details });
  }
}
/** A bug in the router itself (e.g. a caught native panic). */
class SandboxRouterInternalError extends SandboxRouterError {}

/**
 * The classes the native core may name (`errorClass` of a native error), by name: the
 * core's `ErrorClass` list (`binding.errorClassNames()`; __test__/errors.test.cjs checks
 * that the two hold the same names).
 */
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
});

/**
 * Turns a native error into an instance of the class it names. A native error is a typed
 * value (src/binding/error.rs `NativeError`): its `errorClass`, `code`, `message` and the
 * fields its class documents, either returned by a call or thrown as an `Error` whose own
 * properties they are. Both read the same way. Anything else (a bug) becomes an internal
 * error without the original text.
 */
function fromNative(error) {
  if (error === null || typeof error !== 'object' || typeof error.errorClass !== 'string' || typeof error.code !== 'string') {
    return internalError();
  }
  const Cls = Object.hasOwn(NATIVE_CLASSES, error.errorClass) ? NATIVE_CLASSES[error.errorClass] : SandboxRouterInternalError;
  const details = {};
  for (const key of Object.keys(error)) {
    if (key !== 'errorClass' && key !== 'code' && key !== 'message') details[key] = error[key];
  }
  // The base constructor with the named class as `new.target`: every class is built the
  // same way, whatever its own constructor takes.
  return Reflect.construct(SandboxRouterError, [String(error.message), error.code, details], Cls);
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
 * Throws the typed error a native refusal builds: `fn` is a binding call that throws it
 * (`notJsonError`, `unreadableError`, …). If it returned instead, that is a bug of ours.
 * @param {() => unknown} fn
 * @returns {never}
 */
function refuse(fn) {
  callNative(fn);
  throw internalError();
}

module.exports = {
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
