import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ENV,
  loadBatchConfig,
  loadIngestConfig,
  loadRefreshConfig,
} from '../functions/shared/config.ts';
import { environmentSettings } from '../infra/aws/environments.ts';
import { endpointsDir } from '../infra/cli/local-endpoints.ts';
import { loadLocalConfig } from '../infra/local/local-config.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join('docs', name)),
].sort();

/** Folders whose sources read environment variables outside the functions' loaders. */
const SCANNED = ['infra/local', 'infra/cli', 'bench', 'mautic-simulator'];
/** The operating system's, read only to pass it on to a child process: not a setting. */
const NOT_SETTINGS = new Set(['PATH']);

/** Markdown without fenced code blocks: what they hold is neither a heading nor a link. */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor for a heading: lower-cased text, punctuation dropped, spaces as dashes. */
function githubSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file's headings produce; a repeated heading gets `-1`, `-2`, …. */
function anchorsOf(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(readFileSync(file, 'utf8'))) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** The relative link targets of a Markdown file (outside code), as written. */
function relativeLinks(markdown: string): string[] {
  const prose = proseLines(markdown)
    .join('\n')
    .replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map((match) => match[1] as string)
    .filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** What is wrong with one link from `file`, or undefined when it leads somewhere. */
function brokenLink(file: string, target: string): string | undefined {
  const [path = '', anchor] = target.split('#', 2);
  const resolved = path === '' ? join(ROOT, file) : join(ROOT, dirname(file), path);
  if (!existsSync(resolved)) return `${target}: no such file`;
  if (anchor === undefined || anchor === '') return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
    return `${target}: an anchor into something that is not a Markdown file`;
  }
  if (!anchorsOf(resolved).has(decodeURIComponent(anchor))) {
    return `${target}: no heading of ${relative(ROOT, resolved)} makes #${anchor}`;
  }
  return undefined;
}

/**
 * Repository files the prose names as code, e.g. `functions/core/retry-policy.ts`: paths from the
 * repository's root with a folder and an extension, no wildcard. The local stack's endpoints
 * file exists only while `npm start` runs.
 */
function namedFiles(markdown: string): string[] {
  const prose = proseLines(markdown).join('\n');
  return [...prose.matchAll(/`([\w.-]+\/[\w./-]+\.(?:ts|cjs|md|json))`/g)]
    .map((match) => match[1] as string)
    .filter((path) => !path.startsWith('.mautic-relay/'));
}

/**
 * The names a configuration reader asks its environment for, found by handing it an environment
 * that records every name read. An empty environment is refused, but only after the schema read
 * every key of it.
 */
function namesRead(read: (env: Record<string, string | undefined>) => unknown): string[] {
  const names = new Set<string>();
  const recording = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get(_target, key) {
        if (typeof key === 'string') names.add(key);
        return undefined;
      },
    },
  );
  try {
    read(recording);
  } catch {
    // Expected: required settings are missing.
  }
  return [...names];
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.(ts|cjs|mjs|js)$/.test(name))
    .map((name) => join(folder, name));
}

/**
 * Environment variables a source file reads: `process.env.NAME`, `env.NAME`, `env['NAME']`, and
 * `env[CONSTANT]` where the file says `const CONSTANT = 'NAME'`. Writes (`env.NAME = …`) are not
 * reads.
 */
