/**
 * What an operator does to a key through the admin API (or a leak report, leaks/): each is audited, counted and, for the
 * endpoints subscribed to it, sent as a webhook event (webhooks/intake/key-events.ts maps each
 * one, so a new or renamed action does not compile until it has its event).
 */
export type AdminAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban' | 'leak';
