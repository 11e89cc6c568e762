import type { Static } from 'typebox';
import type { CreatedWebhookSchema, PingSchema, WebhookViewSchema } from '../api/webhook-schemas.js';
import { AdminClient } from './admin-client.js';
import type { Values } from './flags.js';
import { jsonLine, printable, table, when } from './format.js';
import { usageError } from './usage.js';

/* `keys webhooks add|list|rm|test`: webhook endpoints through the admin API. */

type WebhookView = Static<typeof WebhookViewSchema>;

function print(values: Values, json: unknown, text: string): void {
  process.stdout.write(values.json ? `${jsonLine(json)}\n` : text);
}

const hookPath = (id: string) => `/admin/webhooks/${encodeURIComponent(id)}`;

function webhooksTable(hooks: WebhookView[]): string {
  if (hooks.length === 0) return 'no webhooks\n';
  const rows = hooks.map((h) => [
    h.id,
    h.failing ? `failing since ${when(h.failing.since)}` : 'ok',
    h.events.join(','),
    h.url,
    h.description,
  ]);
  return table(['ID', 'STATUS', 'EVENTS', 'URL', 'DESCRIPTION'], rows);
}

/** `webhooks <action> [URL|ID]`: the action's own arguments are checked here. */
export async function webhooks(args: string[], values: Values): Promise<void> {
  const [action, target, ...extra] = args;
  if (extra.length > 0) throw usageError('webhooks', `unexpected argument "${extra[0]}"`);
  const admin = AdminClient.fromEnv(process.env);
  const need = (what: string): string => {
    if (!target) throw usageError('webhooks', `webhooks ${action} needs ${what}`);
    return target;
  };
  switch (action) {
    case 'add': {
      const url = need('a URL');
      const events = typeof values.events === 'string' ? values.events.split(',').map((e) => e.trim()) : [];
      if (events.length === 0) throw usageError('webhooks', 'webhooks add needs --events (comma-separated)');
      const created = await admin.request<Static<typeof CreatedWebhookSchema>>('POST', '/admin/webhooks', {
        url,
        events,
        ...(typeof values.description === 'string' ? { description: values.description } : {}),
      });
      print(
        values,
        created,
        `added ${created.id} (${created.events.join(', ')}) -> ${printable(created.url)}\n` +
          `signing secret: ${created.secret}\n(store it now: it is not shown again)\n`,
      );
      return;
    }
    case 'list': {
      const hooks = await admin.request<WebhookView[]>('GET', '/admin/webhooks');
      print(values, hooks, webhooksTable(hooks));
      return;
    }
    case 'rm': {
      const id = need('a webhook id');
      await admin.request('DELETE', hookPath(id));
      print(values, { id, deleted: true }, `deleted ${printable(id)}\n`);
      return;
    }
    case 'test': {
      const id = need('a webhook id');
      const ping = await admin.request<Static<typeof PingSchema>>('POST', `${hookPath(id)}/test`, {});
      print(values, ping, `queued a ping to ${printable(id)} (webhook-id ${ping.eventId})\n`);
      return;
    }
    default:
      throw usageError('webhooks', action ? `unknown webhooks action "${action}"` : 'webhooks needs an action');
  }
}
