/**
 * The CDK app: one stack per environment, chosen with `-c env=NAME` from the environments in
 * cdk.json. `cdk synth -c env=dev` works offline with no AWS credentials.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { loadSourceCompiler } from '../../functions/core/sources/source-compiler.ts';
import { environmentSettings } from './environments.ts';
import { acknowledgeFindings } from './nag.ts';
import { RelayStack } from './relay-stack.ts';

// The environment's sources are compiled to check them (environments.ts).
await loadSourceCompiler();
const app = new App();
const settings = settingsOrExit(app);
const stack = new RelayStack(app, `MauticRelay-${settings.name}`, {
  settings,
  description: `Mautic batch relay, ${settings.name} environment`,
});
acknowledgeFindings(stack);
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
app.synth();

/**
 * The chosen environment's settings; a mistake in cdk.json (or in `-c env=…`) is printed as the
 * sentence that names it, without a Node stack trace around it, and the synth stops (exit 1).
 */
function settingsOrExit(of: App): ReturnType<typeof environmentSettings> {
  try {
    return environmentSettings(of.node.tryGetContext('env'), of.node.tryGetContext('environments'));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
