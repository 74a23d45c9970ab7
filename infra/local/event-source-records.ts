import { createHash } from 'node:crypto';
import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import type {
  SQSMessageAttribute,
  SQSMessageAttributes,
  SQSRecord,
  SQSRecordAttributes,
} from 'aws-lambda';

/** The queue a record comes from, as the record names it. */
export interface RecordSource {
  queueArn: string;
  region: string;
}

/** A received message as Lambda's event source hands it to the function: an SQSRecord. */
export function toSqsRecord(message: Message, { queueArn, region }: RecordSource): SQSRecord {
  const { MessageId, ReceiptHandle } = message;
  if (MessageId === undefined || ReceiptHandle === undefined) {
    throw new Error('ReceiveMessage answered a message without MessageId or ReceiptHandle');
  }
  const body = message.Body ?? '';
  const record: SQSRecord = {
    messageId: MessageId,
    receiptHandle: ReceiptHandle,
    body,
    attributes: toRecordAttributes(message.Attributes ?? {}),
    messageAttributes: toLambdaMessageAttributes(message.MessageAttributes ?? {}),
    md5OfBody: message.MD5OfBody ?? createHash('md5').update(body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
  if (message.MD5OfMessageAttributes !== undefined) {
    record.md5OfMessageAttributes = message.MD5OfMessageAttributes;
  }
  return record;
}

function toRecordAttributes(attributes: Partial<Record<string, string>>): SQSRecordAttributes {
  const record: SQSRecordAttributes = {
    ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
    SentTimestamp: attributes.SentTimestamp ?? '',
    SenderId: attributes.SenderId ?? '',
    ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? '',
  };
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && !(name in record)) {
      (record as unknown as Record<string, string>)[name] = value;
    }
  }
  return record;
}

/** The SDK's MessageAttributes in the Lambda event's shape (binary values as base64). */
function toLambdaMessageAttributes(
  attributes: Record<string, MessageAttributeValue>,
): SQSMessageAttributes {
  const result: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes)) {
    const attribute: SQSMessageAttribute = {
      stringListValues: value.StringListValues ?? [],
      binaryListValues: (value.BinaryListValues ?? []).map(base64),
      dataType: value.DataType ?? 'String',
    };
    if (value.StringValue !== undefined) attribute.stringValue = value.StringValue;
    if (value.BinaryValue !== undefined) attribute.binaryValue = base64(value.BinaryValue);
    result[name] = attribute;
  }
  return result;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}
