import { loadAwsServiceSpec } from '@aws-cdk/aws-service-spec';

/**
 * A check of a synthesized CloudFormation template against the CloudFormation registry schemas
 * as `@aws-cdk/aws-service-spec` ships them (the database CDK's own L1 constructs are generated
 * from): every resource type exists; its properties are known, of their type (or a previous
 * one, which CloudFormation still takes) and the required ones present, nested types included;
 * every Ref, Fn::GetAtt, Fn::Sub, Fn::If, Condition and DependsOn names something the template
 * has, and every Fn::GetAtt an attribute its resource's type has; a string's or an integer's
 * allowed values where the registry lists them. The registry carries no patterns, lengths or
 * ranges, and a JSON-typed property (an IAM policy document, a redrive policy) is not looked
 * into: test/infra/template-limits.ts checks what the relay relies on of those. A test tool, not
 * product code.
 */

type SpecDatabase = Awaited<ReturnType<typeof loadAwsServiceSpec>>;
type Resource = NonNullable<ReturnType<typeof resourceSpec>>;
type PropertyType = NonNullable<Resource['properties'][string]>['type'];
type Properties = Resource['properties'];

export interface CfnTemplate {
  Resources?: Record<
    string,
    {
      Type: string;
      Properties?: unknown;
      DependsOn?: unknown;
      Condition?: unknown;
      DeletionPolicy?: unknown;
      UpdateReplacePolicy?: unknown;
    }
  >;
  Parameters?: Record<string, unknown>;
  Conditions?: Record<string, unknown>;
  Outputs?: Record<string, unknown>;
}

/** The registry's resource type of that name, if it has one. */
function resourceSpec(db: SpecDatabase, type: string) {
  return db.lookup('resource', 'cloudFormationType', 'equals', type)[0];
}

let loading: Promise<SpecDatabase> | undefined;

/** The registry schemas, loaded once per test process (a few hundred ms). */
export function cloudFormationSchemas(): Promise<SpecDatabase> {
  loading ??= loadAwsServiceSpec();
  return loading;
}

/** CloudFormation's pseudo parameters, which `Ref` may name besides the template's own. */
const PSEUDO =
  /^AWS::(AccountId|NotificationARNs|NoValue|Partition|Region|StackId|StackName|URLSuffix)$/;

/** Every problem with `template`, each `<path>: <what>`; none for a sound template. */
export function schemaProblems(db: SpecDatabase, template: CfnTemplate): string[] {
  const problems: string[] = [];
  const resources = template.Resources ?? {};
  for (const [id, resource] of Object.entries(resources)) {
    const at = `Resources.${id}`;
    const spec = resourceSpec(db, resource.Type);
    if (resource.Type.startsWith('Custom::')) {
      if ((resource.Properties as { ServiceToken?: unknown })?.ServiceToken === undefined)
        problems.push(`${at}.Properties: ServiceToken is required`);
    } else if (spec === undefined) {
      problems.push(`${at}.Type: ${resource.Type} is no CloudFormation resource type`);
    } else {
      problems.push(
        ...objectProblems(db, resource.Properties ?? {}, spec.properties, `${at}.Properties`),
      );
    }
  }
  problems.push(...referenceProblems(db, template));
  return problems;
}

/** An object of known properties, the required ones present. */
function objectProblems(
  db: SpecDatabase,
  value: unknown,
  properties: Properties,
  at: string,
): string[] {
  if (isIntrinsic(value)) return [];
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return [`${at}: expected an object, found ${JSON.stringify(value)}`];
  const problems: string[] = [];
  for (const [name, property] of Object.entries(properties))
    if (property?.required && !(name in value)) problems.push(`${at}: ${name} is required`);
  for (const [name, item] of Object.entries(value)) {
    const property = properties[name];
    if (property === undefined) {
      problems.push(`${at}.${name}: no such property`);
      continue;
    }
    // The current type or any earlier one: CloudFormation takes templates written for either.
    const candidates = [property.type, ...(property.previousTypes ?? [])];
    const found = candidates.map((type) => valueProblems(db, item, type, `${at}.${name}`));
    if (found.every((list) => list.length > 0)) problems.push(...(found[0] ?? []));
  }
  return problems;
}

