import type { RetryPolicy } from '../../functions/core/retry-policy.ts';
import { DEFAULT_SIMULATOR_CLIENT } from '../../mautic-simulator/server.ts';
import type { LocalConfig } from './local-config.ts';
import { sourcesWithPlaceholderSecrets } from './source-placeholders.ts';

/** What the local stack tells whoever started it once it is up. */
export interface Banner {
  mauticUrl: string;
  simulated: boolean;
  grantType: LocalConfig['MAUTIC_GRANT_TYPE'];
  retry: RetryPolicy;
  secretsEndpoint: string;
  dedupDescription: string;
  /** The dynalite the outcome table is in. */
  dynamodbEndpoint: string;
  frontUrl: string;
  sourcesFile: string | undefined;
  sourceNames: ReadonlyArray<string>;
  /** The webhook secret, when the stack made it up (no WEBHOOK_SECRET). */
  generatedSecret: string | undefined;
}

/** The lines `npm start` prints: what runs where, and a first event to send. */
export function printBanner(config: LocalConfig, banner: Banner, print: (line: string) => void) {
  const { retry, frontUrl, sourcesFile, generatedSecret } = banner;
  print(`Mautic batch relay, local stack`);
  print(
    `  Mautic:        ${banner.simulated ? `${banner.mauticUrl} (embedded simulator, API credential ${DEFAULT_SIMULATOR_CLIENT.clientId} / ${DEFAULT_SIMULATOR_CLIENT.clientSecret}: the simulator's own)` : banner.mauticUrl}`,
  );
  print(
    '  look in it:    npx mautic-relay mautic --local contacts (or segments, campaigns, companies)',
  );
  print(
    `  queues:        fauxqs FIFO (a message group per record), batches of ${config.BATCH_SIZE} within ${config.BATCH_WINDOW_SECONDS} s; failures retried for ${retry.horizonSeconds} s (delays ${retry.baseSeconds}–${retry.maxDelaySeconds} s, at most ${retry.maxReceiveCount} receives)`,
  );
  print(
    `  token store:   Secrets Manager stand-in at ${banner.secretsEndpoint} (refresh every ${config.REFRESH_INTERVAL_SECONDS} s)`,
  );
  print(`  de-duplication: ${banner.dedupDescription}`);
  const bound = config.MAX_RECORD_EVENTS_PER_MINUTE;
  print(`  per record: ${bound === 0 ? 'no bound' : `at most ${bound} events a minute`}`);
  const kept = config.OUTCOME_RETENTION_SECONDS;
  print(
    `  outcomes:      ${kept === 0 ? 'off (OUTCOME_RETENTION_SECONDS=0)' : `kept ${kept} s in dynalite at ${banner.dynamodbEndpoint} (GET ${frontUrl}/events/ID, npx mautic-relay events --local)`}`,
  );
  if (sourcesFile !== undefined) {
    print(
      `  sources:       ${banner.sourceNames.join(', ') || 'none'} (POST ${frontUrl}/sources/NAME; ${sourcesFile}, read again when it changes)`,
    );
    const placeholders = sourcesWithPlaceholderSecrets(sourcesFile);
    if (placeholders.length > 0)
      print(
        `  warning:       the secret of ${placeholders.join(', ')} is still the example's placeholder (REPLACE_…): the provider's webhooks are refused (401) until you put in the signing secret it shows`,
      );
  }
  if (generatedSecret !== undefined)
    // Each start generates another: a sender outside keeps working only with a pinned one.
    print(
      `  webhook secret (generated): ${generatedSecret} (a new one each start; to keep one: WEBHOOK_SECRET=whsec_… npm start)`,
    );
  if (banner.grantType === 'authorization_code') {
    // The tokens come from a person approving the relay; until then events wait in the queue.
    print('Authorize the relay (authorization_code), then it delivers:');
    print(`  ${authorizeCommand(config.AUTHORIZE_PORT)}`);
  }
  print("Send a signed sample event (send --local signs with this stack's own secret):");
  print(
    `  echo '{"entity":"contacts","action":"create","data":{"email":"ann@example.com","firstname":"Ann"}}' | npx mautic-relay send --local`,
  );
}

/** The operator command that authorizes this stack (its redirect URI's port, when not 8765). */
export function authorizeCommand(port: number): string {
  return `npx mautic-relay authorize --local${port === 8765 ? '' : ` --port ${port}`}`;
}
