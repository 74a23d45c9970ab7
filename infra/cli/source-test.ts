import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mappingFailureText } from '../../functions/core/sources/mapping-failures.ts';
import { mapSourcePayload } from '../../functions/core/sources/source-endpoint.ts';
import { type CompiledSource, compileSources } from '../../functions/core/sources/sources.ts';
import { UsageError } from './errors.ts';
import { definitionOf, type SourcesInUse } from './sources.ts';

/* `sources test NAME --payload FILE [--header …]`: a source run on a payload, nothing sent. */

/** What `sources test` found, as `--json` prints it (contract §4). */
export type SourceTestResult = { ignored: boolean; events: unknown[] } | { error: string };

/**
 * Runs a source's filter, idempotency key and mapping on a payload, and checks the events as
 * the ingest would (§1, §5, the environment's ENTITIES and CONTACT_MATCH_FIELDS), with the
 * endpoint's own code (`mapSourcePayload`): what the endpoint would queue, or the error a
 * `mapping_failed` dead letter would hold. No signature is checked and nothing is sent.
 */
export async function testSource(
  sources: SourcesInUse,
  name: string,
  payload: unknown,
  headers: Readonly<Record<string, string>>,
): Promise<SourceTestResult & { key?: string | undefined; missingHeaders?: string[] }> {
  const mapping = await mapSourcePayload(compiled(sources, name), payload, headers, {
    limits: sources.limits,
    receivedAt: Date.now(),
    newId: randomUUID,
  });
  if (mapping.kind === 'ignored') {
    const filter = definitionOf(sources, name).filter ?? '';
    const missing = headersRead(filter).filter((header) => headers[header] === undefined);
    return {
      ignored: true,
      events: [],
      ...(missing.length > 0 ? { missingHeaders: missing } : {}),
    };
  }
  if (mapping.kind === 'failed') return { error: mappingFailureText(mapping.failure) };
  return { ignored: false, events: mapping.events, key: mapping.key };
}

function compiled(sources: SourcesInUse, name: string): CompiledSource {
  // Without secrets: the test checks no signature.
  const source = compileSources([definitionOf(sources, name)], {
    secretsFor: () => [],
    requireSecrets: false,
  });
  return source.get(name) as CompiledSource;
}

/**
 * The request headers a filter reads (`$headers.'x-shopify-topic'`, `$headers.x_name`), lower-cased
 * as the ingest gives them. `sources test` has only those given with `--header`: a filter on one
 * not given is false whatever the payload.
 */
function headersRead(expression: string): string[] {
  const names = new Set<string>();
  for (const [, quoted, doubled, backticked, bare] of expression.matchAll(
    /\$headers\.(?:'([^']+)'|"([^"]+)"|`([^`]+)`|([A-Za-z_][\w-]*))/g,
  ))
    names.add((quoted ?? doubled ?? backticked ?? bare ?? '').toLowerCase());
  return [...names];
}

export function sourceTestLines(
  name: string,
  result: SourceTestResult & { key?: string | undefined; missingHeaders?: string[] | undefined },
): string[] {
  if ('error' in result) return [`Source "${name}": the mapping fails: ${result.error}`];
  if (result.ignored) {
    const missing = result.missingHeaders ?? [];
    return [
      `Source "${name}": the filter is false: the ingest answers 202 "ignored", queues nothing.`,
      ...(missing.length === 0
        ? []
        : [
            `  The filter reads the header${missing.length === 1 ? '' : 's'} ${missing.join(', ')}, not given: add ${missing.map((header) => `--header '${header}: …'`).join(' ')} with the value the provider sends.`,
          ]),
    ];
  }
  const id =
    result.key === undefined ? 'no request id' : `request id ${JSON.stringify(result.key)}`;
  if (result.events.length === 0)
    return [
      `Source "${name}": no event (nothing to do; ${id}): the ingest answers 202, queues nothing.`,
    ];
  return [
    `Source "${name}": ${result.events.length} ${result.events.length === 1 ? 'event' : 'events'} (${id}):`,
    ...result.events.map((event) => `  ${JSON.stringify(event)}`),
  ];
}

/** `--payload FILE`: the webhook's body, JSON. Where it does not parse is named, not quoted. */
export function readPayload(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `--payload ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`--payload ${path} is not JSON; the ingest would answer 400 invalid_json`);
  }
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

/** `--header 'Name: value'`…, names lower-cased as the ingest has them. */
export function parseHeaders(texts: ReadonlyArray<string>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const text of texts) {
    const colon = text.indexOf(':');
    const name = text.slice(0, colon).trim();
    if (colon < 0 || !HEADER_NAME.test(name))
      throw new UsageError(`--header must be 'Name: value', e.g. 'X-Shopify-Topic: orders/create'`);
    headers[name.toLowerCase()] = text.slice(colon + 1).trim();
  }
  return headers;
}
