import { hash } from 'node:crypto';
import { registerBasePlugins } from '@animal-store/common/base-plugins.js';
import { ApiError } from '@animal-store/common/errors.js';
import { serverOptions } from '@animal-store/common/http.js';
import Fastify, { type FastifyInstance } from 'fastify';
import { type Static, Type } from 'typebox';
import { Value } from 'typebox/value';
import { LeakHandler } from '../api/leak-handler.js';
import { storeUnavailable, unavailable } from '../api/store-unavailable.js';
import type { GatewayConfig } from '../config.js';
import type { GatewayDeps } from '../deps.js';
import { hashApiKey } from '../keys/api-key.js';

/** Where GitHub's secret scanning partner program posts its matches (docs/leaks.md). */
export const GITHUB_LEAK_PATH = '/github/secret-scanning';

/** One match as GitHub sends it: the token, its type, where it was found. */
const GithubMatch = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 1_000 }),
  type: Type.String({ maxLength: 200 }),
  url: Type.Optional(Type.String({ maxLength: 2_000 })),
  source: Type.Optional(Type.String({ maxLength: 200 })),
});
export const GithubReport = Type.Array(GithubMatch, { minItems: 1, maxItems: 1_000 });

/** GitHub's documented answer: one label per match, the token named by its hash, never echoed. */
export const GithubAnswer = Type.Array(
  Type.Object({
    token_hash: Type.String(),
    token_type: Type.String(),
    label: Type.Union([Type.Literal('true_positive'), Type.Literal('false_positive')]),
  }),
);

const KEY_ID_HEADER = 'github-public-key-identifier';
const SIGNATURE_HEADER = 'github-public-key-signature';

/**
 * The secret-scanning receiver on its own listener (LEAK_HOST/LEAK_PORT), never the public or the
 * admin one: it takes GitHub's signed reports, proves each token against the keys, acts on the
 * live ones (leak-handler.ts) and labels every one. A report refused (bad or missing signature,
 * a replay, a body not in GitHub's shape) changes nothing and is logged.
 */
export async function buildLeakApp(config: GatewayConfig, deps: GatewayDeps): Promise<FastifyInstance> {
  const { partnerKeys } = deps;
  if (!partnerKeys) throw new Error('the leak receiver needs LEAK_PUBLIC_KEYS');
  const app = Fastify(
    serverOptions({ serviceName: 'gateway-leaks', logLevel: config.logLevel, logStream: deps.logStream }),
  );
  await registerBasePlugins(app, { classifyError: storeUnavailable });
  // The signature covers the bytes as sent: the body is kept raw and parsed only once it verifies.
  app.removeContentTypeParser('text/plain');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  const handler = new LeakHandler(deps, config.leaks);

  app.post(GITHUB_LEAK_PATH, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const keyId = request.headers[KEY_ID_HEADER];
    const signature = request.headers[SIGNATURE_HEADER];
    if (typeof keyId !== 'string' || typeof signature !== 'string' || keyId === '' || signature === '') {
      request.log.warn({ leakReport: 'refused', why: 'unsigned' }, 'leak report refused: no signature');
      throw new ApiError(
        401,
        'unauthorized',
        `A report must carry the ${KEY_ID_HEADER} and ${SIGNATURE_HEADER} headers`,
      );
    }
    let verified: boolean;
    try {
      verified = await partnerKeys.verify(keyId, signature, body);
    } catch (err) {
      // The keys document unread (its file, its URL): the scanner retries a 503 later.
      request.log.error(
        { err, leakReport: 'refused', why: 'public-keys' },
        'leak report refused: cannot read the public keys',
      );
      throw unavailable('store_unavailable', 'The scanner’s public keys cannot be read now');
    }
    if (!verified) {
      request.log.warn(
        { leakReport: 'refused', why: 'signature', keyIdentifier: keyId },
        'leak report refused: bad signature',
      );
      throw new ApiError(401, 'unauthorized', 'The report’s signature does not verify');
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    if (!Value.Check(GithubReport, parsed)) {
      request.log.warn({ leakReport: 'refused', why: 'malformed' }, 'leak report refused: not GitHub’s shape');
      throw new ApiError(400, 'invalid_request', 'The body must be a JSON array of {token, type, url, source}');
    }
    // After the signature, so only GitHub's own reports take a place in the window. By the body,
    // not the signature: an ECDSA signature has a twin (s and n - s) that verifies as well.
    const seen = hash('sha256', body, 'hex');
    if (!(await deps.leakReplays.firstSeen(seen, config.leaks.replayWindowMs))) {
      request.log.warn({ leakReport: 'refused', why: 'replay' }, 'leak report refused: seen before');
      throw new ApiError(409, 'conflict', 'This report was received before');
    }
    const matches: Static<typeof GithubReport> = parsed;
    const answer: Static<typeof GithubAnswer> = [];
    try {
      for (const match of matches) {
        const sha256 = hashApiKey(match.token);
        const outcome = await handler.report(
          {
            sha256,
            reporter: 'github',
            type: match.type,
            source: match.source ?? 'unknown',
            ...(match.url !== undefined ? { url: match.url } : {}),
          },
          request.log,
        );
        answer.push({ token_hash: sha256, token_type: match.type, label: outcome.label });
      }
    } catch (err) {
      // Taken again when GitHub retries: what was done stays done, the rest is done then.
      await deps.leakReplays.forget(seen).catch(() => {});
      throw err;
    }
    request.log.info(
      { leakReport: 'taken', matches: matches.length, true: answer.filter((a) => a.label === 'true_positive').length },
      'leak report taken',
    );
    return reply.code(200).send(answer);
  });
  return app;
}
