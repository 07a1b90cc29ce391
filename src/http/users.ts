// POST /apps/{id}/users/{user_id}/terminate_connections: every socket signed in as the
// user (pusher:signin), on every shard and node, gets pusher:error 4009 and is closed. In a
// cluster whose backend is down (adapter.when_down refuse): 503, nobody closed, as a publish.

import { BusFullError } from '../bus/bus';
import type { AppConfig } from '../config/types';
import type { ApiDeps } from './deps';
import { jsonError, type ApiResponse } from './request';

export function terminateConnections(deps: ApiDeps, app: AppConfig, rawUserId: string): ApiResponse {
  let userId: string;
  try {
    userId = decodeURIComponent(rawUserId);
  } catch {
    return jsonError(400, 'user id in the path is not valid percent-encoding');
  }
  if (userId.length === 0) return jsonError(400, 'user id is empty');
  if (deps.clusterDown?.()) {
    return { status: 503, body: { error: 'the cluster backend is down: no connection was terminated (adapter.when_down refuse); retry once it is back' }, headers: { 'Retry-After': '1' } };
  }
  try {
    deps.directory.terminateUser(app.id, userId);
  } catch (err) {
    if (err instanceof BusFullError) return jsonError(503, 'server busy: internal queues are full, retry later');
    throw err;
  }
  return { status: 200, body: {} };
}
