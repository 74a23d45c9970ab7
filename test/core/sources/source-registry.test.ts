import { createHmac, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { SourceConfigError } from '../../../functions/core/errors.ts';
import type { SourceSecretStore } from '../../../functions/core/ports.ts';
import { loadSourceCompiler } from '../../../functions/core/sources/source-compiler.ts';
import {
  compileSourcesText,
  formatSourceSecret,
  parseSourceSecret,
  ReloadableSourceRegistry,
  StoredSecretSources,
} from '../../../functions/core/sources/source-registry.ts';
import { parseSourcesDocument } from '../../../functions/core/sources/sources.ts';
import { expectNoSecrets, thrownBy } from '../../support/secrets.ts';

beforeAll(loadSourceCompiler);

const SECRET = `hmac-${randomBytes(16).toString('hex')}`;
const ROTATED = `hmac-${randomBytes(16).toString('hex')}`;
const MAP = "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': email } }";
const BODY = Buffer.from('{"email":"ann@example.com"}');

function hmacSource(secret?: string) {
  return {
    verify: {
      scheme: 'hmac',
      header: 'X-Signature',
      encoding: 'hex',
      ...(secret === undefined ? {} : { secret }),
    },
    map: MAP,
  };
}

/** Headers that sign BODY with `secret`, as the `hmac` scheme above reads them. */
function signedWith(secret: string): Record<string, string> {
  return { 'x-signature': createHmac('sha256', secret).update(BODY).digest('hex') };
}

function recordingLogger() {
  const lines: string[] = [];
  const record =
    (level: string) =>
    (message: string, ...extra: object[]) =>
      lines.push(`${level} ${message} ${JSON.stringify(extra)}`);
  return { lines, logger: { info: record('info'), warn: record('warn'), error: record('error') } };
}

describe('compileSourcesText', () => {
  it('compiles a document given as JSON text', () => {
    const sources = compileSourcesText(JSON.stringify({ sources: { shop: hmacSource(SECRET) } }));

    expect([...sources.keys()]).toEqual(['shop']);
    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), Date.now())).toBe(true);
  });

  it('names where JSON that does not parse goes wrong, never quoting the text around it', async () => {
    const text = `{"sources": {"shop": {"verify": {"scheme": "hmac", "secret": "${SECRET}" oops`;

    const error = await thrownBy(async () => compileSourcesText(text));

    expect(error).toBeInstanceOf(SourceConfigError);
    expect((error as Error).message).toMatch(
      /^Sources document: is not JSON \(line 1, column \d+\)$/,
    );
    expectNoSecrets(error, [SECRET]);
    expect(() => compileSourcesText('  \n')).toThrow(
      'Sources document: is not JSON: the file is empty',
    );
  });

  it('names the source and the problem of a document that does not compile', () => {
    const text = JSON.stringify({ sources: { shop: { ...hmacSource(SECRET), map: '{ ,' } } });

    expect(() => compileSourcesText(text)).toThrow(/^Source "shop": map does not compile: /);
  });
});

describe('ReloadableSourceRegistry', () => {
  it('gives the version in effect, and the next one once it is replaced', () => {
    const registry = new ReloadableSourceRegistry(
      compileSourcesText(JSON.stringify({ sources: { a: hmacSource(SECRET) } })),
    );
    const before = registry.get('a');

    registry.replace(compileSourcesText(JSON.stringify({ sources: { b: hmacSource(SECRET) } })));

    expect(before?.name).toBe('a');
    expect(registry.get('a')).toBeUndefined();
    expect(registry.get('b')?.name).toBe('b');
    expect(registry.names()).toEqual(['b']);
    expect(new ReloadableSourceRegistry().get('b')).toBeUndefined();
  });
});

