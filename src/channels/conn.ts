// A connection as every layer below ws/ sees it: a uWS WebSocket, or an HTTP fallback
// session (fallback/session.ts) that acts like one. ws/types.ts Socket extends it; the
// layers below (channels/, delta/, history/, hooks/) name the part they use with Pick, so
// the shape is declared once.

export interface ConnSocket<D = { closed: boolean }> {
  /** 0 queued behind backpressure, 1 sent, 2 dropped (over the queue's bound). */
  send(message: string, isBinary: boolean): number;
  /** Closes with a code and reason (the close handler runs). */
  end(code?: number, shortMessage?: string): void;
  cork(cb: () => void): unknown;
  subscribe(topic: string): boolean;
  unsubscribe(topic: string): boolean;
  isSubscribed(topic: string): boolean;
  /** To every subscriber of the topic but this connection. */
  publish(topic: string, message: string | Uint8Array, isBinary: boolean): boolean;
  /** Bytes queued for the client and not yet written out. */
  getBufferedAmount(): number;
  getUserData(): D;
}
