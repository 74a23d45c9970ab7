import { IngestRefusal } from '../errors.ts';
import type { Clock, Logger } from '../ports.ts';
import type { IngestEndpoint } from './ingest-steps.ts';
import { refusedCheck, standardWebhookHeaders } from './webhook-auth.ts';

/**
 * POST /events' endpoint with each 401 in the operator's log: one warning with the request id and
 * the check that refused (`refusedCheck`: no credential, a stale timestamp, a bad signature, an
 * unknown key…), never a credential's value. The sender's answer stays the same whatever failed.
 */
export function loggingRefusals(
  endpoint: IngestEndpoint,
  deps: { clock: Clock; logger?: Logger | undefined },
): IngestEndpoint {
  return {
    ...endpoint,
    authenticate: async (request) => {
      try {
        return await endpoint.authenticate(request);
      } catch (error) {
        if (error instanceof IngestRefusal && error.status === 401) {
          const { headers } = request;
          deps.logger?.warn('Refused a request (401): no sender credential matched it', {
            event: 'unauthorized',
            requestId: request.requestId,
            check: refusedCheck(
              standardWebhookHeaders(headers),
              headers.authorization,
              Math.floor(deps.clock.now() / 1000),
            ),
          });
        }
        throw error;
      }
    },
  };
}
