import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SetupError } from '../../infra/cli/errors.ts';
import { endpointsPathIn, readLocalEndpoints } from '../../infra/cli/local-endpoints.ts';
import { printRefresh, refreshEnvironment } from '../../infra/cli/refresh.ts';
import { loadLocalConfig } from '../../infra/local/local-config.ts';
import { startLocalStack } from '../../infra/local/local-stack.ts';

const run = promisify(execFile);
const cloudFormation = mockClient(CloudFormationClient);
const lambda = mockClient(LambdaClient);
const NOW = Date.parse('2026-11-21T00:00:00Z');
const stored = {
  updatedAt: '2026-11-21T00:00:00.000Z',
  accessTokenExpiresAt: '2026-11-21T01:00:00.000Z',
};
const payload = (value: unknown) =>
  Object.assign(new TextEncoder().encode(JSON.stringify(value)), {
    transformToString: () => JSON.stringify(value),
  });
const clients = () => ({
  cloudFormation: new CloudFormationClient({ region: 'eu-west-1' }),
  lambda: new LambdaClient({ region: 'eu-west-1' }),
});

afterEach(() => {
  cloudFormation.reset();
  lambda.reset();
});

describe('refresh --env', () => {
  it('invokes the refresher named by the stack output synchronously and reports what is stored', async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'MauticRelay-dev',
          CreationTime: new Date(),
          StackStatus: 'UPDATE_COMPLETE',
          Outputs: [
            { OutputKey: 'IngestUrl', OutputValue: 'https://x/events' },
            { OutputKey: 'RefreshFunctionName', OutputValue: 'MauticRelay-dev-Refresh123' },
          ],
        },
      ],
    });
    lambda.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: payload({ action: 'refreshed', grant: 'refresh_token', stored }),
    });

    const result = await refreshEnvironment('dev', clients());
    const lines: string[] = [];
    const authorize = 'npx mautic-relay authorize --env dev';
    const ok = printRefresh(result, {
      json: true,
      now: NOW,
      print: (l) => lines.push(l),
      authorize,
    });
    const human: string[] = [];
    printRefresh(result, { json: false, now: NOW, print: (l) => human.push(l), authorize });

    expect(cloudFormation.commandCalls(DescribeStacksCommand)[0]?.args[0].input).toEqual({
      StackName: 'MauticRelay-dev',
    });
    const input = lambda.commandCalls(InvokeCommand)[0]?.args[0].input;
    expect(input?.FunctionName).toBe('MauticRelay-dev-Refresh123');
    expect(input?.InvocationType).toBe('RequestResponse');
    expect(JSON.parse(new TextDecoder().decode(input?.Payload as Uint8Array))).toEqual({
      force: true,
      reason: 'operator',
    });
    expect(ok).toBe(true);
    expect(lines).toEqual(['{"refreshed":true,"accessTokenSecondsLeft":3600}']);
    expect(human).toEqual([
      'Refreshed (refresh_token): the access token is good for 3600 s, until 2026-11-21T01:00:00.000Z.',
    ]);
  });

  it('says what to fix when the stack cannot be read or lacks the output', async () => {
    cloudFormation
      .on(DescribeStacksCommand)
      .rejectsOnce(
        Object.assign(new Error('Stack with id MauticRelay-qa does not exist'), {
          name: 'ValidationError',
        }),
      )
      .resolves({
        Stacks: [
          {
            StackName: 'MauticRelay-dev',
            CreationTime: new Date(),
            StackStatus: 'CREATE_COMPLETE',
            Outputs: [],
          },
        ],
      });

    const missing = refreshEnvironment('qa', clients());
    await expect(missing).rejects.toBeInstanceOf(SetupError);
    await expect(missing).rejects.toThrow(/Cannot read the stack MauticRelay-qa .*check --env/);
    await expect(refreshEnvironment('dev', clients())).rejects.toThrow(
      'The stack MauticRelay-dev has no RefreshFunctionName output: deploy this version of the relay',
    );
    expect(lambda.commandCalls(InvokeCommand)).toHaveLength(0);
  });

  it('reports a failed refresh with its fix and a false result, and a function error', async () => {
    cloudFormation.on(DescribeStacksCommand).resolves({
      Stacks: [
        {
          StackName: 'MauticRelay-dev',
          CreationTime: new Date(),
          StackStatus: 'CREATE_COMPLETE',
          Outputs: [{ OutputKey: 'RefreshFunctionName', OutputValue: 'f' }],
        },
      ],
    });
    lambda
      .on(InvokeCommand)
      .resolvesOnce({
        StatusCode: 200,
        Payload: payload({ action: 'failed', why: 'needs_authorize' }),
      })
      .resolves({
        StatusCode: 200,
        FunctionError: 'Unhandled',
        Payload: payload({ errorMessage: 'x' }),
      });

    const lines: string[] = [];
    const ok = printRefresh(await refreshEnvironment('dev', clients()), {
      json: false,
      now: NOW,
      print: (l) => lines.push(l),
      authorize: 'npx mautic-relay authorize --env dev',
    });
    const json: string[] = [];
    printRefresh(
      { action: 'failed', why: 'transient' },
      { json: true, now: NOW, print: (l) => json.push(l), authorize: 'unused' },
    );

    expect(ok).toBe(false);
    expect(lines[0]).toContain('run "npx mautic-relay authorize --env dev"');
    expect(json).toEqual(['{"refreshed":false,"accessTokenSecondsLeft":null}']);
    await expect(refreshEnvironment('dev', clients())).rejects.toThrow(
      'The refresher failed (Unhandled): see the log of f (its log group is a resource of the stack)',
    );
  });
});

