import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX_FILE_LINES = 400;

/** Lines as `wc -l` counts them: a last line without its newline still counts. */
function lineCount(text: string): number {
  if (text === '') return 0;
  const newlines = text.split('\n').length - 1;
  return text.endsWith('\n') ? newlines : newlines + 1;
}

function typeScriptFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => join(folder, name))
    .sort();
}

// The function limit (60) is Biome's `noExcessiveLinesPerFunction` (biome.json). The file limit
// is checked here because Biome's `noExcessiveLinesPerFile` counts a multi-line comment or
// template literal as one line and ignores trailing comments, so it passes files far over 400
// plain lines: a module with long doc comments would slip through.
describe('house rules', () => {
  it(`keeps every file in functions/, infra/ and mautic-simulator/ at most ${MAX_FILE_LINES} lines long`, () => {
    const files = ['functions', 'infra', 'mautic-simulator'].flatMap((folder) =>
      typeScriptFiles(folder),
    );
    const tooLong = files
      .map((file) => ({ file, lines: lineCount(readFileSync(join(ROOT, file), 'utf8')) }))
      .filter(({ lines }) => lines > MAX_FILE_LINES);

    expect(files.length).toBeGreaterThan(10);
    expect(tooLong).toEqual([]);
  });

  it('counts lines as wc -l does', () => {
    expect(lineCount('')).toBe(0);
    expect(lineCount('a\n')).toBe(1);
    expect(lineCount('a\nb')).toBe(2);
    expect(lineCount('a\n\n/**\n * b\n */\n')).toBe(5);
  });
});
