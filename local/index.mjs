// ESM entry of the embedded local runtime: re-exports the very objects of the CommonJS
// entry, so classes (and `instanceof`) are identical from import and require.
// NOT a security boundary: commands run as the current user on the host.
import cjs from './index.js';

export const { createLocalRuntime, LocalSandboxRuntime, LocalRuntimeError, LOCAL_CAPABILITIES, LOCAL_ERROR_CODES } = cjs;
export default cjs;
