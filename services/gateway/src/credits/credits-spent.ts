import type { GatewayDeps } from '../deps.js';
import { MAX_PAGE_SIZE } from '../paging/page.js';
import type { CreditOwner } from './credit-owner.js';
import { announceCredits } from './owner-credits.js';

/**
 * The credits an owner's requests (a customer's keys') spent in [from, to), both on whole UTC hours (a billing period's
 * bounds are): the ledger's spend entries whose hour starts in it, and the open hour's spend when
 * that hour is in it. The balance is read first, so a past hour still open becomes its entry (and a refill due is
 * applied and announced, as every read of it does).
 * Spends are written hour after hour, so reading newest first stops at the first spend before
 * `from`: a period costs the pages written since it began, not the whole ledger.
 */
export async function creditsSpent(
  deps: Pick<GatewayDeps, 'credits' | 'webhooks'>,
  owner: CreditOwner,
  from: number,
  to: number,
  now: number,
): Promise<number> {
  const { balance, openHour, refilled } = await deps.credits.balance(owner.id, owner.rule, now);
  // A refill this read applied is announced as any reader's is.
  announceCredits(deps, owner, balance, balance, refilled);
  let spent = openHour && openHour.start >= from && openHour.start < to ? openHour.spent : 0;
  let after: string | undefined;
  do {
    const page = await deps.credits.page(owner.id, {
      limit: MAX_PAGE_SIZE,
      ...(after !== undefined ? { after } : {}),
    });
    for (const entry of page.items) {
      if (entry.type !== 'spend') continue;
      if (entry.at < from) return spent;
      if (entry.at < to) spent -= entry.amount;
    }
    after = page.next ?? undefined;
  } while (after !== undefined);
  return spent;
}
