'use strict';
// The lazy runtimes of the builtin providers: the part that touches optional packages and
// provider SDK errors.
//
// Why lazy adapters? The provider adapters live in `@agent-relay/sandbox` and each needs
// its vendor SDK; a caller using two providers must not need all six SDKs installed, and
// constructing a router must not load anything. So each configured provider becomes a
// port-shaped runtime whose first operation imports the adapter (and SDK) through a
// replaceable module loader, constructs it with the credentials from its closure, and
// delegates. Credentials live only in these closures: never on an object we return, in an
// error, an event or a mapping.
//
// Who decides what? The core (src/core/providers.rs, src/core/packages.rs): the recipe of
// each runtime (adapter, SDK, client, methods), and what a failure is: a missing package
// told from a broken install, an adapter without a method, and what a ProviderRuntimeError
// keeps of an SDK error (its HTTP status and class name, never its text). This file loads,
// constructs, delegates, and reports what happened.

const { ProviderRuntimeError, fromNative, isRouterError } = require('./errors.js');
const { binding } = require('./binding.js');
const { guarded } = require('./guard.js');
const { serializeLenient } = require('./serialize.js');

/** The default module loader: a dynamic import, resolved from this package. */
const defaultLoader = (specifier) => import(specifier);

/**
 * The typed error for optional package `name` that failed to load with `error`, as the
 * core judges it from what Node said: whether `error` is a module-not-found error, and
 * its text (read once, inside a guard; the core repeats at most a module name of it).
 */
function packageError(error, name) {
  let facts = { notFound: false, text: null };
  try {
    facts = guarded(() => {
      const code = error !== null && typeof error === 'object' ? error.code : undefined;
      const notFound = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
      return { notFound, text: notFound && typeof error.message === 'string' ? error.message : null };
    });
  } catch {
    // An error that cannot be read is no module-not-found error: the package threw.
  }
  return fromNative(binding.packageLoadError(name, facts.notFound, facts.text));
}

/** Imports package `name` through the loader; a failure is its typed error. */
async function loadPackage(loader, name) {
  try {
    return await loader(name);
  } catch (error) {
    throw packageError(error, name);
  }
}

/** A module's export `name`, as a named export or one of its default export. */
const exported = (mod, name) => mod[name] ?? mod.default?.[name];

/**
 * Builds the adapter of `recipe` (the core's, `RecipeRecord`) from already-validated
 * options. Runs once, on the first operation. `options` holds the credentials; it is
 * never stored elsewhere. With a client (Daytona's SDK), the options it takes go to the
 * client, and the adapter gets the client instead.
 */
async function buildAdapter(recipe, options, loader) {
  const sandbox = await loadPackage(loader, recipe.sandboxPackage);
  const Adapter = exported(sandbox, recipe.adapter);
  if (typeof Adapter !== 'function') throw fromNative(binding.packageExportMissing(recipe.sandboxPackage, recipe.provider));
  if (recipe.sdk === null) return new Adapter(options);
  const sdk = await loadPackage(loader, recipe.sdk);
  if (recipe.client === null) return new Adapter(options);
  const Client = exported(sdk, recipe.client.export);
  if (typeof Client !== 'function') throw fromNative(binding.packageExportMissing(recipe.sdk, recipe.provider));
  const rest = { ...options };
  const clientOptions = {};
  for (const key of recipe.client.keys) {
    if (rest[key] !== undefined) clientOptions[key] = rest[key];
    delete rest[key];
  }
  return new Adapter({ ...rest, [recipe.client.option]: new Client(clientOptions) });
}

/**
 * An SDK error as the router hands it on: a ProviderRuntimeError with the provider and
 * operation, and what the core keeps of the error's facts (read once, inside a guard:
 * its candidate HTTP statuses and its class name). Our own typed errors (a missing
 * package) pass through unchanged.
 */
function sanitized(provider, operation, error) {
  if (isRouterError(error)) return error;
  let facts = null;
  try {
    facts = guarded(() => {
      if (error === null || typeof error !== 'object') return null;
      const statuses = [error.status, error.statusCode, error.response?.status];
      return serializeLenient({ statuses, className: error.constructor?.name });
    });
  } catch {
    facts = null;
  }
  return new ProviderRuntimeError(provider, operation, undefined, binding.keptErrorFacts(facts));
}

/**
 * A port-shaped runtime of `recipe` that constructs the real adapter on first use. The
 * returned object holds no credential: they stay in this function's closure.
 */
function lazyRuntime(recipe, options, loader) {
  const provider = recipe.provider;
  let pending = null;
  const adapter = () => {
    if (pending === null) {
      pending = buildAdapter(recipe, options, loader);
      // A failed load is retried on the next operation (e.g. after installing the package).
      pending.catch(() => {
        pending = null;
      });
    }
    return pending;
  };
  const runtime = { id: provider };
  const delegate = (method) =>
    async function (...args) {
      let a;
      try {
        a = await adapter();
      } catch (error) {
        throw sanitized(provider, 'construct', error);
      }
      if (typeof a[method] !== 'function') throw fromNative(binding.operationUnsupported(provider, method));
      try {
        return await a[method](...args);
      } catch (error) {
        throw sanitized(provider, method, error);
      }
    };
  for (const method of recipe.methods) runtime[method] = delegate(method);
  return Object.freeze(runtime);
}

module.exports = { defaultLoader, lazyRuntime, packageError };
