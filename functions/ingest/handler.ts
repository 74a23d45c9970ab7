import middy from '@middy/core';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { type Lookup, lookUpEvents } from '../core/ingest/event-lookup.ts';
import { acceptEvents } from '../core/ingest/ingest.ts';
import {
  bodyTooLarge,
  type IngestRequest,
  type IngestResponse,
  refusalResponse,
} from '../core/ingest/ingest-steps.ts';
import type { Logger } from '../core/ports.ts';
import { acceptSource, type SourceIngestDeps } from '../core/sources/source-endpoint.ts';

export interface IngestHandlerDeps extends SourceIngestDeps {
  logger: Logger;
}

/** The HTTP API's routes to the ingest function (infra/aws/api.ts; the local front has the same). */
export const INGEST_ROUTES = {
  events: '/events',
  event: '/events/{eventId}',
  source: '/sources/{name}',
} as const;
const SOURCE_ROUTE_KEY = `POST ${INGEST_ROUTES.source}`;
const LOOKUP_ROUTE_KEYS = new Set([`GET ${INGEST_ROUTES.events}`, `GET ${INGEST_ROUTES.event}`]);

/**
 * The API Gateway HTTP API (payload 2.0) handler for POST /events and POST /sources/{name}
 * (contract §1, §6), and for GET /events/{eventId} and GET /events?ids= (§1.6). The body is taken as raw bytes (base64-decoded when API Gateway encoded
 * it) because the signature covers the bytes as sent; its size is checked before it is decoded.
 * An unexpected error answers 500 with a generic message and the request id, and is logged with
 * that id.
 */
export function createIngestHandler(deps: IngestHandlerDeps) {
  return middy<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Error, Context>()
    .use({
      onError: (request) => {
        const requestId = request.context.awsRequestId;
        const error = request.error;
        deps.logger.error('Unexpected error', {
          requestId,
          error: error ? `${error.name}: ${error.message}` : 'unknown',
        });
        request.response = respond({
          status: 500,
          body: {
            error: {
              code: 'internal_error',
              message: `An unexpected error occurred (request ${requestId}).`,
            },
          },
        });
      },
    })
    .handler(async (event, context) => {
      const body = rawBody(event, deps.limits.maxBodyBytes);
      if (body === undefined)
        return respond(refusalResponse(bodyTooLarge(deps.limits.maxBodyBytes)));
      const request: IngestRequest = {
        body,
        headers: lowerCased(event.headers),
        requestId: context.awsRequestId,
        remainingTimeMs: context.getRemainingTimeInMillis?.(),
      };
      if (LOOKUP_ROUTE_KEYS.has(event.routeKey))
        return respond(await lookUpEvents(request, lookupOf(event), deps));
      const response =
        event.routeKey === SOURCE_ROUTE_KEY
          ? await acceptSource(event.pathParameters?.name ?? '', request, deps)
          : await acceptEvents(request, deps);
      return respond(response);
    });
}

/**
 * What a GET asks for: the event of its path, or the `ids` of its query, read from the raw query
 * string (every `ids` parameter, joined) so that the cloud and the local front read it alike.
 */
function lookupOf(event: APIGatewayProxyEventV2): Lookup {
  const eventId = event.pathParameters?.eventId;
  if (eventId !== undefined) return { kind: 'one', eventId };
  const ids = new URLSearchParams(event.rawQueryString ?? '').getAll('ids');
  return { kind: 'some', ids: ids.length === 0 ? undefined : ids.join(',') };
}

/** The body's bytes, or undefined when they would exceed `maxBytes` (known before decoding). */
function rawBody(event: APIGatewayProxyEventV2, maxBytes: number): Uint8Array | undefined {
  const text = event.body ?? '';
  if (event.isBase64Encoded) {
    const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
    if (Math.floor((text.length * 3) / 4) - padding > maxBytes) return undefined;
    return Buffer.from(text, 'base64');
  }
  // UTF-16 length bounds the UTF-8 length from below, so most oversized bodies stop here.
  if (text.length > maxBytes) return undefined;
  return Buffer.from(text, 'utf8');
}

function lowerCased(
  headers: APIGatewayProxyEventV2['headers'] | undefined,
): Record<string, string | undefined> {
  const result: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(headers ?? {})) result[name.toLowerCase()] = value;
  return result;
}

function respond(
  response: { status: number; body: unknown } | IngestResponse,
): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode: response.status,
    headers: {
      'content-type': 'application/json',
      ...('headers' in response ? response.headers : {}),
    },
    body: JSON.stringify(response.body),
  };
}
