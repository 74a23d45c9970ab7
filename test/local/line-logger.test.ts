import { describe, expect, it } from 'vitest';
import { LineLogger } from '../../infra/local/line-logger.ts';

function logger() {
  const lines: string[] = [];
  return { lines, log: new LineLogger({ print: (line) => lines.push(line), debug: false }) };
}

const call = (fields: Record<string, unknown>) => ({
  event: 'mautic_call',
  entity: 'contacts',
  action: 'edit',
  durationMs: 12,
  ...fields,
});

describe('LineLogger', () => {
  it('never prints the invocation event, whatever asks for it, even at DEBUG', () => {
    const lines: string[] = [];
    const log = new LineLogger({ print: (line) => lines.push(line), debug: true });
    const event = {
      headers: { authorization: 'Bearer key-that-must-not-print', 'webhook-signature': 'v1,c2ln' },
      body: '{"data":{"email":"ann@example.com"}}',
    };

    // `true` overrides POWERTOOLS_LOGGER_LOG_EVENT: Powertools would log the event.
    log.logEventIfEnabled(event, true);
    log.debug('after the event');

    expect(lines).toEqual(['after the event {}']);
  });

  it('says delivered only when every item was, with record ids in runs', () => {
    const { lines, log } = logger();
    log.info('Mautic call', call({ items: 5, statuses: { 200: 5 }, ids: [3, 1, 2, 7, 9] }));
    log.info('Mautic call', call({ items: 1, statuses: { 201: 1 }, ids: [4] }));
    expect(lines).toEqual([
      'delivered contacts edit: 5 items, 200×5, ids 1-3 7 9, 12 ms',
      'delivered contacts edit: 1 item, 201×1, ids 4, 12 ms',
    ]);
  });

  it('shows a per-item 404 on an edit as refused, with the ids that were delivered', () => {
    const { lines, log } = logger();
    log.info('Mautic call', call({ items: 3, statuses: { 200: 2, 404: 1 }, ids: [5, 6] }));
    log.info('Mautic call', call({ items: 2, statuses: { 404: 2 }, ids: [] }));
    expect(lines).toEqual([
      'refused 1 of contacts edit: 3 items, 200×2 404×1, delivered ids 5-6, 12 ms',
      'refused 2 of contacts edit: 2 items, 404×2, 12 ms',
    ]);
  });

  it('tells a person at the terminal when Mautic’s circuit opens and closes, and when its calls are paced', () => {
    const { lines, log } = logger();
    const at = Date.parse('2026-12-01T10:00:20Z');
    log.warn("Mautic's circuit changed", {
      event: 'mautic_circuit',
      circuit: 'open',
      nextProbeAt: at,
      lastFailure: 'POST /api/contacts/batch/new failed with status 503',
    });
    log.warn('Calls in flight to Mautic paced', {
      event: 'mautic_paced',
      callsInFlight: 1,
      msPerItem: 12.34,
      usualMsPerItem: 1.2,
    });
    log.info("Mautic's circuit changed", { event: 'mautic_circuit', circuit: 'closed' });

    expect(lines).toEqual([
      'Mautic circuit open, next probe 2026-12-01T10:00:20.000Z (POST /api/contacts/batch/new failed with status 503)',
      'Mautic paced: 1 calls in flight (12.3 ms per item, usual 1.2)',
      'Mautic circuit closed: calls go',
    ]);
  });

  it("names the call and every item's event ids with Mautic's id, or its status when refused", () => {
    const { lines, log } = logger();
    log.info(
      'Mautic call',
      call({
        callId: 'c1',
        items: 3,
        statuses: { 200: 2, 404: 1 },
        ids: [5, 6],
        events: [
          { eventIds: ['ev-1'], status: 200, id: 5 },
          { eventIds: ['ev-2', 'ev-3'], status: 200, id: 6 },
          { eventIds: ['ev-4'], status: 404 },
        ],
      }),
    );
    log.warn('Mautic call failed', {
      event: 'mautic_call_failed',
      callId: 'c2',
      entity: 'contacts',
      action: 'edit',
      items: 2,
      error: 'MauticTransientError: timeout',
      eventIds: ['ev-5', 'ev-6'],
    });

    expect(lines).toEqual([
      'refused 1 of contacts edit: 3 items, 200×2 404×1, delivered ids 5-6, 12 ms; call c1: ev-1→#5 ev-2+ev-3→#6 ev-4→404',
      'failed contacts edit: 2 items, MauticTransientError: timeout; call c2: ev-5 ev-6',
    ]);
  });

  it("names a source's payload that could not be mapped by its source, and an event by entity and action", () => {
    const { lines, log } = logger();
    const kept = { event: 'dead_lettered', reason: 'mapping_failed' };
    log.warn('A payload could not be mapped', {
      ...kept,
      eventId: 'shopify:abc',
      source: 'shopify',
    });
    log.warn('Dead-lettered', {
      event: 'dead_lettered',
      eventId: 'e1',
      entity: 'contacts',
      action: 'edit',
      reason: 'mautic_rejected_item',
      status: 404,
    });
    expect(lines).toEqual([
      'dead-lettered shopify:abc (source shopify): mapping_failed',
      'dead-lettered e1 (contacts edit): mautic_rejected_item 404',
    ]);
  });

  it('shortens a long id list', () => {
    const { lines, log } = logger();
    const ids = Array.from({ length: 30 }, (_, i) => i * 2);
    log.info('Mautic call', call({ items: 30, statuses: { 200: 30 }, ids }));
    expect(lines[0]).toMatch(/ids 0 2 4 .* 38 …, 12 ms$/);
  });

  it('prints one line per refused request with status, error code and request id; none for a 2xx', () => {
    const { lines, log } = logger();
    log.refusedRequest({ statusCode: 202, body: '{"accepted":1}' }, 'r1');
    log.refusedRequest(
      { statusCode: 422, body: JSON.stringify({ error: { code: 'invalid_event', message: 'x' } }) },
      'r2',
    );
    log.refusedRequest({ statusCode: 500, body: 'not json' }, 'r3');
    expect(lines).toEqual(['refused request r2: 422 invalid_event', 'refused request r3: 500 ?']);
  });
});
