// Run by NodejsFunction after esbuild (relay-function.ts, commandHooks.afterBundling) with the
// bundle's folder and the project root: rewrites each source map there so that its `sources`
// are relative to the project root (`functions/ingest/index.ts`). esbuild writes them relative
// to the bundle's folder, a temporary one under the synth's output folder, so they named that
// folder's depth and the clone's path, and the asset hash (taken from the bundle's folder,
// source maps included) changed with `cdk synth -o DIR` and with where the project was cloned.
const { readdirSync, readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');

const [outputDir, projectRoot] = process.argv.slice(2);
if (outputDir === undefined || projectRoot === undefined) {
  process.stderr.write('usage: node relative-source-map.cjs OUTPUT_DIR PROJECT_ROOT\n');
  process.exit(2);
}
for (const name of readdirSync(outputDir).filter((file) => file.endsWith('.map'))) {
  const file = path.join(outputDir, name);
  const map = JSON.parse(readFileSync(file, 'utf8'));
  map.sources = map.sources.map((source) =>
    path.relative(projectRoot, path.resolve(outputDir, source)).split(path.sep).join('/'),
  );
  writeFileSync(file, JSON.stringify(map));
}
