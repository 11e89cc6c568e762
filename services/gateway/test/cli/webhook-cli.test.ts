import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminEnv, runCli } from '../support/cli.js';
import { startGateway, type TestGateway } from '../support/helpers.js';
import { type Received, startReceiver } from '../support/webhook-receiver.js';

/** `keys webhooks add|list|rm|test` against a gateway's admin listener (embedded mode). */

let gw: TestGateway;
let env: Record<string, string>;
beforeAll(async () => {
  gw = await startGateway({ redisUrl: null, env: { WEBHOOKS_ALLOW_INSECURE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' } });
  env = await adminEnv(gw);
});
afterAll(async () => {
  await gw?.close();
});

const keys = (args: string[]) => runCli(args, env);

it('adds, lists, pings and removes an endpoint', async () => {
  const hook = await startReceiver();
  try {
    const added = await keys(['webhooks', 'add', hook.url, '--events', 'key.created,key.revoked', '--json']);
    expect(added.code, added.stderr).toBe(0);
    const { id, secret } = JSON.parse(added.stdout) as { id: string; secret: string };

    const listed = await keys(['webhooks', 'list']);
    expect(listed.stdout).toMatch(new RegExp(`^${id}\\s+ok\\s+key.created,key.revoked\\s+${hook.url}`, 'm'));
    expect(listed.stdout).not.toContain(secret);

    const pinged = await keys(['webhooks', 'test', id]);
    expect(pinged.code, pinged.stderr).toBe(0);
    await hook.until(1);
    const ping = hook.received[0] as Received;
    expect(new Webhook(secret).verify(ping.body, ping.headers as Record<string, string>)).toMatchObject({
      type: 'webhook.test',
    });

    expect((await keys(['webhooks', 'rm', id])).stdout).toBe(`deleted ${id}\n`);
    expect((await keys(['webhooks', 'list'])).stdout).toBe('no webhooks\n');
  } finally {
    await hook.close();
  }
});

it("exits 2 with the usage for a mistake, 1 with the admin API's message for a refusal", async () => {
  const noEvents = await keys(['webhooks', 'add', 'https://hooks.example.com/x']);
  expect(noEvents.code).toBe(2);
  expect(noEvents.stderr).toContain('usage: npm run -s keys -- webhooks add URL --events LIST');
  expect((await keys(['webhooks', 'frobnicate'])).code).toBe(2);
  const unknown = await keys(['webhooks', 'add', 'https://hooks.example.com/x', '--events', 'key.exploded']);
  expect(unknown.code).toBe(1);
  expect(unknown.stderr).toContain('admin API answered 400');
});
