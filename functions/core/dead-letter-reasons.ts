/**
 * Every reason a dead letter carries in `relay.reason` (contract §2), as docs/operations.md's
 * table of dead-letter reasons lists them (test/cli/dead-letter-reasons.test.ts keeps the two
 * the same). `too_many_receives` is also what a letter without the relay's attributes counts as:
 * one the queue moved itself. The operator commands' `--reason` takes only these.
 */
export const DEAD_LETTER_REASONS = [
  'mautic_rejected_item',
  'mautic_refused_item',
  'mautic_unknown_entity',
  'duplicate',
  'ambiguous_result',
  'no_match',
  'ambiguous_match',
  'retry_horizon_exceeded',
  'too_many_receives',
  'mapping_failed',
  'invalid_event',
] as const;
