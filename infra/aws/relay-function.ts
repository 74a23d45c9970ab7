import * as path from 'node:path';
import { type Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import type { RelayService } from '../../functions/core/metrics.ts';
import { checkEnvironmentSize } from './environment-size.ts';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/**
 * How every function is bundled (bench/cold-start.ts builds with these same options). Minified
 * ESM with the AWS SDK bundled, so production runs the SDK version the tests ran. The source map
 * is written beside the bundle, without the sources, for reading a stack trace offline; it is not
 * loaded at run time: `--enable-source-maps` made Node parse it at INIT, which cost more than the
 * rest of the handler's start (measured by `npm run bench:cold-start`; see docs/performance.md).
 * `node:http` is aliased to `node-http.cjs`, which takes the built-in without Node's ESM facade
 * (it loaded undici at INIT: the file says why).
 */
export const RELAY_BUNDLING = {
  format: nodejs.OutputFormat.ESM,
  target: 'node24',
  mainFields: ['module', 'main'],
  sourceMap: true,
  sourcesContent: false,
  minify: true,
  externalModules: [],
  // Paths are resolved in the project root, where NodejsFunction (and the bench) run esbuild.
  esbuildArgs: {
    '--alias': ['node:http=./infra/aws/node-http.cjs', 'http=./infra/aws/node-http.cjs'],
  },
  // ESM output still meets packages that call require(); give them one.
  banner:
    "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
} as const satisfies nodejs.BundlingOptions;

/**
 * After esbuild, each function's source map is made relative to the project root
 * (relative-source-map.cjs says why): the bundle, and with it the asset hash, is then the same
 * whatever the synth's output folder and wherever the project was cloned. Not part of
 * RELAY_BUNDLING: it changes no code the bench runs.
 */
const PROJECT_RELATIVE_SOURCE_MAPS: nodejs.ICommandHooks = {
  beforeBundling: () => [],
  beforeInstall: () => [],
  afterBundling: (inputDir, outputDir) => [
    `node "${path.join(inputDir, 'infra', 'aws', 'relative-source-map.cjs')}" "${outputDir}" "${inputDir}"`,
  ],
};

/** RELAY_BUNDLING's `--alias:name=path` entries as esbuild's `alias` option (for the bench). */
export function relayAliases(): Record<string, string> {
  return Object.fromEntries(
    RELAY_BUNDLING.esbuildArgs['--alias'].map((entry) => {
      const at = entry.indexOf('=');
      return [entry.slice(0, at), entry.slice(at + 1)];
    }),
  );
}

/** Settings of one relay function. */
export interface RelayFunctionProps {
  /** The folder under `functions/` whose `index.ts` exports `handler`. */
  readonly name: 'ingest' | 'batch' | 'refresh';
  /** Powertools' service name (the `service` dimension of its metrics) and metrics namespace. */
  readonly serviceName: RelayService;
  readonly metricsNamespace: string;
  /** Plain settings; a secret is named with `useSecret`, which grants its use in the same call. */
  readonly environment?: Readonly<Record<string, string>>;
  readonly timeout: Duration;
  /** @default 512 */
  readonly memorySize?: number;
  readonly logRetention: logs.RetentionDays;
  readonly logLevel: string;
  readonly reservedConcurrentExecutions?: number;
}

/**
 * The house Lambda function: `nodejs24.x` on arm64, bundled locally with esbuild as
 * `RELAY_BUNDLING` says, its
 * own log group with a retention, and a role that may write only to that log group; every other
 * permission is granted explicitly by the stack.
 */
export class RelayFunction extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: RelayFunctionProps) {
    super(scope, id);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.name} function of ${Stack.of(this).stackName}`,
    });
    this.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [this.logGroup.logGroupArn],
      }),
    );
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      entry: path.join(ROOT, 'functions', props.name, 'index.ts'),
      handler: 'handler',
      projectRoot: ROOT,
      depsLockFilePath: path.join(ROOT, 'package-lock.json'),
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logGroup,
      ...(props.reservedConcurrentExecutions === undefined
        ? {}
        : { reservedConcurrentExecutions: props.reservedConcurrentExecutions }),
      environment: {
        ...props.environment,
        POWERTOOLS_SERVICE_NAME: props.serviceName,
        POWERTOOLS_METRICS_NAMESPACE: props.metricsNamespace,
        POWERTOOLS_LOG_LEVEL: props.logLevel,
      },
      bundling: { ...RELAY_BUNDLING, commandHooks: PROJECT_RELATIVE_SOURCE_MAPS },
    });
    const cfn = this.function.node.defaultChild as lambda.CfnFunction;
    this.node.addValidation({ validate: () => checkEnvironmentSize(cfn, props.name) });
  }

  /**
   * Lets the function use `secret`: names it in the environment `variable` and grants exactly
   * `actions` on it, together, so that neither is ever set without the other.
   */
  useSecret(
    variable: string,
    secret: Secret,
    actions: string[] = ['secretsmanager:GetSecretValue'],
  ): void {
    this.function.addEnvironment(variable, secret.secretArn);
    this.role.addToPolicy(new iam.PolicyStatement({ actions, resources: [secret.secretArn] }));
  }
}
