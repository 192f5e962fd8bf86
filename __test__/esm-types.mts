// Type test (compiled by `npm run typecheck`, never run): the ESM entry's types
// (index.d.mts) are the very declarations of index.d.ts, including the event union and the
// narrowed error codes.
import defaultExport, { NoEligibleProviderError, SandboxRouter, type RoutingEvent, type SandboxRuntime } from '../index.mjs';
import type * as cjs from '../index.js';

const sameEvent: cjs.RoutingEvent = null as unknown as RoutingEvent;
const sameEventBack: RoutingEvent = null as unknown as cjs.RoutingEvent;
const sameRuntime: cjs.SandboxRuntime = null as unknown as SandboxRuntime;
const sameClass: typeof cjs.SandboxRouter = SandboxRouter;
const sameDefault: typeof cjs.NoEligibleProviderError = defaultExport.NoEligibleProviderError;

export function fromEsm(event: RoutingEvent, error: unknown): string {
  if (error instanceof NoEligibleProviderError) {
    // @ts-expect-error TS2367: no overlap with the narrowed code
    if (error.code === 'NOT_A_CODE') return 'unreachable';
  }
  // @ts-expect-error no index signature on events
  void event.provderId;
  return event.type === 'fallback.advanced' ? event.fromProviderId : event.type;
}
void [sameEvent, sameEventBack, sameRuntime, sameClass, sameDefault];

import { PostgresMappingStore } from '../index.mjs';
const samePg: typeof cjs.PostgresMappingStore = PostgresMappingStore;
void samePg;
