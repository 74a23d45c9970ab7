/** JSONata for compiling sources documents (sources.ts), loaded on demand. */
import type jsonata from 'jsonata';

/** JSONata, once `loadSourceCompiler` has loaded it. */
let loaded: typeof jsonata | undefined;

/**
 * Loads JSONata, which compiling sources needs: await it once before the first `compileSources`.
 * JSONata is loaded on demand rather than imported because most deployments have no sources, and
 * evaluating its module would cost every cold start of the ingest function (a few ms of INIT) for
 * nothing. Bundled without splitting, the module stays in the bundle and is evaluated here.
 */
export async function loadSourceCompiler(): Promise<void> {
  loaded ??= (await import('jsonata')).default;
}

/** JSONata, loaded: throws when `loadSourceCompiler()` was not awaited first. */
export function compiler(): typeof jsonata {
  if (loaded === undefined) {
    throw new Error(
      'Sources are compiled before JSONata is loaded: await loadSourceCompiler() first',
    );
  }
  return loaded;
}
