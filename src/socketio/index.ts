/** tollbooth/socket.io — protection for a Socket.IO 4 server: before the connection, per namespace, per event. */
export {
  type RefusedAcknowledgement,
  SOCKET_IO_DISCONNECT_EVENT,
  type SocketIoRefusal,
  type SocketIoRefusalCode,
} from '../client/socketIoRefusals.js'
export type { BucketOptions, EventCost, ProtectSocketIoOptions, SocketIoNamespaceOptions } from './options.js'
export { protectSocketIo, type SocketIoProtection } from './protect.js'
