/** One answer as a client sees it. */
export interface Answer {
  status: number;
  code?: string;
}

/**
 * Clients sharing one key, each honouring Retry-After: it sends until its first 429, then waits
 * the time that 429 announces (at least until the window resets, beyond any test), so it sends
 * nothing more here. Returns each worker's answers.
 */
export async function politeWorkers(count: number, send: (worker: number) => Promise<Answer>): Promise<Answer[][]> {
  return Promise.all(
    Array.from({ length: count }, async (_, worker) => {
      const answers: Answer[] = [];
      for (let i = 0; i < 10_000; i++) {
        const answer = await send(worker);
        answers.push(answer);
        if (answer.status === 429) break;
      }
      return answers;
    }),
  );
}

/**
 * A client that ignores the 429 it got: it keeps sending, one request after another, for `ms`
 * after its first 429 (or until it is banned). Returns its answers.
 */
export async function impatientClient(ms: number, send: (i: number) => Promise<Answer>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let firstRefusalAt: number | undefined;
  for (let i = 0; i < 100_000; i++) {
    const answer = await send(i);
    answers.push(answer);
    if (answer.code === 'api_key_banned') break;
    if (answer.status === 429) firstRefusalAt ??= Date.now();
    if (firstRefusalAt !== undefined && Date.now() - firstRefusalAt > ms) break;
  }
  return answers;
}
