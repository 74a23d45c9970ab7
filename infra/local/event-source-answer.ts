import {
  DeleteMessageBatchCommand,
  type DeleteMessageBatchCommandOutput,
} from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';

/** SQS takes at most 10 entries per DeleteMessageBatch. */
const DELETE_LIMIT = 10;

/** The mapping's delete call (`MappingSqs`). */
interface DeletingSqs {
  send(
    command: DeleteMessageBatchCommand,
    options?: { abortSignal?: AbortSignal },
  ): Promise<DeleteMessageBatchCommandOutput>;
}

/** The events queue, to delete from; `report` is told of a delete call that failed. */
interface DeleteTarget {
  sqs: DeletingSqs;
  queueUrl: string;
  report: (error: unknown) => void;
}

/**
 * Which messages of the batch failed, by the handler's answer under ReportBatchItemFailures:
 * those it reported, or all of them when it threw, timed out or answered what fails the whole
 * batch.
 */
export function failedByAnswer(
  outcome: { ok: true; result: unknown } | { ok: false },
  messageIds: ReadonlyArray<string>,
): { failedIds: ReadonlySet<string>; wholeBatchFailed: boolean } {
  const reported = outcome.ok ? itemFailuresOf(outcome.result, new Set(messageIds)) : undefined;
  return reported === undefined
    ? { failedIds: new Set(messageIds), wholeBatchFailed: true }
    : { failedIds: reported, wholeBatchFailed: false };
}

/**
 * The ids the handler reported failed, or undefined when the response fails the whole batch
 * (docs/architecture.md, reliability idea 2). Lambda sees the handler's answer as JSON, so it is judged as JSON.
 */
function itemFailuresOf(
  response: unknown,
  batchIds: ReadonlySet<string>,
): ReadonlySet<string> | undefined {
  let value: unknown;
  try {
    const json = JSON.stringify(response);
    value = json === undefined ? null : JSON.parse(json);
  } catch {
    return undefined;
  }
  if (value === null) return new Set();
  if (!isPlainObject(value)) return undefined;
  const failures = value.batchItemFailures;
  if (failures === undefined || failures === null) return new Set();
  if (!Array.isArray(failures)) return undefined;
  const failed = new Set<string>();
  for (const entry of failures) {
    if (!isPlainObject(entry)) return undefined;
    const id = entry.itemIdentifier;
    if (typeof id !== 'string' || id === '' || !batchIds.has(id)) return undefined;
    failed.add(id);
  }
  return failed;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Deletes what the answer acknowledged: DeleteMessageBatch in groups of 10, all at once; what
 * fails is retried once. Returns the ids left (they reappear after the visibility timeout).
 */
export async function deleteAll(queue: DeleteTarget, records: SQSRecord[]): Promise<Set<string>> {
  let pending = records;
  for (let attempt = 0; attempt < 2 && pending.length > 0; attempt++) {
    const groups: SQSRecord[][] = [];
    for (let start = 0; start < pending.length; start += DELETE_LIMIT) {
      groups.push(pending.slice(start, start + DELETE_LIMIT));
    }
    pending = (await Promise.all(groups.map((group) => deleteGroup(queue, group)))).flat();
  }
  return new Set(pending.map((record) => record.messageId));
}

async function deleteGroup(
  { sqs, queueUrl, report }: DeleteTarget,
  group: SQSRecord[],
): Promise<SQSRecord[]> {
  try {
    const { Successful = [] } = await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: group.map((record, index) => ({
          Id: String(index),
          ReceiptHandle: record.receiptHandle,
        })),
      }),
    );
    // Whatever the answer does not list as deleted is treated as not deleted.
    const deleted = new Set(Successful.map((entry) => entry.Id));
    return group.filter((_, index) => !deleted.has(String(index)));
  } catch (error) {
    report(error);
    return group;
  }
}
