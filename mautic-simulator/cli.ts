/**
 * `npm run simulator`: the Mautic simulator alone, for trying payloads by hand and for tests of
 * other tools. It prints one JSON line, `{"url","clientId","clientSecret"}`, the credential the
 * simulator accepts (its own, made up for it: no real Mautic's), and runs until SIGINT or SIGTERM.
 *
 *   npm run simulator -- [--port <n>] [--client-id <numericId_random>] [--client-secret <secret>]
 *                        [--mautic-version 5.1|5.2|6|7]
 */
import { parseArgs } from 'node:util';
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from './server.ts';
import { LINE_NAMES } from './versions.ts';

const USAGE =
  'usage: npm run simulator -- [--port <0-65535, default a free one>] ' +
  `[--client-id <numericId_random, default ${DEFAULT_SIMULATOR_CLIENT.clientId}>] ` +
  '[--client-secret <secret, default the simulator’s own>] ' +
  `[--mautic-version <${LINE_NAMES.join('|')}, default 5.1>]\n`;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}`);
  process.exit(2);
}

function options() {
  try {
    return parseArgs({
      options: {
        port: { type: 'string' },
        'client-id': { type: 'string' },
        'client-secret': { type: 'string' },
        'mautic-version': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}

const values = options();
if (values.help === true) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const port = Number(values.port ?? '0');
if (!Number.isInteger(port) || port < 0 || port > 65_535)
  fail(`--port: not a port: ${values.port}`);
const client = {
  ...DEFAULT_SIMULATOR_CLIENT,
  clientId: values['client-id'] ?? DEFAULT_SIMULATOR_CLIENT.clientId,
  clientSecret: values['client-secret'] ?? DEFAULT_SIMULATOR_CLIENT.clientSecret,
};
if (client.clientSecret === '') fail('--client-secret: must not be empty');
const mauticVersion = values['mautic-version'] ?? '5.1';
if (!(LINE_NAMES as readonly string[]).includes(mauticVersion))
  fail(`--mautic-version: not a Mautic line: ${mauticVersion}`);

let simulator: Awaited<ReturnType<typeof startMauticSimulator>>;
try {
  simulator = await startMauticSimulator({ port, clients: [client], mauticVersion });
} catch (error) {
  // A client id Mautic could never look up, or a port in use.
  fail(error instanceof Error ? error.message : String(error));
}
const { clientId, clientSecret } = client;
process.stdout.write(`${JSON.stringify({ url: simulator.url, clientId, clientSecret })}\n`);

let stopping = false;
const stop = () => {
  // npm passes Ctrl-C on once more: the second signal is that echo.
  if (stopping) return;
  stopping = true;
  simulator.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
