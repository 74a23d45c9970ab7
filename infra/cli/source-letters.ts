import { randomUUID } from 'node:crypto';
import { SourceConfigError } from '../../functions/core/errors.ts';
import type { OutgoingMessage } from '../../functions/core/queue-ports.ts';
import {
  mappingFailureText,
  withoutPayloadValues,
} from '../../functions/core/sources/mapping-failures.ts';
import { mapSourcePayload } from '../../functions/core/sources/source-endpoint.ts';
import { type CompiledSource, compileSources } from '../../functions/core/sources/sources.ts';
import { SetupError } from './errors.ts';
import type { SourcesInUse } from './sources.ts';

/*
 * The redrive of `mapping_failed` dead letters (contract §6): each holds a verified payload a
 * source could not map, and a redrive runs the source's current filter and mapping on it again,
 * with the endpoint's own code (`mapSourcePayload`), so that fixing the mapping and redriving
 * delivers it. What this module says never quotes the payload or a secret.
 */

/** What a redrive does with one such letter. */
type Remapped =
  /** Queue these messages (the events as the ingest would queue them; none for `[]`), then delete it. */
  | { kind: 'events'; messages: OutgoingMessage[] }
  /** The source's filter is false now: nothing to queue, delete it. */
  | { kind: 'ignored' }
  /** It stays a dead letter, for this reason. */
  | { kind: 'kept'; problem: string };

/** Maps one letter's body (the message's text) with the sources of now. */
export type Remapper = (letterText: string) => Promise<Remapped>;

/** A `mapping_failed` letter's envelope, as functions/core/sources/source-endpoint.ts writes it. */
interface SourceLetter {
  source: string;
  eventId: string;
  receivedAtMs: number;
  headers: Record<string, string>;
  body: unknown;
}

interface Sources {
  label: string;
  limits: SourcesInUse['limits'];
  compiled: ReadonlyMap<string, CompiledSource>;
}

/**
 * The redrive's mapper: the sources as `load` gives them (the running stack's SOURCES_FILE, or
 * the environment's document), read and compiled once, when the first letter needs them, so that
 * a redrive of other dead letters needs none. Compiled without secrets: mapping checks none. When
 * they cannot be read, each letter stays, saying why.
 */
export function sourceRemapper(load: () => SourcesInUse | Promise<SourcesInUse>): Remapper {
  let sources: Promise<Sources | { problem: string }> | undefined;
  return async (letterText) => {
    sources ??= compiledSources(load);
    const letter = sourceLetterOf(letterText);
    if (letter === undefined) {
      return kept('it is not a source payload this version of the relay can read');
    }
    const current = await sources;
    if ('problem' in current) return kept(`source "${letter.source}": ${current.problem}`);
    const source = current.compiled.get(letter.source);
    if (source === undefined) {
      return kept(
        `source "${letter.source}" is not in ${current.label} any more: add it back and redrive again, or discard the letter (npx mautic-relay dead-letters discard)`,
      );
    }
    const mapping = await mapSourcePayload(source, letter.body, letter.headers, {
      limits: current.limits,
      // The events are the payload's: received when it was, with the ids the endpoint gives.
      receivedAt: letter.receivedAtMs,
      idBase: letter.eventId,
      newId: randomUUID,
    });
    if (mapping.kind === 'ignored') return { kind: 'ignored' };
    if (mapping.kind === 'mapped') return { kind: 'events', messages: mapping.messages };
    // A failed filter or key says `Source "<name>": …` itself.
    const error = mappingFailureText(mapping.failure).replace(`Source "${letter.source}": `, '');
    return kept(
      `source "${letter.source}": the mapping still fails: ${withoutPayloadValues(error)}`,
    );
  };
}

function kept(problem: string): Remapped {
  return { kind: 'kept', problem };
}

async function compiledSources(
  load: () => SourcesInUse | Promise<SourcesInUse>,
): Promise<Sources | { problem: string }> {
  try {
    const sources = await load();
    const compiled = compileSources(sources.definitions, {
      secretsFor: () => [],
      requireSecrets: false,
    });
    return { label: sources.label, limits: sources.limits, compiled };
  } catch (error) {
    // Both name the setting or the source and the problem, never a secret.
    if (error instanceof SetupError || error instanceof SourceConfigError) {
      return { problem: `the sources cannot be read: ${error.message}` };
    }
    throw error;
  }
}

/** The letter's envelope, or undefined when the text is not one (`v` 1). */
function sourceLetterOf(text: string): SourceLetter | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isPlainObject(value) || !Object.hasOwn(value, 'body')) return undefined;
  const { v, source, eventId, receivedAt, headers, body } = value;
  const receivedAtMs = typeof receivedAt === 'string' ? Date.parse(receivedAt) : Number.NaN;
  if (
    v !== 1 ||
    typeof source !== 'string' ||
    typeof eventId !== 'string' ||
    eventId === '' ||
    Number.isNaN(receivedAtMs) ||
    !isPlainObject(headers) ||
    !Object.values(headers).every((header) => typeof header === 'string')
  ) {
    return undefined;
  }
  return { source, eventId, receivedAtMs, headers: headers as Record<string, string>, body };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
