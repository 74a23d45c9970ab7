/**
 * The ledger's part in "no blind re-send of a create" (contract §2), case by case: what a
 * redelivered create of an entity Mautic does not upsert finds in the ledger, and what an
 * ambiguous create leaves there. The delivery against the simulator, with the in-memory ledger.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type IncomingEvent, planBatches } from '../../../functions/core/delivery/batch-plan.ts';
import { deliverChunks } from '../../../functions/core/delivery/delivery.ts';
import type { DeliveryDeps } from '../../../functions/core/delivery/delivery-calls.ts';
import type { MessageOutcome } from '../../../functions/core/delivery/failure-policy.ts';
import { MauticApiClient } from '../../../functions/core/mautic/mautic-api.ts';
import { type MauticSimulator, startMauticSimulator } from '../../../mautic-simulator/server.ts';
import { InMemoryActionLedger } from '../../support/action-ledger.ts';
import { incoming } from '../../support/events.ts';
import { recorder } from '../../support/observe.ts';

let sim: MauticSimulator;
let ledger: InMemoryActionLedger;
const observed = recorder();

beforeEach(async () => {
  observed.clear();
  ledger = new InMemoryActionLedger();
  sim = await startMauticSimulator();
});

afterEach(async () => {
  await sim.close();
});

function deps(): DeliveryDeps {
  const token = sim.issueToken().accessToken;
  return {
    api: new MauticApiClient({ baseUrl: sim.url, fetch }),
    ledger,
    tokens: { accessToken: async () => token },
    logger: observed.logger,
    metrics: observed.metrics,
    clock: Date,
    sleep: async () => {},
    random: () => 0.5,
    learnedLimit: { value: undefined },
  };
}

/** A company create on a message received `receives` times. */
function company(name: string, receives: number): IncomingEvent {
  return {
    ...incoming({ entity: 'companies', action: 'create', data: { companyname: name } }),
    receives,
  };
}

async function deliver(messages: IncomingEvent[]): Promise<MessageOutcome[]> {
  const outcomes = await deliverChunks(planBatches(messages, 200), Date.now() + 60_000, deps());
  return messages.map((m) => outcomes.get(m.messageId) as MessageOutcome);
}

const createCalls = () => sim.requests.filter((r) => r.path === '/api/companies/batch/new');

describe('a create on its first delivery', () => {
  it('asks the ledger nothing when it is delivered', async () => {
    const outcomes = await deliver([company('Acme', 1), company('Beta', 1)]);

    expect(outcomes.map((o) => o.kind)).toEqual(['delivered', 'delivered']);
    expect(ledger.calls).toEqual([]);
  });

  it('is marked in the ledger when its outcome is ambiguous, before its dead letter is sent', async () => {
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'drop');
    const acme = company('Acme', 1);

    const [outcome] = await deliver([acme]);

    expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
    expect(ledger.entries()).toEqual(new Map([[`create ${acme.messageId}`, 'claimed']]));
  });

  it('logs a mark the ledger could not take, without a value, and is still dead-lettered', async () => {
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'drop');
    ledger.failNext('claim');

    const [outcome] = await deliver([company('Acme Secret', 1)]);

    expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
    const line = observed.lines.find((l) => l.message.startsWith('Could not mark'));
    expect(line?.extra).toEqual([expect.objectContaining({ event: 'ambiguous_unmarked' })]);
    expect(JSON.stringify(observed.lines)).not.toContain('Acme Secret');
  });
});

describe('a redelivered create of an entity Mautic does not upsert', () => {
  it('is dead-lettered ambiguous_result without a call when an earlier try was marked', async () => {
    const acme = company('Acme', 2);
    await ledger.claim(`create ${acme.messageId}`);

    const [outcome] = await deliver([acme]);

    expect(outcome).toMatchObject({ kind: 'rejected', reason: 'ambiguous_result' });
    expect(createCalls()).toEqual([]);
  });

  it('is settled as delivered without a call when an earlier try was applied', async () => {
    const acme = company('Acme', 3);
    await ledger.claim(`create ${acme.messageId}`);
    await ledger.complete(`create ${acme.messageId}`);

    const [outcome] = await deliver([acme]);

    expect(outcome).toMatchObject({ kind: 'delivered' });
    expect(createCalls()).toEqual([]);
  });

  it('goes back to the queue untried when the ledger cannot be asked', async () => {
    ledger.failNext('claim');

    const [outcome] = await deliver([company('Acme', 2)]);

    expect(outcome).toMatchObject({ kind: 'retry', reason: 'ledger_unavailable' });
    expect(createCalls()).toEqual([]);
  });

  it('is claimed, sent once and done; one Mautic refuses frees its claim; one ambiguous keeps it', async () => {
    sim.inject(
      { path: '/api/companies/batch/new' },
      { status: 503, headers: { 'retry-after': '120' }, body: '' },
    );
    const refused = company('Gamma', 2);
    const [first] = await deliver([refused]);
    const sent = company('Acme', 2);
    const [second] = await deliver([sent]);
    sim.failAfterApply({ path: '/api/companies/batch/new' }, 'drop');
    const lost = company('Beta', 2);
    const [third] = await deliver([lost]);

    expect([first?.kind, second?.kind, third]).toEqual([
      'retry',
      'delivered',
      expect.objectContaining({ kind: 'rejected', reason: 'ambiguous_result' }),
    ]);
    expect(ledger.entries()).toEqual(
      new Map([
        [`create ${sent.messageId}`, 'done'],
        [`create ${lost.messageId}`, 'claimed'],
      ]),
    );
  });

  it('asks the ledger nothing for a contact create (Mautic upserts it by email)', async () => {
    const contact = {
      ...incoming({ entity: 'contacts', action: 'create', data: { email: 'ann@example.com' } }),
      receives: 2,
    };

    const [outcome] = await deliver([contact]);

    expect(outcome).toMatchObject({ kind: 'delivered' });
    expect(ledger.calls).toEqual([]);
  });
});
