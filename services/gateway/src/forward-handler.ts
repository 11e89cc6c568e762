import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Dispatcher } from 'undici';

/**
 * Answers up to this size are gathered and sent with one write; a larger one streams through
 * as it arrives, so memory per request stays bounded whatever the upstream sends.
 */
export const BUFFERED_BODY_BYTES = 64 * 1024;

export type ResponseHeaders = Record<string, string | string[]>;

export interface ForwardPolicy {
  /** The headers to pass back, from the upstream's raw name/value pairs. */
  responseHeaders(raw: Buffer[]): ResponseHeaders;
  /** Answers a failure that happened before anything was sent to the client. */
  fail(reply: FastifyReply, error: Error): void;
}

/**
 * One proxied request, as an undici dispatch handler. The upstream's status and headers are
 * held until its body is complete, then sent with the body in one write; until then a failure
 * (reset, timeout, a broken body) is still a clean Error answer, not a truncated 200. A body
 * over BUFFERED_BODY_BYTES switches to streaming with undici's back-pressure.
 *
 * Why not @fastify/reply-from: it turns every answer into a stream piped into the response and
 * copies the request headers twice; that cost about a fifth of the gateway's CPU per request at
 * saturation (issue 11), for answers that are a few kilobytes of JSON.
 */
export class ForwardHandler implements Dispatcher.DispatchHandler {
  private statusCode = 0;
  private headers: ResponseHeaders | undefined;
  private chunks: Buffer[] = [];
  private bytes = 0;
  private stream: Readable | undefined;
  private resume: (() => void) | undefined;
  private abort: ((err?: Error) => void) | undefined;
  private complete = false;

  constructor(
    private readonly reply: FastifyReply,
    private readonly policy: ForwardPolicy,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.statusCode = statusCode;
    this.headers = this.policy.responseHeaders(rawHeaders);
    this.resume = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.stream) return this.stream.push(chunk);
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes > BUFFERED_BODY_BYTES) this.startStreaming();
    return true;
  }

  onComplete(): void {
    this.complete = true;
    if (this.stream) {
      this.stream.push(null);
      return;
    }
    const reply = this.start();
    if (!reply) return;
    // fastify's HEAD route sets Content-Length from a buffer it is given (here, none), but leaves
    // a stream's alone: the upstream's length for the GET answer is the one to keep.
    if (reply.request.method === 'HEAD') return void reply.send(Readable.from([]));
    const chunks = this.chunks;
    reply.send(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.bytes));
  }

  onError(error: Error): void {
    // Headers already went out with the start of a streamed body: the client's response breaks
    // off as the upstream's did (never a short body that looks whole).
    if (this.stream) this.stream.destroy(error);
    else this.policy.fail(this.reply, error);
  }

  /** Status and headers onto the reply; undefined when the upstream's status cannot be sent. */
  private start(): FastifyReply | undefined {
    const reply = this.reply;
    try {
      reply.code(this.statusCode);
    } catch (err) {
      this.policy.fail(reply, err as Error);
      return undefined;
    }
    // The upstream answered before the client's body was all read: the connection cannot be
    // reused for another request.
    if (!reply.request.raw.complete) reply.header('connection', 'close');
    return reply.headers(this.headers ?? {});
  }

  private startStreaming(): void {
    const resume = () => this.resume?.();
    this.stream = new Readable({ read: resume });
    // The client went away (fastify destroys the stream it was sending): stop the upstream
    // rather than leave its connection paused until the body timeout.
    this.stream.once('close', () => {
      if (!this.complete) this.abort?.();
    });
    for (const chunk of this.chunks) this.stream.push(chunk);
    this.chunks = [];
    const reply = this.start();
    if (reply) reply.send(this.stream);
    else this.stream.destroy();
  }
}
