// What /console/webhook-rules.js holds: the gateway writes it from its own rules (admin/console.ts).
import type { WEBHOOK_EVENTS as EVENTS } from '@animal-store/gateway/webhooks/event-types.js';

export declare const WEBHOOK_EVENTS: typeof EVENTS;
export declare const ATTEMPTS_KEPT: number;
