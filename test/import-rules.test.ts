import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Proof that biome.json's import rules refuse what they are meant to: fixtures importing across
// the boundaries, linted by Biome under the repository's own biome.json, in a scratch folder
// (the working tree is never written to). A rule that silently stopped firing, e.g. because a
// later override with the same rule replaced its options, fails here.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIOME = join(ROOT, 'node_modules', '.bin', 'biome');

const PURE = 'functions/core is pure';
const KERNEL = "imports none of core's subjects";
const OTHER_SUBJECT = 'no other subject of core';
const ZOD = 'take zod from functions/core/zod.ts';
const SUBJECTS = ['ingest', 'sources', 'delivery', 'tokens', 'mautic'] as const;
type Subject = (typeof SUBJECTS)[number];
/** A file of each subject to name in an import; the rules look at the folder only. */
const A_FILE: Record<Subject, string> = {
  ingest: 'ingest/ingest.ts',
  sources: 'sources/sources.ts',
  delivery: 'delivery/delivery.ts',
  tokens: 'tokens/token-wait.ts',
  mautic: 'mautic/mautic-api.ts',
};
/** The one edge between subjects: a source is a variant of the ingest. */
const MAY_IMPORT: Partial<Record<Subject, Subject[]>> = { sources: ['ingest'] };

interface Fixture {
  /** Where the fixture is linted as, from the repository's root. */
  file: string;
  /** Import specifiers Biome must refuse, each with a part of the message it must give. */
  refused: Array<[specifier: string, message: string]>;
  /** Import specifiers Biome must let through. */
  allowed: string[];
  /** Whether the `process` global is refused there too (core's other purity rule). */
  pure?: boolean;
}

function subjectFixture(subject: Subject): Fixture {
  const permitted = MAY_IMPORT[subject] ?? [];
  const others = SUBJECTS.filter((other) => other !== subject);
  return {
    file: `functions/core/${subject}/fixture.ts`,
    refused: [
      ...others
        .filter((other) => !permitted.includes(other))
        .flatMap(
          (other): Array<[string, string]> => [
            [`../${A_FILE[other]}`, OTHER_SUBJECT],
            [`../../core/${A_FILE[other]}`, OTHER_SUBJECT],
          ],
        ),
      ['@aws-sdk/client-sqs', PURE],
      ['zod', ZOD],
      ['zod/mini', ZOD],
    ],
    allowed: [
      '../errors.ts',
      '../ports.ts',
      '../zod.ts',
      `./${A_FILE[subject].split('/')[1]}`,
      ...permitted.map((other) => `../${A_FILE[other]}`),
    ],
    pure: true,
  };
}

const FIXTURES: Fixture[] = [
  {
    file: 'functions/core/fixture.ts',
    refused: [
      ...SUBJECTS.map((subject): [string, string] => [`./${A_FILE[subject]}`, KERNEL]),
      ['../core/delivery/outcomes.ts', KERNEL],
      ['node:process', PURE],
      ['zod', ZOD],
      ['zod/v4/core', ZOD],
    ],
    allowed: ['./errors.ts', './events.ts', './zod.ts', 'node:crypto'],
    pure: true,
  },
  {
    // The one module of the functions that imports zod itself.
    file: 'functions/core/zod.ts',
    refused: [
      ['./ingest/ingest.ts', KERNEL],
      ['@aws-sdk/client-sqs', PURE],
    ],
    allowed: ['zod/mini', 'zod/locales'],
    pure: true,
  },
  {
    file: 'functions/ingest/fixture.ts',
    refused: [
      ['zod', ZOD],
      ['zod/mini', ZOD],
    ],
    allowed: ['../core/zod.ts', '../core/ingest/ingest.ts'],
  },
  ...SUBJECTS.map(subjectFixture),
  {
    file: 'functions/adapters/fixture.ts',
    refused: [
      ['../core/ingest/ingest.ts', 'never a use case'],
      ['../core/sources/source-endpoint.ts', 'never a use case'],
      ['../core/delivery/outcomes.ts', 'never a use case'],
      ['zod', ZOD],
    ],
    allowed: [
      '../core/ports.ts',
      '../core/zod.ts',
      '../core/errors.ts',
      '../core/token-secret.ts',
      '../core/ingest/webhook-auth.ts',
      '../core/ingest/sender-credentials.ts',
    ],
  },
  {
    file: 'infra/local/fixture.ts',
    refused: [
      ['../../functions/core/events.ts', 'builds each function with its builder'],
      ['../../functions/core/delivery/outcomes.ts', 'builds each function with its builder'],
    ],
    allowed: [
      '../../functions/core/ports.ts',
      '../../functions/core/errors.ts',
      '../../functions/core/retry-policy.ts',
      '../../functions/batch/compose.ts',
    ],
  },
];

interface Finding {
  file: string;
  line: number;
  rule: string;
  message: string;
}

let scratch: string;
let findings: Finding[];

/** The fixture's lines: one side-effect import per specifier, then a use of `process`. */
function lines(fixture: Fixture): string[] {
  return [
    ...[...fixture.refused.map(([specifier]) => specifier), ...fixture.allowed].map(
      (specifier) => `import '${specifier}';`,
    ),
    'export const region = process.env.AWS_REGION;',
  ];
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'import-rules-'));
  copyFileSync(join(ROOT, 'biome.json'), join(scratch, 'biome.json'));
  for (const fixture of FIXTURES) {
    const path = join(scratch, fixture.file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${lines(fixture).join('\n')}\n`);
  }
  const run = spawnSync(
    BIOME,
    [
      'lint',
      '--vcs-enabled=false',
      '--reporter=github',
      '--max-diagnostics=none',
      '--only=style/noRestrictedImports',
      '--only=style/noRestrictedGlobals',
      ...FIXTURES.map((fixture) => fixture.file),
    ],
    { cwd: scratch, encoding: 'utf8', timeout: 15_000 },
  );
  if (run.error) throw run.error;
  const output = `${run.stdout}\n${run.stderr}`;
  // ::error title=lint/style/noRestrictedImports,file=/tmp/…/x.ts,line=2,endLine=2,…::message
  findings = [
    ...output.matchAll(/^::error title=([^,]+),file=([^,]+),line=(\d+),[^:]*::(.*)$/gm),
  ].map((match) => ({
    rule: match[1] as string,
    file: relative(scratch, match[2] as string),
    line: Number(match[3]),
    message: match[4] as string,
  }));
  expect(findings.length, output).toBeGreaterThan(0);
});

afterAll(() => {
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
});

describe("biome.json's import rules", () => {
  it.each(FIXTURES)('refuses exactly the crossings in $file', (fixture) => {
    const fixtureLines = lines(fixture);
    const lineOf = (specifier: string) => fixtureLines.indexOf(`import '${specifier}';`) + 1;
    const refused = findings
      .filter((finding) => finding.file === fixture.file)
      .filter((finding) => finding.rule === 'lint/style/noRestrictedImports');

    expect(refused.map((finding) => finding.line).sort((a, b) => a - b)).toEqual(
      fixture.refused.map(([specifier]) => lineOf(specifier)),
    );
    for (const [specifier, message] of fixture.refused) {
      const finding = refused.find((candidate) => candidate.line === lineOf(specifier));
      expect(finding?.message, specifier).toContain(message);
    }
  });

  it.each(FIXTURES)('refuses the process global in $file only within core', (fixture) => {
    const globals = findings.filter(
      (finding) =>
        finding.file === fixture.file && finding.rule === 'lint/style/noRestrictedGlobals',
    );
    expect(globals.length).toBe(fixture.pure === true ? 1 : 0);
  });
});
