import { ReadPreference, type WriteConcernSettings } from 'mongodb';

/**
 * The choices every MongoDB operation of the services makes instead of the driver's or the
 * server's defaults; docs/mongodb.md ("Writes and reads") says why each, and
 * tests/mongo/server-rules.test.ts holds them to what MongoDB documents.
 */

/**
 * How long a replica set may go without a primary: "the median time before a cluster elects a new
 * primary should not typically exceed 12 seconds" with the default electionTimeoutMillis of 10 s
 * (https://www.mongodb.com/docs/manual/core/replica-set-elections/).
 */
export const ELECTION_MS = 12_000;

/**
 * How long an operation waits for a server it may use: longer than an election, so a write sent
 * while the set has no primary lands on the new one instead of failing. A request that must answer
 * sooner carries its own bound (the gate's KEY_LOOKUP_TIMEOUT_MS, maxTimeMS on lists).
 */
export const SERVER_SELECTION_TIMEOUT_MS = 15_000;

/**
 * Writes that decide access: creating, revoking, rotating and changing a key (plan, limits,
 * scopes, addresses, expiry, owner) and a customer's terms or deletion. A write acknowledged by
 * the primary alone (w: 1) is rolled back if that primary fails before a secondary has it: the
 * admin API said "revoked" and the revoked key works again. w: "majority" is acknowledged only
 * once a majority holds it, which no election undoes. Said here, not left to the server's
 * implicit default (majority since 5.0, but w: 1 with an arbiter in a three-member set, and any
 * cluster-wide default set by setDefaultRWConcern).
 * https://www.mongodb.com/docs/manual/core/replica-set-rollbacks/
 *
 * wtimeoutMS: without it a majority that cannot be reached blocks the write for ever. After it the
 * server answers code 64 (the admin API's 503) and keeps the write on the primary, which may still
 * replicate it: the client retries (a revoke of a revoked key answers 204 again). Below the
 * gateway's socketTimeoutMS (5 s), so the server's answer comes before the socket gives up.
 */
export const ACCESS_WRITE: { readonly writeConcern: WriteConcernSettings } = {
  writeConcern: { w: 'majority', wtimeoutMS: 4_000 },
};

/**
 * The server-side bound on one page of a list (admin keys and customers, pets): past it the server
 * stops the query and answers code 50, which the services answer with a retryable 503 instead of
 * a scan that goes on after the client gave up. Below both services' socketTimeoutMS.
 */
export const LIST_MAX_TIME_MS = 3_000;

/**
 * A key or customer lookup on the request path (an uncached key). primaryPreferred: the primary
 * while there is one, a secondary during an election, so keys keep being checked while writes
 * wait. The trade-off: a secondary may lag, so for the seconds of an election a key revoked just
 * before it can still be found live (and cached until evicted); maxStalenessSeconds (MongoDB's
 * smallest, 90) keeps a secondary that has stopped replicating out of it. maxTimeMS bounds the
 * server's work on an indexed point lookup; the gate bounds the request's wait.
 * https://www.mongodb.com/docs/manual/core/read-preference/ and
 * https://www.mongodb.com/docs/manual/core/read-preference-staleness/
 */
export const KEY_LOOKUP = {
  readPreference: new ReadPreference('primaryPreferred', undefined, { maxStalenessSeconds: 90 }),
  maxTimeMS: 1_000,
} as const;
