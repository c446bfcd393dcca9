/** tollbooth/ws — protection for a `ws` WebSocketServer: before the upgrade, and per message. */
export { CloseCodes, CloseReasons } from './closeCodes.js'
export type { ProtectWebSocketOptions } from './options.js'
export { protectWebSocketServer, type WebSocketProtection } from './protect.js'
export type { WebSocketProtocolError } from './protocolError.js'
