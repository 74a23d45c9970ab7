/**
 * The reasons `--reason` accepts are the ones docs/operations.md documents, in its order: one
 * list (functions/core/dead-letter-reasons.ts) that this test holds to the table.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEAD_LETTER_REASONS } from '../../functions/core/dead-letter-reasons.ts';

/** The first column of the table under "## Dead-letter reasons". */
function documentedReasons(): string[] {
  const text = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = text.split('\n## Dead-letter reasons\n')[1]?.split('\n## ')[0] ?? '';
  return [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map(([, reason]) => reason ?? '');
}

describe('the dead-letter reasons', () => {
  it('are the ones docs/operations.md documents', () => {
    expect(documentedReasons()).toEqual([...DEAD_LETTER_REASONS]);
  });
});
