/**
 * A contact's or company's `fields` as Mautic 5.1.1's API shows them: the fields grouped, each
 * with its definition, and `all` with every value. Mautic shows them two ways, both recorded in
 * real-mautic-5.1.1/:
 * - **created** (a record this call created, from the field list in memory): entries
 *   `{id, group, label, alias, type, properties, value, normalizedValue}` in id order (a
 *   company's without `properties`), and a contact's `points` entry `null`;
 * - **loaded** (a record read from the database: an edit's, a delete's or a read's answer):
 *   entries `{id: "<id>", label, alias, type, group, object, is_fixed, properties:
 *   "<serialized>", default_value, value, normalizedValue}` in the table's order, and a company
 *   has an `other` group instead of `social` and `personal`;
 * - **matched** (a contact batch/new found by its email and updated): the loaded entries, in id
 *   order (contacts_batch_new_dup_and_invalid.json).
 * Number fields are cast as CustomFieldsApiControllerTrait::fixNumbers does, in both.
 */
import { DEFAULT_COMPANY_FIELDS, LOADED_COMPANY_ORDER } from './company-fields.ts';
import {
  DEFAULT_CONTACT_FIELDS,
  type FieldDefinition,
  LOADED_CONTACT_ORDER,
} from './contact-fields.ts';
import { phpIntval, phpSerialize } from './php.ts';
import { EncodedJson } from './php-json.ts';
import type { EntityState, StoredRecord } from './store.ts';

export type RecordView = 'created' | 'loaded' | 'matched';
const VIEWS = ['created', 'loaded', 'matched'] as const;
type FieldObject = 'lead' | 'company';

interface Layout {
  /** How many custom fields the object had: it only ever adds them. */
  customCount: number;
  /** The fields in each view's order. */
  order: Record<RecordView, FieldDefinition[]>;
  /**
   * Each field's entry when the record has no value for it, encoded once per view: most fields
   * are unset, and their definitions are most of a record's size.
   */
  unset: Record<RecordView, Map<string, EncodedJson>>;
}

const layouts = new WeakMap<EntityState, Record<FieldObject, Layout | undefined>>();

function layoutOf(state: EntityState, object: FieldObject): Layout {
  const custom = object === 'lead' ? state.customFields : state.customCompanyFields;
  const cached = layouts.get(state)?.[object];
  if (cached?.customCount === custom.size) return cached;
  const customDefinitions = [...custom.entries()].map(([alias, id]) => ({
    id,
    group: 'core' as const,
    label: alias,
    alias,
    type: 'text',
    properties: [],
    fixed: false,
    defaultValue: null,
  }));
  const defaults = object === 'lead' ? DEFAULT_CONTACT_FIELDS : DEFAULT_COMPANY_FIELDS;
  const order = object === 'lead' ? LOADED_CONTACT_ORDER : LOADED_COMPANY_ORDER;
  const byAlias = new Map(defaults.map((definition) => [definition.alias, definition]));
  const loadedDefaults = order.flatMap((alias) => byAlias.get(alias) ?? []);
  const created = [...defaults, ...customDefinitions];
  const layout: Layout = {
    customCount: custom.size,
    order: { created, loaded: [...loadedDefaults, ...customDefinitions], matched: created },
    unset: { created: new Map(), loaded: new Map(), matched: new Map() },
  };
  for (const view of VIEWS) {
    for (const definition of layout.order[view]) {
      const entry = fieldEntry(object, view, definition, null);
      layout.unset[view].set(definition.alias, new EncodedJson(entry));
    }
  }
  layouts.set(state, {
    lead: undefined,
    company: undefined,
    ...layouts.get(state),
    [object]: layout,
  });
  return layout;
}

function fieldEntry(
  object: FieldObject,
  view: RecordView,
  definition: FieldDefinition,
  value: unknown,
): Record<string, unknown> {
  const normalizedValue = value ?? '';
  const { id, group, label, alias, type, properties } = definition;
  if (view === 'created') {
    return object === 'lead'
      ? { id, group, label, alias, type, properties, value, normalizedValue }
      : { id, group, label, alias, type, value, normalizedValue };
  }
  return {
    id: String(id),
    label,
    alias,
    type,
    group,
    object,
    is_fixed: definition.fixed ? '1' : '0',
    properties: phpSerialize(properties),
    default_value: definition.defaultValue,
    value,
    normalizedValue,
  };
}

/** A contact's points as its integer column holds them. */
export function contactPoints(record: StoredRecord): number {
  return Math.trunc(Number(record.fields.points)) || 0;
}

/** fixNumbers: a number field's value as an int, or a float when its properties set a scale. */
function numberValue(definition: FieldDefinition, value: unknown): unknown {
  if (value === null || definition.type !== 'number') return value;
  const scale = (definition.properties as { scale?: unknown } | undefined)?.scale;
  return scale ? Number(value) || 0 : phpIntval(value);
}

/** The value one field of the record shows. */
function shownValue(
  object: FieldObject,
  view: RecordView,
  definition: FieldDefinition,
  record: StoredRecord,
) {
  if (object === 'lead' && definition.alias === 'points') {
    // A created contact's field list never saw its points; the column has them (fixNumbers).
    const points = contactPoints(record);
    return { entry: view === 'created' && points === 0 ? null : points, all: points };
  }
  const value = numberValue(definition, record.fields[definition.alias] ?? null);
  return { entry: value, all: value };
}

/** The record's `fields` in the given view. */
export function groupedFields(
  state: EntityState,
  object: FieldObject,
  record: StoredRecord,
  view: RecordView,
): Record<string, unknown> {
  const layout = layoutOf(state, object);
  const groups = new Map<string, Record<string, unknown>>(
    (object === 'company'
      ? view !== 'loaded'
        ? ['core', 'professional', 'social', 'personal']
        : ['core', 'professional', 'other']
      : ['core', 'social', 'personal', 'professional']
    ).map((name) => [name, {}]),
  );
  const all: Record<string, unknown> = { id: object === 'lead' ? String(record.id) : record.id };
  for (const definition of layout.order[view]) {
    const { entry, all: shown } = shownValue(object, view, definition, record);
    const group = groups.get(definition.group);
    if (group !== undefined) {
      group[definition.alias] =
        entry === null
          ? layout.unset[view].get(definition.alias)
          : fieldEntry(object, view, definition, entry);
    }
    all[definition.alias] = shown;
  }
  // PHP's empty groups are arrays, which JSON shows as [].
  const fields: Record<string, unknown> = {};
  for (const [name, group] of groups) fields[name] = Object.keys(group).length === 0 ? [] : group;
  fields.all = all;
  return fields;
}
