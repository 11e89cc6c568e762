import { ApiError } from '@animal-store/common/errors.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { CreditLedgerQuery } from '../api/credit-schemas.js';
import { customerOwner } from '../billing/credit-owner.js';
import { ownerLedger } from '../credits/owner-credits.js';
import type { GatewayDeps } from '../deps.js';
import { signedInCustomer } from './own-keys.js';

type Deps = Pick<GatewayDeps, 'customerStore' | 'plans' | 'credits' | 'webhooks' | 'now'>;

/** Page sizes the portal's ledger may ask for: a screenful, well under the admin API's. */
const PortalLedgerQuery = Type.Object(
  { ...CreditLedgerQuery.properties, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })) },
  { additionalProperties: false },
);

/**
 * The signed-in customer's credit ledger, read-only: the admin API's page (ownerLedger, the
 * same balance and entries), newest first. A customer without credit terms has none to show: 404,
 * as its usage answer carries no credits.
 */
export const portalCreditRoutes: FastifyPluginAsyncTypebox<{ deps: Deps }> = async (app, { deps }) => {
  app.get('/portal/api/credits/ledger', { schema: { querystring: PortalLedgerQuery } }, async (request) => {
    const customer = await signedInCustomer(deps, request);
    const owner = customerOwner(deps.plans, customer);
    if (!owner.terms) throw new ApiError(404, 'not_found', 'Your account spends no credits');
    return ownerLedger(deps, owner, request.query.limit, request.query.after);
  });
};
