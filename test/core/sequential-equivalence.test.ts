import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planBatches } from '../../functions/core/batch-plan.ts';
import { type DeliveryDeps, deliverChunks } from '../../functions/core/delivery.ts';
import type { QueuedEvent } from '../../functions/core/events.ts';
import { MauticApiClient } from '../../functions/core/mautic-api.ts';
import { listRecords, seedRecord } from '../../infra/local/mautic-simulator-rest.ts';
import { inMemoryMautic } from '../support/in-memory-mautic.ts';

// Contract §2 "Coalescing never changes the result" and "Order per record": whatever the planner
// merges and however it orders calls, Mautic (the simulator's write rules) ends up holding what
// it holds after each event was sent alone, in arrival order.

const NOW = Date.parse('2026-11-21T00:00:00Z');
const ENTITIES = ['contacts', 'companies', 'segments'] as const;

type EventInput = Pick<QueuedEvent, 'entity' | 'action'> & Partial<QueuedEvent>;

const value = fc.oneof(
  { arbitrary: fc.constantFrom('Ann', 'Bob', 'Cy', 5, '7'), weight: 3 },
  { arbitrary: fc.constantFrom('', null, 0, '0', 0.5, false), weight: 1 },
);
/** Mostly absent: most events set a field or two, as senders do. */
const rarely = <T>(arbitrary: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: 4 }, { arbitrary, weight: 1 });
const withoutAbsent = (data: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(data).filter(([, field]) => field !== undefined));
const tags = fc.array(fc.constantFrom('news', '-news', 'web', '-web', 'News', ' web'), {
  minLength: 1,
  maxLength: 3,
});
const flag = fc.constantFrom(true, false, '1', 0);
const email = fc.constantFrom('a@x.io', 'A@x.io', 'b@x.io', 'c@x.io');
const contactFields = fc
  .record({
    firstname: rarely(value).map((field) => field ?? 'Ann'),
    city: rarely(value),
    points: rarely(fc.constantFrom(0, 5, '', 9, '0')),
    tags: rarely(tags),
    overwriteWithBlank: rarely(flag),
    owner: rarely(fc.constantFrom(3, 4, '')),
    doNotContact: rarely(fc.constant([{ reason: 1, channel: 'email' }])),
  })
  .chain((data) =>
    // Drop firstname now and then, so that events also set disjoint fields.
    fc.boolean().map((keep) => withoutAbsent(keep ? data : { ...data, firstname: undefined })),
  );
const companyFields = fc
  .record({ companyname: value, companycity: rarely(value), overwriteWithBlank: rarely(flag) })
  .map(withoutAbsent);
const segmentFields = fc
  .record({ name: rarely(fc.constantFrom('S', 'T', '')), description: value })
  .map(withoutAbsent);

const event: fc.Arbitrary<EventInput> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(email, contactFields).map(([address, data]) => ({
      entity: 'contacts',
      action: 'create' as const,
      data: { ...data, email: address },
    })),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 4 }), contactFields, fc.option(email, { freq: 6 }))
      .map(([id, data, address]) => ({
        entity: 'contacts',
        action: 'edit' as const,
        id,
        data: address === null ? data : { ...data, email: address },
      })),
  },
  fc
    .integer({ min: 1, max: 4 })
    .map((id) => ({ entity: 'contacts', action: 'delete' as const, id })),
  companyFields.map((data) => ({ entity: 'companies', action: 'create' as const, data })),
  fc
    .tuple(fc.integer({ min: 1, max: 3 }), companyFields)
    .map(([id, data]) => ({ entity: 'companies', action: 'edit' as const, id, data })),
  fc
    .integer({ min: 1, max: 3 })
    .map((id) => ({ entity: 'companies', action: 'delete' as const, id })),
  segmentFields.map((data) => ({ entity: 'segments', action: 'create' as const, data })),
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 2 }), segmentFields)
      .map(([id, data]) => ({ entity: 'segments', action: 'edit' as const, id, data })),
  },
);

/** A Mautic in memory holding the same few records every run starts from. */
function seededMautic() {
  const mautic = inMemoryMautic(() => NOW);
  seedRecord(mautic.state, 'contacts', { email: 'a@x.io', firstname: 'Seed', tags: ['news'] });
  seedRecord(mautic.state, 'contacts', { email: 'b@x.io', city: 'Oslo', points: 3 });
  seedRecord(mautic.state, 'companies', { companyname: 'Seed Co' });
  seedRecord(mautic.state, 'segments', { name: 'Seed segment' });
  return {
    ...mautic,
    api: new MauticApiClient({ baseUrl: 'http://mautic.test', fetch: mautic.fetch }),
  };
}

