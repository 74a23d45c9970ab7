/**
 * The `/sources/{name}` endpoint (contract §6) for tests: sources documents, requests signed as
 * the providers sign them (with their own libraries), and the real ingest handler with sources.
 */

import { randomBytes } from 'node:crypto';
import { sign as signGitHub } from '@octokit/webhooks-methods';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import Stripe from 'stripe';
import { parseCredentials } from '../../functions/core/ingest/webhook-auth.ts';
import type { Logger, RequestLedger } from '../../functions/core/ports.ts';
import type {
  EventQueue,
  SourceDeadLetter,
  SourceDeadLetterQueue,
} from '../../functions/core/queue-ports.ts';
import { loadSourceCompiler } from '../../functions/core/sources/source-compiler.ts';
import { compileSources, parseSourcesDocument } from '../../functions/core/sources/sources.ts';
import { createIngestHandler } from '../../functions/ingest/handler.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';
import {
  API_KEY,
  httpApiEvent,
  INGEST_LIMITS,
  NOW,
  NOW_SECONDS,
  WEBHOOK_SECRET,
} from './ingest.ts';

// The tests compile sources as the composition roots do, once JSONata is loaded.
await loadSourceCompiler();

export const STRIPE_SECRET = `whsec_${randomBytes(24).toString('hex')}`;
export const GITHUB_SECRET = randomBytes(20).toString('hex');

const stripe = new Stripe('sk_test_not_a_real_key');

/**
 * A Stripe source as an operator writes one: customers created or updated become a contact
 * create by email, deleted ones a delete by `match.email`; Stripe's event id is the key.
 */
export function stripeSource(overrides: Record<string, unknown> = {}) {
  return {
    verify: { scheme: 'stripe', secret: STRIPE_SECRET },
    filter: "type in ['customer.created', 'customer.updated', 'customer.deleted']",
    map: `type = 'customer.deleted'
      ? { 'entity': 'contacts', 'action': 'delete', 'match': { 'email': data.object.email } }
      : { 'entity': 'contacts', 'action': 'create',
          'data': { 'email': data.object.email, 'firstname': data.object.name } }`,
    ...overrides,
  };
}

/** A GitHub source: a star becomes a contact; the delivery id (a header) is the key. */
export function githubSource() {
  return {
    verify: { scheme: 'github', secret: GITHUB_SECRET },
    filter: "$headers.'x-github-event' = 'star' and action = 'created'",
    map: "{ 'entity': 'contacts', 'action': 'create', 'data': { 'email': sender.email } }",
  };
}

/** A Stripe event of `type` about a customer with this email. */
export function stripeEvent(id: string, type: string, email: string, extra = {}) {
  return JSON.stringify({
    id,
    object: 'event',
    type,
    data: { object: { id: 'cus_1', object: 'customer', email, name: 'Ann', ...extra } },
  });
}

/** Headers of a request Stripe signed at `timestamp` (unix seconds). */
export function stripeHeaders(
  payload: string,
  options: { timestamp?: number; secret?: string } = {},
): Record<string, string> {
  return {
    'content-type': 'application/json; charset=utf-8',
    'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
    'stripe-signature': stripe.webhooks.generateTestHeaderString({
      payload,
      secret: options.secret ?? STRIPE_SECRET,
      timestamp: options.timestamp ?? NOW_SECONDS,
    }),
  };
}

/** Headers of a delivery GitHub signed. */
export async function githubHeaders(
  payload: string,
  delivery: string,
  event = 'star',
): Promise<Record<string, string>> {
  return {
    'content-type': 'application/json',
    'x-github-event': event,
    'x-github-delivery': delivery,
    'x-hub-signature-256': await signGitHub(GITHUB_SECRET, payload),
  };
}

/** The API Gateway event of `POST /sources/{name}`. */
export function sourceEvent(
  name: string,
  body: string | Uint8Array,
  headers: Record<string, string>,
): APIGatewayProxyEventV2 {
  const event = httpApiEvent({ body, headers });
  const routeKey = 'POST /sources/{name}';
  const path = `/sources/${name}`;
  return {
    ...event,
    routeKey,
    rawPath: path,
    pathParameters: { name },
    requestContext: {
      ...event.requestContext,
      routeKey,
      http: { ...event.requestContext.http, path },
    },
  };
}

/** A dead-letter queue that keeps what it is given, or fails as told. */
export function recordingDeadLetters(
  fail?: () => Error,
): SourceDeadLetterQueue & { letters: SourceDeadLetter[] } {
  const letters: SourceDeadLetter[] = [];
  return {
    letters,
    async deadLetter(letter) {
      if (fail) throw fail();
      letters.push(letter);
    },
  };
}

export interface SourceAnswer {
  status: number;
  body: {
    accepted?: number;
    eventIds?: string[];
    ignored?: boolean;
    deadLettered?: string;
    error?: { code: string; message: string };
  };
  /** The body as sent. */
  raw: string;
}

/** The real ingest handler with the sources of `document`, over the given queues. */
export function sourcesHandler(options: {
  document: unknown;
  queue: EventQueue;
  deadLetters: SourceDeadLetterQueue;
  logger: Logger;
  ledger?: RequestLedger;
  clock?: { now(): number };
  limits?: Partial<typeof INGEST_LIMITS>;
  timeoutMs?: number;
}) {
  const sources = compileSources(parseSourcesDocument(options.document), {
    limits: options.timeoutMs === undefined ? undefined : { timeoutMs: options.timeoutMs },
  });
  const credentials = parseCredentials({ webhookSecrets: [WEBHOOK_SECRET], apiKeys: [API_KEY] });
  let ids = 0;
  const handler = createIngestHandler({
    credentials: async () => credentials,
    queue: options.queue,
    ledger: options.ledger,
    clock: options.clock ?? { now: () => NOW },
    newId: () => `generated-${++ids}`,
    limits: { ...INGEST_LIMITS, ...options.limits },
    logger: options.logger,
    sources,
    sourceDeadLetters: options.deadLetters,
  });
  return async (event: APIGatewayProxyEventV2): Promise<SourceAnswer> => {
    const context = lambdaContext('ingest', 10_000, { awsRequestId: 'request-7' });
    const result = (await handler(event, context)) as APIGatewayProxyStructuredResultV2;
    const raw = String(result.body);
    return { status: result.statusCode ?? 0, body: JSON.parse(raw), raw };
  };
}
