import { describe, expect, it } from 'vitest';
import { decideItem, unrepeatable } from '../../../functions/core/delivery/answer-policy.ts';
import {
  type CallSituation,
  type Decision,
  decideAfterFailure,
  heldBehind,
  isUnexpected,
  type MessageOutcome,
  noCallNow,
} from '../../../functions/core/delivery/failure-policy.ts';
import {
  MauticAuthError,
  MauticBatchLimitError,
  MauticPermanentError,
  MauticRateLimitError,
  MauticResponseError,
  MauticTransientError,
} from '../../../functions/core/errors.ts';
import type { ItemResult } from '../../../functions/core/ports.ts';
import {
  decideRequeue,
  IN_CALL_RETRY,
  inCallBackoffMs,
  jittered,
  MAX_VISIBILITY_DELAY_SECONDS,
  type RetryPolicy,
  retryDelaySeconds,
} from '../../../functions/core/retry-policy.ts';

const NOW = Date.parse('2026-11-25T12:00:00Z');
const at = { method: 'POST', path: '/api/contacts/batch/new' };

/** A call of 10 contact creates on its first attempt, with a minute left for calls. */
function situation(overrides: Partial<CallSituation> = {}): CallSituation {
  return {
    entity: 'contacts',
    action: 'create',
    items: 10,
    attempt: 1,
    token: 'cached',
    now: NOW,
    callsUntil: NOW + 60_000,
    halt: {},
    random: () => 0.5,
    ...overrides,
  };
}

const server = (status = 500) => new MauticTransientError({ ...at, kind: 'server', status });
const refused = (status: number, mauticMessage?: string) =>
  new MauticPermanentError({ ...at, status, mauticMessage });
const retryOutcome = (error: Error, reason: string, status?: number): MessageOutcome => ({
  kind: 'retry',
  reason,
  ...(status === undefined ? {} : { status }),
  message: `${error.name}: ${error.message}`,
});
const retryOf = (error: Error, reason: string, status?: number): Decision => ({
  kind: 'settle',
  outcome: retryOutcome(error, reason, status),
});

