/**
 * The Standard Webhooks (v1) signature check every receiver must make, on node:crypto alone: the
 * baseline's whole work and the floor's first step.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/** True when one of the `webhook-signature` entries signs the id, timestamp and body. */
export function verifySignature(key: Buffer, headers: IncomingHttpHeaders, body: Buffer): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string')
    return false;
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  let valid = false;
  for (const entry of signatures.split(' ')) {
    const [version, encoded] = entry.split(',');
    if (version !== 'v1' || encoded === undefined) continue;
    const candidate = Buffer.from(encoded, 'base64');
    if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) valid = true;
  }
  return valid;
}
