import * as z from 'zod';

/** A Mautic API path name (contract §1): `contacts`, `companies`, `segments`, … */
export const ENTITY_PATTERN = /^[a-z][a-zA-Z]{1,63}$/;

const ACTIONS = ['create', 'edit', 'delete'] as const;
export type Action = (typeof ACTIONS)[number];

const eventFields = {
  entity: z
    .string()
    .regex(
      ENTITY_PATTERN,
      'must be a Mautic API path name such as "contacts" (/^[a-z][a-zA-Z]{1,63}$/)',
    ),
  action: z.enum(ACTIONS),
  data: z.record(z.string(), z.unknown()).optional(),
  id: z.number().int().positive().optional(),
};

/** Built once: a schema made per event cost more than the rest of the event's checks. */
const emailSchema = z.email();

type EventShape = {
  entity: string;
  action: Action;
  data?: Record<string, unknown> | undefined;
  id?: number | undefined;
};

/** The rules that tie fields together (contract §1, the event object table). */
function checkEvent(event: EventShape, ctx: z.RefinementCtx): void {
  if ((event.action === 'create' || event.action === 'edit') && event.data === undefined) {
    ctx.addIssue({ code: 'custom', path: ['data'], message: `is required for ${event.action}` });
  }
  if ((event.action === 'edit' || event.action === 'delete') && event.id === undefined) {
    ctx.addIssue({ code: 'custom', path: ['id'], message: `is required for ${event.action}` });
  }
  if (event.entity !== 'contacts' || event.data === undefined) return;
  const email = event.data.email;
  if (email === undefined) {
    if (event.action === 'create') {
      ctx.addIssue({
        code: 'custom',
        path: ['data', 'email'],
        message: 'is required to create a contact',
      });
    }
  } else if (typeof email !== 'string' || !emailSchema.safeParse(email).success) {
    ctx.addIssue({
      code: 'custom',
      path: ['data', 'email'],
      message: 'must be a valid email address',
    });
  }
}

/** One event as a sender posts it (contract §1). */
export const relayEventSchema = z
  .strictObject({ ...eventFields, eventId: z.string().min(1).max(128).optional() })
  .superRefine(checkEvent);
export type RelayEvent = z.infer<typeof relayEventSchema>;

/**
 * One queued event: the body of one SQS message, written by ingest and read by the batch
 * function. `v` versions the envelope so a later format can be told apart.
 */
export const queuedEventSchema = z
  .object({
    v: z.literal(1),
    eventId: z.string().min(1).max(128),
    receivedAt: z.iso.datetime(),
    sender: z.string().min(1).max(128),
    ...eventFields,
  })
  .superRefine(checkEvent);
export type QueuedEvent = z.infer<typeof queuedEventSchema>;

/** A short, value-free description of why a value failed a schema: paths and messages only. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(event)'}: ${issue.message}`)
    .join('; ');
}

/**
 * The reference by which an event names its record, as far as the relay can tell without asking
 * Mautic: `email <address>` for a contact create (Mautic upserts contacts by email), `id <n>` for
 * an edit or delete, and undefined for a create that always makes a new record. Events of one
 * entity with the same reference keep their arrival order: across batches through the queue's
 * message group (`queueMessageFor`), within a batch through the planner.
 */
export function recordKey(event: Pick<QueuedEvent, 'entity' | 'action' | 'data' | 'id'>) {
  if (event.action === 'create') {
    const email = event.entity === 'contacts' ? event.data?.email : undefined;
    return typeof email === 'string' ? `email ${email.trim().toLowerCase()}` : undefined;
  }
  return event.id === undefined ? undefined : `id ${event.id}`;
}
