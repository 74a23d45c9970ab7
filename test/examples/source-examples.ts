/**
 * The shipped examples of examples/sources/ (contract §6): their sources document, the providers'
 * own sample payloads, the headers each provider sends beside them, the events each must yield,
 * and requests signed as each provider signs them. Shared by the `sources test` check and the
 * end-to-end run, so both hold the examples to the same expectations.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import { stripeHeaders } from '../support/sources.ts';

/** examples/sources/, where the document and the payloads are. */
const EXAMPLES_DIR = fileURLToPath(new URL('../../examples/sources/', import.meta.url));
export const EXAMPLES_DOCUMENT = `${EXAMPLES_DIR}sources.json`;

type SourceJson = { verify: { scheme: string; secret?: string } & Record<string, unknown> };

/** The examples' sources document as shipped. */
export function examplesDocument(): { sources: Record<string, SourceJson> } {
  return JSON.parse(readFileSync(EXAMPLES_DOCUMENT, 'utf8'));
}

/** A sample payload's path, relative to examples/sources/payloads/. */
export function payloadPath(file: string): string {
  return `${EXAMPLES_DIR}payloads/${file}`;
}

/** A sample payload's text, byte for byte as shipped (what the provider signs). */
export function payloadText(file: string): string {
  return readFileSync(payloadPath(file), 'utf8');
}

/** The GitHub sample's sender with a public email, which the documented sample does not show. */
export const STARGAZER_EMAIL = 'codertocat@example.com';

export function stargazerWithEmail(): string {
  const sample = JSON.parse(payloadText('github/watch-started.json'));
  return JSON.stringify({ ...sample, sender: { ...sample.sender, email: STARGAZER_EMAIL } });
}

/** One example: a sample payload sent to a source, and what its mapping yields. */
export interface SourceExample {
  source: string;
  payload: string;
  /** What the provider sends beside the body and its signature, names lower-case. */
  headers: Record<string, string>;
  /** The events the mapping yields, or `'ignored'` when the filter turns the payload away. */
  expected: unknown[] | 'ignored';
}

const jenny = (type: string) => (type === 'customer.deleted' ? deleteJenny : createJenny);
const createJenny = [
  {
    entity: 'contacts',
    action: 'create',
    data: { email: 'jennyrosen@example.com', firstname: 'Jenny', lastname: 'Rosen' },
  },
];
const deleteJenny = [
  { entity: 'contacts', action: 'delete', match: { email: 'jennyrosen@example.com' } },
];

/** Shopify's delivery headers (shopify.dev/docs/api/webhooks, "Headers"), but the HMAC. */
export function shopifyHeaders(topic: string, webhookId: string): Record<string, string> {
  return {
    'x-shopify-topic': topic,
    'x-shopify-shop-domain': 'snowdevil.myshopify.com',
    'x-shopify-api-version': '2026-07',
    'x-shopify-webhook-id': webhookId,
    'x-shopify-triggered-at': '2025-07-10T16:15:47.000000Z',
    'x-shopify-event-id': '59d6d79c-595f-4e7e-bc6f-72f5c3d0c66f',
  };
}

/** GitHub's delivery headers, but the signature. */
export function githubDeliveryHeaders(delivery: string): Record<string, string> {
  return {
    'x-github-event': 'watch',
    'x-github-delivery': delivery,
    'x-github-hook-id': '292430182',
    'user-agent': 'GitHub-Hookshot/044aadd',
  };
}

/** Every example of examples/sources/README.md, in its order. */
export const SOURCE_EXAMPLES: ReadonlyArray<SourceExample> = [
  ...['customer.created', 'customer.updated', 'customer.deleted'].map((type) => ({
    source: 'stripe-customers',
    payload: `stripe/${type}.json`,
    headers: {},
    expected: jenny(type),
  })),
  {
    source: 'shopify',
    payload: 'shopify/customers-create.json',
    headers: shopifyHeaders('customers/create', 'b54557e4-8a5f-4f7d-b70b-cd043c2a9a11'),
    expected: [
      {
        entity: 'contacts',
        action: 'create',
        data: {
          email: 'bob@biller.com',
          firstname: 'Bob',
          lastname: 'Biller',
          tags: ['shopify-customer'],
        },
      },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'bob@biller.com' },
        segmentId: 1,
      },
    ],
  },
  {
    source: 'shopify',
    payload: 'shopify/orders-create.json',
    headers: shopifyHeaders('orders/create', '545ebdd4-b7be-4d3d-b14e-54aa78e0e0f9'),
    expected: [
      {
        entity: 'contacts',
        action: 'create',
        data: {
          email: 'john@example.com',
          firstname: 'John',
          lastname: 'Smith',
          tags: ['shopify-buyer', 'tag1', 'tag2'],
        },
      },
      {
        entity: 'contacts',
        action: 'addPoints',
        match: { email: 'john@example.com' },
        points: 404,
        eventId: 'shopify-points:gid://shopify/Order/820982911946154508',
      },
    ],
  },
  {
    source: 'typeform',
    payload: 'typeform/form_response.json',
    headers: {},
    expected: [
      {
        entity: 'contacts',
        action: 'create',
        data: { email: 'laura@example.com', firstname: 'Laura' },
      },
      {
        entity: 'contacts',
        action: 'addToSegment',
        match: { email: 'laura@example.com' },
        segmentId: 2,
      },
    ],
  },
  {
    source: 'github-stars',
    payload: 'github/watch-started.json',
    headers: githubDeliveryHeaders('72d3162e-cc78-11e3-81ab-4c9367dc0958'),
    expected: 'ignored',
  },
];

/** Each example source's secret, new for a run, as the operator puts them in the document. */
export function newSecrets(): Record<string, string> {
  return {
    'stripe-customers': `whsec_${randomBytes(24).toString('hex')}`,
    shopify: randomBytes(16).toString('hex'),
    typeform: randomBytes(16).toString('hex'),
    'github-stars': randomBytes(20).toString('hex'),
  };
}

/** The examples' document with each source's secret replaced, as an operator's SOURCES_FILE. */
export function documentWithSecrets(secrets: Record<string, string>): string {
  const document = examplesDocument();
  for (const [name, source] of Object.entries(document.sources)) {
    const secret = secrets[name];
    if (secret === undefined) throw new Error(`no secret for the example source "${name}"`);
    source.verify.secret = secret;
  }
  return JSON.stringify(document, null, 2);
}

const base64Hmac = (secret: string, body: string) =>
  createHmac('sha256', secret).update(body).digest('base64');

/**
 * The headers of `body` as its provider sends it, signed with `secret` now: Stripe with its own
 * library; Shopify base64 HMAC-SHA256 of the body (shopify.dev, "Verify the webhook"); Typeform
 * `sha256=` and the same (typeform.com/developers/webhooks/secure-your-webhooks); GitHub with
 * `@octokit/webhooks-methods`.
 */
export async function providerSigned(
  source: string,
  body: string,
  secret: string,
  headers: Record<string, string>,
): Promise<Record<string, string>> {
  const json = { 'content-type': 'application/json', ...headers };
  switch (source) {
    case 'stripe-customers':
      return stripeHeaders(body, { secret, timestamp: Math.floor(Date.now() / 1000) });
    case 'shopify':
      return { ...json, 'x-shopify-hmac-sha256': base64Hmac(secret, body) };
    case 'typeform':
      return { ...json, 'typeform-signature': `sha256=${base64Hmac(secret, body)}` };
    case 'github-stars':
      return { ...json, 'x-hub-signature-256': await signGitHub(secret, body) };
    default:
      throw new Error(`no provider signs for the source "${source}"`);
  }
}
