// The inverse of tables.ts for the peers' shapes: an app (ringcast's field names, as the
// app API was given them) written as a row of a soketi or sockudo table. Only the fields
// such a table holds can be written; any other is refused before anything is written
// (AppStoreRefused, answered 422 by the app API). A limit the app leaves unset is written
// as the peer's "not set" value (soketi -1, sockudo 0), which tables.ts reads back as
// ringcast's default; an unset switch is written as ringcast's default value.

import type { TableSchema } from './port';
import { snake } from './tables';

type PeerSchema = Exclude<TableSchema, 'ringcast'>;

/** A field the table's shape cannot hold, or a column the table lacks: nothing was written. */
export class AppStoreRefused extends Error {
  readonly code = 'RC_ERR_APP_STORE_REFUSED';
}

/** The limits both peers hold, by ringcast's name. */
const LIMITS = [
  'max_connections', 'max_backend_events_per_second', 'max_client_events_per_second',
  'max_presence_members_per_channel', 'max_presence_member_size_in_kb', 'max_channel_name_length',
  'max_event_channels_at_once', 'max_event_name_length', 'max_event_payload_in_kb', 'max_event_batch_size',
];
/** Switches and ringcast's default of each. */
const SWITCHES: Record<PeerSchema, Record<string, boolean>> = {
  soketi: { enabled: true, enable_client_messages: true, enable_user_authentication: true },
  sockudo: { enabled: true, enable_client_messages: true, enable_user_authentication: true, enable_watchlist_events: false },
};
const JSONS: Record<PeerSchema, string[]> = {
  soketi: ['webhooks'],
  sockudo: ['webhooks', 'allowed_origins', 'channel_delta_compression'],
};
/** The peers' names of ringcast's fields (the rest are the same). */
const NAMES: Record<PeerSchema, Record<string, string>> = {
  soketi: { max_backend_events_per_second: 'max_backend_events_per_sec', max_client_events_per_second: 'max_client_events_per_sec' },
  sockudo: {},
};
/** Columns a new row needs (NOT NULL in the peer's published schema) that ringcast does not read. */
const INSERT_ONLY: Record<PeerSchema, Record<string, unknown>> = {
  soketi: { max_read_req_per_sec: -1 },
  sockudo: { max_read_requests_per_second: 0 },
};
const UNSET: Record<PeerSchema, number> = { soketi: -1, sockudo: 0 };

/** The fields of ringcast's apps a table of `schema` holds. */
export function peerFields(schema: PeerSchema): string[] {
  return ['id', 'key', 'secret', ...LIMITS, ...Object.keys(SWITCHES[schema]), ...JSONS[schema]];
}

export interface PeerRow {
  /** Every column ringcast writes (snake_case names): set on update, the rest are kept. */
  columns: Record<string, unknown>;
  /** Added to `columns` when the row is new. */
  insertOnly: Record<string, unknown>;
  /** The ringcast field of each column, when `app` set it (a table lacking that column refuses it). */
  given: Map<string, string>;
}

/**
 * The row of a soketi or sockudo table for `app` (ringcast field names); throws
 * AppStoreRefused naming the first field the shape cannot hold. Switches are 1/0 (read
 * as booleans by PostgreSQL and as tinyint by MySQL alike) unless `native` (DynamoDB).
 */
export function appToPeerRow(schema: PeerSchema, app: Record<string, unknown>, table: string, native: boolean): PeerRow {
  const holds = new Set(peerFields(schema));
  const alien = Object.keys(app).filter((f) => !holds.has(f) && app[f] !== undefined);
  if (alien.length > 0) {
    throw new AppStoreRefused(`${alien.join(', ')}: a ${schema} table (${table}) has no column for ${alien.length > 1 ? 'these fields' : 'this field'}; it holds only ${peerFields(schema).join(', ')}`);
  }
  const name = (f: string) => NAMES[schema][f] ?? f;
  const columns: Record<string, unknown> = { id: String(app.id), key: String(app.key), secret: String(app.secret) };
  for (const f of LIMITS) {
    const v = app[f];
    columns[name(f)] = typeof v === 'number' ? v : UNSET[schema]; // null (unlimited) and unset read back alike
  }
  for (const [f, dflt] of Object.entries(SWITCHES[schema])) {
    const on = typeof app[f] === 'boolean' ? app[f] : dflt;
    columns[f] = native ? on : on ? 1 : 0;
  }
  for (const f of JSONS[schema]) {
    const v = app[f];
    columns[f] = v === undefined || v === null ? null : JSON.stringify(v);
  }
  const given = new Map(Object.keys(app).filter((f) => app[f] !== undefined).map((f) => [name(f), f]));
  return { columns, insertOnly: { ...INSERT_ONLY[schema] }, given };
}

/**
 * The columns of `row` the table has (`present` maps snake_case names to the table's own);
 * throws AppStoreRefused when the app set a field whose column the table lacks. Columns
 * of `row` the app did not set and the table lacks are left out.
 */
export function presentColumns(row: PeerRow, present: Map<string, string>, label: string, insert: boolean): [string, unknown][] {
  const out: [string, unknown][] = [];
  const all = insert ? { ...row.insertOnly, ...row.columns } : row.columns;
  for (const [col, v] of Object.entries(all)) {
    const actual = present.get(col);
    if (actual !== undefined) out.push([actual, v]);
    else if (row.given.has(col)) throw new AppStoreRefused(`${row.given.get(col)!}: ${label} has no column ${col}`);
  }
  return out;
}

/** The actual name of each snake_case column among `names` (a table may spell them camelCase or PascalCase). */
export function columnNames(names: readonly string[]): Map<string, string> {
  const alias: Record<string, string> = { app_id: 'id', app_key: 'key', app_secret: 'secret' };
  const out = new Map<string, string>();
  for (const n of names) out.set(alias[snake(n)] ?? snake(n), n);
  return out;
}
