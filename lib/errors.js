'use strict';
// Every error a caller can catch: one base class, named subclasses, a stable `code`.
// These classes live in one CommonJS module that both `index.js` and `index.mjs` hand
// out, so `instanceof` holds the same way from either module system.
//
// Errors carry only what we put in them: codes, provider ids, operations, field paths.
// Never a provider's message, stack or cause, never a credential.

/** Every error this package made: an identity check that touches no property of a value. */
const OURS = new WeakSet();

const { isNativeError } = require('node:util').types;

class SandboxRouterError extends Error {
  /**
   * @param {string} message
   * @param {string} code
   * @param {Record<string, unknown>} [details]
   */
  constructor(message, code, details) {
    super(message);
    OURS.add(this);
    Object.defineProperty(this, 'name', { value: new.target.name, enumerable: false, configurable: true, writable: true });
    this.code = code;
    if (details) {
      for (const [k, v] of Object.entries(details)) {
        if (v !== undefined) this[k] = v;
      }
    }
  }

  toJSON() {
    const out = { name: this.name, code: this.code, message: this.message };
    for (const [k, v] of Object.entries(this)) out[k] = v;
    return out;
  }
}

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
 * Holds only `providerId` and `operation`.
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
    if (timeoutMs === undefined) {
      super(`provider ${providerId} failed during ${operation}`, 'PROVIDER_RUNTIME_ERROR', { providerId, operation, ...facts });
    } else {
      super(`provider ${providerId} did not settle ${operation} within ${timeoutMs} ms; outcome unknown`, 'OPERATION_TIMEOUT', {
        providerId,
        operation,
        timeoutMs,
      });
    }
  }
}
/** Acquisition failed terminally or exhausted its attempts; `attempts` lists sanitized codes. */
class ProviderProvisioningError extends SandboxRouterError {}
/** The credential-readiness port threw or answered a non-boolean. */
class ProvisioningAvailabilityError extends SandboxRouterError {}
/** Capacity routing found no pool with room. Retry later: capacity changes. */
class ProviderCapacityExhaustedError extends SandboxRouterError {}
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
/** A bug in the router itself (e.g. a caught native panic). */
class SandboxRouterInternalError extends SandboxRouterError {}
/**
 * `NATIVE_BINARY_NOT_FOUND`: no native binary fits this platform (`triple`, e.g.
 * `linux-arm64-musl`); thrown by lib/native.js when the package is first loaded.
 */
class NativeBinaryNotFoundError extends SandboxRouterError {}

const CLASS_BY_CODE = {
  INVALID_REQUEST: SandboxRequestValidationError,
  RESERVED_LABEL: SandboxRequestValidationError,
  INVALID_SANDBOX_ID: SandboxRequestValidationError,
  ROUTING_NOT_APPLICABLE: RoutingNotApplicableError,
  NO_ELIGIBLE_PROVIDER: NoEligibleProviderError,
  INVALID_PROVIDER_ID: ProviderRegistryError,
  DUPLICATE_PROVIDER: ProviderRegistryError,
  INVALID_PROVIDER_DEFINITION: ProviderRegistryError,
  INVALID_CONFIGURATION: SandboxRouterConfigurationError,
  INVALID_INPUT: SandboxRequestValidationError,
  INTERNAL_ERROR: SandboxRouterInternalError,
  MAPPING_STORE_OPEN_FAILED: MappingPersistenceError,
  MAPPING_STORE_SCHEMA_TOO_NEW: MappingPersistenceError,
  MAPPING_PERSISTENCE_FAILED: MappingPersistenceError,
  MAPPING_READ_FAILED: MappingPersistenceError,
  COORDINATOR_UNAVAILABLE: MappingPersistenceError,
};

/** Whether `value` is an error this package made. Never throws, reads no property of `value`. */
function isRouterError(value) {
  return typeof value === 'object' && value !== null && OURS.has(value);
}

/**
 * Turns a native error into an instance of the right class: a typed `NativeError` value
 * (the provision path's entry points return one in an `Either`), or an error thrown by an
 * older entry point, which encodes `{ code, message, field, ... }` as JSON in its message.
 * Anything else (which would be a bug) becomes an internal error without the original text.
 */
function fromNative(error) {
  let data;
  // isNativeError, not instanceof: under Jest a thrown napi error comes from another realm.
  if (error !== null && typeof error === 'object' && !isNativeError(error)) {
    // A typed error value (`NativeError`, returned by the newer entry points).
    data = { ...error };
    for (const k of Object.keys(data)) if (data[k] === null || data[k] === undefined) delete data[k];
  } else {
    try {
      data = JSON.parse(error && error.message);
    } catch {
      data = undefined;
    }
  }
  if (!data || typeof data.code !== 'string') {
    return new SandboxRouterInternalError('internal error in the native routing core', 'INTERNAL_ERROR');
  }
  const { code, message, ...details } = data;
  if (details.field === undefined) delete details.field;
  const Cls = CLASS_BY_CODE[code] || SandboxRouterInternalError;
  return new Cls(message, code, details);
}

/** Calls `fn`, rethrowing native failures as typed errors. */
function callNative(fn) {
  try {
    return fn();
  } catch (error) {
    throw fromNative(error);
  }
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
  MappingPersistenceError,
  SandboxNotFoundError,
  AcquisitionTimeoutError,
  ProviderPackageMissingError,
  SandboxRouterInternalError,
  NativeBinaryNotFoundError,
  fromNative,
  callNative,
  isRouterError,
};
