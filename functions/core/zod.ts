/**
 * The functions' zod: `zod/mini`, with zod's English messages. Every function validates with
 * zod at each request, so it loads zod at each cold start: zod's classic API builds its whole
 * method-chaining surface at import (about 11 ms of INIT here, issue 38), where zod/mini builds
 * only what is used. The same core checks and messages; only the way schemas are written
 * differs (`z.optional(x)`, `.check(z.minLength(1))`). The tools under infra/ keep the classic
 * API: they run once, not at a cold start.
 */
import { en } from 'zod/locales';
import { config } from 'zod/mini';

// zod/mini sets no messages of its own ("Invalid input"); the classic API sets these.
config(en());

// Imported as `import * as z from '…/zod.ts'`: each name used is bundled, no other.
export * from 'zod/mini';
