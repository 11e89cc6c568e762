/** What became of one HTTP request, as the client saw it. */
export interface Outcome {
  /** Which loop sent it and its sequence number there; `tag` lets a test find what it created. */
  loop: number;
  seq: number;
  tag: string;
  start: number;
  end: number;
  /** Set when a response (status line and headers) arrived. */
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /**
   * Set when no complete response arrived: the cause's code (ECONNREFUSED, ECONNRESET,
   * UND_ERR_SOCKET, ...) or TIMEOUT when the client gave up.
   */
  error?: string;
}

/** The innermost error code undici/fetch reports, or TIMEOUT for an aborted request. */
function errorCode(err: unknown): string {
  let current = err as { name?: string; code?: string; cause?: unknown } | undefined;
  let code: string | undefined;
  for (let depth = 0; current && depth < 5; depth++) {
    if (current.name === 'TimeoutError' || current.name === 'AbortError') return 'TIMEOUT';
    if (current.code) code = current.code;
    current = current.cause as typeof current;
  }
  return code ?? (err instanceof Error ? err.message : String(err));
}

export interface RequestSpec {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

/** One fetch (keep-alive, undici's global pool) with a client-side bound, never throwing. */
export async function send(
  spec: RequestSpec,
  meta: { loop: number; seq: number; tag: string },
  timeoutMs: number,
): Promise<Outcome> {
  const start = Date.now();
  try {
    const res = await fetch(spec.url, {
      method: spec.method ?? 'GET',
      headers: spec.headers,
      body: spec.body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const headers = Object.fromEntries(res.headers);
    try {
      const body = await res.text();
      return { ...meta, start, end: Date.now(), status: res.status, headers, body };
    } catch (err) {
      // Headers arrived, the body broke off.
      return { ...meta, start, end: Date.now(), status: res.status, headers, error: errorCode(err) };
    }
  } catch (err) {
    return { ...meta, start, end: Date.now(), error: errorCode(err) };
  }
}

export interface RequestLoops {
  outcomes: Outcome[];
  /** Outcomes of requests that started at or after `at`. */
  since(at: number): Outcome[];
  /** Ends every loop after its current request and resolves once all have. */
  stop(): Promise<Outcome[]>;
}

/**
 * `concurrency` loops, each sending one request after the other until stopped (or until
 * `until` says so after a request). Every outcome is kept, none thrown.
 */
export function startLoops(opts: {
  concurrency: number;
  request: (loop: number, seq: number, tag: string) => RequestSpec;
  timeoutMs: number;
  until?: (outcome: Outcome) => boolean;
}): RequestLoops {
  const outcomes: Outcome[] = [];
  let stopped = false;
  const loops = Array.from({ length: opts.concurrency }, async (_, loop) => {
    for (let seq = 0; !stopped; seq++) {
      const tag = `l${loop}-${seq}`;
      const outcome = await send(opts.request(loop, seq, tag), { loop, seq, tag }, opts.timeoutMs);
      outcomes.push(outcome);
      if (opts.until?.(outcome)) break;
    }
  });
  return {
    outcomes,
    since: (at) => outcomes.filter((o) => o.start >= at),
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return outcomes;
    },
  };
}

/** A short summary for assertion messages: counts by status or error code. */
export function tally(outcomes: Outcome[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const o of outcomes) {
    const key = o.error ? (o.status ? `${o.status}+${o.error}` : o.error) : String(o.status);
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}