function deps(api: MauticApiClient): DeliveryDeps {
  const quiet = { info() {}, warn() {}, error() {} };
  return {
    api,
    tokens: { accessToken: async () => 'token' },
    refresher: { requestRefresh: async () => {} },
    logger: quiet,
    metrics: { addMetric() {} },
    clock: { now: () => NOW },
    sleep: async () => {},
    random: () => 0.5,
    learnedLimit: { value: undefined },
  };
}

const call = { accessToken: 'token' };

async function sendAlone(api: MauticApiClient, input: EventInput): Promise<void> {
  if (input.action === 'create') await api.create(input.entity, [input.data ?? {}], call);
  else if (input.action === 'edit')
    await api.edit(input.entity, [{ ...input.data, id: input.id ?? 0 }], call);
  else await api.delete(input.entity, [input.id ?? 0], call);
}

function held(state: ReturnType<typeof seededMautic>['state']) {
  return Object.fromEntries(ENTITIES.map((entity) => [entity, listRecords(state, entity)]));
}

describe('planned delivery versus one event at a time', () => {
  it('leaves Mautic holding exactly what sending each event alone, in order, leaves', async () => {
    // How often the runs merged events and cut phases: the property must not hold vacuously.
    let merged = 0;
    let phased = 0;
    let refusedMerges = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { maxLength: 14 }),
        fc.integer({ min: 1, max: 4 }),
        async (inputs, batchSize) => {
          const alone = seededMautic();
          for (const input of inputs) await sendAlone(alone.api, input);

          const planned = seededMautic();
          const incoming = inputs.map((input, index) => ({
            messageId: `m${index}`,
            event: {
              v: 1 as const,
              eventId: `e${index}`,
              receivedAt: '2026-11-21T00:00:00.000Z',
              sender: 'test',
              ...input,
            },
          }));
          const chunks = planBatches(incoming, batchSize);
          const items = chunks.flatMap((chunk) => chunk.items);
          if (items.some((item) => item.messageIds.length > 1)) merged++;
          if (chunks.some((chunk) => chunk.phase > 0)) phased++;
          const outcomes = await deliverChunks(chunks, NOW + 60_000, deps(planned.api));
          const partOutcomes = items.flatMap((item) =>
            item.parts
              ? item.parts.map((part) => outcomes.get(part.messageIds[0] ?? '')?.kind)
              : [],
          );
          if (new Set(partOutcomes).size > 1) refusedMerges++;

          expect(outcomes.size).toBe(inputs.length);
          expect([...outcomes.values()].filter((outcome) => outcome.kind === 'retry')).toEqual([]);
          expect(held(planned.state)).toEqual(held(alone.state));
        },
      ),
      { numRuns: 2_000 },
    );
    expect(merged).toBeGreaterThan(150);
    expect(phased).toBeGreaterThan(500);
    expect(refusedMerges).toBeGreaterThan(3);
  }, 120_000);

  it('reproduces the defects of issue 11: blanks after values, additive tags, delete then re-create', async () => {
    const inputs: EventInput[] = [
      {
        entity: 'contacts',
        action: 'create',
        data: { email: 'c@x.io', firstname: 'Ann', points: 5 },
      },
      { entity: 'contacts', action: 'create', data: { email: 'c@x.io', firstname: '', points: 0 } },
      { entity: 'contacts', action: 'create', data: { email: 'c@x.io', tags: ['newsletter'] } },
      { entity: 'contacts', action: 'create', data: { email: 'c@x.io', tags: ['webinar'] } },
      { entity: 'contacts', action: 'delete', id: 1 },
      { entity: 'contacts', action: 'create', data: { email: 'a@x.io', lastname: 'Again' } },
    ];
    const planned = seededMautic();

    await deliverChunks(
      planBatches(
        inputs.map((input, index) => ({
          messageId: `m${index}`,
          event: {
            v: 1,
            eventId: `e${index}`,
            receivedAt: '2026-11-21T00:00:00.000Z',
            sender: 't',
            ...input,
          },
        })),
        200,
      ),
      NOW + 60_000,
      deps(planned.api),
    );

    expect(listRecords(planned.state, 'contacts')).toMatchObject([
      { id: 2, email: 'b@x.io' },
      { id: 3, email: 'c@x.io', firstname: 'Ann', points: 5, tags: ['newsletter', 'webinar'] },
      { id: 4, email: 'a@x.io', lastname: 'Again' },
    ]);
  });
});