/** A value of one property type. An intrinsic function stands for any type (resolved at deploy). */
function valueProblems(db: SpecDatabase, value: unknown, type: PropertyType, at: string): string[] {
  if (isIntrinsic(value)) return [];
  const wrong = (expected: string) => [
    `${at}: expected ${expected}, found ${JSON.stringify(value)}`,
  ];
  switch (type.type) {
    case 'string':
    case 'date-time':
      if (typeof value !== 'string') return wrong('a string');
      return 'allowedValues' in type && type.allowedValues && !type.allowedValues.includes(value)
        ? wrong(`one of ${type.allowedValues.join(', ')}`)
        : [];
    case 'number':
      return typeof value === 'number' || isNumeric(value) ? [] : wrong('a number');
    case 'integer': {
      const number = typeof value === 'string' && isNumeric(value) ? Number(value) : value;
      if (!Number.isInteger(number)) return wrong('an integer');
      // Some integers are an enumeration too (a log group's RetentionInDays).
      return type.allowedValues && !type.allowedValues.includes(number as number)
        ? wrong(`one of ${type.allowedValues.join(', ')}`)
        : [];
    }
    case 'boolean':
      return typeof value === 'boolean' || value === 'true' || value === 'false'
        ? []
        : wrong('a boolean');
    case 'json':
      return [];
    case 'null':
      return value === null ? [] : wrong('null');
    case 'tag':
      return objectProblems(db, value, TAG, at);
    case 'ref':
      return objectProblems(db, value, db.get('typeDefinition', type.reference).properties, at);
    case 'array':
      if (!Array.isArray(value)) return wrong('a list');
      return value.flatMap((item, i) => valueProblems(db, item, type.element, `${at}[${i}]`));
    case 'map':
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        return wrong('a map');
      return Object.entries(value).flatMap(([key, item]) =>
        valueProblems(db, item, type.element, `${at}.${key}`),
      );
    case 'union': {
      const found = type.types.map((member) => valueProblems(db, value, member, at));
      return found.some((list) => list.length === 0)
        ? []
        : wrong(`one of ${type.types.map((t) => t.type).join(', ')}`);
    }
  }
}

const TAG: Properties = {
  Key: { type: { type: 'string' }, required: true },
  Value: { type: { type: 'string' }, required: true },
};

function isNumeric(value: unknown): boolean {
  return typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value));
}

function isIntrinsic(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && (keys[0] === 'Ref' || keys[0]?.startsWith('Fn::') === true);
}

/** Every name a Ref, Fn::GetAtt, Fn::Sub, Fn::If, Condition or DependsOn uses, checked. */
function referenceProblems(db: SpecDatabase, template: CfnTemplate): string[] {
  const resources = template.Resources ?? {};
  const problems: string[] = [];
  const ref = (name: unknown, at: string) => {
    if (
      typeof name !== 'string' ||
      !(name in resources || name in (template.Parameters ?? {}) || PSEUDO.test(name))
    )
      problems.push(`${at}: Ref names no resource or parameter: ${JSON.stringify(name)}`);
  };
  const getAtt = (id: string, attribute: string, at: string) => {
    const type = resources[id]?.Type;
    if (type === undefined) {
      problems.push(`${at}: Fn::GetAtt names no resource: ${id}`);
      return;
    }
    const spec = resourceSpec(db, type);
    if (spec && !(attribute in spec.attributes))
      problems.push(`${at}: ${type} has no attribute ${attribute} (Fn::GetAtt ${id})`);
  };
  const condition = (name: unknown, at: string) => {
    if (typeof name !== 'string' || !(name in (template.Conditions ?? {})))
      problems.push(`${at}: names no condition: ${JSON.stringify(name)}`);
  };
  const walk = (value: unknown, at: string): void => {
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) walk(item, `${at}[${i}]`);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    for (const [key, item] of Object.entries(value)) {
      if (key === 'Ref') ref(item, at);
      else if (key === 'Fn::GetAtt') {
        const [id, ...attribute] = Array.isArray(item) ? item : String(item).split('.');
        getAtt(String(id), attribute.join('.'), at);
      } else if (key === 'Fn::Sub') {
        const [text, variables = {}] = Array.isArray(item) ? item : [item];
        for (const [, name] of String(text).matchAll(/\$\{([^!}][^}]*)\}/g)) {
          if (name === undefined || name in variables) continue;
          const [id, ...attribute] = name.split('.');
          if (attribute.length > 0) getAtt(String(id), attribute.join('.'), at);
          else ref(name, at);
        }
      } else if (key === 'Fn::If' && Array.isArray(item)) condition(item[0], at);
      walk(item, `${at}.${key}`);
    }
  };
  for (const [id, resource] of Object.entries(resources)) {
    const at = `Resources.${id}`;
    walk(resource.Properties, `${at}.Properties`);
    for (const name of [resource.DependsOn ?? []].flat())
      if (typeof name !== 'string' || !(name in resources))
        problems.push(`${at}.DependsOn: names no resource: ${JSON.stringify(name)}`);
    if (resource.Condition !== undefined) condition(resource.Condition, `${at}.Condition`);
  }
  walk(template.Outputs, 'Outputs');
  walk(template.Conditions, 'Conditions');
  return problems;
}
