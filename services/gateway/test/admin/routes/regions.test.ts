import { describe, expect, it } from 'vitest';
import { auth, expectError } from '../../support/admin.js';
import { useGateways } from '../../support/helpers.js';

// The view with NATS is tested with a real nats-server in test/regions/regions.test.ts.
describe('GET /admin/regions', () => {
  const gateways = useGateways();

  it('answers 404 for a gateway that is one region (NATS_URL unset)', async () => {
    const gw = await gateways.start();
    // Nothing exchanges counts, and the limiter is not wrapped: the hot path is as it was.
    expect(gw.deps.regions).toBeNull();
    expectError(await gw.admin.inject({ method: 'GET', url: '/admin/regions', headers: auth }), 404, 'not_found');
  });
});
