/**
 * The CDK app: one stack per environment, chosen with `-c env=NAME` from the environments in
 * cdk.json. `cdk synth -c env=dev` works offline with no AWS credentials.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { environmentSettings } from './environments.ts';
import { acknowledgeFindings } from './nag.ts';
import { RelayStack } from './relay-stack.ts';

const app = new App();
const settings = environmentSettings(
  app.node.tryGetContext('env'),
  app.node.tryGetContext('environments'),
);
const stack = new RelayStack(app, `MauticRelay-${settings.name}`, {
  settings,
  description: `Mautic batch relay, ${settings.name} environment`,
});
acknowledgeFindings(stack);
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
app.synth();
