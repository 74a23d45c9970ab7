// The Events view: an event's outcome by id (`events show ID…`), or the newest outcomes a filter
// matches (`events list`), as the command's --json gives them: ids, statuses and times only,
// never a record's value.

import { $, api, at, element, formFilters, table } from './console-page.js';

const STATUS_WORDS = {
  queued: 'queued',
  retrying: 'retrying',
  delivered: 'delivered',
  dead_lettered: 'dead-lettered',
  ignored: 'ignored',
  skipped: 'skipped',
  coalesced: 'coalesced',
};

const COLUMNS = [
  ['eventId', 'Event id'],
  ['sender', 'Sender'],
  ['status', 'Status'],
  ['entity', 'Entity'],
  ['action', 'Action'],
  ['mauticIds', 'Mautic ids'],
  ['attempts', 'Tries'],
  ['outcome', 'Reason or last failure'],
  ['acceptedAt', 'Accepted (UTC)'],
  ['updatedAt', 'Updated (UTC)'],
];

/** A time in a row: "11-28 15:07:06" (UTC, as the column says). */
const short = (iso) => at(iso).slice(5, 19);

const http = (code) => (code === null || code === undefined ? '' : `HTTP ${code}`);

/** What became of the event, in words: its reason, its last failure, the call that carried it. */
function outcomeWords(event) {
  switch (event.status) {
    case 'retrying': {
      const failure = event.lastFailure;
      return `try ${event.attempts} failed: ${failure?.class ?? 'unknown'} ${http(failure?.httpStatus)}; next try ${short(event.nextAttemptAt)}`;
    }
    case 'delivered':
      return `${event.httpStatus == null ? 'delivered' : `Mautic answered ${http(event.httpStatus)}`}${event.callId ? ` in call ${event.callId}` : ''}`;
    case 'dead_lettered':
      return `${event.reason}: ${event.detail ?? http(event.httpStatus)}`;
    case 'skipped':
      return event.detail ?? 'skipped';
    case 'coalesced':
      return `carried by event ${event.into}`;
    case 'ignored':
      return "its source's filter said no";
    default:
      return 'waiting in the queue';
  }
}

function row(event) {
  return {
    eventId: event.eventId,
    statusKey: event.status,
    sender: event.sender ?? '',
    status: element('span', STATUS_WORDS[event.status] ?? event.status, {
      class: `status-${event.status}`,
    }),
    entity: event.entity ?? '–',
    action: event.action ?? '–',
    mauticIds: event.mauticIds?.length ? event.mauticIds.join(', ') : '–',
    attempts: event.attempts ?? 0,
    outcome: outcomeWords(event),
    acceptedAt: short(event.acceptedAt),
    updatedAt: short(event.updatedAt),
  };
}

/** "2 events of 3 ids found." or "5 newest outcomes.", and the command's own notes. */
function summary(filters, answer, events) {
  const notes = answer.notes?.length ? ` ${answer.notes.join(' ')}` : '';
  if (answer.result === null) return notes.trim() || 'The events command printed nothing.';
  const n = events.length;
  const found = filters.id
    ? `${n} ${n === 1 ? 'event' : 'events'} found.`
    : n === 0
      ? 'No outcomes match these filters.'
      : `The ${n} newest ${n === 1 ? 'outcome' : 'outcomes'} these filters match, newest first.`;
  return `${found}${notes}`;
}

/** Runs the form's lookup or list and shows its rows, its empty state or its error. */
export async function loadEvents() {
  const filters = formFilters($('#events-form'));
  const result = $('#events-result');
  const said = $('#events-summary');
  try {
    const answer = await api(`/api/events?${new URLSearchParams(filters)}`);
    const events = answer.result?.events ?? [];
    said.textContent = summary(filters, answer, events);
    result.replaceChildren(
      events.length === 0
        ? element('p', 'No outcome to show.', { class: 'empty' })
        : table(COLUMNS, events.map(row), (shown) => ({
            'data-event-id': shown.eventId,
            'data-status': shown.statusKey,
          })),
    );
  } catch (error) {
    said.textContent = error.message;
    result.replaceChildren(element('p', 'No outcome to show.', { class: 'empty' }));
  }
}

/** The form asking for these ids alone (a dead letter's link). */
export function askForIds(ids) {
  const form = $('#events-form');
  form.reset();
  form.elements.id.value = ids.join(' ');
}
