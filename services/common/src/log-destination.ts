import pino from 'pino';

/** Where a process's log lines go: written without blocking, and able to say when all are out. */
export interface LogDestination {
  write(line: string): void;
  /** Calls back once every line written so far has reached the file descriptor (pino's logger.flush). */
  flush(cb?: (err?: Error) => void): void;
}

const BUFFER_BYTES = 4096;
const FLUSH_MS = 500;

/**
 * stdout written asynchronously (pino's sonic-boom), so a log line never blocks the event loop;
 * one per process, shared by its listeners, and flushed by serve() before the process exits.
 *
 * Lines are gathered up to BUFFER_BYTES before a write (and written at least every FLUSH_MS), so
 * the access line costs a write system call per dozen requests rather than per request. The
 * bytes handed over and the bytes written ('write' events) are counted, and flush waits until
 * they match, pushing out what the buffer still holds.
 */
export function logDestination(fd = 1): LogDestination {
  const boom = pino.destination({ dest: fd, sync: false, minLength: BUFFER_BYTES, periodicFlush: FLUSH_MS });
  let pending = 0;
  let waiters: Array<(err?: Error) => void> = [];
  const settle = (err?: Error) => {
    const done = waiters;
    waiters = [];
    for (const cb of done) cb(err);
  };
  boom.on('write', (bytes: number) => {
    pending = Math.max(0, pending - bytes);
    if (pending === 0) settle();
    // Someone waits and less than a buffer's worth is left: sonic-boom would hold it until the
    // next periodic flush. Once this write has been released, push the rest out.
    else if (waiters.length > 0) setImmediate(() => boom.flush());
  });
  // A closed stdout (EPIPE) must not hold shutdown until the grace period runs out.
  boom.on('error', (err: Error) => {
    pending = 0;
    settle(err);
  });
  return {
    write(line) {
      pending += Buffer.byteLength(line);
      boom.write(line);
    },
    flush(cb) {
      if (pending === 0) {
        cb?.();
        return;
      }
      if (cb) waiters.push(cb);
      boom.flush();
    },
  };
}
