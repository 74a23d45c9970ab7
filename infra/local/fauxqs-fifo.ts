/**
 * fauxqs (2.4.1, still so in 2.9.2) with its FIFO queues corrected where the relay's order per
 * record depends on them: start it with `startFauxqsFifoFixed` wherever it is started.
 *
 * What SQS does with a FIFO queue, and fauxqs does not:
 * - A ReceiveMessage returns several messages of one message group, in order, when it can (AWS:
 *   "SQS returns as many messages with the same message group ID as possible"); then no more of
 *   the group until they are deleted or visible again. fauxqs takes one message per group per
 *   call, so locally a record's second event never came in the same batch as its first, and the
 *   batch function's handling of that case (the cloud's everyday case) went untried.
 * - A group stays in the order its messages arrived. fauxqs puts a message whose visibility ran
 *   out (`processTimers`) or was set to 0 (`changeVisibility`) back with `unshift`: two or more
 *   messages of one group coming back (a batch whose invocation died, or retried with delays
 *   that end in the other order) came back reversed.
 *
 * Both are patched on fauxqs's `SqsQueue` class, which the package does not export: its module
 * is found beside the package's main file. The patch keeps fauxqs's own bookkeeping (locks,
 * receive counts, redrive to the dead-letter queue) and only adds to it, so it fails loudly if a
 * fauxqs version changes the parts it touches.
 */
import { type FauxqsServer, startFauxqs } from 'fauxqs';

/** The parts of fauxqs's SqsQueue (dist/sqs/sqsStore.js) the patch reads and wraps. */
interface QueueMessage {
  messageGroupId?: string;
}
interface InFlight {
  message: QueueMessage;
  receiptHandle: string;
  visibilityDeadline: number;
}
interface SqsQueue {
  isFifo(): boolean;
  fifoMessages: Map<string, QueueMessage[]>;
  fifoLockedGroups: Map<string, number>;
  inflightMessages: Map<string, InFlight>;
  enqueue(message: QueueMessage): void;
  dequeueFifo(
    maxCount: number,
    visibilityTimeout?: number,
    ...rest: unknown[]
  ): Array<{ ReceiptHandle: string }>;
  changeVisibility(receiptHandle: string, timeoutSeconds: number): void;
  processTimers(): void;
}

/** fauxqs's group for a FIFO message sent without one (it refuses such sends, though). */
const DEFAULT_GROUP = '__default';
/**
 * A visibility running out within this long of the check before `processTimers` is still
 * caught: fauxqs reads the clock again inside it, a moment later.
 */
const CLOCK_SLACK_MS = 1_000;

let patched: Promise<void> | undefined;

/** Starts fauxqs (as `startFauxqs`) with its FIFO queues patched as described above. */
export async function startFauxqsFifoFixed(
  options: Parameters<typeof startFauxqs>[0],
): Promise<FauxqsServer> {
  patched ??= patchSqsQueue();
  await patched;
  return startFauxqs(options);
}

async function patchSqsQueue(): Promise<void> {
  const queue = await sqsQueuePrototype();
  receiveGroupsWhole(queue);
  keepGroupsInArrivalOrder(queue);
}

/** fauxqs's SqsQueue prototype, refused if a method the patch wraps is missing. */
async function sqsQueuePrototype(): Promise<SqsQueue> {
  const store = new URL('./sqs/sqsStore.js', import.meta.resolve('fauxqs'));
  const { SqsQueue } = (await import(store.href)) as { SqsQueue?: { prototype: SqsQueue } };
  const queue = SqsQueue?.prototype;
  const methods = ['isFifo', 'enqueue', 'dequeueFifo', 'changeVisibility', 'processTimers'];
  if (queue === undefined || methods.some((name) => typeof Reflect.get(queue, name) !== 'function'))
    throw new Error(
      `fauxqs changed its SqsQueue (${store.pathname}): review infra/local/fauxqs-fifo.ts`,
    );
  return queue;
}