// One row per rule of contract §2 that a failed Mautic call can meet.
const afterFailure: Array<{
  rule: string;
  error: unknown;
  situation?: Partial<CallSituation>;
  decision: Decision;
}> = [
  {
    rule: 'a 401 re-reads the token past the cache (tokens never cost an event a try)',
    error: new MauticAuthError({ ...at, reason: 'token_expired' }),
    decision: { kind: 'renew_token', token: 'reread' },
  },
  {
    rule: 'a second 401 waits for a newer token from the refresher',
    error: new MauticAuthError({ ...at, reason: 'token_expired' }),
    situation: { token: 'reread' },
    decision: { kind: 'renew_token', token: 'refused' },
  },
  {
    rule: 'a 401 after the refresher renewed the token leaves the run to the queue',
    error: new MauticAuthError({ ...at, reason: 'token_invalid' }),
    situation: { token: 'refused' },
    decision: {
      kind: 'settle',
      outcome: { kind: 'retry', reason: 'unauthorized_token_invalid' },
      halt: { unauthorized: 'unauthorized_token_invalid' },
    },
  },
  {
    rule: 'a 429 whose reset is near is waited for inside the invocation, and no call of the run starts before it',
    error: new MauticRateLimitError({ ...at, resetAt: NOW + 4_000, limit: 2 }),
    decision: {
      kind: 'wait',
      untilMs: NOW + 4_000,
      halt: { rateLimitedUntil: NOW + 4_000 },
    },
  },
  {
    rule: 'a 429 whose reset comes after the time for calls comes back then through the queue, and halts the run',
    error: new MauticRateLimitError({ ...at, resetAt: NOW + 4_000, limit: 2 }),
    situation: { callsUntil: NOW + 3_000 },
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: NOW + 4_000,
        status: 429,
        message: `MauticRateLimitError: POST /api/contacts/batch/new failed with status 429 (rate limited; resets at ${new Date(NOW + 4_000).toISOString()})`,
      },
      halt: { rateLimitedUntil: NOW + 4_000 },
    },
  },
  {
    rule: 'a 429 without a reset time waits the default delay',
    error: new MauticRateLimitError({ ...at, resetAt: undefined, limit: undefined }),
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'retry',
        reason: 'rate_limited',
        notBefore: NOW + IN_CALL_RETRY.defaultRateLimitDelayMs,
        status: 429,
        message:
          'MauticRateLimitError: POST /api/contacts/batch/new failed with status 429 (rate limited)',
      },
      halt: { rateLimitedUntil: NOW + IN_CALL_RETRY.defaultRateLimitDelayMs },
    },
  },
  {
    rule: 'a 409 is a record a user has open for editing (Mautic 7): to the queue, with no alert',
    error: refused(409, 'Welcome is currently checked out by Admin User'),
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'retry',
        reason: 'mautic_locked',
        status: 409,
        message:
          'MauticPermanentError: POST /api/contacts/batch/new failed with status 409 (Welcome is currently checked out by Admin User)',
      },
    },
  },
  {
    rule: "Mautic's batch limit splits the call and is remembered",
    error: new MauticBatchLimitError({ ...at, limit: 3 }),
    decision: { kind: 'split', size: 3, learnedLimit: 3 },
  },
  {
    rule: 'a batch limit split never keeps more than half of the call',
    error: new MauticBatchLimitError({ ...at, limit: 8 }),
    decision: { kind: 'split', size: 5, learnedLimit: 5 },
  },
  {
    rule: 'a whole-call 422 halves the call to find the item at fault',
    error: refused(422, 'Invalid'),
    decision: { kind: 'split', size: 5 },
  },
  {
    rule: 'a whole-call 413 halves the call too',
    error: refused(413),
    situation: { items: 3 },
    decision: { kind: 'split', size: 2 },
  },
  {
    rule: 'the item at fault of a whole-call 400 is dead-lettered alone',
    error: refused(400, 'Bad request'),
    situation: { items: 1 },
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'rejected',
        reason: 'mautic_refused_item',
        status: 400,
        message: 'POST /api/contacts/batch/new failed with status 400 (Bad request)',
      },
    },
  },
  {
    rule: "Mautic's 404 for a path it has no route for: the entity does not exist",
    error: refused(404, 'Requested URL not found: /api/gadgets/batch/new'),
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'rejected',
        reason: 'mautic_unknown_entity',
        status: 404,
        message:
          'POST /api/contacts/batch/new failed with status 404 (Requested URL not found: /api/gadgets/batch/new)',
      },
    },
  },
  {
    rule: 'a 403 is configuration, not the events: back to the queue, loudly',
    error: refused(403, 'No access'),
    decision: {
      kind: 'settle',
      outcome: { kind: 'retry', reason: 'mautic_refused_403' },
      alert: {
        message: "Mautic refused the call; check the base URL and the API user's permissions",
        details: {
          entity: 'contacts',
          action: 'create',
          status: 403,
          error:
            'MauticPermanentError: POST /api/contacts/batch/new failed with status 403 (No access)',
        },
      },
    },
  },
  {
    rule: 'a 5xx backs off (equal jitter) and calls again while attempts and time remain',
    error: server(503),
    decision: { kind: 'call_again', afterMs: 150 },
  },
  {
    rule: 'the backoff doubles per attempt',
    error: server(503),
    situation: { attempt: 2, items: 1 },
    decision: { kind: 'call_again', afterMs: 300 },
  },
  {
    rule: 'a 5xx after the last attempt goes back to the queue with the failure',
    error: server(500),
    situation: { attempt: IN_CALL_RETRY.maxAttempts, items: 1 },
    decision: retryOf(server(500), 'mautic_server', 500),
  },
  {
    rule: 'a whole-call 5xx repeated on a call of several items: narrow it down by halves',
    error: server(500),
    situation: { attempt: 2, items: 8 },
    decision: { kind: 'narrow', outcome: retryOutcome(server(500), 'mautic_server', 500) },
  },
  {
    rule: 'while narrowing, a part that fails with a 5xx is narrowed again at once',
    error: server(502),
    situation: { attempt: 1, items: 1, narrowing: true },
    decision: { kind: 'narrow', outcome: retryOutcome(server(502), 'mautic_server', 502) },
  },
  {
    rule: 'a 503 that says when to come back is waited for when near, not narrowed',
    error: new MauticTransientError({ ...at, kind: 'server', status: 503, retryAt: NOW + 2_000 }),
    situation: { attempt: 2, items: 8 },
    decision: { kind: 'wait', untilMs: NOW + 2_000, halt: { rateLimitedUntil: NOW + 2_000 } },
  },
  {
    rule: 'a 503 that says to come back later than the run may wait: back to the queue until then',
    error: new MauticTransientError({ ...at, kind: 'server', status: 503, retryAt: NOW + 600_000 }),
    decision: {
      kind: 'settle',
      outcome: {
        kind: 'retry',
        reason: 'mautic_server',
        notBefore: NOW + 600_000,
        status: 503,
        message: `MauticTransientError: POST /api/contacts/batch/new failed with status 503 (server; back at ${new Date(NOW + 600_000).toISOString()})`,
      },
      halt: { rateLimitedUntil: NOW + 600_000 },
    },
  },
  {
    rule: 'a 5xx with no time left for the backoff goes back to the queue',
    error: server(502),
    situation: { callsUntil: NOW + 100 },
    decision: retryOf(server(502), 'mautic_server', 502),
  },
  {
    rule: 'a call aborted at the deadline goes back to the queue at once',
    error: new MauticTransientError({ ...at, kind: 'aborted', possiblyApplied: true }),
    situation: { action: 'edit' },
    decision: retryOf(
      new MauticTransientError({ ...at, kind: 'aborted', possiblyApplied: true }),
      'mautic_aborted',
    ),
  },
  {
    rule: 'an answer that cannot be read is retried as transient',
    error: new MauticResponseError('a body that is not JSON', {
      ...at,
      status: 502,
      retryable: true,
    }),
    situation: { attempt: 3 },
    decision: retryOf(
      new MauticResponseError('a body that is not JSON', { ...at, status: 502, retryable: true }),
      'mautic_bad_response',
      502,
    ),
  },
  {
    rule: 'an error the policy does not know is retried as unexpected',
    error: new TypeError('boom'),
    situation: { attempt: 3 },
    decision: retryOf(new TypeError('boom'), 'unexpected_error'),
  },
];

