// Types for stryker.config.mjs, for the TypeScript that imports its areas (stryker.vitest.config.ts).
import type { PartialStrykerOptions } from '@stryker-mutator/api/core';

/** One area of `npm run mutate`: the code it mutates and its test files, the most focused first. */
export interface MutationArea {
  mutate: string[];
  testFiles: string[];
}

export type AreaName =
  | 'limits'
  | 'keys'
  | 'cache'
  | 'gate'
  | 'sync'
  | 'policy'
  | 'history'
  | 'webhooks'
  | 'guard'
  | 'customers'
  | 'credits'
  | 'metering'
  | 'billing'
  | 'portal'
  | 'self-service';

export declare const areas: Record<AreaName, MutationArea>;

declare const options: PartialStrykerOptions;
export default options;
