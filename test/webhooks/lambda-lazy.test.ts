// @aws-sdk/client-lambda (a few MB of modules) is loaded only when a lambda:// webhook is
// invoked (webhooks/lambda.ts): loading the server, or starting it with HTTP webhooks only,
// leaves it out of the module cache.

import { execFileSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';

const main = path.resolve(__dirname, '../../src/main.js');

t.test('loading the server does not load the AWS SDK', async (t) => {
  const out = execFileSync(process.execPath, ['-e', `
    require(${JSON.stringify(main)});
    const sdk = Object.keys(require.cache).filter((k) => k.includes('@aws-sdk'));
    process.stdout.write(String(sdk.length));
  `], { encoding: 'utf8' });
  t.equal(out, '0', 'no @aws-sdk module in the cache');
});

t.test('the SDK loads on the first lambda:// invoke', async (t) => {
  const lambda = path.resolve(__dirname, '../../src/webhooks/lambda.js');
  const out = execFileSync(process.execPath, ['-e', `
    const { createLambdaInvoker } = require(${JSON.stringify(lambda)});
    const inv = createLambdaInvoker({ endpoint: 'http://127.0.0.1:9', timeoutMs: 500 });
    const before = Object.keys(require.cache).filter((k) => k.includes('@aws-sdk/client-lambda')).length;
    inv.invoke('arn:aws:lambda:eu-west-1:123456789012:function:f', '{}').then((o) => {
      const after = Object.keys(require.cache).filter((k) => k.includes('@aws-sdk/client-lambda')).length;
      inv.close();
      process.stdout.write(JSON.stringify({ before, after: after > 0, ok: o.ok }));
    });
  `], { encoding: 'utf8', env: { ...process.env, AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y' } });
  t.same(JSON.parse(out), { before: 0, after: true, ok: false }, 'loaded by the invoke (which fails: nothing listens on port 9)');
});
