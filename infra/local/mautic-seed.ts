import type { MauticSimulator } from '../../mautic-simulator/server.ts';

/**
 * What the embedded Mautic of `npm start` holds from the start: the segments, campaign and
 * company that docs/recipes.md and examples/sources/ name by id, so that each of them works as
 * written on a fresh stack (a segment Mautic does not have dead-letters the event). The ids are
 * their places here: a seeded record is given the next id of its entity.
 */
const SEED: ReadonlyArray<[entity: string, record: Record<string, unknown>]> = [
  // Segment 1: Shopify's new customers (examples/sources/, the shopify source).
  ['segments', { name: 'Shopify customers', alias: 'shopify-customers', isPublished: true }],
  // Segment 2: a form's sign-ups (examples/sources/, the typeform source).
  ['segments', { name: 'Newsletter', alias: 'newsletter', isPublished: true }],
  // Segment 3: a shop's customers (docs/recipes.md).
  ['segments', { name: 'Customers', alias: 'customers', isPublished: true }],
  // Campaign 1 and company 1 (docs/recipes.md).
  ['campaigns', { name: 'Onboarding', isPublished: true }],
  ['companies', { companyname: 'Example Ltd' }],
];

/** Seeds the embedded simulator; what it holds is listed with `npx mautic-relay mautic --local`. */
export function seedLocalMautic(simulator: Pick<MauticSimulator, 'seed'>): void {
  for (const [entity, record] of SEED) simulator.seed(entity, record);
}
