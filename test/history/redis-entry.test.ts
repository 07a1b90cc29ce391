// The redis drivers' stored entry (history/redis.ts): `<time> <frame>`, or with tags
// `<time> T<length> <tags><frame>`, read back exactly whatever the tags and the frame hold
// (spaces, `T`, multi-byte characters). The round trip through Redis: filtered.test.ts.
import t from 'tap';
import { entryOf, tagsPrefix } from '../../src/history/redis';

t.test('entries with and without tags read back as written', async (t) => {
  const frame = '{"event":"ev","channel":"c","data":"{\\"x\\":\\"a b T1 €\\"}"}';
  t.same(entryOf(`1700000000000 ${tagsPrefix(undefined)}${frame}`), { timeMs: 1700000000000, message: frame });
  for (const tags of ['{"region":"eu"}', '{"s":"a b","t":"T9 x"}', '{"sym":"€ü😀"}', '']) {
    t.same(entryOf(`42 ${tagsPrefix(tags)}${frame}`), { timeMs: 42, tags, message: frame }, `tags ${JSON.stringify(tags)}`);
  }
});
