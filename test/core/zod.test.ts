import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { relayEventSchema } from '../../functions/core/events.ts';
import { RELAY_BUNDLING } from '../../infra/aws/relay-function.ts';

// The functions' zod is zod/mini (functions/core/zod.ts): its classic API cost each cold start
// about 11 ms (docs/performance.md). zod/mini has no messages of its own; zod.ts sets English.

describe("the functions' zod", () => {
  it("answers in zod's English messages, as senders read them in a 400", () => {
    const result = relayEventSchema().safeParse({ entity: 'contacts', action: 'delete', id: 'x' });
    expect(result.error?.issues.map((issue) => issue.message)).toEqual([
      'Invalid input: expected number, received string',
    ]);
    const unknown = relayEventSchema().safeParse({ entity: 'contacts', action: 'merge', id: 1 });
    expect(unknown.error?.issues[0]?.message).toMatch(/^Invalid option: expected one of /);
  });

  it.each(['ingest', 'batch', 'refresh'])(
    "bundles zod/mini with its English messages, never zod's classic API, in the %s function",
    async (name) => {
      const result = await build({
        entryPoints: [`functions/${name}/index.ts`],
        bundle: true,
        platform: 'node',
        format: 'esm',
        mainFields: [...RELAY_BUNDLING.mainFields],
        write: false,
        outdir: 'out',
        metafile: true,
        logLevel: 'silent',
      });
      // What the bundle holds of each module: the inputs list modules tree-shaking dropped too.
      const held = Object.values(result.metafile.outputs).flatMap((output) =>
        Object.entries(output.inputs)
          .filter(([input, { bytesInOutput }]) => input.includes('zod/') && bytesInOutput > 0)
          .map(([input]) => input),
      );
      expect(held.some((input) => input.includes('zod/v4/mini/'))).toBe(true);
      expect(held.some((input) => input.endsWith('zod/v4/locales/en.js'))).toBe(true);
      expect(held.filter((input) => input.includes('zod/v4/classic/'))).toEqual([]);
    },
    30_000,
  );
});