describe('the stored form of a source’s secrets', () => {
  it('round-trips a list, newest first, and reads {} as none', () => {
    expect(parseSourceSecret('shop', formatSourceSecret([ROTATED, SECRET]))).toEqual([
      ROTATED,
      SECRET,
    ]);
    expect(parseSourceSecret('shop', '{}')).toEqual([]);
    expect(parseSourceSecret('shop', undefined)).toEqual([]);
  });

  it.each([
    ['not JSON', SECRET],
    ['a bare string', JSON.stringify(SECRET)],
    ['a list of something else', JSON.stringify({ secrets: [SECRET, 7] })],
    ['eleven secrets', JSON.stringify({ secrets: Array(11).fill(SECRET) })],
  ])('refuses %s, naming the source but not the value', async (_, text) => {
    const error = await thrownBy(async () => parseSourceSecret('shop', text));

    expect(error).toBeInstanceOf(SourceConfigError);
    expect((error as Error).message).toMatch(/^Source "shop": the stored secret must be/);
    expectNoSecrets(error, [SECRET]);
  });
});

describe('StoredSecretSources', () => {
  const definitions = parseSourcesDocument({
    sources: { shop: hmacSource(), forms: hmacSource() },
  });

  /** `fail`: the names whose secret cannot be read now (`true`: every one). */
  function stored(
    values: Map<string, string | undefined>,
    options: { fail?: boolean | string[] } = {},
  ) {
    const state = { now: 0, reads: 0, fail: options.fail ?? false };
    const down = new Error('Secrets Manager is down');
    const store: SourceSecretStore = {
      read: async (names) => {
        state.reads += 1;
        const failing = (name: string) =>
          state.fail === true || (Array.isArray(state.fail) && state.fail.includes(name));
        return new Map(
          names.map((name) => [
            name,
            failing(name) ? { unreadable: down } : { text: values.get(name) },
          ]),
        );
      },
    };
    const { lines, logger } = recordingLogger();
    const sources = new StoredSecretSources(definitions, {
      store,
      cacheMs: 300_000,
      clock: { now: () => state.now },
      logger,
    });
    return { sources, state, lines };
  }

  it('compiles each source with its stored secrets; one not set yet authenticates nothing and is named', async () => {
    const values = new Map([['shop', formatSourceSecret([SECRET])]]);
    const { sources, lines } = stored(values.set('forms', '{}'));

    await sources.refresh();

    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(true);
    expect(sources.get('forms')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(false);
    expect(sources.get('other')).toBeUndefined();
    expect(lines).toEqual([
      expect.stringMatching(/^warn Source "forms" has no secret yet: .*sources set-secret forms/),
    ]);
  });

  it('reads the secrets again only once the cache period has passed, so a rotation needs no deploy', async () => {
    const values = new Map([
      ['shop', formatSourceSecret([SECRET])],
      ['forms', formatSourceSecret([SECRET])],
    ]);
    const { sources, state, lines } = stored(values);
    await sources.refresh();
    values.set('shop', formatSourceSecret([ROTATED, SECRET]));

    state.now = 299_999;
    await sources.refresh();
    const beforeExpiry = sources.get('shop')?.authenticate(BODY, signedWith(ROTATED), 0);
    const forms = sources.get('forms');
    state.now = 300_000;
    await sources.refresh();

    expect(state.reads).toBe(2);
    expect(beforeExpiry).toBe(false);
    expect(sources.get('shop')?.authenticate(BODY, signedWith(ROTATED), 0)).toBe(true);
    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(true);
    // Unchanged secrets: the source is not compiled again.
    expect(sources.get('forms')).toBe(forms);
    expect(lines).toEqual([]);
  });

  it('answers 503 for a source whose secret cannot be read at first, the others go on, and reads it again within 15 s', async () => {
    const values = new Map([
      ['shop', formatSourceSecret([SECRET])],
      ['forms', formatSourceSecret([ROTATED])],
    ]);
    const { sources, state, lines } = stored(values, { fail: ['forms'] });

    await sources.refresh();
    const during = sources.get('forms');
    state.fail = false;
    state.now = 14_999;
    await sources.refresh();
    const readsBefore = state.reads;
    state.now = 15_000;
    await sources.refresh();

    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(true);
    expect(during?.secretUnreadable).toBe(true);
    expect(during?.authenticate(BODY, signedWith(ROTATED), 0)).toBe(false);
    expect([readsBefore, state.reads]).toEqual([1, 2]);
    expect(sources.get('forms')?.secretUnreadable).toBeUndefined();
    expect(sources.get('forms')?.authenticate(BODY, signedWith(ROTATED), 0)).toBe(true);
    expect(lines).toEqual([
      expect.stringMatching(
        /^error Source "forms": its secret could not be read; its requests get 503 \(send again\) until it can be, tried again within 15 s .*source_secret_unreadable.*Secrets Manager is down/,
      ),
    ]);
    expectNoSecrets(lines, [SECRET, ROTATED]);
  });

  it('reads again only the secrets that could not be read, between full reads; a 503 source whose value then cannot work answers 401', async () => {
    const names: string[][] = [];
    const values = new Map<string, string | undefined>([
      ['shop', formatSourceSecret([SECRET])],
      ['forms', '{"secrets": 7}'],
    ]);
    let failing = ['forms'];
    const store: SourceSecretStore = {
      read: async (asked) => {
        names.push([...asked]);
        return new Map(
          asked.map((name) => [
            name,
            failing.includes(name) ? { unreadable: new Error('down') } : { text: values.get(name) },
          ]),
        );
      },
    };
    let now = 0;
    const { logger, lines } = recordingLogger();
    const sources = new StoredSecretSources(definitions, {
      store,
      cacheMs: 300_000,
      clock: { now: () => now },
      logger,
    });

    await sources.refresh();
    failing = [];
    now = 15_000;
    await sources.refresh();

    expect(names).toEqual([['shop', 'forms'], ['forms']]);
    expect(sources.get('forms')?.secretUnreadable).toBeUndefined();
    expect(sources.get('forms')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(false);
    expect(lines.at(-1)).toMatch(
      /^error Source "forms": the stored secret must be .*refused \(401\)/,
    );
  });

  it('keeps the secrets in hand when a later read fails, and says so', async () => {
    const { sources, state, lines } = stored(
      new Map([
        ['shop', formatSourceSecret([SECRET])],
        ['forms', '{}'],
      ]),
    );
    await sources.refresh();
    state.fail = true;
    state.now = 300_000;

    await sources.refresh();

    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(true);
    expect(sources.get('shop')?.secretUnreadable).toBeUndefined();
    expect(lines.slice(-2)).toEqual([
      expect.stringMatching(
        /^error Source "shop": its secret could not be read; the source stays as it was/,
      ),
      expect.stringMatching(
        /^error Source "forms": its secret could not be read; the source stays as it was/,
      ),
    ]);
  });

  it('takes a store that fails outright as every secret unread', async () => {
    const store: SourceSecretStore = {
      read: async () => {
        throw new Error('broken store');
      },
    };
    const { logger, lines } = recordingLogger();
    const sources = new StoredSecretSources(definitions, {
      store,
      cacheMs: 300_000,
      clock: { now: () => 0 },
      logger,
    });

    await sources.refresh();

    expect([sources.get('shop')?.secretUnreadable, sources.get('forms')?.secretUnreadable]).toEqual(
      [true, true],
    );
    expect(lines).toHaveLength(2);
  });

  it('keeps a source’s secrets when a stored value cannot work, naming the source, never the value', async () => {
    const values = new Map([
      ['shop', formatSourceSecret([SECRET])],
      ['forms', `{"secrets": ["${SECRET}"`],
    ]);
    const { sources, state, lines } = stored(values);
    await sources.refresh();
    values.set('shop', formatSourceSecret([` ${ROTATED}\n`]));
    state.now = 300_000;

    await sources.refresh();

    expect(sources.get('shop')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(true);
    // A source that never had a good value still answers, with 401s rather than 404s.
    expect(sources.get('forms')?.authenticate(BODY, signedWith(SECRET), 0)).toBe(false);
    expect(lines).toEqual([
      expect.stringMatching(/^error Source "forms": the stored secret must be .*refused \(401\)/),
      expect.stringMatching(/^error Source "shop": .*secret #1 .*keeps the secrets it had/),
    ]);
    for (const line of lines) {
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain(ROTATED);
    }
  });
});
