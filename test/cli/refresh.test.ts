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
import { DEFAULT_SIMULATOR_CLIENT, startMauticSimulator } from '../../mautic-simulator/server.ts';
import { freePort } from '../support/net.ts';
import { operatorCommand } from '../support/relay-process.ts';

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
    const relay = { env: 'dev' };
    const ok = printRefresh(result, { json: true, now: NOW, print: (l) => lines.push(l), relay });
    const human: string[] = [];
    printRefresh(result, { json: false, now: NOW, print: (l) => human.push(l), relay });

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
      relay: { env: 'dev' },
    });
    const json: string[] = [];
    printRefresh(
      { action: 'failed', why: 'transient' },
      { json: true, now: NOW, print: (l) => json.push(l), relay: { env: 'dev' } },
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

describe('a failed refresh says what fixes it, where the relay runs', () => {
  const advice = (
    result: Parameters<typeof printRefresh>[0],
    relay: { local: true } | { env: string },
  ) => {
    const lines: string[] = [];
    printRefresh(result, { json: false, now: NOW, print: (l) => lines.push(l), relay });
    return lines.join('\n');
  };

  it("a refused credential: the credentials command for an environment, npm start's variables locally", () => {
    const refused = { action: 'failed', why: 'invalid_client' } as const;
    expect(advice(refused, { env: 'dev' })).toContain(
      'Mautic refused the client id or secret: store the right ones with "npx mautic-relay credentials --env dev',
    );
    const local = advice(refused, { local: true });
    expect(local).toContain(
      'start it again with the right MAUTIC_CLIENT_ID and MAUTIC_CLIENT_SECRET',
    );
    // There is no credentials --local.
    expect(local).not.toContain('mautic-relay credentials');
  });

  it('an unreachable Mautic: what was not reached, and the setting that names it', () => {
    const unreachable = {
      action: 'failed',
      why: 'transient',
      detail: 'could not be reached (127.0.0.1:4 ECONNREFUSED)',
    } as const;
    expect(advice(unreachable, { local: true })).toBe(
      'The refresh failed (transient): Mautic\'s token endpoint could not be reached (127.0.0.1:4 ECONNREFUSED): check the MAUTIC_BASE_URL "npm start" was given, and that Mautic runs and answers from here. The refresher tries again on its schedule.',
    );
    expect(advice(unreachable, { env: 'prod' })).toContain(
      'check the base URL stored with "npx mautic-relay credentials --env prod" and that Mautic answers from AWS',
    );
  });

  it('npm start with a wrong client secret, or a Mautic that is not there: refresh --local and the log say so', async () => {
    const sim = await startMauticSimulator();
    const closed = await freePort();
    const cases = [
      {
        env: { MAUTIC_BASE_URL: sim.url, MAUTIC_CLIENT_SECRET: 'not-the-secret' },
        says: /\(invalid_client\): Mautic refused the client id or secret: stop "npm start" and start it again with the right MAUTIC_CLIENT_ID and MAUTIC_CLIENT_SECRET/,
        logs: /Mautic refused the client id or secret: stop "npm start"/,
      },
      {
        env: {
          MAUTIC_BASE_URL: `http://127.0.0.1:${closed}`,
          MAUTIC_CLIENT_SECRET: 'a-secret-never-shown',
        },
        says: new RegExp(
          `\\(transient\\): Mautic's token endpoint could not be reached \\(127\\.0\\.0\\.1:${closed} ECONNREFUSED\\): check the MAUTIC_BASE_URL`,
        ),
        logs: /could not be reached \(127\.0\.0\.1:\d+ ECONNREFUSED\)/,
      },
      {
        // A port fetch never connects to (the Fetch standard's "bad ports").
        env: {
          MAUTIC_BASE_URL: 'http://127.0.0.1:9',
          MAUTIC_CLIENT_SECRET: 'a-secret-never-shown',
        },
        says: /could not be reached \(127\.0\.0\.1:9 BAD_PORT\)/,
        logs: /could not be reached \(127\.0\.0\.1:9 BAD_PORT\)/,
      },
    ];
    try {
      for (const { env, says, logs } of cases) {
        const dir = await mkdtemp(join(tmpdir(), 'relay-refresh-fix-'));
        const printed: string[] = [];
        const stack = await startLocalStack(
          loadLocalConfig({
            PORT: '0',
            REFRESH_INTERVAL_SECONDS: '3600',
            MAUTIC_CLIENT_ID: DEFAULT_SIMULATOR_CLIENT.clientId,
            ...env,
          }),
          (line) => printed.push(line),
          { endpointsDir: dir },
        );
        try {
          const refreshed = await operatorCommand(['refresh', '--local'], {
            MAUTIC_RELAY_DIR: dir,
          });
          expect(refreshed.code).toBe(1);
          expect(refreshed.out).toMatch(says);
          const log = printed.join('\n');
          expect(log).toMatch(logs);
          // A token call changes nothing in Mautic: the log does not wonder whether it applied.
          expect(log).not.toContain('possibly applied');
          expect(`${refreshed.out}${log}`).not.toContain(env.MAUTIC_CLIENT_SECRET);
        } finally {
          await stack.stop();
          await rm(dir, { recursive: true, force: true });
        }
      }
    } finally {
      await sim.close();
    }
  }, 60_000);
});
