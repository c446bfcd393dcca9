import type { WebSocket, WebSocketServer } from 'ws'

/** An error ws raised for what a client sent (`code` is ws' `WS_ERR_*`), after closing the socket with its code. */
export type WebSocketProtocolError = Error & { readonly code: string }

/**
 * Whether `error` is ws refusing a client's frame: a message over `maxPayload` (1009), a bad opcode or mask, RSV bits
 * (1002), invalid UTF-8 (1007), … ws has already sent the close frame when it emits one of these: the socket needs
 * no handling beyond being cut if the client does not complete the close.
 */
export function isProtocolError(error: unknown): error is WebSocketProtocolError {
  if (!(error instanceof Error)) return false
  const { code } = error as { code?: unknown }
  return typeof code === 'string' && code.startsWith('WS_ERR_')
}

/** The subprotocol of graphql-ws (`useServer` accepts no other). */
const GRAPHQL_TRANSPORT_WS = 'graphql-transport-ws'

/**
 * Whether a protocol error must stay away from the socket's 'error' listeners: graphql-ws' listener logs every
 * socket 'error' with its stack as an internal error of the server, so passing a client's oversized or malformed
 * frames on would let any client write to the server's logs at will. graphql-ws' `useServer` attaches that listener
 * to every socket of its server, also to one that offered no subprotocol (closed 4406 right after), so the server
 * is recognised by the `handleProtocols` it installs, as well as the socket by its subprotocol.
 */
export function withholdsProtocolErrors(socket: WebSocket, server: WebSocketServer): boolean {
  return (
    socket.protocol === GRAPHQL_TRANSPORT_WS || server.options.handleProtocols?.name === 'handleProtocols'
  )
}
