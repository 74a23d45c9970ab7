import { readFileSync } from 'node:fs';

/** What happened and what to do, for one dead-letter reason, in the runbook's words. */
export interface RunbookEntry {
  happened: string;
  todo: string;
}

/**
 * The runbook's table of dead-letter reasons (docs/operations.md, "Dead-letter reasons"), read
 * from the page itself so that the console says what the runbook says and nothing else. Markdown
 * is reduced to plain text: the page shows it as text, never as HTML.
 */
export function readRunbook(
  path = new URL('../../../docs/operations.md', import.meta.url),
): Record<string, RunbookEntry> {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  const section = text.split('## Dead-letter reasons')[1]?.split('\n## ')[0] ?? '';
  const entries: Record<string, RunbookEntry> = {};
  for (const line of section.split('\n')) {
    const cells = line.split(' | ').map((cell) => cell.replace(/^\|\s*|\s*\|$/g, ''));
    const reason = /^`([a-z_]+)`$/.exec(cells[0] ?? '')?.[1];
    if (reason && cells.length === 3)
      entries[reason] = { happened: plain(cells[1] ?? ''), todo: plain(cells[2] ?? '') };
  }
  return entries;
}

function plain(markdown: string): string {
  return markdown
    .replace(/\[([^\]]+)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim();
}
