'use strict';
// The lazy runtimes of the builtin providers (docs/providers.md, "Loading and credentials"): each
// is port-shaped; its first operation imports the adapter and SDK through a replaceable loader,
// constructs it with the credentials from its closure, and delegates. Credentials live only in these
// closures: never on an object we return, in an error, an event or a mapping. The core decides the
// recipes and what a failure is (src/core/providers.rs, packages.rs), never keeping an SDK's text.

const { ProviderRuntimeError, fromNative, isRouterError } = require('./errors.js');
const { binding } = require('./binding.js');
const { readOr, methodOf } = require('./guard.js');
const { serializeLenient } = require('./serialize.js');

/** The default module loader: a dynamic import, resolved from this package. */
const defaultLoader = (specifier) => import(specifier);

/** Package `name`'s load failure as the core judges it: module-not-found or not (its text: a module name at most). */
function packageError(error, name) {
  // An error that cannot be read is no module-not-found error: the package threw.
  const facts = readOr(() => {
    const code = error !== null && typeof error === 'object' ? error.code : undefined;
    const notFound = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
    return { notFound, text: notFound && typeof error.message === 'string' ? error.message : null };
  }, { notFound: false, text: null });
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

/** Builds `recipe`'s adapter from `options` (with a client, as Daytona's SDK: its options go to the client). */
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

/** An SDK error as a ProviderRuntimeError of what the core keeps of its facts (read once, in a guard); ours pass. */
function sanitized(provider, operation, error) {
  if (isRouterError(error)) return error;
  const facts = readOr(() => {
    if (error === null || typeof error !== 'object') return null;
    const statuses = [error.status, error.statusCode, error.response?.status];
    return serializeLenient({ statuses, className: error.constructor?.name });
  }, null);
  return new ProviderRuntimeError(provider, operation, undefined, binding.keptErrorFacts(facts));
}

/** A port-shaped runtime of `recipe` that builds the real adapter on first use; credentials stay in this closure. */
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
      const f = methodOf(a, method);
      if (f === undefined) throw fromNative(binding.operationUnsupported(provider, method));
      try {
        return await f.apply(a, args);
      } catch (error) {
        throw sanitized(provider, method, error);
      }
    };
  for (const method of recipe.methods) runtime[method] = delegate(method);
  return Object.freeze(runtime);
}

module.exports = { defaultLoader, lazyRuntime, packageError };
