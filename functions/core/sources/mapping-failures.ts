/**
 * A source's mapping that failed, as the dead letter, `sources test` and a redrive word it:
 * the error and where, never the payload's values.
 */
import { SourceEvaluationError } from '../errors.ts';

/** Why a payload could not be mapped: the error, and the JSON pointer of the first bad field. */
export interface MappingFailure {
  error: string;
  pointer: string;
}

/** A failure as a dead letter's `relay.detail`, `sources test` and a redrive word it. */
export function mappingFailureText(failure: MappingFailure): string {
  return failure.pointer === '' ? failure.error : `${failure.error} (at ${failure.pointer})`;
}

/** A jsonata error's own words end with its code, e.g. `(D3030 at position 8)`. */
const JSONATA_ERROR = /\([A-Z]\d{4}( at position \d+)?\)$/;

/**
 * A mapping error without the payload's values, for a dead letter's detail and the commands'
 * output (record contents only with `--show-data`): jsonata quotes the value it failed on, as
 * JSON (`Unable to cast value to a number: "…"`), so every string in its message is blanked;
 * its code and the position in the expression say where. The ingest's own checks quote none.
 */
export function withoutPayloadValues(error: string): string {
  if (!JSONATA_ERROR.test(error)) return error;
  return error.replace(/"(?:[^"\\]|\\.)*"/g, '"…"');
}

/** A filter or idempotency key that failed; anything else is a fault of the relay's own. */
export function evaluationFailure(error: unknown): MappingFailure {
  if (!(error instanceof SourceEvaluationError)) throw error;
  return { error: error.message, pointer: '' };
}
