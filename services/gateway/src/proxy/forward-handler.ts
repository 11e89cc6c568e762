import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { closeAfterAnswer } from '@animal-store/common/lingering-close.js';
import type { FastifyReply } from 'fastify';
import type { Dispatcher } from 'undici';
import { markStage } from '../observability/server-timing.js';

/**
 * Answers up to this size are gathered and sent with one write; a larger one streams through
 * as it arrives, so memory per request stays bounded whatever the upstream sends.
 */
export const BUFFERED_BODY_BYTES = 64 * 1024;

export type ResponseHeaders = Record<string, string | string[]>;

export interface ForwardPolicy {
  /** The headers to pass back, from the upstream's (names lower-cased, repeated fields as arrays). */
  responseHeaders(upstream: IncomingHttpHeaders, status: number): ResponseHeaders;
  /** Answers a failure that happened before anything was sent to the client. */
  fail(reply: FastifyReply, error: Error): void;
  /**
   * Given an upstream answer with an error status (400 and up) and its whole body, answers the
   * client with something else and returns true, or returns false to let the upstream's answer
   * through. A body over BUFFERED_BODY_BYTES is not read to the end: it comes as undefined, and
   * the client must be answered (the return value is ignored).
   */
  replaceError(reply: FastifyReply, status: number, headers: ResponseHeaders, body: Buffer | undefined): boolean;
}

/**
 * One proxied request, as an undici dispatch handler. The upstream's status and headers are
 * held until its body is complete, then sent with the body in one write; until then a failure
 * (reset, timeout, a broken body) is still a clean Error answer, not a truncated 200. A body
 * over BUFFERED_BODY_BYTES switches to streaming with undici's back-pressure, unless the status
 * is an error: an error answer is never streamed, policy.replaceError judges it once complete
 * (or once past that size).
 *
 * Why not @fastify/reply-from: it turns every answer into a stream piped into the response and
 * copies the request headers twice; that cost about a fifth of the gateway's CPU per request at
 * saturation, for answers that are a few kilobytes of JSON.
 */
export class ForwardHandler implements Dispatcher.DispatchHandler {
  private statusCode = 0;
  private headers: ResponseHeaders | undefined;
  private chunks: Buffer[] = [];
  private bytes = 0;
  private stream: Readable | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  private complete = false;
  private errorStatus = false;
  /** The client was answered without the upstream's answer: whatever the upstream does next is moot. */
  private settled = false;

  constructor(
    private readonly reply: FastifyReply,
    private readonly policy: ForwardPolicy,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.statusCode = statusCode;
    // A HEAD answer has no body to judge: its status and allowed headers pass as they are.
    this.errorStatus = statusCode >= 400 && this.reply.request.method !== 'HEAD';
    this.headers = this.policy.responseHeaders(headers, statusCode);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.stream) {
      // The client reads slower than the upstream sends: stop reading the upstream until the
      // stream asks for more (its read() resumes the controller).
      if (!this.stream.push(chunk)) controller.pause();
      return;
    }
    if (this.settled) return;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes > BUFFERED_BODY_BYTES) {
      if (this.errorStatus) this.dropErrorBody();
      else this.startStreaming();
    }
  }

  onResponseEnd(): void {
    this.complete = true;
    markStage(this.reply.request, 'answered');
    if (this.settled) return;
    if (this.stream) {
      this.stream.push(null);
      return;
    }
    let body: Buffer | undefined;
    if (this.errorStatus) {
      body = this.body();
      if (this.policy.replaceError(this.reply, this.statusCode, this.headers ?? {}, body)) return;
    }
    const reply = this.start();
    if (!reply) return;
    // fastify's HEAD route sets Content-Length from a buffer it is given (here, none), but leaves
    // a stream's alone: the upstream's length for the GET answer is the one to keep.
    if (reply.request.method === 'HEAD') return void reply.send(Readable.from([]));
    reply.send(body ?? this.body());
  }

  private body(): Buffer {
    const chunks = this.chunks;
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.bytes);
  }

  /**
   * An error answer too large to be an Error body: the client is answered now, and the upstream
   * request ends here rather than be read to the end (a slow endless body would hold it forever).
   */
  private dropErrorBody(): void {
    this.chunks = [];
    this.settled = true;
    this.policy.replaceError(this.reply, this.statusCode, this.headers ?? {}, undefined);
    this.controller?.abort(new Error('error answer too large to judge'));
  }

  /** Also called, with no controller, for a request undici refuses before sending it. */
  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    // Headers already went out with the start of a streamed body: the client's response breaks
    // off as the upstream's did (never a short body that looks whole).
    if (this.stream) this.stream.destroy(error);
    else if (!this.settled) this.policy.fail(this.reply, error);
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
    if (!reply.request.raw.complete) closeAfterAnswer(reply);
    return reply.headers(this.headers ?? {});
  }

  private startStreaming(): void {
    const controller = this.controller;
    this.stream = new Readable({ read: () => controller?.resume() });
    // The client went away (fastify destroys the stream it was sending): stop the upstream
    // rather than leave its connection paused until the body timeout.
    this.stream.once('close', () => {
      if (!this.complete) controller?.abort(new Error('client went away'));
    });
    for (const chunk of this.chunks) this.stream.push(chunk);
    this.chunks = [];
    const reply = this.start();
    if (reply) reply.send(this.stream);
    else this.stream.destroy();
  }
}
