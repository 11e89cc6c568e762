import { MAX_PAGE_SIZE } from '../paging/page.js';
import type { CreditLedger } from './credit-ledger.js';
import type { CreditOwner } from './credit-terms.js';
import { announceCredits, type CreditAnnouncer } from './owner-credits.js';

/**
 * The credits an owner's requests (a customer's keys') spent in [from, to), both on whole UTC
 * hours (a billing period's bounds are): the ledger's spend entries whose hour starts in it, less
 * the refund entries for those hours, and the open hour's spend when that hour is in it. Spends are
 * net of the refunds given while their hour was open, so this is the credits of the requests
 * served: the period's billed units. The balance is read first, so a past hour still open becomes its entry (and a refill due is
 * applied and announced, as every read of it does).
 * Spends are written hour after hour, and a refund entry only for the hour just closed, so
 * reading newest first stops at the first of either before `from`: a period costs the pages
 * written since it began, not the whole ledger.
 */
export async function creditsSpent<Ref>(
  deps: { credits: CreditLedger; webhooks: CreditAnnouncer<Ref> },
  owner: CreditOwner<Ref>,
  from: number,
  to: number,
  now: number,
): Promise<number> {
  const { balance, openHour, refilled } = await deps.credits.balance(owner.id, owner.rule, now);
  // A refill this read applied is announced as any reader's is.
  announceCredits(deps, owner, { before: balance, after: balance, refilled });
  let spent = openHour && openHour.start >= from && openHour.start < to ? openHour.spent : 0;
  let after: string | undefined;
  do {
    const page = await deps.credits.page(owner.id, {
      limit: MAX_PAGE_SIZE,
      // Stryker disable next-line ConditionalExpression: both ledgers read `after: undefined` as no cursor
      ...(after !== undefined ? { after } : {}),
    });
    for (const entry of page.items) {
      if (entry.type !== 'spend' && entry.type !== 'refund') continue;
      if (entry.at < from) return spent;
      if (entry.at < to) spent -= entry.amount;
    }
    after = page.next ?? undefined;
  } while (after !== undefined);
  return spent;
}
