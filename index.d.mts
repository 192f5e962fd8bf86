// ESM view of the public types: the same declarations as index.d.ts (one set of classes).
export * from './index.js';
declare const _default: typeof import('./index.js');
export default _default;
