import { Logger } from '@aws-lambda-powertools/logger';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { QueueUnavailableError } from '../../functions/core/errors.ts';
import type { IngestLimits } from '../../functions/core/ingest/ingest-steps.ts';
import {
  credentialIdOf,
  parseCredentials,
  parseWebhookSecret,
  signWebhook,
} from '../../functions/core/ingest/webhook-auth.ts';
import type { Clock, RequestLedger } from '../../functions/core/ports.ts';
import type { EventQueue, OutgoingMessage } from '../../functions/core/queue-ports.ts';
import { createIngestHandler } from '../../functions/ingest/handler.ts';
import { DEFAULT_ENTITIES, DEFAULTS } from '../../functions/shared/config.ts';
import { lambdaContext } from '../../infra/local/lambda-context.ts';

/** The ingest's default limits. */
export const INGEST_LIMITS: IngestLimits = {
  maxBodyBytes: DEFAULTS.maxBodyBytes,
  maxEvents: DEFAULTS.maxEventsPerRequest,
  entities: new Set(DEFAULT_ENTITIES),
  contactMatchFields: new Set(['email']),
};

export const NOW = Date.parse('2026-11-21T12:00:00Z');
export const NOW_SECONDS = NOW / 1000;
export const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
export const OTHER_SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
export const API_KEY = 'relay-test-api-key-0123456789';
/** The envelope's sender for each credential above, given as a value: named by its stable id. */
export const WEBHOOK_SENDER = `webhook#${credentialIdOf('webhook_secret', WEBHOOK_SECRET)}`;
export const OTHER_SENDER = `webhook#${credentialIdOf('webhook_secret', OTHER_SECRET)}`;
export const API_KEY_SENDER = `api-key#${credentialIdOf('api_key', API_KEY)}`;

/** An API Gateway HTTP API (payload 2.0) event for POST /events. */
export function httpApiEvent(options: {
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  isBase64Encoded?: boolean;
}): APIGatewayProxyEventV2 {
  const { body, headers = {} } = options;
  const binary = body instanceof Uint8Array;
  return {
    version: '2.0',
    routeKey: 'POST /events',
    rawPath: '/events',
    rawQueryString: '',
    headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: '127.0.0.1',
      domainPrefix: '127',
      http: {
        method: 'POST',
        path: '/events',
        protocol: 'HTTP/1.1',
        sourceIp: '127.0.0.1',
        userAgent: 'test',
      },
      requestId: 'req',
      routeKey: 'POST /events',
      stage: '$default',
      time: '21/Nov/2026:12:00:00 +0000',
      timeEpoch: NOW,
    },
    ...(body === undefined ? {} : { body: binary ? Buffer.from(body).toString('base64') : body }),
    isBase64Encoded: options.isBase64Encoded ?? binary,
  };
}

/** Standard Webhooks headers over `body`, signed with `secret` at `timestamp`. */
export function signedHeaders(
  body: string | Uint8Array,
  options: { id?: string; timestamp?: number | string; secret?: string } = {},
): Record<string, string> {
  const id = options.id ?? 'msg_2Zq4YkJt';
  const timestamp = options.timestamp ?? NOW_SECONDS;
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(
      parseWebhookSecret(options.secret ?? WEBHOOK_SECRET),
      id,
      Number(timestamp),
      bytes,
    ),
  };
}

/** Characters SQS refuses in a message body (it allows #x9, #xA, #xD, #x20–#xD7FF, #xE000–#xFFFD, #x10000–#x10FFFF). */
const NOT_SQS_TEXT = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

/** A queue that records what it was given, refuses what SQS would refuse, or fails as told. */
export function recordingQueue(fail?: () => Error): EventQueue & { messages: OutgoingMessage[] } {
  const messages: OutgoingMessage[] = [];
  return {
    messages,
    async enqueue(batch) {
      if (fail) throw fail();
      const refused = batch.find((message) => NOT_SQS_TEXT.test(message.body));
      if (refused)
        throw new QueueUnavailableError(`SQS would refuse the body of ${refused.eventId}`);
      messages.push(...batch);
    },
  };
}

/** What the ingest answers. */
export interface IngestBody {
  accepted?: number;
  eventIds?: string[];
  error?: {
    code: string;
    message: string;
    details?: Array<{ index?: number; path: string; message: string }>;
  };
}

/** The real ingest handler over `queue`, with one webhook secret and one API key. */
export function ingestHandler(
  queue: EventQueue,
  options: {
    logger?: Logger;
    secrets?: string[];
    apiKeys?: string[];
    limits?: IngestLimits;
    ledger?: RequestLedger;
    clock?: Clock;
    /** The invocation's time: what getRemainingTimeInMillis() counts down from. */
    timeoutMs?: number;
    /** Collects each answer's body as sent, for byte-for-byte comparisons. */
    rawBodies?: string[];
  } = {},
) {
  const credentials = parseCredentials({
    webhookSecrets: options.secrets ?? [WEBHOOK_SECRET],
    apiKeys: options.apiKeys ?? [API_KEY],
  });
  const handler = createIngestHandler({
    credentials: async () => credentials,
    queue,
    ledger: options.ledger,
    clock: options.clock ?? { now: () => NOW },
    newId: (() => {
      let n = 0;
      return () => `generated-${++n}`;
    })(),
    limits: options.limits ?? INGEST_LIMITS,
    logger: options.logger ?? new Logger({ serviceName: 'ingest-test', logLevel: 'SILENT' }),
  });
  return async (event: APIGatewayProxyEventV2) => {
    const context = lambdaContext('ingest', options.timeoutMs ?? 10_000, {
      awsRequestId: 'request-42',
    });
    const result = (await handler(event, context)) as APIGatewayProxyStructuredResultV2;
    options.rawBodies?.push(String(result.body));
    return { status: result.statusCode ?? 0, body: JSON.parse(String(result.body)) as IngestBody };
  };
}

export const contact = (n = 0) => ({
  entity: 'contacts',
  action: 'create',
  data: { email: `user${n}@example.com` },
});
