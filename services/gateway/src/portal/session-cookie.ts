import { ApiError } from '@animal-store/common/errors.js';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  newSecret,
  PORTAL_ENTRY,
  type PortalSession,
  type PortalSessionStore,
  type SessionGone,
} from '../customers/portal-session-store.js';
import { sameSecret } from '../keys/api-key.js';

/** How long a session lasts from sign-in; it ends sooner on sign-out. */
export const SESSION_TTL_MS = 60 * 60_000;
const COOKIE = 'portal_session';
/** The header every state-changing request carries, with the session's CSRF token. */
const CSRF_HEADER = 'x-csrf-token';

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in customer's session, set by the portal's session check. */
    portalSession: (PortalSession & { secret: string }) | null;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

interface CookieOptions {
  /** The portal's own origin (PORTAL_URL): a link served elsewhere sets a Secure cookie only behind TLS. */
  portalUrl: string;
}

/** The cookie is Secure whenever the browser talks TLS: the request came over it, or PORTAL_URL says so. */
function secure(request: FastifyRequest, { portalUrl }: CookieOptions): boolean {
  return request.protocol === 'https' || portalUrl.startsWith('https:');
}

function setSessionCookie(reply: FastifyReply, value: string, maxAgeSeconds: number, secureCookie: boolean): void {
  reply.header(
    'set-cookie',
    stringifySetCookie({
      name: COOKIE,
      value,
      path: '/portal',
      httpOnly: true,
      sameSite: 'strict',
      secure: secureCookie,
      maxAge: maxAgeSeconds,
    }),
  );
}

/** What newSecret makes: 256 bits, base64url. A cookie of any other shape was never a session's. */
const SECRET_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Why a cookie the browser sent named no session: `malformed`, not of a secret's shape, so made
 * up (and not worth a store call); else what the store's trace says (SessionGone): `ended` by
 * sign-out, `expired`, or `unknown` (a forgery of the right shape, or a session long gone).
 */
type CookieRefusal = 'malformed' | SessionGone;

/** The session a request's cookie names; why the cookie named none; or null for no cookie. */
async function sessionOf(
  request: FastifyRequest,
  store: PortalSessionStore,
): Promise<(PortalSession & { secret: string }) | { refused: CookieRefusal } | null> {
  const secret = parseCookie(request.headers.cookie ?? '')[COOKIE];
  if (!secret) return null;
  if (!SECRET_SHAPE.test(secret)) return { refused: 'malformed' };
  const session = await store.getSession(secret);
  if (session) return { ...session, secret };
  // The reason is for the log only: a store that fails to say it leaves the answer a 401.
  return { refused: await store.whyGone(secret).catch((): SessionGone => 'unknown') };
}

/**
 * Sign-in, sign-out and the session check of the portal's API:
 *   GET  /portal/enter?token=   the one-time link: a session cookie, then the portal (303)
 *   POST /portal/api/sign-out   ends the session and clears the cookie
 * Every /portal/api route needs a live session (401 otherwise), and every state-changing one the
 * session's CSRF token in X-CSRF-Token (403 otherwise): SameSite=Strict keeps the cookie off
 * other sites' requests in today's browsers, the token in the rest.
 */
export async function sessionRoutes(
  app: FastifyInstance,
  opts: CookieOptions & { store: PortalSessionStore; now: () => number },
): Promise<void> {
  const { store, now } = opts;
  app.decorateRequest('portalSession', null);

  app.get<{ Querystring: { token?: string } }>(PORTAL_ENTRY, async (request, reply) => {
    const token = request.query.token;
    const customerId = typeof token === 'string' && token !== '' ? await store.takeLink(token) : null;
    if (customerId === null) {
      request.log.warn({ audit: 'portal.link_refused' }, 'portal: a sign-in link that is unknown, used or expired');
      return reply
        .code(404)
        .type('text/plain; charset=utf-8')
        .send('This sign-in link has expired or was already used. Ask for a new one where you came from.');
    }
    const secret = newSecret();
    const expiresAt = now() + SESSION_TTL_MS;
    await store.putSession(secret, { customerId, csrfToken: newSecret(), expiresAt });
    request.log.info({ audit: 'portal.signed_in', customerId }, `portal: ${customerId} signed in`);
    setSessionCookie(reply, secret, SESSION_TTL_MS / 1000, secure(request, opts));
    return reply.code(303).header('location', '/portal').send();
  });

  app.addHook('onRequest', async (request) => {
    // The route the router matched, not the raw URL: `/portal/%61pi/sign-out` is the sign-out route.
    if (!(request.routeOptions.url ?? request.url).startsWith('/portal/api/')) return;
    const session = await sessionOf(request, store);
    if (!session || 'refused' in session) {
      // A cookie that names no session is observable, as an event on the request log, not an
      // audit line: audit lines record what an identified actor did, and anyone on the internet
      // can send such cookies. Finding the reason is a read, never a write. No cookie at all is
      // the access log's 401 only.
      if (session) {
        request.log.warn(
          { event: 'portal.session-refused', reason: session.refused },
          `portal: a session cookie refused (${session.refused})`,
        );
      }
      throw new ApiError(401, 'unauthorized', 'Not signed in, or the session has ended: sign in again');
    }
    request.portalSession = session;
    if (SAFE_METHODS.has(request.method)) return;
    const token = request.headers[CSRF_HEADER];
    if (typeof token !== 'string' || !sameSecret(token, session.csrfToken)) {
      request.log.warn(
        { audit: 'portal.csrf_refused', customerId: session.customerId },
        'portal: a request without its CSRF token',
      );
      throw new ApiError(403, 'forbidden', `Send the session's CSRF token in ${CSRF_HEADER}`);
    }
  });

  app.post('/portal/api/sign-out', async (request, reply) => {
    const session = request.portalSession as NonNullable<FastifyRequest['portalSession']>;
    await store.endSession(session.secret);
    request.log.info(
      { audit: 'portal.signed_out', customerId: session.customerId },
      `portal: ${session.customerId} signed out`,
    );
    setSessionCookie(reply, '', 0, secure(request, opts));
    return reply.code(204).send();
  });
}
