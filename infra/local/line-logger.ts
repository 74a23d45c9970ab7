import { Logger } from '@aws-lambda-powertools/logger';

type Extra = Record<string, unknown>;

/**
 * The local stack's log: the real handlers log through Powertools as in the cloud, and this
 * Logger prints what a person at a terminal wants instead of JSON: one short line per Mautic
 * call and per dead-lettered event, warnings and errors in a line each, and the rest only at
 * DEBUG. It recognises lines by their stable `event` field (`mautic_call`, `mautic_call_failed`,
 * `dead_lettered`), never by message text. Like the cloud logs, it never holds record contents or tokens (the handlers never log
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
      const statuses = Object.entries((fields.statuses as Record<string, number>) ?? {})
        .map(([status, count]) => `${status}×${count}`)
        .join(' ');
      this.#print(
        `delivered ${fields.entity} ${fields.action}: ${fields.items} items, ${statuses}, ${fields.durationMs} ms`,
      );
    } else if (this.#debug) {
      this.#print(`${String(input)} ${JSON.stringify(fields)}`);
    }
  }

  override warn(input: unknown, ...extra: unknown[]): void {
    const fields = merge(extra);
    if (fields.event === 'dead_lettered') {
      const status = fields.status === undefined ? '' : ` ${fields.status}`;
      this.#print(
        `dead-lettered ${fields.eventId ?? fields.messageId} (${fields.entity ?? '?'} ${fields.action ?? '?'}): ${fields.reason}${status}`,
      );
    } else if (fields.event === 'mautic_call_failed') {
      this.#print(
        `failed ${fields.entity} ${fields.action}: ${fields.items} items, ${fields.error}`,
      );
    } else {
      this.#print(`warning: ${String(input)}${describe(fields)}`);
    }
  }

  override error(input: unknown, ...extra: unknown[]): void {
    this.#print(`error: ${String(input)}${describe(merge(extra))}`);
  }

  override debug(input: unknown, ...extra: unknown[]): void {
    if (this.#debug) this.#print(`${String(input)} ${JSON.stringify(merge(extra))}`);
  }
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
