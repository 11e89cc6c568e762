import { type ErrorBody, errorBody } from '@animal-store/common/errors.js';
import { type Dispatcher, request } from 'undici';
import { upstreamFailure } from '../proxy/upstream-failure.js';
import { isOpenApi31, type OpenApiDocument, publicDocument } from './openapi.js';
import type { PublicDocumentOptions } from './openapi-description.js';

/** Why the document cannot be served, as the Error body to send. */
export class OpenApiUnavailable extends Error {
  constructor(readonly body: ErrorBody) {
    super(body.message);
    this.name = 'OpenApiUnavailable';
  }
}

export interface OpenApiSourceOptions {
  /** Base URL of the pets service. */
  upstream: string;
  timeoutMs: number;
  /** How to reach it: the proxy's pool (default: undici's global dispatcher). */
  dispatcher?: Dispatcher;
  /** How long a transformed document is served before the upstream is asked again. */
  ttlMs?: number;
  /** What the public document says beyond the upstream's (default: DEFAULT_DOCUMENT_OPTIONS). */
  document?: PublicDocumentOptions;
  now?: () => number;
  onRefreshError?: (err: unknown, servingStale: boolean) => void;
}

/**
 * The public document, fetched from the pets service and transformed, kept for `ttlMs`. Concurrent
 * callers share one fetch; when a refresh fails the last good document is served (stale beats
 * none); with nothing cached the failure is an OpenApiUnavailable carrying the Error body.
 */
export class OpenApiSource {
  private cached: { doc: OpenApiDocument; at: number } | null = null;
  private inflight: Promise<OpenApiDocument> | null = null;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(private readonly opts: OpenApiSourceOptions) {
    this.ttlMs = opts.ttlMs ?? 60_000;
    this.now = opts.now ?? Date.now;
  }

  async get(): Promise<OpenApiDocument> {
    const cached = this.cached;
    if (cached && this.now() - cached.at < this.ttlMs) return cached.doc;
    this.inflight ??= this.refresh().finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  private async refresh(): Promise<OpenApiDocument> {
    try {
      const doc = publicDocument(await this.fetchUpstream(), this.opts.document);
      this.cached = { doc, at: this.now() };
      return doc;
    } catch (err) {
      this.opts.onRefreshError?.(err, this.cached !== null);
      if (this.cached) return this.cached.doc;
      throw err instanceof OpenApiUnavailable ? err : new OpenApiUnavailable(upstreamFailure(err).body);
    }
  }

  /** Failures come as undici's (or a TimeoutError), which upstreamFailure maps like the proxy's. */
  private async fetchUpstream(): Promise<OpenApiDocument> {
    const url = `${this.opts.upstream.replace(/\/+$/, '')}/v1/openapi.json`;
    const res = await request(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(this.opts.timeoutMs),
      ...(this.opts.dispatcher ? { dispatcher: this.opts.dispatcher } : {}),
    });
    if (res.statusCode < 200 || res.statusCode > 299) {
      await res.body.dump();
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', `The pets service answered ${res.statusCode} for its API description`),
      );
    }
    let body: unknown;
    try {
      body = await res.body.json();
    } catch (err) {
      // Text that is not JSON is no document (below); a failure while reading is the upstream's.
      if (!(err instanceof SyntaxError)) throw err;
    }
    if (!isOpenApi31(body)) {
      throw new OpenApiUnavailable(
        errorBody(502, 'upstream_unavailable', 'The pets service sent no usable API description'),
      );
    }
    return body;
  }
}
