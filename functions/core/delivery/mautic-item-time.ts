/**
 * Mautic's observed time per item: how many milliseconds its batch calls have been taking for
 * each item they carried, over its recent successful calls. A real Mautic saves a batch item by
 * item, so a call's time grows with its items (Mautic 5.1.1 on 2 cores: 4–7 s for 200 contacts,
 * a fraction of a second for one); the delivery sizes and times its calls by this figure
 * (`call-budget.ts`), so that a call Mautic may be applying is not cut off by a deadline it
 * could have foreseen (contract §2).
 *
 * Kept per container, for as long as it lives, like the batch limit Mautic stated. Self-contained
 * on purpose: a shared view of Mautic's health may feed it from elsewhere (`observe`).
 */

/**
 * Calls of fewer items teach nothing about the time per item: their time is mostly the call's
 * own (Mautic booting its kernel, the token check), a few hundred ms that would make one item
 * look as slow as that. From 20 items on, that part is at most tens of ms per item, and it
 * errs on the safe side: a larger estimate only makes calls smaller or their timeouts longer.
 */
export const LEARN_MIN_ITEMS = 20;

/** A call of this many items (Mautic's default `api_batch_max_limit`) counts as a whole sample. */
const FULL_CALL_ITEMS = 200;

/**
 * How far one full call moves the average towards its own figure: half, so that a Mautic that
 * slowed down is believed within two or three calls, and one odd call does not decide alone.
 */
const SMOOTHING = 0.5;

/**
 * An exponentially weighted moving average of ms per item, each call weighted by its share of a
 * full call (a call of 50 items moves it a quarter as far as one of 200).
 */
export class MauticItemTime {
  #msPerItem: number | undefined;

  /** Milliseconds per item, undefined until a call of `LEARN_MIN_ITEMS` or more was observed. */
  get msPerItem(): number | undefined {
    return this.#msPerItem;
  }

  /** Learns from a call Mautic answered: how many items it carried and how long it took. */
  observe(items: number, durationMs: number): void {
    if (!(items >= LEARN_MIN_ITEMS) || !(durationMs >= 0)) return;
    const sample = durationMs / items;
    if (this.#msPerItem === undefined) {
      this.#msPerItem = sample;
      return;
    }
    const weight = Math.min(1, items / FULL_CALL_ITEMS);
    const step = 1 - (1 - SMOOTHING) ** weight;
    this.#msPerItem += step * (sample - this.#msPerItem);
  }
}
