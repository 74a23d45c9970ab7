import { CfnOutput, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { secretNames } from '../../functions/shared/secret-names.ts';
import { ingestApi } from './api.ts';
import type { RelaySettings } from './environments.ts';
import { relayFunctions } from './functions.ts';
import { alarmsAndDashboard } from './observability.ts';
import type { RelayFunction } from './relay-function.ts';
import { dedupTable, outcomeTable, relayQueues, relaySecrets } from './storage.ts';

export interface RelayStackProps extends StackProps {
  readonly settings: RelaySettings;
}

/**
 * The whole relay for one environment: the events queue and its dead-letter queue, the three
 * secrets, the token refresher on a schedule, the batch function on the queue, the ingest
 * function behind an HTTP API, alarms to an SNS topic, and a dashboard. Every resource is made
 * in the stack's own scope under the id it always had: its logical id, and so the live resource,
 * survives an upgrade.
 */
export class RelayStack extends Stack {
  readonly ingest: RelayFunction;
  readonly batch: RelayFunction;
  readonly refresh: RelayFunction;
  readonly eventsQueue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly api: apigw.HttpApi;
  readonly dedupTable: dynamodb.Table;
  readonly outcomeTable: dynamodb.Table;

  constructor(scope: Construct, id: string, props: RelayStackProps) {
    // Bound to the environment's account and region: a deploy with other credentials refuses.
    const { account, region } = props.settings;
    super(scope, id, { ...props, env: { account, region } });
    const { settings } = props;
    // What the stack's deletion, or a replacement, does to the data: queues, the table and the
    // secrets are kept unless the environment's settings let them go. Kept except when the
    // deploy that created them rolls back (RetainExceptOnCreate): a failed first deploy leaves
    // no fixed-name secret behind to make the next one fail with "already exists".
    const dataPolicy = settings.retainData
      ? RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
      : RemovalPolicy.DESTROY;
    const { retry } = settings;

    const queues = relayQueues(this, settings, retry, dataPolicy);
    const secrets = relaySecrets(
      this,
      settings.name,
      dataPolicy,
      settings.sources.map((source) => source.name),
    );
    this.dedupTable = dedupTable(this, dataPolicy, settings.retainData);
    this.outcomeTable = outcomeTable(this, dataPolicy);
    const functions = relayFunctions(this, settings, {
      queues,
      secrets,
      dedupTable: this.dedupTable,
      outcomeTable: this.outcomeTable,
      retry,
    });
    this.api = ingestApi(this, settings, functions.ingest);
    const dashboard = alarmsAndDashboard(this, settings, { queues, functions, api: this.api });

    this.ingest = functions.ingest;
    this.batch = functions.batch;
    this.refresh = functions.refresh;
    this.eventsQueue = queues.events;
    this.deadLetterQueue = queues.deadLetter;
    this.outputs(settings, dashboard.dashboardName);
  }

  /** What the operator commands read to find this environment (infra/cli/target.ts). */
  private outputs(settings: RelaySettings, dashboardName: string): void {
    const environment = settings.name;
    const names = secretNames(environment);
    new CfnOutput(this, 'IngestUrl', { value: `${this.api.apiEndpoint}/events` });
    new CfnOutput(this, 'EventsQueueUrl', { value: this.eventsQueue.queueUrl });
    new CfnOutput(this, 'DedupTableName', { value: this.dedupTable.tableName });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: this.deadLetterQueue.queueUrl });
    new CfnOutput(this, 'ClientSecretName', { value: names.client });
    new CfnOutput(this, 'TokenSecretName', { value: names.token });
    new CfnOutput(this, 'WebhookSecretName', { value: names.webhook });
    // refresh --env invokes the refresher by this name.
    new CfnOutput(this, 'RefreshFunctionName', { value: this.refresh.function.functionName });
    // For the operator: the function whose log and metrics the stuck-queue alarms read.
    new CfnOutput(this, 'BatchFunctionName', { value: this.batch.function.functionName });
    new CfnOutput(this, 'DashboardName', { value: dashboardName });
    // sources and redrive --env read the sources document the ingest runs with from it.
    new CfnOutput(this, 'IngestFunctionName', { value: this.ingest.function.functionName });
    // events --env reads each event's outcome there, and says so when none is kept.
    new CfnOutput(this, 'OutcomeTableName', { value: this.outcomeTable.tableName });
    new CfnOutput(this, 'OutcomeRetentionSeconds', {
      value: String(settings.outcomeRetentionSeconds),
    });
  }
}
