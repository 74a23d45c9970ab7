import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CfnSecret } from 'aws-cdk-lib/aws-secretsmanager';
import { describe, expect, it } from 'vitest';
import { environments, relayStack } from './synth.ts';

/**
 * CloudFormation writes a new value into a secret whenever the template changes its
 * `SecretString` or `GenerateSecretString` (a new generated value, or the literal), and makes a
 * new, empty secret when its logical id or `Name` changes. Any of these on an upgrade would wipe a
 * live value: the webhook secret's sender secrets and API keys, the Mautic credential, the tokens,
 * a source's signing secret. So they are pinned here, exactly: this test failing means a change
 * that would do that. Never "update the snapshot"; find another way (docs/operations.md, Upgrade).
 */
const PINNED = {
  ClientSecret6773D8CE: { Name: 'MauticRelay/ENV/client', SecretString: '{}' },
  TokenSecret75569B26: { Name: 'MauticRelay/ENV/token', SecretString: '{}' },
  WebhookSecretF21E29CC: {
    Name: 'MauticRelay/ENV/webhook',
    GenerateSecretString: {
      ExcludePunctuation: true,
      GenerateStringKey: 'generatedSecret',
      IncludeSpace: false,
      PasswordLength: 32,
      SecretStringTemplate: '{"webhookSecrets":[],"apiKeys":[]}',
    },
  },
  // One per source, under an id of the source's name: adding or removing a source leaves the others.
  SourceSecretshop9AA364D7: { Name: 'MauticRelay/ENV/sources/shop', SecretString: '{}' },
  SourceSecretstripecustomers19E8751D: {
    Name: 'MauticRelay/ENV/sources/stripe-customers',
    SecretString: '{}',
  },
};

const SOURCE = {
  verify: { scheme: 'stripe' },
  map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': data.object.email } }",
};

/**
 * Each secret's logical id, with what CloudFormation makes its value and its identity from;
 * `change` edits the stack first, as a careless upgrade would.
 */
function secretBlocks(
  name: string,
  sources: Record<string, unknown>,
  change: (stack: Stack) => void = () => {},
) {
  const { stack } = relayStack(name, { sources });
  change(stack);
  const template = Template.fromStack(stack);
  return Object.fromEntries(
    Object.entries(template.findResources('AWS::SecretsManager::Secret')).map(([id, secret]) => {
      const { Name, SecretString, GenerateSecretString } = secret.Properties;
      return [id, { Name, SecretString, GenerateSecretString }];
    }),
  );
}

/** The pinned blocks of `ids` in environment `name`, as `toEqual` compares them. */
function pinned(name: string, ids: Array<keyof typeof PINNED>) {
  return Object.fromEntries(
    ids.map((id) => {
      const block: { Name: string; SecretString?: string; GenerateSecretString?: object } =
        PINNED[id];
      return [
        id,
        {
          Name: block.Name.replace('ENV', name),
          SecretString: block.SecretString,
          GenerateSecretString: block.GenerateSecretString,
        },
      ];
    }),
  );
}

describe('secrets are never regenerated or replaced by a template change', () => {
  it.each(Object.keys(environments))(
    'pins every secret’s id, name and value block in %s, with and without sources',
    (name) => {
      const base = [
        'ClientSecret6773D8CE',
        'TokenSecret75569B26',
        'WebhookSecretF21E29CC',
      ] as const;

      expect(secretBlocks(name, {})).toEqual(pinned(name, [...base]));
      expect(secretBlocks(name, { shop: SOURCE, 'stripe-customers': SOURCE })).toEqual(
        pinned(name, [...base, 'SourceSecretshop9AA364D7', 'SourceSecretstripecustomers19E8751D']),
      );
      // Removing a source leaves the other's secret as it was.
      expect(secretBlocks(name, { 'stripe-customers': SOURCE })).toEqual(
        pinned(name, [...base, 'SourceSecretstripecustomers19E8751D']),
      );
    },
  );

  it.each([
    ['a longer generated key', 'GenerateSecretString.PasswordLength', 40],
    ['another template', 'GenerateSecretString.SecretStringTemplate', '{"senders":[]}'],
    ['a value in the template', 'SecretString', '{"senders":[]}'],
  ])("fails when the webhook secret's generation block changes: %s", (_, path, value) => {
    const blocks = secretBlocks('dev', {}, (stack) => {
      const webhook = stack.node.findChild('WebhookSecret').node.defaultChild as CfnSecret;
      webhook.addPropertyOverride(path, value);
    });

    expect(blocks).not.toEqual(
      pinned('dev', Object.keys(PINNED).slice(0, 3) as Array<keyof typeof PINNED>),
    );
    // Only that secret differs: the comparison is of each block, exactly.
    const { WebhookSecretF21E29CC: _changed, ...others } = blocks;
    const { WebhookSecretF21E29CC: _pinned, ...pinnedOthers } = pinned('dev', [
      'ClientSecret6773D8CE',
      'TokenSecret75569B26',
      'WebhookSecretF21E29CC',
    ]);
    expect(others).toEqual(pinnedOthers);
  });
});
