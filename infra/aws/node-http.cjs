// What every bundled function gets for `node:http` (RELAY_BUNDLING in relay-function.ts aliases
// it here): Node's own module, taken without an ES module import. In an ESM bundle, esbuild
// leaves `import … from "node:http"` as it is, and Node's ESM facade for a built-in reads every
// export, so `node:http` loads its lazy fetch/WebSocket exports and with them undici: about
// 10 ms of every cold start (bench:cold-start), for an HTTP client the AWS SDK uses, never
// fetch. process.getBuiltinModule gives the same module object without the facade.
module.exports = process.getBuiltinModule('node:http');
