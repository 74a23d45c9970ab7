/**
 * bench:ingest's source side (contract §6): the shipped Stripe example's source
 * (examples/sources/sources.json, `stripe-customers`) with the bench's secret, and requests
 * Stripe would send it: the documented `customer.created` sample, each with an event id and an
 * email of its own, padded to the plain side's body size and signed with Stripe's own library,
 * which only the load generator loads: no server's peak RSS counts it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const EXAMPLES = new URL('../../examples/sources/', import.meta.url);
const SOURCE = 'stripe-customers';

/** Where the source side posts. */
export const SOURCE_PATH = `/sources/${SOURCE}`;

/** A request ready to send: its headers (signature included) and its body. */
export interface SignedRequest {
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * A SOURCES_FILE with the example's Stripe source alone, its secret `secret`, in a folder of
 * its own; `remove` deletes the folder.
 */
export function writeStripeSourcesFile(secret: string): { path: string; remove(): void } {
  const document = JSON.parse(readFileSync(new URL('sources.json', EXAMPLES), 'utf8'));
  const source = document.sources[SOURCE];
  if (source === undefined) throw new Error(`examples/sources/sources.json has no "${SOURCE}"`);
  source.verify.secret = secret;
  const folder = mkdtempSync(join(tmpdir(), 'bench-sources-'));
  const path = join(folder, 'sources.json');
  writeFileSync(path, JSON.stringify({ sources: { [SOURCE]: source } }));
  return { path, remove: () => rmSync(folder, { recursive: true, force: true }) };
}

/**
 * `count` requests signed up front (now, well within Stripe's 300 s), each the sample event with
 * `evt_<prefix>_<index>` and `bench-<index>@example.com`, padded in the customer's `description`
 * to exactly `bodyBytes`.
 */
export async function stripeSignedRequests(
  secret: string,
  prefix: string,
  count: number,
  bodyBytes: number,
): Promise<SignedRequest[]> {
  const { default: Stripe } = await import('stripe');
  const stripe = new Stripe('sk_test_not_a_real_key');
  const sample = JSON.parse(
    readFileSync(new URL('payloads/stripe/customer.created.json', EXAMPLES), 'utf8'),
  );
  const timestamp = Math.floor(Date.now() / 1000);
  return Array.from({ length: count }, (_, index) => {
    const event = (description: string) => ({
      ...sample,
      id: `evt_${prefix}_${index}`,
      data: {
        object: { ...sample.data.object, email: `bench-${index}@example.com`, description },
      },
    });
    const bare = Buffer.byteLength(JSON.stringify(event('')));
    const payload = JSON.stringify(event('x'.repeat(Math.max(0, bodyBytes - bare))));
    const body = Buffer.from(payload);
    return {
      body,
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'content-length': String(body.length),
        'stripe-signature': stripe.webhooks.generateTestHeaderString({
          payload,
          secret,
          timestamp,
        }),
      },
    };
  });
}
