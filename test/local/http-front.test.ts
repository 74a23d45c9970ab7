import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  type HttpApiHandler,
  type HttpFrontOptions,
  startHttpFront,
} from '../../infra/local/http-front.ts';
import { InvocationTimeoutError } from '../../infra/local/lambda-context.ts';

/** Bound for any one raw exchange with the front. */
const EXCHANGE_TIMEOUT_MS = 5_000;

interface Invocation {
  event: APIGatewayProxyEventV2;
  context: Context;
  remainingMs: number;
}

/** A front whose handler records what it got and answers it back as JSON. */
async function echoFront(options: Partial<HttpFrontOptions> = {}) {
  const invocations: Invocation[] = [];
  const errors: unknown[] = [];
  const echo: HttpApiHandler = async (event, context) => {
    invocations.push({ event, context, remainingMs: context.getRemainingTimeInMillis() });
    return {
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(event),
    };
  };
  const front = await startHttpFront({
    handler: echo,
    onError: (error) => errors.push(error),
    ...options,
  });
  onTestFinished(() => front.close());
  return { front, invocations, errors };
}

/** The one event the handler got. */
function onlyEvent(invocations: Invocation[]): APIGatewayProxyEventV2 {
  expect(invocations).toHaveLength(1);
  return (invocations[0] as Invocation).event;
}

/** The bytes API Gateway handed over, whichever way they were encoded. */
function bodyBytes(event: APIGatewayProxyEventV2): Buffer {
  return Buffer.from(event.body ?? '', event.isBase64Encoded ? 'base64' : 'utf8');
}

interface RawResponse {
  status: number;
  headers: Record<string, string[]>;
  body: Buffer;
}

/**
 * Writes `head` (request line and headers, CRLF-separated, without the blank line) and `body`
 * on a fresh connection exactly as given, and reads the answer until the server closes it.
 * Send `Connection: close` or a body the server will cut, or the exchange times out.
 */