/** A receive takes as many messages of a group as it can, in order, as SQS's does. */
function receiveGroupsWhole(queue: SqsQueue): void {
  const { dequeueFifo } = queue;
  queue.dequeueFifo = function (this: SqsQueue, maxCount, visibilityTimeout, ...rest) {
    const limit = Math.min(maxCount, 10);
    const received = dequeueFifo.call(this, limit, visibilityTimeout, ...rest);
    // A receive that hides nothing (VisibilityTimeout 0) would find what it took visible again
    // and take it twice: it takes one message per group, as fauxqs does.
    if (visibilityTimeout === 0) return received;
    // fauxqs takes one message per free group, then locks it. The groups this call took from
    // were free when it began, so all they have in flight is this call's: their locks are set
    // aside while fauxqs takes the next message of each, then counted again from what is in
    // flight, as fauxqs counts them.
    let taken = groupsOf(this, received);
    while (received.length < limit) {
      const more = taken.filter((group) => (this.fifoMessages.get(group)?.length ?? 0) > 0);
      if (more.length === 0) break;
      for (const group of more) this.fifoLockedGroups.delete(group);
      let next: ReturnType<SqsQueue['dequeueFifo']> = [];
      try {
        next = dequeueFifo.call(this, limit - received.length, visibilityTimeout, ...rest);
      } finally {
        relock(this, more);
      }
      if (next.length === 0) break;
      received.push(...next);
      taken = groupsOf(this, next);
    }
    return received;
  };
}

/**
 * A group's messages that become visible again (their visibility ran out, or was set to 0) take
 * their places in the order the group's messages arrived, where fauxqs puts each back first.
 */
function keepGroupsInArrivalOrder(queue: SqsQueue): void {
  const { enqueue, changeVisibility, processTimers } = queue;
  // A group's order is the order its messages reached the queue (SQS's sequence numbers). Not
  // fauxqs's `sequenceNumber`: a message the redrive policy moves keeps its source queue's.
  const arrival = new WeakMap<QueueMessage, number>();
  let arrived = 0;
  const inArrivalOrder = (self: SqsQueue, group: string) =>
    self.fifoMessages.get(group)?.sort((a, b) => (arrival.get(a) ?? 0) - (arrival.get(b) ?? 0));

  queue.enqueue = function (this: SqsQueue, message) {
    arrival.set(message, ++arrived);
    enqueue.call(this, message);
  };

  queue.changeVisibility = function (this: SqsQueue, receiptHandle, timeoutSeconds) {
    const message = this.isFifo() ? this.inflightMessages.get(receiptHandle)?.message : undefined;
    changeVisibility.call(this, receiptHandle, timeoutSeconds);
    if (message !== undefined && !this.inflightMessages.has(receiptHandle))
      inArrivalOrder(this, message.messageGroupId ?? DEFAULT_GROUP);
  };

  queue.processTimers = function (this: SqsQueue) {
    if (!this.isFifo()) return processTimers.call(this);
    const soon = Date.now() + CLOCK_SLACK_MS;
    const due: InFlight[] = [];
    for (const entry of this.inflightMessages.values())
      if (entry.visibilityDeadline <= soon) due.push(entry);
    processTimers.call(this);
    const returned = new Set<string>();
    for (const { message, receiptHandle } of due)
      if (!this.inflightMessages.has(receiptHandle))
        returned.add(message.messageGroupId ?? DEFAULT_GROUP);
    for (const group of returned) inArrivalOrder(this, group);
  };
}

/** The groups of messages a receive just took, in the order it took them. */
function groupsOf(queue: SqsQueue, received: ReadonlyArray<{ ReceiptHandle: string }>): string[] {
  const groups = received.map(
    ({ ReceiptHandle }) =>
      queue.inflightMessages.get(ReceiptHandle)?.message.messageGroupId ?? DEFAULT_GROUP,
  );
  return [...new Set(groups)];
}

/** Sets the groups' locks as fauxqs keeps them: one per message of the group in flight. */
function relock(queue: SqsQueue, groups: ReadonlyArray<string>): void {
  const inFlight = new Map<string, number>();
  for (const { message } of queue.inflightMessages.values()) {
    const group = message.messageGroupId ?? DEFAULT_GROUP;
    inFlight.set(group, (inFlight.get(group) ?? 0) + 1);
  }
  for (const group of groups) {
    const count = inFlight.get(group) ?? 0;
    if (count > 0) queue.fifoLockedGroups.set(group, count);
    else queue.fifoLockedGroups.delete(group);
  }
}
