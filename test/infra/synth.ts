import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { environmentSettings } from '../../infra/aws/environments.ts';
import { RelayStack } from '../../infra/aws/relay-stack.ts';

/** The environments of cdk.json, as the CDK app reads them. */
export const environments = JSON.parse(readFileSync('cdk.json', 'utf8')).context
  .environments as Record<string, Record<string, unknown>>;

/**
 * The relay stack of one environment of cdk.json, with `overrides` on its settings, in an app
 * that bundles nothing (the tests read templates, not bundles).
 */
export function relayStack(name = 'dev', overrides: Record<string, unknown> = {}) {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const settings = environmentSettings(name, {
    ...environments,
    [name]: { ...environments[name], ...overrides },
  });
  const stack = new RelayStack(app, `MauticRelay-${name}`, { settings });
  return { app, stack, settings };
}
