// No option of the spec is accepted and silently ignored. This walks every key of the
// defaults (config/defaults.ts, read off config/schema.ts: the list of keys the loader
// accepts) and every per-app key; each must be claimed in test/ops/option-claims.ts. A key
// added to the defaults without a claim fails this test; so does a claim for a key that no
// longer exists. Refused and inert claims are checked here by loading the config; effect
// claims (which file reads the key, and which test shows what it does) are checked by the
// lint scripts/check-options.mjs, part of `make lint` and `make test`.

import t from 'tap';
import { loadConfig, type ConfigInput } from '../../src/config';
import { appDefaults, defaultConfig, defaultRawTree } from '../../src/config/defaults';
import { assertSupported } from '../../src/config/support';
import { APP, CLAIMS } from './option-claims';

function leaves(o: unknown, prefix: string, out: string[]): string[] {
  if (o !== null && typeof o === 'object' && !Array.isArray(o) && Object.keys(o).length > 0) {
    for (const [k, v] of Object.entries(o)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.push(prefix);
  }
  return out;
}

const KEYS = [...leaves(defaultRawTree(), '', []), ...leaves(appDefaults(defaultConfig()), 'apps[]', [])];

/** The loader and config/support.ts together, as `ringcast start` runs them: the error message, or null. */
function refusal(input: ConfigInput): string | null {
  try {
    assertSupported(loadConfig({ env: {}, overrides: { apps: [APP], ...input } }));
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

t.test('every option of the defaults is claimed, and every claim names an option', async (t) => {
  t.same(KEYS.filter((k) => !(k in CLAIMS)), [], 'no option without a claim');
  t.same(Object.keys(CLAIMS).filter((k) => !KEYS.includes(k)), [], 'no claim for an option that does not exist');
  t.equal(refusal({}), null, 'the defaults themselves start');
});

for (const key of KEYS) {
  const claim = CLAIMS[key];
  if (!claim || 'effect' in claim) continue;
  t.test(key, async (t) => {
    if ('refused' in claim) {
      t.match(refusal(claim.refused), claim.why, 'refused, with the key and the reason');
    } else if ('inert' in claim) {
      t.not(refusal(claim.enabler), null, `inert: read by ${claim.inert}, whose switch is refused`);
    } else {
      t.comment(`${key}: ${claim.pending}`);
      t.pass('listed with its current state');
    }
  });
}
