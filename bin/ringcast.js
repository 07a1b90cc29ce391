#!/usr/bin/env node
'use strict';
require('../dist/src/cli.js')
  .main(process.argv.slice(2))
  .then((code) => process.exit(code), (err) => {
    process.stderr.write(`ringcast: ${(err && err.stack) || String(err)}\n`);
    process.exit(1);
  });
