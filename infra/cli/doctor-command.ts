import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Command } from './command.ts';
import { EXIT } from './errors.ts';
import { checkEnvironment } from './options.ts';

/** `doctor`: its options and help here; the checks, loaded only when it runs, in doctor.ts. */
export const doctorCommand: Command = {
  name: 'doctor',
  usage: 'doctor --env NAME [--after-deploy] [--json]',
  summary: 'check that an environment can be deployed, or (--after-deploy) that it runs',
  details: `Checks what a deploy of environment NAME needs, before anything is created, in the
account and region cdk.json binds it to (run it in the project's directory): that cdk.json
names a real account, the one of the credentials here; that the account and region are
bootstrapped for the CDK; that the account's Lambda concurrency quota holds what the
environment reserves (reservedConcurrency: 1 + maxConcurrency) and still leaves Lambda's 100
unreserved; that the secrets' fixed names are free before the first deploy (a teardown or a
failed first deploy keeps them) and present after it; that the standard queues of a version
before the FIFO queues, which the upgrade replaces, are drained; that Mautic's API answers from
this machine as Mautic does (401 or 403 with JSON, not a redirect, a 404 or a 5xx).
With --after-deploy, that the deployed stack runs: its last change completed, the alarm e-mail's
subscription is confirmed, the event source that feeds the batch function is enabled, and the
refresher has stored Mautic tokens that are still good (never shown).
Every check runs and is reported, each failure with what to do. Exits 1 when one failed, 3 when
AWS did not answer (the checks that need it are then reported as not checked). The caller needs
sts:GetCallerIdentity (no permission), cloudformation:DescribeStacks and ListStackResources,
lambda:GetAccountSettings and GetFunctionConcurrency, secretsmanager:DescribeSecret,
sqs:GetQueueAttributes; with --after-deploy also sns:ListSubscriptionsByTopic,
lambda:GetEventSourceMapping and secretsmanager:GetSecretValue on the token secret.
  --env NAME       an environment of cdk.json
  --after-deploy   check the deployed stack instead of what a deploy needs
  --json           print one JSON document on stdout`,
  options: {
    env: { type: 'string' },
    'after-deploy': { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
  positionals: 0,
  run: async (values, _, io) => {
    const env = checkEnvironment(values.env);
    const afterDeploy = values['after-deploy'] === true;
    // Loaded here only: it reads cdk.json as the CDK app does, with the CDK library; STS and
    // SNS serve no other command.
    const doctor = await import('./doctor.ts');
    const { STSClient } = await import('@aws-sdk/client-sts');
    const { SNSClient } = await import('@aws-sdk/client-sns');
    const settings = doctor.doctorSettings(env, process.cwd());
    const region = { region: settings.region };
    const clients = {
      sts: new STSClient(region),
      lambda: new LambdaClient(region),
      secrets: new SecretsManagerClient(region),
      cloudFormation: new CloudFormationClient(region),
      sqs: new SQSClient(region),
      sns: new SNSClient(region),
    };
    try {
      const checks = await doctor.runDoctor(
        settings,
        { ...clients, fetch, env: io.env, now: io.now },
        { afterDeploy },
      );
      if (values.json) io.stdout(JSON.stringify({ environment: env, afterDeploy, checks }));
      else
        for (const line of doctor.doctorLines(checks, settings, { afterDeploy })) io.stdout(line);
      if (checks.some((check) => check.unchecked)) return EXIT.setup;
      return checks.every((check) => check.ok) ? EXIT.ok : EXIT.failed;
    } finally {
      for (const client of Object.values(clients)) client.destroy();
    }
  },
};
