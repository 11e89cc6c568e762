import { UsageError } from './usage.js';

const DEFAULT_HOST = '127.0.0.1';
const DEFAULT_PORT = '8081';
const TIMEOUT_MS = 10_000;

/**
 * Where the admin API is: ADMIN_URL, else ADMIN_HOST/ADMIN_PORT (the variables the gateway itself
 * listens on), else the gateway's default. `host:port` without a scheme means http.
 */
function adminBaseUrl(env: NodeJS.ProcessEnv): string {
  const given = env.ADMIN_URL?.trim();
  if (given) {
    const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(given) ? given : `http://${given}`;
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new UsageError(`ADMIN_URL=${given} is not a URL or host:port (e.g. http://127.0.0.1:8081)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new UsageError(`ADMIN_URL=${given} must be http:// or https://`);
    }
    return url.origin + url.pathname.replace(/\/+$/, '');
  }
  const port = env.ADMIN_PORT?.trim() || DEFAULT_PORT;
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) throw new UsageError(`ADMIN_PORT=${port} is not a port number`);
  return localBaseUrl(env.ADMIN_HOST?.trim() || DEFAULT_HOST, port);
}

/**
 * How to call a listener of this machine: one on every address (0.0.0.0, ::) is called on
 * loopback, an IPv6 address goes in brackets.
 */
export function localBaseUrl(host: string, port: number | string): string {
  const local = host === '0.0.0.0' || host === '::' ? DEFAULT_HOST : host;
  return `http://${local.includes(':') ? `[${local}]` : local}:${port}`;
}

/** Why a request never got an answer, in words: refused, not found, timed out. */
function unreachable(err: unknown): string {
  if (err instanceof DOMException && err.name === 'TimeoutError') return `no answer within ${TIMEOUT_MS / 1000} s`;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  switch (cause?.code) {
    case 'ECONNREFUSED':
      return 'connection refused: nothing listens there';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
      return 'connection reset';
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connection timed out';
    default:
      return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
  }
}

/** An answer of the admin API that is not a success, with its status and its message. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    readonly apiMessage: string,
  ) {
    super(`admin API answered ${status}: ${apiMessage}`);
  }
}

export class AdminClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  static fromEnv(env: NodeJS.ProcessEnv): AdminClient {
    const base = adminBaseUrl(env);
    const token = env.ADMIN_TOKEN;
    if (!token)
      throw new UsageError('set ADMIN_TOKEN to use the admin API (or use --file with create, update, rotate)');
    return new AdminClient(base, token);
  }

  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<T> {
    return (await this.exchange<T>(method, path, body, extraHeaders)).data;
  }

  /** As request, with the answer's headers (an Idempotency-Key replay says so in one). */
  async exchange<T>(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<{ data: T; headers: Headers }> {
    const url = `${this.baseUrl}${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
          ...extraHeaders,
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      throw new Error(
        `cannot reach the admin API at ${this.baseUrl} (${unreachable(err)}). ` +
          'Is the gateway running with ADMIN_TOKEN set? Point ADMIN_URL (or ADMIN_HOST/ADMIN_PORT) at its admin listener.',
      );
    }
    const text = await response.text();
    let data: unknown = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      throw new Error(`${url} answered ${response.status} with a body that is not JSON: is ADMIN_URL the admin API?`);
    }
    if (!response.ok) {
      const error = data as { code?: string; message?: string } | null;
      if (isPublicApi(response, error?.code)) {
        throw new Error(
          `${this.baseUrl} is the gateway's public API, not its admin API (it answered ${response.status} ` +
            `${error?.code ?? ''}). The admin API listens on ADMIN_PORT (default 8081): point ADMIN_URL there, ` +
            'e.g. with the export line npm start printed.',
        );
      }
      if (response.status === 401 && error?.code === 'unauthorized') {
        throw new Error(
          `the admin API at ${this.baseUrl} refused ADMIN_TOKEN (401): it is not the token this gateway runs with. ` +
            'Under npm start, paste the "export ADMIN_URL=… ADMIN_TOKEN=…" line it printed (each run makes a new one); ' +
            "otherwise use the gateway's own ADMIN_TOKEN (or the file ADMIN_TOKEN_FILE names).",
        );
      }
      throw new AdminApiError(response.status, error?.message ?? response.statusText);
    }
    return { data: data as T, headers: response.headers };
  }
}

/** Codes only the public API gives: it refused the admin token as an API key. */
const PUBLIC_API_CODES = new Set(['missing_api_key', 'invalid_api_key', 'expired_api_key', 'api_key_banned']);

/**
 * Whether the answer came from the public listener: its key codes, or the rate-limit headers it
 * puts on every answer (the admin API sends none).
 */
function isPublicApi(response: Response, code: string | undefined): boolean {
  return (
    (code !== undefined && PUBLIC_API_CODES.has(code)) ||
    response.headers.has('ratelimit-policy') ||
    response.headers.has('x-ratelimit-limit')
  );
}