describe('decideAfterFailure', () => {
  it.each(afterFailure)('$rule', ({ error, situation: overrides, decision }) => {
    expect(decideAfterFailure(error, situation(overrides))).toEqual(decision);
  });

  it('keeps the later reset when another chunk of the run was already rate-limited longer', () => {
    const decision = decideAfterFailure(
      new MauticRateLimitError({ ...at, resetAt: NOW + 1_000, limit: 2 }),
      situation({ halt: { rateLimitedUntil: NOW + 20_000 } }),
    );
    expect(decision).toMatchObject({
      outcome: { notBefore: NOW + 20_000 },
      halt: { rateLimitedUntil: NOW + 20_000 },
    });
  });

  it('uses the run’s own in-call retry settings when given', () => {
    const retry = { ...IN_CALL_RETRY, maxAttempts: 1 };
    expect(decideAfterFailure(server(), situation({ retry }))).toMatchObject({ kind: 'settle' });
  });

  it('tells unexpected failures from the ones it knows, for the error log', () => {
    expect(isUnexpected(new TypeError('boom'))).toBe(true);
    for (const known of [server(), refused(403), new MauticBatchLimitError({ ...at, limit: 1 })])
      expect(isUnexpected(known)).toBe(false);
  });
});

describe('unrepeatable (no blind re-send of a create that may have happened)', () => {
  const timeout = new MauticTransientError({ ...at, kind: 'timeout', possiblyApplied: true });
  const segment = { payload: { name: 'Buyers' } };
  const company = { payload: { companyname: 'Acme' } };
  const contact = { payload: { email: 'a@example.com' } };
  const anonymous = { payload: { firstname: 'Ann' } };

  it('dead-letters a create Mautic may have applied, unless a repeat cannot double it (a contact’s email, a company’s unique name)', () => {
    const result = unrepeatable(timeout, { entity: 'contacts', action: 'create' }, [
      contact,
      anonymous,
    ]);
    expect(result?.items).toEqual([anonymous]);
    expect(result?.outcome).toEqual({
      kind: 'rejected',
      reason: 'ambiguous_result',
      message: `Mautic may have created this record; its answer cannot tell (MauticTransientError: ${timeout.message})`,
    });
    expect(
      unrepeatable(timeout, { entity: 'segments', action: 'create' }, [segment])?.items,
    ).toEqual([segment]);
    // A repeated company create with a name is refused (5.1, 5.2.0) or upserted (5.2.1 to 7),
    // never doubled, on a version its answers named; with an unknown one it is not repeated.
    const companies = [company, { payload: {} }];
    const on = (mauticVersion?: string) =>
      unrepeatable(timeout, { entity: 'companies', action: 'create', mauticVersion }, companies)
        ?.items;
    for (const known of ['5.1.1', '5.2.0', '5.2.1', '6.0.3', '7.0.0'])
      expect(on(known), known).toEqual([{ payload: {} }]);
    for (const unknown of [undefined, '4.4.12', '8.0.0-dev', 'unknown'])
      expect(on(unknown), unknown).toEqual(companies);
  });

  it('sends again what cannot have been applied, and edits and deletes', () => {
    const notSent = new MauticTransientError({ ...at, kind: 'network', possiblyApplied: false });
    expect(
      unrepeatable(notSent, { entity: 'segments', action: 'create' }, [segment]),
    ).toBeUndefined();
    expect(
      unrepeatable(timeout, { entity: 'segments', action: 'edit' }, [segment]),
    ).toBeUndefined();
    expect(
      unrepeatable(timeout, { entity: 'segments', action: 'delete' }, [segment]),
    ).toBeUndefined();
    const garbled = new MauticResponseError('a body that is not JSON', {
      ...at,
      status: 201,
      retryable: false,
    });
    expect(
      unrepeatable(garbled, { entity: 'segments', action: 'create' }, [segment])?.items,
    ).toEqual([segment]);
  });
});

