import { createWriteStream, fstatSync, writeSync } from 'node:fs';
import { Socket } from 'node:net';

/** Where a process's log lines go: written without blocking, and able to say when all are out. */
export interface LogDestination {
  write(line: string): void;
  /** Calls back once every line written so far has reached the file descriptor (pino's logger.flush). */
  flush(cb?: (err?: Error) => void): void;
  /** Starts writing what is buffered now; pino calls it after a fatal line, before the process exits. */
  flushSync(): void;
}

/**
 * Lines are gathered up to this many bytes before a write to a pipe: a write wakes the reader,
 * which on a small machine costs tens of microseconds, so one per ~50 access lines. (64 KiB cut
 * the pipe writes in a profile by two thirds but moved no req/s figure measurably, and held each
 * line four times longer under moderate traffic.)
 */
const PIPE_BUFFER_BYTES = 16 * 1024;
/**
 * ... and before a write to a file, one per ~200 access lines: each wakes a thread of libuv's
 * pool (a CPU profile of the gateway logging to a file at saturation: 11 % of its busy time in
 * fs.write with sonic-boom's 4 KiB writes).
 */
const FILE_BUFFER_BYTES = 64 * 1024;
/** ... and written at least this often, so a quiet service's lines do not wait. */
const FLUSH_MS = 500;
/** A reader this far behind loses lines rather than the process its memory (counted, then reported). */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;

/**
 * stdout, written without ever blocking the event loop; one per process, shared by its
 * listeners, and flushed by serve() before the process exits. Lines are gathered and written in
 * large chunks.
 *
 * A pipe or socket (a container runtime, a log shipper, `npm start`) is written as a non-blocking
 * stream on the event loop. A file or terminal (`node server.js > app.log`) cannot be: its writes
 * go to libuv's thread pool (fs.WriteStream), which keeps a slow disk off the event loop. pino's
 * own asynchronous destination (sonic-boom) does that too, but writes at most 16 KiB at a time and
 * re-measures its growing buffer on every line; waking a pool thread per write cost more than the
 * request itself on a two-core machine (CPU profiles of the gateway at saturation).
 */
export function logDestination(fd = 1): LogDestination {
  const stat = fstatSync(fd);
  if (stat.isFIFO() || stat.isSocket()) {
    try {
      // A second handle on the descriptor: process.stdout would also work, but writes through it
      // from elsewhere (a stray console.log) would then interleave mid-buffer.
      return bufferedDestination(fd, new Socket({ fd, readable: false, writable: true }), PIPE_BUFFER_BYTES);
    } catch {
      // A descriptor net cannot stream to (a datagram socket): the thread pool it is.
    }
  }
  // The path is not used when a descriptor is given; autoClose off: the descriptor is stdout's.
  return bufferedDestination(fd, createWriteStream('', { fd, autoClose: false }), FILE_BUFFER_BYTES);
}

/** What bufferedDestination writes chunks to: a net.Socket or an fs.WriteStream. */
interface Sink {
  readonly writableLength: number;
  write(chunk: string, cb: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

/** The callbacks of flush() calls not yet answered; each is called once, when the lines are out. */
class FlushWaiters {
  private callbacks: Array<(err?: Error) => void> = [];
  get waiting(): boolean {
    return this.callbacks.length > 0;
  }
  add(cb: (err?: Error) => void): void {
    this.callbacks.push(cb);
  }
  settle(err?: Error): void {
    const done = this.callbacks;
    this.callbacks = [];
    for (const cb of done) cb(err);
  }
}

function bufferedDestination(fd: number, sink: Sink, bufferBytes: number): LogDestination {
  let buffered = '';
  let timer: NodeJS.Timeout | undefined;
  let inFlight = 0;
  let dropped = 0;
  let broken: Error | undefined;
  const waiters = new FlushWaiters();
  const written = () => {
    inFlight--;
    if (inFlight > 0) return;
    if (dropped > 0) reportDropped();
    // Lines logged while a flush waited (a closing connection's) are part of what it waits for.
    else if (waiters.waiting && buffered !== '') push();
    else waiters.settle();
  };
  const reportDropped = () => {
    const line = `${JSON.stringify({ level: 40, time: Date.now(), msg: `dropped ${dropped} log lines: stdout was not read fast enough` })}\n`;
    dropped = 0;
    inFlight++;
    sink.write(line, written);
  };
  const push = () => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (buffered === '' || broken) return;
    const chunk = buffered;
    buffered = '';
    inFlight++;
    sink.write(chunk, written);
  };
  // A closed stdout (EPIPE) must neither crash the process nor hold shutdown until the grace
  // period runs out: lines are discarded from then on.
  sink.on('error', (err: Error) => {
    broken = err;
    buffered = '';
    inFlight = 0;
    waiters.settle(err);
  });
  // An exit that did not wait for flush (a failed start, close-with-grace's timeout): what is
  // still gathered goes out synchronously. libuv made the descriptor non-blocking, so a full
  // pipe refuses the rest (EAGAIN), which is lost rather than the exit held up.
  process.once('exit', () => {
    if (buffered === '' || broken) return;
    try {
      writeSync(fd, buffered);
    } catch {
      // EAGAIN or EPIPE: nothing more can be done at exit.
    }
    buffered = '';
  });

  return {
    write(line) {
      if (broken) return;
      if (sink.writableLength > MAX_QUEUED_BYTES) {
        dropped++;
        return;
      }
      buffered += line;
      if (buffered.length >= bufferBytes) push();
      else if (timer === undefined) timer = setTimeout(push, FLUSH_MS).unref();
    },
    flush(cb) {
      push();
      if (inFlight === 0 || broken) {
        cb?.(broken);
        return;
      }
      if (cb) waiters.add(cb);
    },
    flushSync: push,
  };
}
