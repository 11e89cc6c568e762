import { expect, vi } from 'vitest';

/**
 * The admin API of one gateway under test, as an operator's script calls it: GET, or POST with a
 * JSON body; anything but a 2xx fails the test with the answer's body.
 */
export function adminClient(baseUrl: () => string, token: string) {
  async function call(path: string, body?: object): Promise<Record<string, unknown>> {
    const res = await fetch(`${baseUrl()}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(5_000),
    });
    const text = await res.text();
    expect(res.status, text).toBeLessThan(300);
    return JSON.parse(text) as Record<string, unknown>;
  }

  /**
   * A top-up, sent again while it answers 503 (a gateway just started on a loaded host can outlast
   * the command timeout), as a client would: a top-up answered 503 was not made (a fenced write).
   */
  async function topUp(id: string, amount: number): Promise<void> {
    await vi.waitFor(() => call(`/admin/keys/${id}/credits`, { amount, reason: 'fault test' }), {
      timeout: 10_000,
      interval: 100,
    });
  }

  return { call, topUp };
}
