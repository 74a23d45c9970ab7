import { Logger } from '@aws-lambda-powertools/logger';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';

type Extra = Record<string, unknown>;

/**
 * The local stack's log: the real handlers log through Powertools as in the cloud, and this
 * Logger prints what a person at a terminal wants instead of JSON: one short line per Mautic
 * call and per dead-lettered event, warnings and errors in a line each, and the rest only at
 * DEBUG. It recognises lines by their stable `event` field (`mautic_call`, `mautic_call_failed`,
 * `dead_lettered`, `mautic_circuit`, `mautic_paced`), never by message text. A call's line names
 * its call id and each item's event ids with their Mautic id, so a search for an event id finds
 * it. Like the cloud logs, it never holds record contents or tokens (the handlers never log
 * them).
 */
export class LineLogger extends Logger {
  readonly #print: (line: string) => void;
  readonly #debug: boolean;

  constructor(options: { print: (line: string) => void; debug: boolean }) {
    super({ serviceName: 'local', logLevel: 'SILENT' });
    this.#print = options.print;
    this.#debug = options.debug;
  }

  override info(input: unknown, ...extra: unknown[]): void {
    const fields = merge(extra);
    if (fields.event === 'mautic_call') {
      this.#print(mauticCallLine(fields));
    } else if (fields.event === 'mautic_circuit' || fields.event === 'mautic_paced') {
      this.#print(healthLine(fields));
    } else if (this.#debug) {
      this.#print(`${String(input)} ${JSON.stringify(fields)}`);
    }
  }

  /**
   * One line per refused ingest request: its status, error code and request id (the id the
   * sender got in the `apigw-requestid` header), never its body.
   */
  refusedRequest(answer: APIGatewayProxyStructuredResultV2, requestId: string): void {
    const status = answer.statusCode ?? 200;
    if (status < 400) return;
    let code = '?';
    try {
      code = String(JSON.parse(String(answer.body)).error.code ?? '?');
    } catch {
      // An answer without the error shape: the status says enough.
    }
    this.#print(`refused request ${requestId}: ${status} ${code}`);
  }

  override warn(input: unknown, ...extra: unknown[]): void {
    const fields = merge(extra);
    if (fields.event === 'dead_lettered') {
      const status = fields.status === undefined ? '' : ` ${fields.status}`;
      this.#print(
        `dead-lettered ${fields.eventId ?? fields.messageId} (${typeof fields.source === 'string' ? `source ${fields.source}` : `${fields.entity ?? '?'} ${fields.action ?? '?'}`}): ${fields.reason}${status}`,
      );
    } else if (fields.event === 'mautic_circuit' || fields.event === 'mautic_paced') {
      this.#print(healthLine(fields));
    } else if (fields.event === 'mautic_call_failed') {
      const eventIds = Array.isArray(fields.eventIds) ? (fields.eventIds as string[]) : [];
      this.#print(
        `failed ${fields.entity} ${fields.action}: ${fields.items} items, ${fields.error}${callOf(fields)}${eventIds.map((id) => ` ${id}`).join('')}`,
      );
    } else {
      this.#print(`warning: ${String(input)}${describe(fields)}`);
    }
  }

  override error(input: unknown, ...extra: unknown[]): void {
    this.#print(`error: ${String(input)}${describe(merge(extra))}`);
  }

  /**
   * Never: the invocation event holds the request's headers and body, an API key or a webhook
   * signature among them (Powertools logs it when POWERTOOLS_LOGGER_LOG_EVENT is set).
   */
  override logEventIfEnabled(_event?: unknown, _overwriteValue?: boolean): void {}

  override debug(input: unknown, ...extra: unknown[]): void {
    if (this.#debug) this.#print(`${String(input)} ${JSON.stringify(merge(extra))}`);
  }
}

/** One item of a call as its line names it: its event ids, and Mautic's id or status. */
interface CallItem {
  eventIds: string[];
  status: number | null;
  id?: number;
}

/** `; call <id>:`, naming the call as the events' outcomes do; nothing for a line without one. */
function callOf(fields: Extra): string {
  return typeof fields.callId === 'string' ? `; call ${fields.callId}:` : '';
}

/**
 * `ev-1→#7 ev-2+ev-3→#8 ev-4→404`: each item's event ids (merged ones joined by `+`) with the
 * record id Mautic gave it, or its status when Mautic refused it. Every item: a log search for an
 * event id finds its line.
 */
function eventsText(fields: Extra): string {
  const items = Array.isArray(fields.events) ? (fields.events as CallItem[]) : [];
  return items
    .map(
      (item) =>
        ` ${item.eventIds.join('+')}→${item.id === undefined ? item.status : `#${item.id}`}`,
    )
    .join('');
}

/**
 * A Mautic call: `delivered` only when every item was; items Mautic refused (a 404 on an edit,
 * a 422) are counted as refused. Record ids and event ids, never contents.
 */
function mauticCallLine(fields: Extra): string {
  const statuses = Object.entries((fields.statuses as Record<string, number>) ?? {})
    .map(([status, count]) => `${status}×${count}`)
    .join(' ');
  const items = Number(fields.items);
  const ids = Array.isArray(fields.ids) ? (fields.ids as number[]) : [];
  const refused = items - ids.length;
  const idText = ids.length > 0 ? `, ids ${ranges(ids)}` : '';
  const what = `${fields.entity} ${fields.action}: ${items} ${items === 1 ? 'item' : 'items'}, ${statuses}`;
  const events = `${callOf(fields)}${eventsText(fields)}`;
  if (refused <= 0) return `delivered ${what}${idText}, ${fields.durationMs} ms${events}`;
  return `refused ${refused} of ${what}${idText && `, delivered${idText.slice(1)}`}, ${fields.durationMs} ms${events}`;
}

/** Mautic's shared health changed: its circuit, or the calls in flight allowed. */
function healthLine(fields: Extra): string {
  if (fields.event === 'mautic_paced') {
    return `Mautic paced: ${fields.callsInFlight} calls in flight (${Number(fields.msPerItem).toFixed(1)} ms per item, usual ${Number(fields.usualMsPerItem).toFixed(1)})`;
  }
  if (fields.circuit === 'closed') return 'Mautic circuit closed: calls go';
  const next =
    typeof fields.nextProbeAt === 'number'
      ? `, next probe ${new Date(fields.nextProbeAt).toISOString()}`
      : '';
  const why = fields.lastFailure === undefined ? '' : ` (${fields.lastFailure})`;
  return `Mautic circuit ${fields.circuit}${next}${why}`;
}

/** `1-3 7 9-10`: ids in order, runs shortened, at most 20 shown. */
function ranges(ids: number[]): string {
  const sorted = [...new Set(ids)].sort((a, b) => a - b);
  const parts: string[] = [];
  let start = sorted[0];
  let previous = start;
  for (const id of [...sorted.slice(1), Number.NaN]) {
    if (id === (previous ?? 0) + 1) {
      previous = id;
      continue;
    }
    parts.push(start === previous ? `${start}` : `${start}-${previous}`);
    start = id;
    previous = id;
  }
  return parts.length > 20 ? `${parts.slice(0, 20).join(' ')} …` : parts.join(' ');
}

function merge(extra: unknown[]): Extra {
  return Object.assign(
    {},
    ...extra.filter((item): item is Extra => typeof item === 'object' && item !== null),
  );
}

function describe(fields: Extra): string {
  const text = Object.entries(fields)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  return text ? ` (${text})` : '';
}
