import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from './errors.ts';

/**
 * The region of a deployed environment's stack: the one cdk.json (in the directory the command
 * runs in, the project's) binds it to, as `cdk deploy` and `doctor` read it. Undefined where no
 * cdk.json is found or it names no region: then the usual AWS environment (AWS_REGION,
 * AWS_PROFILE's region) decides. An environment a readable cdk.json does not name is a usage
 * mistake, said before any AWS call.
 */
export function environmentRegion(environment: string, directory: string): string | undefined {
  let environments: unknown;
  try {
    environments = JSON.parse(readFileSync(join(directory, 'cdk.json'), 'utf8')).context
      ?.environments;
  } catch {
    return undefined;
  }
  if (typeof environments !== 'object' || environments === null) return undefined;
  if (!Object.hasOwn(environments, environment))
    throw new UsageError(
      `Unknown environment "${environment}"; known environments: ${Object.keys(environments).join(', ')} (cdk.json in ${directory})`,
    );
  const { region } = (environments as Record<string, { region?: unknown }>)[environment] ?? {};
  return typeof region === 'string' && region !== '' ? region : undefined;
}

/** The AWS clients' settings for environment NAME's commands: its region, when cdk.json binds one. */
export function clientConfig(environment: string): { region?: string } {
  const region = environmentRegion(environment, process.cwd());
  return region === undefined ? {} : { region };
}
