/**
 * tollbooth/ws — protection for a `ws` WebSocketServer. Not built yet (see the WebSocket issue); this entry point
 * exists so the package's `exports` map is stable. The core it will use is re-exported for convenience.
 */
export { concurrencyLimit } from '../core/limiters/concurrencyLimit.js'
