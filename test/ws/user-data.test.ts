// SocketData stays within the field count uWS keeps fast (bench/ws/user-data.bench.ts):
// one field more puts every connection's user data in dictionary mode (+~0.65 KiB of RSS
// per idle connection, a hash lookup per field read).
import t from 'tap';
import { newSocketData, USER_DATA_FIELDS } from '../../src/ws/connection';

t.test('a connection\'s user data has at most USER_DATA_FIELDS fields', (t) => {
  const d = newSocketData('1.1', null, null);
  t.ok(Object.keys(d).length <= USER_DATA_FIELDS, `${Object.keys(d).length} fields (${Object.keys(d).join(', ')}), at most ${USER_DATA_FIELDS}`);
  t.equal(USER_DATA_FIELDS, 15, 'the limit measured on uWS.js 20.30 (re-run the bench on a uWS upgrade)');
  t.end();
});