function envReadsIn(source: string): string[] {
  const constants = new Map(
    [...source.matchAll(/const\s+([A-Z][A-Z0-9_]*)\s*=\s*['"]([A-Z][A-Z0-9_]*)['"]/g)].map(
      (match) => [match[1] as string, match[2] as string],
    ),
  );
  const notAWrite = String.raw`(?!\s*=(?!=))`;
  const direct = new RegExp(String.raw`\benv\.([A-Z][A-Z0-9_]*)\b${notAWrite}`, 'g');
  const quoted = new RegExp(String.raw`\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]${notAWrite}`, 'g');
  const byConstant = new RegExp(String.raw`\benv\[\s*([A-Z][A-Z0-9_]*)\s*\]${notAWrite}`, 'g');
  return [
    ...[...source.matchAll(direct)].map((match) => match[1] as string),
    ...[...source.matchAll(quoted)].map((match) => match[1] as string),
    ...[...source.matchAll(byConstant)].flatMap((match) => {
      const name = constants.get(match[1] as string);
      return name === undefined ? [] : [name];
    }),
  ];
}

/** The names configuration.md's table lists: every `code` name in the first column. */
function documentedSettings(): Set<string> {
  const table = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|\s*-/.test(line));
  const names = table.flatMap((row) => {
    const firstCell = row.split('|')[1] ?? '';
    return [...firstCell.matchAll(/`([^`]+)`/g)].map((match) => match[1] as string);
  });
  return new Set(names);
}

function settingsTheCodeReads(): string[] {
  const functions = [
    ...Object.values(ENV),
    ...namesRead(loadBatchConfig),
    ...namesRead(loadIngestConfig),
    ...namesRead(loadRefreshConfig),
  ];
  const stackContext = namesRead((settings) => environmentSettings('probe', { probe: settings }));
  const local = [...namesRead(loadLocalConfig), ...namesRead(endpointsDir)];
  const scanned = SCANNED.flatMap(sourceFiles).flatMap((file) =>
    envReadsIn(readFileSync(join(ROOT, file), 'utf8')),
  );
  // Each source must have yielded names, or a changed reader would pass this test unseen.
  expect(functions.length).toBeGreaterThan(20);
  expect(stackContext).toContain('mauticBaseUrl');
  expect(stackContext.length).toBeGreaterThan(10);
  expect(local).toContain('PORT');
  expect(scanned).toContain('MAUTIC_RELAY_HIDE_SECONDS');
  return [...new Set([...functions, ...stackContext, ...local, ...scanned])]
    .filter((name) => !NOT_SETTINGS.has(name))
    .sort();
}

describe('docs', () => {
  it('finds the Markdown files to check', () => {
    expect(DOCS).toContain('README.md');
    expect(DOCS).toContain(join('docs', 'configuration.md'));
  });

  it.each(DOCS)('%s: every relative link leads to a file and a heading', (file) => {
    const broken = relativeLinks(readFileSync(join(ROOT, file), 'utf8'))
      .map((target) => brokenLink(file, target))
      .filter((problem) => problem !== undefined);
    expect(broken).toEqual([]);
  });

  it.each(DOCS)('%s: every file it names exists', (file) => {
    const missing = namedFiles(readFileSync(join(ROOT, file), 'utf8')).filter(
      (path) => !existsSync(join(ROOT, path)),
    );
    expect(missing).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    expect(githubSlug('4. Operator commands (`npx mautic-relay …`)')).toBe(
      '4-operator-commands-npx-mautic-relay-',
    );
    expect(githubSlug('2.3 `client_credentials` only for admin-made credentials')).toBe(
      '23-client_credentials-only-for-admin-made-credentials',
    );
    expect(githubSlug('See [the contract](contract.md) **now**')).toBe('see-the-contract-now');
  });

  it('finds environment reads in source the way the code writes them', () => {
    const source = [
      "const SECRET_ENV = 'BENCH_SECRET';",
      'process.env.POWERTOOLS_METRICS_DISABLED = "true";',
      'const a = process.env.ONE ?? io.env.TWO;',
      "const b = env['THREE'] ?? process.env[SECRET_ENV];",
      'if (env.FOUR === "x") {}',
    ].join('\n');
    expect(envReadsIn(source).sort()).toEqual(['BENCH_SECRET', 'FOUR', 'ONE', 'THREE', 'TWO']);
  });

  it('lists in configuration.md every setting the code reads', () => {
    const documented = documentedSettings();
    const missing = settingsTheCodeReads().filter((name) => !documented.has(name));
    expect(missing).toEqual([]);
  });
});
