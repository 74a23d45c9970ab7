/**
 * Contract §1.6 and §4's `events` end to end through `npm start`: events of every kind (creates,
 * edits by id and by match, each integrator action, an unknown target, a source's filtered
 * payload, a repeated addPoints, two events coalesced after a retry) followed with `GET
 * /events/...` as their sender and with `events show` as an operator, each status and Mautic id
 * checked against the simulator's records; another sender's credential gets 404; no answer and
 * no line of the relay carries a value, an address or a secret; the retention and the off switch.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Stripe from 'stripe';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  drained,
  getAs,
  operatorCommand,
  post,
  RELAY_SECRET,
  startRelay,
  stopRunning,
} from '../support/relay-process.ts';
import { until } from '../support/until.ts';

afterEach(stopRunning);

const OTHER_KEY = `other-sender-${randomBytes(12).toString('hex')}`;
const STRIPE_SECRET = `whsec_${randomBytes(24).toString('hex')}`;
const STRIPE = 'stripe-customers';
const stripe = new Stripe('sk_test_not_a_real_key');
const folder = mkdtempSync(join(tmpdir(), 'relay-e2e-outcomes-'));
const sourcesFile = join(folder, 'sources.json');
writeFileSync(
  sourcesFile,
  JSON.stringify({
    sources: {
      [STRIPE]: {
        verify: { scheme: 'stripe', secret: STRIPE_SECRET },
        filter: "type = 'customer.created'",
        map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
      },
    },
  }),
);
afterAll(() => rmSync(folder, { recursive: true, force: true }));

type Outcome = Record<string, unknown> & { eventId: string; status: string };

/** The outcome its sender reads: the answer's status, and its body. */
async function lookUp(url: string, eventId: string, apiKey?: string) {
  const { status, text } = await getAs(url, `/events/${encodeURIComponent(eventId)}`, apiKey);
  return { status, text, body: JSON.parse(text) as Outcome & { error?: { code: string } } };
}

/** Waits until `eventId`'s outcome, as its sender reads it, is `status`; resolves it. */
function outcomeOf(url: string, eventId: string, status: string, timeoutMs = 45_000) {
  let last = '';
  return until(
    async () => {
      const answer = await lookUp(url, eventId);
      last = answer.text;
      return answer.body.status === status ? answer.body : undefined;
    },
    timeoutMs,
    () => `${eventId} never ${status}: ${last}`,
  );
}

/** A Stripe webhook posted to the source as Stripe posts it. */
async function postStripe(url: string, id: string, type: string, email: string) {
  const payload = JSON.stringify({
    id,
    object: 'event',
    type,
    data: { object: { id: `cus_${id}`, object: 'customer', email } },
  });
  const response = await fetch(url.replace(/\/events$/, `/sources/${STRIPE}`), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'stripe-signature': stripe.webhooks.generateTestHeaderString({
        payload,
        secret: STRIPE_SECRET,
        timestamp: Math.floor(Date.now() / 1000),
      }),
    },
    body: payload,
  });
  return { status: response.status, text: await response.text() };
}