function rawExchange(url: string, head: string, body: Buffer = Buffer.alloc(0)) {
  const { port } = new URL(url);
  return new Promise<RawResponse>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: Number(port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer within ${EXCHANGE_TIMEOUT_MS} ms`));
    }, EXCHANGE_TIMEOUT_MS);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The server may close while the body is still going out; the answer is what matters.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(parseResponse(Buffer.concat(chunks)));
      } catch (error) {
        reject(error);
      }
    });
    socket.write(`${head}\r\n\r\n`);
    socket.end(body);
  });
}

function parseResponse(raw: Buffer): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) throw new Error(`no complete response head in ${JSON.stringify(String(raw))}`);
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string[]> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).toLowerCase();
    headers[name] = [...(headers[name] ?? []), line.slice(colon + 1).trim()];
  }
  const length = Number(headers['content-length']?.[0] ?? 0);
  const body = raw.subarray(end + 4, end + 4 + length);
  if (body.length !== length) throw new Error('the response body was cut short');
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

describe('startHttpFront', () => {
  it('builds a payload 2.0 event from the request, with a Lambda context', async () => {
    const { front, invocations } = await echoFront({ functionTimeoutMs: 10_000 });
    const response = await fetch(`${front.url}/events?a=1&b=x%20y&a=2`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'relay-test/1',
        cookie: 'session=abc; theme=dark',
      },
      body: '{}',
    });
    expect(response.status).toBe(200);
    await response.text();

    const event = onlyEvent(invocations);
    expect(event).toMatchObject({
      version: '2.0',
      routeKey: 'POST /events',
      rawPath: '/events',
      rawQueryString: 'a=1&b=x%20y&a=2',
      queryStringParameters: { a: '1,2', b: 'x y' },
      cookies: ['session=abc', 'theme=dark'],
      body: '{}',
      isBase64Encoded: false,
      requestContext: {
        accountId: expect.any(String),
        apiId: expect.any(String),
        domainName: '127.0.0.1',
        http: {
          method: 'POST',
          path: '/events',
          protocol: 'HTTP/1.1',
          sourceIp: '127.0.0.1',
          userAgent: 'relay-test/1',
        },
        requestId: expect.any(String),
        routeKey: 'POST /events',
        stage: '$default',
        time: expect.stringMatching(/^\d{2}\/[A-Z][a-z]{2}\/\d{4}:\d{2}:\d{2}:\d{2} \+0000$/),
        timeEpoch: expect.any(Number),
      },
    });
    expect(event.headers.cookie).toBeUndefined();
    expect(Math.abs(event.requestContext.timeEpoch - Date.now())).toBeLessThan(5_000);
    expect(response.headers.get('apigw-requestid')).toBe(event.requestContext.requestId);

    const { context, remainingMs } = invocations[0] as Invocation;
    expect(context.functionName).toBe('ingest');
    expect(context.awsRequestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(remainingMs).toBeGreaterThan(9_000);
    expect(remainingMs).toBeLessThanOrEqual(10_000);
  });

  it('lower-cases header names and joins duplicates with a bare comma', async () => {
    const { front, invocations } = await echoFront();
    const response = await rawExchange(
      front.url,
      [
        'POST /events HTTP/1.1',
        'Host: 127.0.0.1',
        'X-Multi: one',
        'x-multi: two',
        'X-MULTI: three, four',
        // Node keeps only the first Authorization and Content-Type in req.headers.
        'Authorization: Bearer first',
        'Authorization: Bearer second',
        'Content-Type: application/json',
        'Webhook-Id: msg_1',
        'Content-Length: 2',
        'Connection: close',
      ].join('\r\n'),
      Buffer.from('{}'),
    );
    expect(response.status).toBe(200);

    const { headers } = onlyEvent(invocations);
    expect(headers).toMatchObject({
      'x-multi': 'one,two,three, four',
      authorization: 'Bearer first,Bearer second',
      'content-type': 'application/json',
      'webhook-id': 'msg_1',
    });
    expect(Object.keys(headers).every((name) => name === name.toLowerCase())).toBe(true);
  });

  it('passes a UTF-8 body with a text-like content type as text, byte for byte', async () => {
    const { front, invocations } = await echoFront();
    const texts: Array<[string, string]> = [
      ['application/json; charset=utf-8', '{"name":"Zoë","mood":"🚀"}'],
      ['text/plain', '\uFEFFa byte order mark stays'],
      ['application/vnd.api+json', '{"data":[]}'],
      ['application/xml', '<a>ü</a>'],
      ['application/x-www-form-urlencoded', 'a=1&b=%C3%BC'],
    ];
    for (const [contentType, text] of texts) {
      const response = await fetch(`${front.url}/events`, {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: Buffer.from(text, 'utf8'),
      });
      expect(response.status).toBe(200);
      await response.text();
    }

    expect(invocations.map(({ event }) => [event.isBase64Encoded, event.body])).toEqual(
      texts.map(([, text]) => [false, text]),
    );
  });

  it('base64-encodes invalid UTF-8 and binary content types, byte for byte', async () => {
    const { front, invocations } = await echoFront();
    const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const bodies: Array<[string | undefined, Buffer]> = [
      ['application/json', Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d])],
      ['text/plain', Buffer.from([0xed, 0xa0, 0x80])],
      ['application/octet-stream', Buffer.from('valid text, binary type')],
      ['image/png', everyByte],
      [undefined, Buffer.from('no content type')],
    ];
    for (const [contentType, bytes] of bodies) {
      const response = await fetch(`${front.url}/events`, {
        method: 'POST',
        headers: contentType === undefined ? {} : { 'content-type': contentType },
        body: bytes,
      });
      expect(response.status).toBe(200);
      await response.text();
    }

    expect(invocations).toHaveLength(bodies.length);
    invocations.forEach(({ event }, index) => {
      expect(event.isBase64Encoded).toBe(true);
      expect(bodyBytes(event).equals(bodies[index]?.[1] as Buffer)).toBe(true);
    });
  });

  it('leaves body out of the event when the request has none', async () => {
    const { front, invocations } = await echoFront();
    const response = await fetch(`${front.url}/events`, { method: 'POST' });
    expect(response.status).toBe(200);
    await response.text();

    const event = onlyEvent(invocations);
    expect(event.body).toBeUndefined();
    expect(event.isBase64Encoded).toBe(false);
    expect(event.queryStringParameters).toBeUndefined();
    expect(event.cookies).toBeUndefined();
  });

  it('cuts an oversized body at maxBodyBytes + 1 and hands that to the handler', async () => {
    const { front, invocations } = await echoFront({ maxBodyBytes: 1024 });
    const big = Buffer.alloc(5 * 1024 * 1024, 'a');
    const response = await fetch(`${front.url}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: big,
    });
    expect(response.status).toBe(200);
    await response.text();

    const event = onlyEvent(invocations);
    expect(bodyBytes(event).equals(big.subarray(0, 1025))).toBe(true);
    expect(event.headers['content-length']).toBe(String(big.length));
  });

  it('lets the handler answer 413 for an oversized body without waiting for the rest, and closes that connection', async () => {
    const bodies: Buffer[] = [];
    const front = await startHttpFront({
      maxBodyBytes: 1024,
      handler: async (event) => {
        bodies.push(bodyBytes(event));
        return { statusCode: bodyBytes(event).length > 1024 ? 413 : 202, body: '' };
      },
    });
    onTestFinished(() => front.close());
    // 5 MB announced, 4 KiB sent: an answer can only come if the front stops reading early.
    const response = await rawExchange(
      front.url,
      [
        'POST /events HTTP/1.1',
        'Host: 127.0.0.1',
        'Content-Type: application/json',
        `Content-Length: ${5 * 1024 * 1024}`,
      ].join('\r\n'),
      Buffer.alloc(4096, 'b'),
    );
    expect(response.status).toBe(413);
    expect(response.headers.connection).toEqual(['close']);
    expect(bodies.map((body) => body.length)).toEqual([1025]);
  });

  it('drops a request whose client goes away mid-body, without invoking or reporting', async () => {
    const { front, invocations, errors } = await echoFront();
    const { port } = new URL(front.url);
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.write(
          'POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789',
        );
        // Gives the front time to start reading before the client vanishes.
        setTimeout(() => socket.destroy(), 50);
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });

    // The front is still serving, and the broken request never reached the handler.
    const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(200);
    await response.text();
    expect(invocations).toHaveLength(1);
    expect(errors).toEqual([]);
  });

  it('passes a body of exactly maxBodyBytes whole', async () => {
    const { front, invocations } = await echoFront({ maxBodyBytes: 1024 });
    const exact = Buffer.alloc(1024, 'c');
    const response = await fetch(`${front.url}/events`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: exact,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('connection')).not.toBe('close');
    await response.text();
    expect(bodyBytes(onlyEvent(invocations)).equals(exact)).toBe(true);
  });

  it('answers 404 Not Found, as API Gateway does, for a method or path with no route', async () => {
    const { front, invocations } = await echoFront();
    for (const [method, path] of [
      ['DELETE', '/events'],
      ['PUT', '/events'],
      ['POST', '/events/'],
      ['POST', '/events/abc'],
      ['GET', '/events/'],
      ['GET', '/events/a/b'],
      ['POST', '/other'],
      ['GET', '/'],
    ] as const) {
      const response = await fetch(`${front.url}${path}`, {
        method,
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.text()).toBe('{"message":"Not Found"}');
    }
    expect(invocations).toHaveLength(0);
  });

  it('routes POST /sources/{name} with its route key and the name, decoded as API Gateway decodes the path', async () => {
    const { front, invocations } = await echoFront();
    for (const path of ['/sources/stripe', '/sources/%73hop']) {
      const response = await fetch(`${front.url}${path}?x=1`, { method: 'POST', body: '{}' });
      expect(response.status).toBe(200);
    }
    for (const [method, path] of [
      ['POST', '/sources/'],
      ['POST', '/sources'],
      ['POST', '/sources/a/b'],
      ['GET', '/sources/stripe'],
    ] as const) {
      const response = await fetch(`${front.url}${path}`, {
        method,
        ...(method === 'POST' ? { body: '{}' } : {}),
      });
      expect(response.status).toBe(404);
    }

    expect(invocations.map(({ event }) => [event.routeKey, event.pathParameters])).toEqual([
      ['POST /sources/{name}', { name: 'stripe' }],
      ['POST /sources/{name}', { name: 'shop' }],
    ]);
    expect(invocations[0]?.event).toMatchObject({
      rawPath: '/sources/stripe',
      rawQueryString: 'x=1',
      requestContext: { routeKey: 'POST /sources/{name}', http: { path: '/sources/stripe' } },
    });
  });

  it('routes GET /events and GET /events/{eventId}, the id decoded, with the method and query as sent', async () => {
    const { front, invocations } = await echoFront();
    for (const path of ['/events?ids=a,b%2Cc', '/events/msg_1%3A0', '/events/plain']) {
      const response = await fetch(`${front.url}${path}`);
      expect(response.status).toBe(200);
      await response.text();
    }

    expect(
      invocations.map(({ event }) => [
        event.routeKey,
        event.requestContext.http.method,
        event.pathParameters,
        event.rawQueryString,
      ]),
    ).toEqual([
      ['GET /events', 'GET', undefined, 'ids=a,b%2Cc'],
      ['GET /events/{eventId}', 'GET', { eventId: 'msg_1:0' }, ''],
      ['GET /events/{eventId}', 'GET', { eventId: 'plain' }, ''],
    ]);
    expect(invocations[0]?.event.body).toBeUndefined();
  });

  it('refuses a body cap or function timeout that is not a positive integer', async () => {
    for (const bad of [{ maxBodyBytes: 0 }, { maxBodyBytes: 1.5 }, { functionTimeoutMs: -1 }]) {
      await expect(startHttpFront({ handler: async () => ({}), ...bad })).rejects.toThrow(
        RangeError,
      );
    }
  });

  it('answers 500 Internal Server Error, as API Gateway does, when the handler throws', async () => {
    const errors: unknown[] = [];
    const failure = new Error('boom: secret-looking detail');
    const front = await startHttpFront({
      handler: async () => {
        throw failure;
      },
      onError: (error) => errors.push(error),
    });
    onTestFinished(() => front.close());

    const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(500);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.text()).toBe('{"message":"Internal Server Error"}');
    expect(errors).toEqual([failure]);
  });

  it('answers 500 when the handler runs past the function timeout', async () => {
    const errors: unknown[] = [];
    const front = await startHttpFront({
      handler: () => new Promise(() => undefined),
      functionTimeoutMs: 50,
      onError: (error) => errors.push(error),
    });
    onTestFinished(() => front.close());

    const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('{"message":"Internal Server Error"}');
    expect(errors).toEqual([expect.any(InvocationTimeoutError)]);
  });

  it('writes the status, headers and base64 body the handler answers', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xfe, 0xff]);
    const answer: APIGatewayProxyStructuredResultV2 = {
      statusCode: 201,
      headers: { 'content-type': 'application/octet-stream', 'x-count': 3, 'x-flag': true },
      body: bytes.toString('base64'),
      isBase64Encoded: true,
    };
    const front = await startHttpFront({ handler: async () => answer });
    onTestFinished(() => front.close());

    const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(201);
    expect(response.headers.get('content-type')).toBe('application/octet-stream');
    expect(response.headers.get('x-count')).toBe('3');
    expect(response.headers.get('x-flag')).toBe('true');
    expect(Buffer.from(await response.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('writes a text body as UTF-8', async () => {
    const front = await startHttpFront({
      handler: async () => ({
        statusCode: 202,
        headers: { 'content-type': 'text/plain' },
        body: 'ünïcode ✓',
      }),
    });
    onTestFinished(() => front.close());

    const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    expect(response.status).toBe(202);
    expect(await response.text()).toBe('ünïcode ✓');
  });

  it('answers 500 for a result it cannot write, and reports it', async () => {
    const results: unknown[] = [
      { statusCode: 99 },
      { accepted: 1 },
      undefined,
      { statusCode: 200, body: 42 },
      { statusCode: 200, headers: { 'x-list': ['a'] } },
      { statusCode: 200, headers: { 'x-bad': 'line\nbreak' }, body: 'ok' },
    ];
    const errors: unknown[] = [];
    const front = await startHttpFront({
      handler: async () => results.shift() as APIGatewayProxyStructuredResultV2,
      onError: (error) => errors.push(error),
    });
    onTestFinished(() => front.close());

    for (let i = 0; i < 6; i++) {
      const response = await fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
      expect(response.status).toBe(500);
      expect(response.headers.get('x-bad')).toBeNull();
      expect(await response.text()).toBe('{"message":"Internal Server Error"}');
    }
    expect(errors).toHaveLength(6);
  });

  it('lets the invocation in hand answer on close, then refuses connections', async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const front = await startHttpFront({
      handler: async () => {
        started();
        await sleep(100);
        return { statusCode: 202, body: 'done' };
      },
    });
    onTestFinished(() => front.close());

    const pending = fetch(`${front.url}/events`, { method: 'POST', body: '{}' });
    await running;
    await front.close();
    const response = await pending;
    expect(response.status).toBe(202);
    expect(await response.text()).toBe('done');
    await expect(fetch(`${front.url}/events`, { method: 'POST', body: '{}' })).rejects.toThrow();
  });
});
