// ESM view of the local runtime's types: the same declarations as index.d.ts.
export * from './index.js';
declare const _default: typeof import('./index.js');
export default _default;
