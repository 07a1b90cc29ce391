#!/usr/bin/env node
'use strict';
// Before anything loads uWebSockets.js' native code: a clear message on the wrong Node or libc.
const problem = require('../dist/src/runtime.js').runtimeProblem();
if (problem) {
  process.stderr.write(`ringcast: ${problem}\n`);
  process.exit(1);
}
require('../dist/src/cli.js')
  .main(process.argv.slice(2))
  .then((code) => process.exit(code), (err) => {
    process.stderr.write(`ringcast: ${(err && err.stack) || String(err)}\n`);
    process.exit(1);
  });
