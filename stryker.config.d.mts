// Types for stryker.config.mjs, for the TypeScript that imports its areas (stryker.vitest.config.ts).
import type { PartialStrykerOptions } from '@stryker-mutator/api/core';

/** One area of `npm run mutate`: the code it mutates and its test files, the most focused first. */
export interface MutationArea {
  mutate: string[];
  testFiles: string[];
}

export declare const areas: Record<'limits' | 'keys' | 'cache' | 'gate' | 'sync', MutationArea>;

declare const options: PartialStrykerOptions;
export default options;