describe('refresh --local', () => {
  it('asks the running npm start through its control endpoint, and says when none runs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'relay-refresh-'));
    const env = { ...process.env, MAUTIC_RELAY_DIR: dir };
    const cli = (...args: string[]) =>
      run('node', ['infra/cli/mautic-relay.ts', 'refresh', ...args], {
        env,
        timeout: 20_000,
      }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    const printed: string[] = [];
    const stack = await startLocalStack(
      loadLocalConfig({ PORT: '0', REFRESH_INTERVAL_SECONDS: '3600', LOG_LEVEL: 'DEBUG' }),
      (line) => printed.push(line),
      { endpointsDir: dir },
    );
    try {
      expect(existsSync(endpointsPathIn(dir))).toBe(true);
      const json = await cli('--local', '--json');
      const human = await cli('--local');

      expect(JSON.parse(json.stdout)).toEqual({ refreshed: true, accessTokenSecondsLeft: 3600 });
      expect(human.stdout).toMatch(
        /^Refreshed \(client_credentials\): the access token is good for 3\d{3} s/,
      );
      expect(printed.filter((l) => l.includes('Mautic tokens refreshed'))).toHaveLength(3);
      // The token itself appears nowhere: not in the answers, not in the stack's output.
      const endpoints = readLocalEndpoints(endpointsPathIn(dir));
      if (!endpoints) throw new Error('no endpoints file');
      const secrets = new SecretsManagerClient({
        endpoint: endpoints.secretsEndpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      const { SecretString } = await secrets.send(
        new GetSecretValueCommand({ SecretId: endpoints.tokenSecretId }),
      );
      secrets.destroy();
      const token = JSON.parse(SecretString ?? '{}') as { accessToken?: string };
      expect(token.accessToken).toMatch(/^[A-Za-z0-9_-]{86}$/);
      for (const text of [json.stdout, json.stderr, human.stdout, printed.join('\n')])
        expect(text).not.toContain(token.accessToken);
    } finally {
      await stack.stop();
    }

    const none = await cli('--local');
    expect(existsSync(endpointsPathIn(dir))).toBe(false);
    // Exit 3: what the command needs cannot be reached (the CLI's exit codes).
    expect(none).toMatchObject({ code: 3 });
    expect(none.stderr).toContain('No local stack is running here');
    expect(none.stderr).toContain('npm start');
    const both = await cli('--local', '--env', 'dev');
    expect(both).toMatchObject({ code: 2 });
    expect(both.stderr).toContain('Give --env NAME or --local, not both');
    await rm(dir, { recursive: true, force: true });
  }, 60_000);
});
