import type { Socket } from 'node:net';
import type { FastifyReply } from 'fastify';

/** How long a closing connection goes on reading a body it refused, at most. */
const LINGER_MS = 2_000;
/** How much of that body it reads and discards, at most. */
const LINGER_BYTES = 4 * 1024 * 1024;

/**
 * Answers with `Connection: close` and, once the answer is written, closes the connection the way
 * nginx's lingering close does: stop writing, read and discard what the client is still sending
 * for a while, then close. A client refused before its body was read (401, 413, 429, 503) is
 * often still writing that body; closing the socket with bytes unread makes the kernel send a
 * reset, which can reach the client before it has read the answer (EPIPE, no answer at all).
 */
export function closeAfterAnswer(reply: FastifyReply): void {
  reply.header('connection', 'close');
  const socket = reply.request.raw.socket as Socket | null;
  // Node closes a connection after its last answer with destroySoon: that call lingers instead.
  if (socket) socket.destroySoon = lingerThenDestroy;
}

function lingerThenDestroy(this: Socket): void {
  if (this.writable) this.end();
  // What follows is the refused body, never another request: the HTTP parser must not see it.
  // Dropping its listener and adding one of our own takes the socket back from the parser,
  // which otherwise reads straight from the handle.
  this.removeAllListeners('data');
  if (this.readableEnded) {
    // The client already finished sending: nothing to wait for once the answer is out.
    if (this.writableFinished) this.destroy();
    else this.once('finish', () => this.destroy());
    return;
  }
  let left = LINGER_BYTES;
  const timer = setTimeout(() => this.destroy(), LINGER_MS);
  // A linger never holds a shutting-down process open.
  timer.unref();
  this.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left <= 0) this.destroy();
  });
  // The client is done sending: close once the answer is out, as Node would have.
  this.once('end', () => (this.writableFinished ? this.destroy() : this.once('finish', () => this.destroy())));
  this.once('close', () => clearTimeout(timer));
  this.resume();
}
