// ws.send of one protocol frame to one socket, counted: metrics/meters.ts sendFrame (one
// copy for every layer), re-exported where ws/ and the layers above import it.

export { sendFrame } from '../metrics/meters';