describe('decideItem', () => {
  const rows: Array<{
    rule: string;
    result: ItemResult | undefined;
    merged?: boolean;
    unrepeatable?: boolean;
    perPair?: boolean;
    to: unknown;
  }> = [
    {
      rule: 'a saved item is delivered',
      result: { kind: 'delivered', status: 201, id: 7 },
      to: { kind: 'settle', outcome: { kind: 'delivered', status: 201, id: 7 } },
    },
    {
      rule: 'a delete of an id Mautic does not have counts as delivered',
      result: { kind: 'delivered', status: 404, id: 9 },
      to: { kind: 'settle', outcome: { kind: 'delivered', status: 404, id: 9 } },
    },
    ...[400, 403, 404, 422].map((status) => ({
      rule: `a per-item ${status} is refused for good`,
      result: { kind: 'rejected' as const, status, message: 'no' },
      to: {
        kind: 'settle',
        outcome: { kind: 'rejected', reason: 'mautic_rejected_item', status, message: 'no' },
      },
    })),
    {
      rule: 'a per-item 5xx is not the event’s own: back to the queue',
      result: { kind: 'rejected', status: 500, message: 'oops' },
      to: { kind: 'settle', outcome: { kind: 'retry', reason: 'mautic_item_500' } },
    },
    {
      rule: 'a per-item 409 is a record a user has open (Mautic 7): back to the queue, with why',
      result: { kind: 'rejected', status: 409, message: 'Welcome is currently checked out' },
      to: {
        kind: 'settle',
        outcome: {
          kind: 'retry',
          reason: 'mautic_locked',
          status: 409,
          message: 'Welcome is currently checked out',
        },
      },
    },
    {
      rule: 'a company link a bulk call refuses with 403 is a per-pair call’s 403: back to the queue, loudly',
      result: { kind: 'rejected', status: 403, message: 'Access denied (contact 2, company 1)' },
      perPair: true,
      to: {
        kind: 'settle',
        outcome: {
          kind: 'retry',
          reason: 'mautic_refused_403',
          status: 403,
          message: 'Access denied (contact 2, company 1)',
        },
        alert: {
          message: "Mautic refused a contact's company link; check the API user's permissions",
          details: { status: 403, error: 'Access denied (contact 2, company 1)' },
        },
      },
    },
    {
      rule: 'an item Mautic did not answer for goes back to the queue',
      result: undefined,
      to: { kind: 'settle', outcome: { kind: 'retry', reason: 'no_result' } },
    },
    {
      rule: 'a merged item refused as invalid is sent again event by event',
      result: { kind: 'rejected', status: 422, message: 'invalid' },
      merged: true,
      to: { kind: 'one_by_one' },
    },
    {
      rule: 'a merged item refused as not allowed is refused for all its events',
      result: { kind: 'rejected', status: 403, message: 'no' },
      merged: true,
      to: {
        kind: 'settle',
        outcome: { kind: 'rejected', reason: 'mautic_rejected_item', status: 403, message: 'no' },
      },
    },
    {
      rule: 'a per-item 5xx of a create Mautic does not upsert may follow its save: ambiguous_result',
      result: { kind: 'rejected', status: 500, message: 'listener failed' },
      unrepeatable: true,
      to: {
        kind: 'settle',
        outcome: {
          kind: 'rejected',
          reason: 'ambiguous_result',
          message:
            'Mautic may have created this record; it answered 500 for this item (listener failed)',
        },
      },
    },
    {
      rule: 'a per-item 5xx of an upserted create or an edit is retried',
      result: { kind: 'rejected', status: 500, message: 'listener failed' },
      to: { kind: 'settle', outcome: { kind: 'retry', reason: 'mautic_item_500' } },
    },
    {
      rule: 'a per-item 4xx of a create is refused as usual',
      result: { kind: 'rejected', status: 422, message: 'invalid' },
      unrepeatable: true,
      to: {
        kind: 'settle',
        outcome: {
          kind: 'rejected',
          reason: 'mautic_rejected_item',
          status: 422,
          message: 'invalid',
        },
      },
    },
  ];

  it.each(rows)('$rule', ({ result, merged, unrepeatable, perPair, to }) => {
    const item = {
      merged: merged ?? false,
      unrepeatable: unrepeatable ?? false,
      perPair: perPair ?? false,
    };
    expect(decideItem(result, item)).toEqual(to);
  });

  it('dead-letters a value another record holds as duplicate, naming the field, never the value', () => {
    const refused: ItemResult = {
      kind: 'rejected',
      status: 422,
      message: 'companyname: This field must be unique.',
    };

    expect(decideItem(refused, { merged: false, unrepeatable: false })).toEqual({
      kind: 'settle',
      outcome: {
        kind: 'rejected',
        reason: 'duplicate',
        status: 422,
        message:
          "companyname: This field must be unique. Another record has this companyname (ignoring case and trailing spaces), perhaps this event's own earlier try.",
      },
    });
  });
});

