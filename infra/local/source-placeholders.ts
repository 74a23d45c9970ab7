import { readFileSync } from 'node:fs';

/** What the shipped examples hold where a source's secret belongs (`whsec_REPLACE_with_…`). */
const PLACEHOLDER = /REPLACE/;

/**
 * The sources of a SOURCES_FILE whose secret is still an example's placeholder: the provider's
 * real webhooks are then refused (401), and nothing else says why. A file that cannot be read
 * names none here (the ingest says what is wrong with it).
 */
export function sourcesWithPlaceholderSecrets(file: string): string[] {
  let document: { sources?: Record<string, { verify?: { secret?: unknown; secrets?: unknown } }> };
  try {
    document = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return [];
  }
  return Object.entries(document.sources ?? {})
    .filter(([, source]) => {
      const { secret, secrets } = source?.verify ?? {};
      const all = [secret, ...(Array.isArray(secrets) ? secrets : [])];
      return all.some((value) => typeof value === 'string' && PLACEHOLDER.test(value));
    })
    .map(([name]) => name);
}
