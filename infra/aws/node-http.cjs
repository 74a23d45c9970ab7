// What every bundled function gets for `node:http` (RELAY_BUNDLING in relay-function.ts aliases
// it here): Node's own module, taken without an ES module import. In an ESM bundle, esbuild
// leaves `import … from "node:http"` as it is, and Node's ESM facade for a built-in reads every
// export, so importing `node:http` loads its lazy fetch/WebSocket exports and with them undici:
// about 10 ms of INIT per function under aws-lambda-ric (bench:cold-start). The AWS SDK's HTTP
// client needs none of it. The ingest function never loads undici now; the batch function and
// the refresher still do, at their first fetch to Mautic, so for them the cost moves from INIT
// to the first Mautic call rather than going away. process.getBuiltinModule gives the same
// module object without the facade.
module.exports = process.getBuiltinModule('node:http');
