/** Socket ids are `<digits>.<digits>` (pusher-js and the SDKs check this form). */
const SOCKET_ID_RE = /^\d+\.\d+$/;

export function isValidSocketId(s: unknown): boolean {
  return typeof s === 'string' && s.length <= 64 && SOCKET_ID_RE.test(s);
}
