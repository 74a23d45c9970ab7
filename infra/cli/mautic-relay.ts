#!/usr/bin/env node
/**
 * Operator commands. Secrets Manager is reached through the usual AWS environment (region,
 * profile, credentials); against the local stack set AWS_ENDPOINT_URL_SECRETS_MANAGER as
 * `npm start` prints it.
 *
 *   npx mautic-relay credentials --env dev --base-url https://mautic.example.com \
 *       --client-id 1_abc --grant-type client_credentials   (secret from MAUTIC_CLIENT_SECRET or stdin)
 *   npx mautic-relay authorize --env dev [--port 8765] [--timeout 300]
 */
import { parseArgs } from 'node:util';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { authorize, type CommandDeps, storeCredentials, UsageError } from './operator-commands.ts';

const USAGE = `Usage:
  mautic-relay credentials --env NAME --base-url URL --client-id ID --grant-type client_credentials|authorization_code
      (the client secret is read from MAUTIC_CLIENT_SECRET, else from stdin)
  mautic-relay authorize --env NAME [--port 8765] [--timeout SECONDS]`;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      env: { type: 'string' },
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'grant-type': { type: 'string', default: 'client_credentials' },
      port: { type: 'string', default: '8765' },
      timeout: { type: 'string', default: '300' },
    },
  });
  if (!values.env) throw new UsageError(`--env is required\n${USAGE}`);
  const deps: CommandDeps = {
    secrets: new SecretsManagerClient({}),
    fetch,
    print: (line) => process.stdout.write(`${line}\n`),
    now: Date.now,
  };
  if (command === 'credentials') {
    if (!values['base-url'] || !values['client-id'])
      throw new UsageError(`--base-url and --client-id are required\n${USAGE}`);
    const clientSecret = process.env.MAUTIC_CLIENT_SECRET ?? (await readStdin());
    await storeCredentials(
      {
        env: values.env,
        baseUrl: values['base-url'],
        clientId: values['client-id'],
        clientSecret,
        grantType: values['grant-type'],
      },
      deps,
    );
  } else if (command === 'authorize') {
    await authorize(
      { env: values.env, port: Number(values.port), timeoutMs: Number(values.timeout) * 1000 },
      deps,
    );
  } else {
    throw new UsageError(USAGE);
  }
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Mautic client secret (then Enter, Ctrl-D): ');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof UsageError ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
