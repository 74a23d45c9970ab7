import { afterEach, describe, expect, it } from 'vitest';
import {
  drained,
  operatorCommand,
  post,
  simulatorGet,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

async function deadLetters(dir: string) {
  const { out } = await operatorCommand(['dead-letters', '--local', '--json'], {
    MAUTIC_RELAY_DIR: dir,
  });
  return JSON.parse(out) as { count: number; items: Array<{ reason: string; action: string }> };
}

// Contract §5 through npm start, as a sender would use it: every action by match.email.
describe('npm start: the integrator actions', () => {
  it('applies each of the nine actions to a contact named by email, in the order sent', async () => {
    const { sim, url, dir } = await startRelay({});
    const segment = sim.seed('segments', { name: 'S', alias: 's', isPublished: true });
    const gone = sim.seed('segments', { name: 'G', alias: 'g', isPublished: true });
    const campaign = sim.seed('campaigns', { name: 'C', isPublished: true });
    const left = sim.seed('campaigns', { name: 'L', isPublished: true });
    const company = sim.seed('companies', { companyname: 'Acme' });
    const former = sim.seed('companies', { companyname: 'Former' });
    const match = { email: 'cy@example.com' };
    const events = [
      { entity: 'contacts', action: 'create', data: { email: 'cy@example.com' } },
      { entity: 'contacts', action: 'addToSegment', match, segmentId: segment.id },
      { entity: 'contacts', action: 'addToSegment', match, segmentId: gone.id },
      { entity: 'contacts', action: 'removeFromSegment', match, segmentId: gone.id },
      { entity: 'contacts', action: 'addToCampaign', match, campaignId: campaign.id },
      { entity: 'contacts', action: 'addToCampaign', match, campaignId: left.id },
      { entity: 'contacts', action: 'removeFromCampaign', match, campaignId: left.id },
      { entity: 'contacts', action: 'linkCompany', match, companyId: former.id },
      { entity: 'contacts', action: 'linkCompany', match, companyId: company.id },
      { entity: 'contacts', action: 'unlinkCompany', match, companyId: former.id },
      { entity: 'contacts', action: 'addDoNotContact', match, channel: 'sms', reason: 'bounced' },
      { entity: 'contacts', action: 'addDoNotContact', match, reason: 'manual' },
      { entity: 'contacts', action: 'removeDoNotContact', match, channel: 'email' },
      { entity: 'contacts', action: 'addPoints', match, points: 12 },
      { entity: 'contacts', action: 'addPoints', match, points: -2 },
    ];

    const response = await post(url, JSON.stringify(events));
    expect(response.status).toBe(202);
    await until(
      async () => (await drained(dir)) && sim.records('contacts')[0]?.points === 10,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    const id = sim.records('contacts')[0]?.id ?? 0;
    expect(
      Object.keys((await simulatorGet(sim, `/api/contacts/${id}/segments`)).lists as object),
    ).toEqual([String(segment.id)]);
    expect(
      Object.keys((await simulatorGet(sim, `/api/contacts/${id}/campaigns`)).campaigns as object),
    ).toEqual([String(campaign.id)]);
    const companies = (await simulatorGet(sim, `/api/contacts/${id}/companies`))
      .companies as Array<{
      id: unknown;
    }>;
    expect(companies.map((c) => Number(c.id))).toEqual([company.id]);
    const { contact } = (await simulatorGet(sim, `/api/contacts/${id}`)) as {
      contact: { doNotContact: Array<{ channel: string; reason: number }> };
    };
    expect(contact.doNotContact.map(({ channel, reason }) => ({ channel, reason }))).toEqual([
      { channel: 'sms', reason: 2 },
    ]);
    expect((await deadLetters(dir)).count).toBe(0);
  }, 90_000);

  it('adds points once when the answer is lost (a dead letter ambiguous_result) and once when the event comes twice', async () => {
    const { sim, url, dir } = await startRelay({});
    const ann = sim.seed('contacts', { email: 'ann@example.com' });
    const points = (eventId: string, value: number) =>
      JSON.stringify({
        entity: 'contacts',
        action: 'addPoints',
        eventId,
        match: { email: 'ann@example.com' },
        points: value,
      });
    // Mautic applies the first points call, then the connection drops before its answer.
    sim.failAfterApply({ path: /\/points\// }, 'drop');

    expect((await post(url, points('order-1', 10))).status).toBe(202);
    await until(
      async () => (await deadLetters(dir)).count === 1,
      30_000,
      () => 'no dead letter',
    );
    // The same event, sent again in another request; a second order, sent twice.
    expect((await post(url, points('order-1', 10))).status).toBe(202);
    expect((await post(url, points('order-2', 5))).status).toBe(202);
    expect((await post(url, points('order-2', 5))).status).toBe(202);
    await until(
      async () => (await drained(dir)) && sim.records('contacts')[0]?.points === 15,
      30_000,
      () => JSON.stringify(sim.records('contacts')),
    );

    expect(sim.records('contacts').find((c) => c.id === ann.id)?.points).toBe(15);
    const letters = await deadLetters(dir);
    expect(letters.items.map((l) => [l.action, l.reason])).toEqual([
      ['addPoints', 'ambiguous_result'],
      ['addPoints', 'ambiguous_result'],
    ]);
    expect(sim.requests.filter((r) => r.path.includes('/points/'))).toHaveLength(2);
  }, 90_000);
});
