import type {
  Logger,
  RefreshAnswer,
  RefreshReport,
  RefreshRequester,
} from '../../functions/core/ports.ts';

/**
 * The token refresher of the local stack, run one at a time as reserved concurrency 1 makes it in
 * the cloud: a run asked for while another is under way is refused as busy, like a throttled
 * invoke, so the batch handler's polling path is the one it takes in the cloud too. It is also
 * the batch handler's RefreshRequester: a function call in place of the RequestResponse invoke.
 */
export class LocalRefresher implements RefreshRequester {
  readonly #run: (event: unknown) => Promise<RefreshReport>;
  readonly #logger: Logger;
  readonly #scheduleSeconds: number;
  #running: Promise<RefreshReport> | undefined;

  /** `scheduleSeconds`: the timer's period (`REFRESH_INTERVAL_SECONDS`), told to scheduled runs. */
  constructor(
    run: (event: unknown) => Promise<RefreshReport>,
    logger: Logger,
    scheduleSeconds: number,
  ) {
    this.#run = run;
    this.#logger = logger;
    this.#scheduleSeconds = scheduleSeconds;
  }

  /** One run with this event, or 'busy'; a failed run rejects. */
  async invoke(event: unknown): Promise<RefreshReport | 'busy'> {
    if (this.#running) return 'busy';
    const running = this.#run(event);
    this.#running = running;
    try {
      return await running;
    } finally {
      this.#running = undefined;
    }
  }

  /**
   * A scheduled run, told its period as the cloud's rule input tells it (a run puts off a renewal
   * only to a next run that comes in time): skipped while another runs, its failure logged.
   */
  async scheduled(): Promise<void> {
    try {
      await this.invoke({ scheduleSeconds: this.#scheduleSeconds });
    } catch (error) {
      this.#logger.error('The refresher failed', { error: String(error) });
    }
  }

  async refreshNow(request: {
    reason: string;
    staleUpdatedAt: string | null;
  }): Promise<RefreshAnswer> {
    const outcome = await this.invoke({ force: true, ...request });
    if (outcome === 'busy') return { kind: 'busy' };
    return {
      kind: 'answered',
      action: outcome.action,
      ...(outcome.why === undefined ? {} : { why: outcome.why }),
      ...(outcome.stored ? { stored: outcome.stored } : {}),
    };
  }

  /** Resolves once no run is under way. */
  async idle(): Promise<void> {
    await this.#running?.catch(() => {});
  }
}