describe('heldBehind (order per record)', () => {
  it('leaves a later event to the queue behind its earlier one, not before it comes back', () => {
    expect(
      heldBehind([
        { kind: 'retry', reason: 'mautic_server', message: 'busy' },
        { kind: 'retry', reason: 'rate_limited', notBefore: NOW + 9_000 },
      ]),
    ).toEqual({
      kind: 'retry',
      reason: 'earlier_event_pending',
      notBefore: NOW + 9_000,
      message: 'An earlier event of the same record went back to the queue (mautic_server: busy)',
    });
    expect(heldBehind([{ kind: 'retry', reason: 'no_token' }])).toEqual({
      kind: 'retry',
      reason: 'earlier_event_pending',
      message: 'An earlier event of the same record went back to the queue (no_token)',
    });
  });
});

describe('noCallNow', () => {
  it.each([
    {
      rule: 'a rate-limited run waits for a near reset before its next call',
      halt: { rateLimitedUntil: NOW + 5_000, unauthorized: 'unauthorized_token_invalid' },
      outcome: { kind: 'wait', untilMs: NOW + 5_000 },
    },
    {
      rule: 'a rate-limited run makes no more calls until a reset further off than it may wait',
      halt: { rateLimitedUntil: NOW + 50_000 },
      outcome: { kind: 'retry', reason: 'rate_limited', notBefore: NOW + 50_000 },
    },
    {
      rule: 'calls start again once the reset has passed',
      halt: { rateLimitedUntil: NOW - 1 },
      outcome: undefined,
    },
    {
      rule: 'a run whose renewed token was refused makes no more calls',
      halt: { unauthorized: 'unauthorized_access_denied' },
      outcome: { kind: 'retry', reason: 'unauthorized_access_denied' },
    },
    {
      rule: 'no call starts past the deadline margin',
      halt: {},
      now: NOW + 60_001,
      outcome: { kind: 'retry', reason: 'deadline' },
    },
    {
      rule: 'no call starts once the invocation is being aborted',
      halt: {},
      aborted: true,
      outcome: { kind: 'retry', reason: 'deadline' },
    },
    { rule: 'otherwise the call may start', halt: {}, outcome: undefined },
  ])('$rule', ({ halt, now, aborted, outcome }) => {
    expect(noCallNow(halt, now ?? NOW, NOW + 60_000, aborted ?? false)).toEqual(outcome);
  });
});

