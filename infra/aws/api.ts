import { Aws, Fn, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as logs from 'aws-cdk-lib/aws-logs';
import { INGEST_ROUTES } from '../../functions/ingest/handler.ts';
import type { RelaySettings } from './environments.ts';
import type { RelayFunction } from './relay-function.ts';

/**
 * The HTTP API: `POST /events` and `POST /sources/{name}` (contract §1, §6), `GET /events` and
 * `GET /events/{eventId}` (§1.6) to the ingest function, on a throttled stage with access logs.
 */
export function ingestApi(
  stack: Stack,
  settings: RelaySettings,
  ingest: RelayFunction,
): apigw.HttpApi {
  const accessLogs = new logs.LogGroup(stack, 'ApiAccessLogs', {
    // Under /aws/vendedlogs/, API Gateway delivers without adding the group to the account's
    // one CloudWatch Logs resource policy, whose size limit busy accounts reach ("Cannot enable
    // logging. Policy document length…"). The stack id's unique part tells apart the groups of
    // successive stacks of one environment, so one kept by a teardown never blocks a deploy.
    logGroupName: Fn.join('/', [
      `/aws/vendedlogs/MauticRelay-${settings.name}/api-access`,
      Fn.select(2, Fn.split('/', Aws.STACK_ID)),
    ]),
    retention: settings.logRetentionDays,
    // Kept with the environment's data, deleted with a developer's stack.
    removalPolicy: settings.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
  });
  const api = new apigw.HttpApi(stack, 'Api', {
    createDefaultStage: false,
    description: `Mautic batch relay (${settings.name})`,
  });
  new apigw.HttpStage(stack, 'ApiStage', {
    httpApi: api,
    stageName: '$default',
    autoDeploy: true,
    throttle: settings.apiThrottle,
    accessLogSettings: {
      destination: new apigw.LogGroupLogDestination(accessLogs),
      // HTTP APIs have their own $context variables; the REST API's standard format is not for them.
      format: AccessLogFormat.custom(
        JSON.stringify({
          requestId: '$context.requestId',
          ip: '$context.identity.sourceIp',
          requestTime: '$context.requestTime',
          routeKey: '$context.routeKey',
          status: '$context.status',
          responseLength: '$context.responseLength',
          responseLatency: '$context.responseLatency',
          integrationError: '$context.integrationErrorMessage',
        }),
      ),
    },
  });
  // One integration for every route; each route gets its own permission to invoke the function.
  const integration = new HttpLambdaIntegration('IngestIntegration', ingest.function);
  for (const path of [INGEST_ROUTES.events, INGEST_ROUTES.source]) {
    api.addRoutes({ path, methods: [apigw.HttpMethod.POST], integration });
  }
  for (const path of [INGEST_ROUTES.events, INGEST_ROUTES.event]) {
    api.addRoutes({ path, methods: [apigw.HttpMethod.GET], integration });
  }
  return api;
}
