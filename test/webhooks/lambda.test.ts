// test-modes: once (Lambda invocations are made by the webhook service on the primary)
// lambda://<function_arn> targets against a local HTTP server standing in for the Lambda
// Invoke endpoint (webhooks.lambda_endpoint → the client's `endpoint` option): the path,
// the SigV4 Authorization header, X-Amz-Invocation-Type Event and the payload
// {"body": "<the JSON string>"}; retried on 5xx like an HTTP endpoint.

import t from 'tap';
import { APP, RawClient, startServer } from '../helpers/server';
import { startReceiver } from './receiver';

const ARN = 'arn:aws:lambda:eu-west-3:123456789012:function:ringcast-hooks';

t.test('an asynchronous invoke, signed with the environment credentials, region from the ARN', async (t) => {
  const saved = { ...process.env };
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret-example', AWS_EC2_METADATA_DISABLED: 'true',
  });
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
  const stand = await startReceiver();
  let first = true;
  stand.respond = () => {
    if (first) {
      first = false;
      return 500; // retried, like an HTTP endpoint
    }
    return 202;
  };
  const srv = await startServer({
    webhooks: { lambda_endpoint: `http://127.0.0.1:${stand.port}`, retry: { initial_delay_ms: 50, max_delay_ms: 1000, max_retries: 3 } },
    apps: [{ ...APP, webhooks: [{ url: `lambda://${ARN}`, event_types: ['channel_occupied'] }] }],
  });
  t.teardown(async () => {
    await srv.stop();
    await stand.close();
    process.env = saved;
  });
  const c = srv.track(await RawClient.connect(srv.wsUrl()));
  const before = Date.now();
  await c.subscribe('to-lambda');
  await stand.until((q) => q.length >= 2, 15_000, 'the invoke and its retry');
  t.equal(stand.requests.length, 2, 'a 500 is retried once, then 202 ends it');
  const q = stand.requests[1];
  t.equal(q.path, `/2015-03-31/functions/${encodeURIComponent(ARN)}/invocations`, 'Invoke path with the ARN as FunctionName');
  t.equal(q.headers['x-amz-invocation-type'], 'Event', 'asynchronous invocation');
  const auth = String(q.headers.authorization);
  t.match(auth, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-3\/lambda\/aws4_request, SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$/, `SigV4: ${auth}`);
  t.match(String(q.headers['x-amz-date']), /^\d{8}T\d{6}Z$/);
  t.same(Object.keys(q.body), ['body'], 'payload: {"body": …}');
  const inner = (q.body as unknown as { body: string }).body;
  t.type(inner, 'string', 'body is the JSON string');
  const parsed = JSON.parse(inner) as { time_ms: number; events: unknown[] };
  t.same(parsed.events, [{ name: 'channel_occupied', channel: 'to-lambda' }]);
  t.ok(parsed.time_ms >= before - 5 && parsed.time_ms <= Date.now());
  t.equal(stand.requests[0].rawBody, q.rawBody, 'the retry carries the same payload');
});

t.test('config: a lambda:// URL must hold a function ARN', async (t) => {
  const { loadConfig } = await import('../../src/config');
  t.throws(() => loadConfig({ env: {}, overrides: { apps: [{ ...APP, webhooks: [{ url: 'lambda://not-an-arn', event_types: ['cache_miss'] }] }] } }),
    /apps\[0\]\.webhooks\[0\]\.url must be lambda:\/\/arn:<partition>:lambda:<region>:<account>:function:<name>/);
});
