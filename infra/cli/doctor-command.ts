import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { Command } from './command.ts';
import { awsCall, EXIT } from './errors.ts';
import { checkEnvironment } from './options.ts';

/** `doctor`: its options and help here; the checks, loaded only when it runs, in doctor.ts. */
export const doctorCommand: Command = {
  name: 'doctor',
  usage: 'doctor --env NAME [--json]',
  summary: 'check that an environment can be deployed: account, quota, secrets, Mautic',
  details: `Checks what a deploy of environment NAME needs, before anything is created, in the
account and region cdk.json binds it to (run it in the project's directory): that cdk.json
names a real account, the one of the credentials here; that the account's Lambda concurrency
quota holds what the environment reserves (reservedConcurrency: 1 + maxConcurrency) and still
leaves Lambda's 100 unreserved; that the secrets' fixed names are free before the first deploy
(a teardown or a failed first deploy keeps them) and present after it; that Mautic's API
answers from this machine as Mautic does (401 or 403 with JSON, not a redirect, a 404 or a
5xx). Each failed check says what to do. Exits 1 when one failed. The caller needs
lambda:GetAccountSettings, lambda:GetFunctionConcurrency, secretsmanager:DescribeSecret,
cloudformation:DescribeStacks and cloudformation:ListStackResources.
  --env NAME   an environment of cdk.json
  --json       print one JSON document on stdout`,
  options: { env: { type: 'string' }, json: { type: 'boolean', default: false } },
  positionals: 0,
  run: async (values, _, io) => {
    const env = checkEnvironment(values.env);
    // Loaded here only: it reads cdk.json as the CDK app does, with the CDK library; STS
    // serves no other command.
    const doctor = await import('./doctor.ts');
    const { STSClient } = await import('@aws-sdk/client-sts');
    const settings = doctor.doctorSettings(env, process.cwd());
    const clients = {
      sts: new STSClient({ region: settings.region }),
      lambda: new LambdaClient({ region: settings.region }),
      secrets: new SecretsManagerClient({ region: settings.region }),
      cloudFormation: new CloudFormationClient({ region: settings.region }),
    };
    try {
      const checks = await awsCall(env, io, () =>
        doctor.runDoctor(settings, { ...clients, fetch }),
      );
      if (values.json) io.stdout(JSON.stringify({ environment: env, checks }));
      else for (const line of doctor.doctorLines(checks, settings)) io.stdout(line);
      return checks.every((check) => check.ok) ? EXIT.ok : EXIT.failed;
    } finally {
      for (const client of Object.values(clients)) client.destroy();
    }
  },
};
