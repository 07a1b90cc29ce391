// `lambda://<function_arn>` targets: an asynchronous invoke (InvocationType Event) with the
// AWS SDK v3 Lambda client, payload {"body": "<the JSON string a URL endpoint would get>"}.
// The region is the ARN's; credentials come from the SDK's default chain (AWS_ACCESS_KEY_ID
// / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, profiles, instance roles). The SDK's own
// retries are off (maxAttempts 1): the webhook retry policy (send.ts) is the only one.
// `webhooks.lambda_endpoint` points every client at another endpoint (a local stand-in).
// The SDK (a few MB of modules) is loaded on the first invoke only: a server with no
// lambda:// target never loads it.

import type { LambdaClient } from '@aws-sdk/client-lambda';
import { RETRY_STATUSES, type Outcome } from './outcome';

type LambdaSdk = typeof import('@aws-sdk/client-lambda');
let sdk: Promise<LambdaSdk> | null = null;
/** The AWS SDK's Lambda client module, loaded once on first use. */
function loadSdk(): Promise<LambdaSdk> {
  sdk ??= import('@aws-sdk/client-lambda');
  return sdk;
}

export interface LambdaInvoker {
  invoke(arn: string, body: string): Promise<Outcome>;
  close(): void;
}

/** arn:<partition>:lambda:<region>:<account>:function:<name>[:<qualifier>] → region (config validation checked the form). */
export function regionOf(arn: string): string {
  return arn.split(':')[3];
}

export function createLambdaInvoker(opts: { endpoint: string | null; timeoutMs: number }): LambdaInvoker {
  const clients = new Map<string, LambdaClient>();
  const client = (region: string, { LambdaClient }: LambdaSdk) => {
    let c = clients.get(region);
    if (!c) {
      c = new LambdaClient({ region, maxAttempts: 1, ...(opts.endpoint ? { endpoint: opts.endpoint } : {}) });
      clients.set(region, c);
    }
    return c;
  };
  return {
    async invoke(arn, body) {
      let lambda: LambdaSdk;
      try {
        lambda = await loadSdk();
      } catch (err) {
        return { ok: false, retry: false, reason: 'config', error: `could not load @aws-sdk/client-lambda: ${(err as Error).message}` };
      }
      const cmd = new lambda.InvokeCommand({
        FunctionName: arn,
        InvocationType: 'Event',
        Payload: Buffer.from(JSON.stringify({ body })),
      });
      try {
        const res = await client(regionOf(arn), lambda).send(cmd, { abortSignal: AbortSignal.timeout(opts.timeoutMs) });
        return { ok: true, status: res.StatusCode ?? 202 };
      } catch (err) {
        const e = err as Error & { $metadata?: { httpStatusCode?: number } };
        const status = e.$metadata?.httpStatusCode;
        if (status !== undefined) return { ok: false, retry: RETRY_STATUSES.has(status), reason: 'status', status, error: e.name };
        const timeout = e.name === 'TimeoutError' || e.name === 'AbortError';
        return { ok: false, retry: true, reason: timeout ? 'timeout' : 'network', error: e.message };
      }
    },
    close() {
      for (const c of clients.values()) c.destroy();
      clients.clear();
    },
  };
}
