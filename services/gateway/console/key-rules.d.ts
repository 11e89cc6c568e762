// What /console/key-rules.js holds: the gateway writes it from its own rules (admin/console.ts).
import type { Window } from '@animal-store/gateway/limits/windows.js';
import type { Scope } from '@animal-store/gateway/plans/plans.js';

export declare const SCOPES: readonly Scope[];
export declare const WINDOWS: ReadonlyArray<Pick<Window, 'name' | 'field' | 'unit' | 'label'>>;
export declare const DEFAULT_GRACE_SECONDS: number;
export declare const MAX_GRACE_SECONDS: number;
export declare const MAX_ANCHOR_DAY: number;
