// The console's page: plain DOM, no framework and no build step. Every value reaches the page
// through textContent, never as HTML, so nothing an event or a letter holds can run here.

import { askForIds, loadEvents } from './console-events.js';
import {
  $,
  api,
  at,
  element,
  formFilters,
  fromNow,
  say,
  setText,
  table,
  value,
} from './console-page.js';

const FLOWS = [
  ['accepted', 'Accepted', '#3b82c4'],
  ['delivered', 'Delivered', '#2f9e44'],
  ['retrying', 'Retrying', '#e8a317'],
  ['deadLettered', 'Dead-lettered', '#c92a2a'],
];
const SVG = 'http://www.w3.org/2000/svg';

function showView(name) {
  for (const button of document.querySelectorAll('nav button')) {
    if (button.dataset.view === name) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  for (const section of document.querySelectorAll('main > section'))
    section.hidden = section.id !== name;
  say('');
  const load = {
    overview: loadOverview,
    events: loadEvents,
    'dead-letters': loadDeadLetters,
    sources: loadSources,
  };
  load[name]?.().catch((error) => say(error.message));
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return 'unknown';
  const s = Math.abs(seconds);
  const text =
    s >= 86400
      ? `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`
      : s >= 3600
        ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
        : s >= 60
          ? `${Math.floor(s / 60)} min ${s % 60} s`
          : `${s} s`;
  return seconds < 0 ? `expired ${text} ago` : `${text} left`;
}

async function loadOverview() {
  const { target, result, flow } = await api('/api/overview');
  setText('target', target.local ? '· local stack' : `· environment ${target.name}`);
  const { queue, deadLetters, token, ingestUrl } = result;
  setText('queue-visible', value(queue.visible));
  setText('queue-inFlight', value(queue.inFlight));
  setText('queue-delayed', value(queue.delayed));
  setText(
    'queue-oldest',
    queue.oldestAgeSeconds === null
      ? target.local
        ? 'not known locally'
        : 'unknown'
      : `${queue.oldestAgeSeconds} s`,
  );
  setText('dead-count', value(deadLetters.count));
  setText('token-access', duration(token.accessTokenSecondsLeft));
  setText(
    'token-refresh',
    token.refreshTokenSecondsLeft === null
      ? 'none (client credentials) or unknown'
      : duration(token.refreshTokenSecondsLeft),
  );
  setText('token-updated', token.updatedAt ?? 'never');
  setText('mautic-version', token.mauticVersion ?? 'unknown');
  setText('ingest-url', ingestUrl);
  showHealth(result.mautic);
  drawFlow(flow);
}

const CIRCUIT_WORDS = {
  closed: 'closed: calls go to Mautic',
  open: 'open: calls wait for the next probe',
  half_open: 'half-open: a probe is testing Mautic',
};

const HEALTH_FIELDS = [
  'mautic-since',
  'mautic-next-probe',
  'mautic-last-failure',
  'mautic-ms-per-item',
  'mautic-in-flight',
];

const when = (iso) => `${at(iso)} (${fromNow(iso)})`;

/** Mautic's health as every batch invocation shares it (status's `mautic`): null is unknown. */
function showHealth(mautic) {
  const circuit = mautic?.circuit ?? null;
  const node = $('#mautic-circuit');
  node.dataset.circuit = circuit ?? 'unknown';
  if (circuit === null) {
    node.textContent = 'unknown (status could not read it)';
    for (const id of HEALTH_FIELDS) setText(id, 'unknown');
    return;
  }
  node.textContent = CIRCUIT_WORDS[circuit] ?? circuit;
  setText('mautic-since', mautic.since ? when(mautic.since) : 'no outage seen');
  setText('mautic-next-probe', mautic.nextProbeAt ? when(mautic.nextProbeAt) : 'none (not open)');
  setText('mautic-last-failure', mautic.lastFailure ?? 'none');
  setText(
    'mautic-ms-per-item',
    mautic.recentMsPerItem === null
      ? 'no call timed yet'
      : `${mautic.recentMsPerItem} ms recently (usual ${value(mautic.usualMsPerItem, ' ms')})`,
  );
  setText(
    'mautic-in-flight',
    mautic.callsInFlightAllowed === null
      ? 'not held back'
      : `at most ${mautic.callsInFlightAllowed} (Mautic is slow)`,
  );
}

function drawFlow(flow) {
  if (!flow) {
    setText('chart', 'No per-minute counts available.');
    return;
  }
  for (const [key] of FLOWS)
    setText(
      `total-${key}`,
      flow.counts[key].reduce((a, b) => a + b, 0),
    );
  setText('mautic-calls', flow.mautic.calls);
  setText('mautic-mean', value(flow.mautic.meanMs, ' ms'));
  const legend = $('#chart-legend');
  legend.replaceChildren(
    ...FLOWS.map(([, label, color]) => {
      const item = element('span', label);
      const swatch = element('i', undefined, { 'aria-hidden': 'true' });
      swatch.style.background = color;
      item.prepend(swatch);
      return item;
    }),
  );
  $('#chart').replaceChildren(chart(flow));
}

/** The hour as lines, one per flow, over a 60-minute axis; a tiny SVG needs no library. */
function chart(flow) {
  const width = 720;
  const height = 220;
  const pad = 32;
  const max = Math.max(1, ...FLOWS.flatMap(([key]) => flow.counts[key]));
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const x = (i) => pad + (i * (width - 2 * pad)) / 59;
  const y = (n) => height - pad - (n * (height - 2 * pad)) / max;
  const line = (attrs) => {
    const node = document.createElementNS(SVG, attrs.points ? 'polyline' : 'line');
    for (const [key, val] of Object.entries(attrs)) node.setAttribute(key, val);
    svg.append(node);
  };
  const label = (text, tx, ty) => {
    const node = document.createElementNS(SVG, 'text');
    node.textContent = text;
    for (const [key, val] of Object.entries({ x: tx, y: ty, 'font-size': 11, fill: '#56606b' }))
      node.setAttribute(key, val);
    svg.append(node);
  };
  line({ x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, stroke: '#aab3bd' });
  label(String(max), 2, pad + 4);
  label('0', 2, height - pad + 4);
  label('−60 min', pad, height - 8);
  label('now', width - pad - 20, height - 8);
  for (const [key, , color] of FLOWS) {
    const points = flow.counts[key].map((n, i) => `${x(i)},${y(n)}`).join(' ');
    line({ points, fill: 'none', stroke: color, 'stroke-width': 2 });
  }
  return svg;
}

const LETTER_COLUMNS = [
  ['deadLetteredAt', 'Dead-lettered'],
  ['reason', 'Reason'],
  ['status', 'Status'],
  ['entity', 'Entity'],
  ['action', 'Action'],
  ['eventId', 'Event id'],
  ['detail', 'Detail'],
];

async function loadDeadLetters() {
  const filters = formFilters($('#dead-form'));
  const { result, runbook, notes } = await api(`/api/dead-letters?${new URLSearchParams(filters)}`);
  fillReasons(runbook);
  setText(
    'dead-summary',
    `${result.count} matching dead ${result.count === 1 ? 'letter' : 'letters'}${result.items.length < result.count ? `; the newest ${result.items.length} below` : ''}.${notes.length ? ` ${notes.join(' ')}` : ''}`,
  );
  $('#dead-reasons').replaceChildren(
    ...Object.entries(result.byReason).map(([reason, count]) => {
      const box = element('div', undefined, { class: 'reason', 'data-reason': reason });
      box.append(
        element('h3', `${reason}: ${count}`),
        element('p', `What happened: ${runbook[reason]?.happened ?? '(not in the runbook)'}`),
        element('p', `What to do: ${runbook[reason]?.todo ?? ''}`),
      );
      return box;
    }),
  );
  const rows = result.items.map((item) => ({ ...item, eventId: eventLink(item.eventId) }));
  $('#dead-items').replaceChildren(table(LETTER_COLUMNS, rows));
}

/** A dead letter's event id, as a link to that event's outcome in the Events view. */
function eventLink(eventId) {
  if (!eventId) return '';
  const link = element('a', eventId, { href: '#events' });
  link.onclick = (event) => {
    event.preventDefault();
    askForIds([eventId]);
    showView('events');
    $('#events-form input[name=id]').focus();
  };
  return link;
}

function fillReasons(runbook) {
  const select = $('#dead-form select[name=reason]');
  if (select.options.length > 1) return;
  select.append(
    ...Object.keys(runbook).map((reason) => element('option', reason, { value: reason })),
  );
}

/** Redrive or discard: the dry run's count first, then the change only once confirmed. */
async function change(kind) {
  const filters = formFilters($('#dead-form'));
  const path = `/api/dead-letters/${kind}`;
  const dry = await api(path, { ...filters, dryRun: true });
  const verb = kind === 'redrive' ? 'moved to the events queue' : 'deleted for good';
  const n = dry.result.matched;
  const notes = dry.notes.length ? ` ${dry.notes.join(' ')}` : '';
  setText(
    'confirm-text',
    `${n} matching dead ${n === 1 ? 'letter' : 'letters'} would be ${verb} (dry run: nothing changed yet).${notes} Go on?`,
  );
  const box = $('#confirm');
  box.hidden = false;
  $('#confirm-yes').focus();
  const confirmed = await new Promise((resolve) => {
    $('#confirm-yes').onclick = () => resolve(true);
    $('#confirm-no').onclick = () => resolve(false);
    // Escape cancels, as a dialog's keyboard users expect.
    box.onkeydown = (event) => event.key === 'Escape' && resolve(false);
  });
  box.hidden = true;
  if (!confirmed) return say('Nothing changed.');
  const done = await api(path, filters);
  const { matched, left } = done.result;
  const count = kind === 'redrive' ? done.result.moved : done.result.discarded;
  say(`${kind === 'redrive' ? 'Moved' : 'Discarded'} ${count} of ${matched}; ${left} left.`);
  await loadDeadLetters();
}

async function loadSources() {
  const { result } = await api('/api/sources');
  const list = result.sources;
  $('#sources-list').replaceChildren(
    list.length === 0
      ? element('p', 'No sources configured.')
      : table(
          [
            ['name', 'Source'],
            ['scheme', 'Scheme'],
            ['filter', 'Filter'],
            ['idempotencyKey', 'Idempotency key'],
          ],
          list.map((s) => ({
            ...s,
            filter: s.filter ? 'yes' : 'no',
            idempotencyKey: s.idempotencyKey ? 'yes' : 'no',
          })),
        ),
  );
  const select = $('#playground select[name=name]');
  select.replaceChildren(...list.map((s) => element('option', s.name, { value: s.name })));
}

async function tryMapping(event) {
  event.preventDefault();
  const data = new FormData(event.target);
  const headers = String(data.get('headers')).split('\n');
  const out = $('#playground-result');
  try {
    const answer = await api('/api/sources/test', {
      name: data.get('name'),
      payload: data.get('payload'),
      headers,
    });
    out.textContent = JSON.stringify(answer.result, null, 2);
  } catch (error) {
    out.textContent = error.message;
  }
}

function start() {
  for (const button of document.querySelectorAll('nav button'))
    button.onclick = () => showView(button.dataset.view);
  $('#overview-refresh').onclick = () => loadOverview().catch((error) => say(error.message));
  $('#dead-form').onsubmit = (event) => {
    event.preventDefault();
    loadDeadLetters().catch((error) => say(error.message));
  };
  $('#redrive').onclick = () => change('redrive').catch((error) => say(error.message));
  $('#discard').onclick = () => change('discard').catch((error) => say(error.message));
  $('#events-form').onsubmit = (event) => {
    event.preventDefault();
    loadEvents();
  };
  $('#playground').onsubmit = tryMapping;
  showView('overview');
  // The Overview follows the flow while it is shown; the other views change only when asked.
  setInterval(() => {
    if (!$('#overview').hidden) loadOverview().catch((error) => say(error.message));
  }, 15_000);
}

start();
