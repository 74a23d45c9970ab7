import type { RetryPolicy } from '../../functions/core/retry-policy.ts';
import type { LocalConfig } from './local-config.ts';

/** What the local stack tells whoever started it once it is up. */
export interface Banner {
  mauticUrl: string;
  simulated: boolean;
  grantType: LocalConfig['MAUTIC_GRANT_TYPE'];
  retry: RetryPolicy;
  secretsEndpoint: string;
  dedupDescription: string;
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
    `  Mautic:        ${banner.simulated ? `${banner.mauticUrl} (embedded simulator)` : banner.mauticUrl}`,
  );
  print(
    `  queues:        fauxqs FIFO (a message group per record), batches of ${config.BATCH_SIZE} within ${config.BATCH_WINDOW_SECONDS} s; failures retried for ${retry.horizonSeconds} s (delays ${retry.baseSeconds}–${retry.maxDelaySeconds} s, at most ${retry.maxReceiveCount} receives)`,
  );
  print(
    `  token store:   Secrets Manager stand-in at ${banner.secretsEndpoint} (refresh every ${config.REFRESH_INTERVAL_SECONDS} s)`,
  );
  print(`  de-duplication: ${banner.dedupDescription}`);
  if (sourcesFile !== undefined) {
    print(
      `  sources:       ${banner.sourceNames.join(', ') || 'none'} (POST ${frontUrl}/sources/NAME; ${sourcesFile}, read again when it changes)`,
    );
  }
  if (generatedSecret !== undefined) print(`  webhook secret (generated): ${generatedSecret}`);
  if (banner.grantType === 'authorization_code') {
    // The tokens come from a person approving the relay; until then events wait in the queue.
    print('Authorize the relay (authorization_code), then it delivers:');
    print(`  ${authorizeCommand(config.AUTHORIZE_PORT)}`);
  }
  print('Send a signed sample event:');
  print(
    `  echo '{"entity":"contacts","action":"create","data":{"email":"ann@example.com","firstname":"Ann"}}' | ${generatedSecret === undefined ? '' : `WEBHOOK_SECRET=${generatedSecret} `}npx mautic-relay send --url ${frontUrl}/events`,
  );
}

/** The operator command that authorizes this stack (its redirect URI's port, when not 8765). */
export function authorizeCommand(port: number): string {
  return `npx mautic-relay authorize --local${port === 8765 ? '' : ` --port ${port}`}`;
}
