import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { loadSourceCompiler } from '../../functions/core/sources/source-compiler.ts';
import { environmentSettings } from '../../infra/aws/environments.ts';
import { RelayStack } from '../../infra/aws/relay-stack.ts';

// Settings with sources compile them, as in the CDK app (infra/aws/app.ts), once JSONata is loaded.
await loadSourceCompiler();

const { environments: fromCdkJson, ...featureFlags } = JSON.parse(readFileSync('cdk.json', 'utf8'))
  .context as Record<string, unknown>;

/** The environments of cdk.json, as the CDK app reads them. */
export const environments = fromCdkJson as Record<string, Record<string, unknown>>;

/**
 * The rest of cdk.json's context: the feature flags the CLI hands the app. An app made here gets
 * them too, so the tests read the templates `cdk deploy` would deploy.
 */
export const cdkContext: Readonly<Record<string, unknown>> = featureFlags;

/**
 * The relay stack of one environment of cdk.json, with `overrides` on its settings, in an app
 * that bundles nothing (the tests read templates, not bundles).
 */
export function relayStack(name = 'dev', overrides: Record<string, unknown> = {}) {
  const app = new App({ context: { ...cdkContext, 'aws:cdk:bundling-stacks': [] } });
  const settings = environmentSettings(name, {
    ...environments,
    [name]: { ...environments[name], ...overrides },
  });
  const stack = new RelayStack(app, `MauticRelay-${name}`, { settings });
  return { app, stack, settings };
}
