'use strict';
// The base class of every error a caller can catch, and the one error thrown before the
// native binary is loaded (lib/native.js): both sit below the loader, so lib/errors.js
// (which needs the binding) and the loader (which needs the error) import no circle.

/** Every error this package made: an identity check that touches no property of a value. */
const OURS = new WeakSet();

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
    for (const [k, v] of Object.entries(details ?? {})) {
      if (v !== undefined) this[k] = v;
    }
  }

  toJSON() {
    const out = { name: this.name, code: this.code, message: this.message };
    for (const [k, v] of Object.entries(this)) out[k] = v;
    return out;
  }
}

/**
 * `NATIVE_BINARY_NOT_FOUND`: no native binary fits this platform (`triple`, e.g.
 * `linux-arm64-musl`); thrown by lib/native.js when the package is first loaded.
 */
class NativeBinaryNotFoundError extends SandboxRouterError {}

/** Whether `value` is an error this package made. Never throws, reads no property of `value`. */
function isRouterError(value) {
  return typeof value === 'object' && value !== null && OURS.has(value);
}

module.exports = { SandboxRouterError, NativeBinaryNotFoundError, isRouterError };