describe('decideRequeue', () => {
  const policy: RetryPolicy = {
    baseSeconds: 30,
    maxDelaySeconds: 900,
    horizonSeconds: 86_400,
    maxReceiveCount: 200,
  };
  const options = { now: NOW, policy, maxDelaySeconds: 3_600, random: () => 0 };
  const fresh = { receives: 1, firstReceivedAt: NOW - 1_000 };
  const retry = (extra: Partial<MessageOutcome & { kind: 'retry' }> = {}) => ({
    kind: 'retry' as const,
    reason: 'mautic_server',
    ...extra,
  });

  it.each([
    {
      rule: 'a retried event comes back after the exponential backoff for its receive count',
      outcome: retry(),
      message: { receives: 3, firstReceivedAt: NOW - 60_000 },
      requeue: { kind: 'delay', seconds: retryDelaySeconds(policy, 3, 0), reason: 'mautic_server' },
    },
    {
      rule: 'a 429 that says when to come back is retried at that time, not later',
      outcome: retry({ reason: 'rate_limited', notBefore: NOW + 120_000 }),
      message: fresh,
      requeue: { kind: 'delay', seconds: 120, reason: 'rate_limited' },
    },
    {
      rule: 'a reset sooner than the backoff of a late receive: at the reset, not on the exponential schedule',
      outcome: retry({ reason: 'rate_limited', notBefore: NOW + 3_500 }),
      message: { receives: 6, firstReceivedAt: NOW - 600_000 },
      requeue: { kind: 'delay', seconds: 4, reason: 'rate_limited' },
    },
    {
      // Not at once: a Mautic whose resets are always past would have the event back in a loop.
      rule: 'a reset already past: back after the backoff, never at once',
      outcome: retry({ reason: 'rate_limited', notBefore: NOW - 1_000 }),
      message: { receives: 4, firstReceivedAt: NOW - 60_000 },
      requeue: { kind: 'delay', seconds: 120, reason: 'rate_limited' },
    },
    {
      rule: 'a reset beyond the longest delay is capped',
      outcome: retry({ reason: 'rate_limited', notBefore: NOW + 86_400_000 }),
      message: fresh,
      requeue: { kind: 'delay', seconds: 3_600, reason: 'rate_limited' },
    },
    {
      rule: 'a message with no outcome (delivery stopped before it) is retried',
      outcome: undefined,
      message: fresh,
      requeue: { kind: 'delay', seconds: 15, reason: 'no_outcome' },
    },
    {
      rule: 'past the retry horizon the event is dead-lettered with its last failure',
      outcome: retry({ status: 503, message: 'MauticTransientError: busy' }),
      message: { receives: 90, firstReceivedAt: NOW - 86_400_000 },
      requeue: {
        kind: 'dead_letter',
        reason: 'retry_horizon_exceeded',
        detail: 'retried for 86400 s; last failure: MauticTransientError: busy',
        status: 503,
      },
    },
  ])('$rule', ({ outcome, message, requeue }) => {
    expect(decideRequeue(outcome, message, options)).toEqual(requeue);
  });

  it('never asks for a visibility delay SQS refuses (12 h after the receive)', () => {
    const long = { ...options, maxDelaySeconds: 43_200 };
    const requeue = decideRequeue(
      retry({ reason: 'rate_limited', notBefore: NOW + 43_200_000 }),
      fresh,
      long,
    );
    expect(requeue).toEqual({
      kind: 'delay',
      seconds: MAX_VISIBILITY_DELAY_SECONDS,
      reason: 'rate_limited',
    });
  });
});

describe('the one jitter scheme', () => {
  it('draws from the upper half of the step, in the call and between receives', () => {
    expect([jittered(100, 0), jittered(100, 0.5), jittered(100, 0.999)]).toEqual([50, 75, 99.95]);
    const options = { baseBackoffMs: 200, maxBackoffMs: 5_000 };
    expect([1, 2, 3, 10].map((attempt) => inCallBackoffMs(options, attempt, 0))).toEqual([
      100, 200, 400, 2_500,
    ]);
    const policy = { baseSeconds: 30, maxDelaySeconds: 900, horizonSeconds: 1, maxReceiveCount: 9 };
    expect([1, 2, 99].map((receives) => retryDelaySeconds(policy, receives, 0))).toEqual([
      15, 30, 450,
    ]);
  });
});