describe('npm start: what happened to each event', () => {
  it('answers every kind of event’s outcome to its sender and to the operator, with the ids Mautic holds and no value', async () => {
    const { sim, url, dir, output } = await startRelay(
      {},
      {
        SOURCES_FILE: sourcesFile,
        INGEST_API_KEYS: OTHER_KEY,
        RETRY_BASE_SECONDS: '2',
        RETRY_MAX_DELAY_SECONDS: '2',
        RETRY_HORIZON_SECONDS: '600',
      },
    );
    const env = { MAUTIC_RELAY_DIR: dir, MAUTIC_RELAY_HIDE_SECONDS: '2' };
    const bob = sim.seed('contacts', { email: 'bob@example.com', firstname: 'Bob' });
    const carol = sim.seed('contacts', { email: 'carol@example.com', firstname: 'Carol' });
    const dave = sim.seed('contacts', { email: 'dave@example.com', firstname: 'Dave' });
    const segment = sim.seed('segments', { name: 'Buyers', alias: 'buyers', isPublished: true });
    const campaign = sim.seed('campaigns', { name: 'Welcome', isPublished: true });
    const acme = sim.seed('companies', { companyname: 'Acme Corp' });
    const match = { email: 'dave@example.com' };
    const values = [
      'ann@example.com',
      'bob@example.com',
      'carol@example.com',
      'dave@example.com',
      'erin@example.com',
      'Annabel',
      'Carolina',
      'Oslo',
      'ZIP-4711',
      'Globex Inc',
      'Acme Corp',
      'bounced',
      RELAY_SECRET,
      OTHER_KEY,
      STRIPE_SECRET,
    ];

    // Every kind of event, in one request; the ids are the sender's own.
    const events = [
      {
        eventId: 'create-ann',
        entity: 'contacts',
        action: 'create',
        data: { email: 'ann@example.com', firstname: 'Annabel' },
      },
      {
        eventId: 'edit-bob',
        entity: 'contacts',
        action: 'edit',
        id: bob.id,
        data: { city: 'Oslo' },
      },
      {
        eventId: 'edit-carol',
        entity: 'contacts',
        action: 'edit',
        match: { email: 'carol@example.com' },
        data: { firstname: 'Carolina' },
      },
      {
        eventId: 'create-globex',
        entity: 'companies',
        action: 'create',
        data: { companyname: 'Globex Inc' },
      },
      {
        eventId: 'seg-add',
        entity: 'contacts',
        action: 'addToSegment',
        match,
        segmentId: segment.id,
      },
      {
        eventId: 'seg-remove',
        entity: 'contacts',
        action: 'removeFromSegment',
        match,
        segmentId: segment.id,
      },
      {
        eventId: 'camp-add',
        entity: 'contacts',
        action: 'addToCampaign',
        match,
        campaignId: campaign.id,
      },
      {
        eventId: 'camp-remove',
        entity: 'contacts',
        action: 'removeFromCampaign',
        match,
        campaignId: campaign.id,
      },
      { eventId: 'link', entity: 'contacts', action: 'linkCompany', match, companyId: acme.id },
      { eventId: 'unlink', entity: 'contacts', action: 'unlinkCompany', match, companyId: acme.id },
      {
        eventId: 'dnc-add',
        entity: 'contacts',
        action: 'addDoNotContact',
        match,
        reason: 'bounced',
      },
      { eventId: 'dnc-remove', entity: 'contacts', action: 'removeDoNotContact', match },
      { eventId: 'points-1', entity: 'contacts', action: 'addPoints', match, points: 7 },
      {
        eventId: 'unknown-segment',
        entity: 'contacts',
        action: 'addToSegment',
        match,
        segmentId: 9_999,
      },
    ];
    const accepted = await post(url, JSON.stringify(events));
    expect(accepted.status).toBe(202);

    // Read at once, before any delivery could have settled them all: queued, or further on.
    const early = await lookUp(url, 'create-globex');
    expect(early.status).toBe(200);
    expect(['queued', 'delivered']).toContain(early.body.status);

    const globex = await outcomeOf(url, 'create-globex', 'delivered');
    const letter = await outcomeOf(url, 'unknown-segment', 'dead_lettered');
    for (const event of events.slice(0, -1)) await outcomeOf(url, event.eventId, 'delivered');

    // Each delivered outcome names the record Mautic holds.
    const ann = sim.records('contacts').find((c) => c.email === 'ann@example.com');
    const company = sim.records('companies').find((c) => c.companyname === 'Globex Inc');
    const idsOf = async (eventId: string) => (await lookUp(url, eventId)).body.mauticIds;
    expect(await idsOf('create-ann')).toEqual([ann?.id]);
    expect(globex).toMatchObject({ mauticIds: [company?.id], httpStatus: 201, attempts: 1 });
    expect(await idsOf('edit-bob')).toEqual([bob.id]);
    expect(await idsOf('edit-carol')).toEqual([carol.id]);
    for (const event of events.slice(4, -1)) expect(await idsOf(event.eventId)).toEqual([dave.id]);
    expect(sim.records('contacts').find((c) => c.id === bob.id)?.city).toBe('Oslo');
    expect(sim.records('contacts').find((c) => c.id === dave.id)?.points).toBe(7);
    // The call it names is the one whose line names the event with its Mautic id.
    const callLine = output.find((line) => line.includes(`call ${globex.callId}:`));
    expect(callLine).toContain(`create-globex→#${company?.id}`);
    expect(letter).toMatchObject({
      reason: 'mautic_rejected_item',
      httpStatus: 404,
      detail: 'Mautic found no segment 9999',
      action: 'addToSegment',
    });

    // Another sender's credential: the same answer as an unknown id.
    const foreign = await lookUp(url, 'create-ann', OTHER_KEY);
    const unknown = await lookUp(url, 'never-sent');
    expect(foreign.status).toBe(404);
    expect(foreign.body.error?.code).toBe('unknown_event');
    expect(foreign.text).toBe(unknown.text);

    // The same addPoints event again (a sender's retry in a new request): skipped, applied once.
    expect((await post(url, JSON.stringify([events[12]]))).status).toBe(202);
    const skipped = await outcomeOf(url, 'points-1', 'skipped');
    expect(skipped.detail).toBe('an addPoints already applied for this event: not sent again');
    expect(sim.records('contacts').find((c) => c.id === dave.id)?.points).toBe(7);

    // Two edits of one company while the first is retried: they go out merged, the first
    // coalesced into the second.
    sim.inject({ path: '/api/companies/batch/edit' }, { status: 502, body: '' }, 3);
    const edit = (eventId: string, data: Record<string, unknown>) =>
      post(
        url,
        JSON.stringify([{ eventId, entity: 'companies', action: 'edit', id: acme.id, data }]),
      );
    expect((await edit('acme-city', { companycity: 'Oslo' })).status).toBe(202);
    const retrying = await outcomeOf(url, 'acme-city', 'retrying', 20_000);
    expect(retrying).toMatchObject({
      attempts: 1,
      lastFailure: { class: 'mautic_server', httpStatus: 502 },
    });
    expect(Date.parse(String(retrying.nextAttemptAt))).toBeGreaterThan(
      Date.parse(String(retrying.updatedAt)),
    );
    expect((await edit('acme-zip', { companyzipcode: 'ZIP-4711' })).status).toBe(202);
    const coalesced = await outcomeOf(url, 'acme-city', 'coalesced');
    expect(coalesced).toMatchObject({ into: 'acme-zip', attempts: 2 });
    expect(await outcomeOf(url, 'acme-zip', 'delivered')).toMatchObject({ mauticIds: [acme.id] });
    expect(sim.records('companies').find((c) => c.id === acme.id)).toMatchObject({
      companycity: 'Oslo',
      companyzipcode: 'ZIP-4711',
    });

    // A source's payload its filter refused, found by <source>:<key> by the operator.
    const ignored = await postStripe(url, 'evt_skip_1', 'invoice.paid', 'erin@example.com');
    expect(ignored).toEqual({ status: 202, text: '{"accepted":0,"eventIds":[],"ignored":true}' });
    // And one it maps: found by the id its answer gave.
    const mapped = await postStripe(url, 'evt_new_1', 'customer.created', 'erin@example.com');
    expect(JSON.parse(mapped.text).eventIds).toEqual([`${STRIPE}:evt_new_1:0`]);
    await until(
      async () =>
        (await drained(dir)) && sim.records('contacts').some((c) => c.email === 'erin@example.com'),
      30_000,
      'the queue drained',
    );
    const erin = sim.records('contacts').find((c) => c.email === 'erin@example.com');

    // The operator's view: the same outcomes, every sender's, each named with its sender.
    const shown = await operatorCommand(
      [
        'events',
        'show',
        'create-ann',
        'acme-city',
        'unknown-segment',
        `${STRIPE}:evt_skip_1`,
        `${STRIPE}:evt_new_1:0`,
        '--local',
        '--json',
      ],
      env,
    );
    expect(shown.code).toBe(0);
    const operator = JSON.parse(shown.out).events as Outcome[];
    // Its sender label names the credential's id: the local stack's generated secret's.
    const sender = 'webhook#webhook-secret-1';
    expect(operator.map((o) => [o.eventId, o.status, o.sender])).toEqual([
      ['create-ann', 'delivered', sender],
      ['acme-city', 'coalesced', sender],
      ['unknown-segment', 'dead_lettered', sender],
      [`${STRIPE}:evt_skip_1`, 'ignored', `source:${STRIPE}`],
      [`${STRIPE}:evt_new_1:0`, 'delivered', `source:${STRIPE}`],
    ]);
    expect(operator[4]?.mauticIds).toEqual([erin?.id]);
    const { sender: _, ...asOperatorSees } = operator[0] as Outcome;
    expect(asOperatorSees).toEqual((await lookUp(url, 'create-ann')).body);
    const listed = await operatorCommand(
      ['events', 'list', '--local', '--status', 'dead_lettered'],
      env,
    );
    expect(listed.out).toContain(
      `unknown-segment (from ${sender}): mautic_rejected_item 404, Mautic found no segment 9999`,
    );
    const letters = await operatorCommand(['dead-letters', '--local'], env);
    expect(letters.out).toContain(
      'What became of each event: npx mautic-relay events show EVENT_ID --local',
    );

    // No answer, no command's output and no line of the relay holds a value or a secret.
    const answers = await Promise.all(
      [...events.map((e) => e.eventId), 'acme-city', 'acme-zip'].map(
        async (id) => (await lookUp(url, id)).text,
      ),
    );
    // The relay's own lines from when it was ready (its banner shows a sample command).
    const lines = output.slice(output.findIndex((line) => line.startsWith('Ready:')));
    const everything = [...answers, shown.out, listed.out, letters.out, ...lines].join('\n');
    for (const value of values) expect(everything, value).not.toContain(value);
  }, 240_000);

  it('forgets an outcome past OUTCOME_RETENTION_SECONDS', async () => {
    const { url } = await startRelay({}, { OUTCOME_RETENTION_SECONDS: '3' });
    const event = {
      eventId: 'short-lived',
      entity: 'contacts',
      action: 'create',
      data: { email: 'x@example.com' },
    };
    expect((await post(url, JSON.stringify([event]))).status).toBe(202);
    await outcomeOf(url, 'short-lived', 'delivered');

    const gone = await until(
      async () => {
        const answer = await lookUp(url, 'short-lived');
        return answer.status === 404 ? answer : undefined;
      },
      15_000,
      'the outcome outlived its retention',
    );
    expect(gone.body.error?.code).toBe('unknown_event');
  }, 90_000);

  it('keeps none with OUTCOME_RETENTION_SECONDS=0, and says so to senders and operators', async () => {
    const { sim, url, dir, output } = await startRelay({}, { OUTCOME_RETENTION_SECONDS: '0' });
    const event = {
      eventId: 'kept-nowhere',
      entity: 'contacts',
      action: 'create',
      data: { email: 'y@example.com' },
    };
    expect((await post(url, JSON.stringify([event]))).status).toBe(202);
    await until(() => sim.records('contacts').length === 1, 30_000, 'not delivered');

    const answer = await lookUp(url, 'kept-nowhere');
    const shown = await operatorCommand(['events', 'show', 'kept-nowhere', '--local'], {
      MAUTIC_RELAY_DIR: dir,
    });

    expect(answer.status).toBe(404);
    expect(answer.body.error?.code).toBe('outcomes_disabled');
    expect(shown.code).toBe(1);
    expect(shown.err).toContain('keeps no outcomes of events (OUTCOME_RETENTION_SECONDS=0)');
    expect(output).toContain('  outcomes:      off (OUTCOME_RETENTION_SECONDS=0)');
    // The log still answers: the call's line names the event with its Mautic id. Written once
    // Mautic's answer is read, so it may come after the simulator holds the contact.
    const id = sim.records('contacts')[0]?.id;
    await until(
      () => output.some((line) => line.includes(`kept-nowhere→#${id}`)),
      15_000,
      () => `a line naming kept-nowhere→#${id} in:\n${output.join('\n')}`,
    );
  }, 90_000);
});
