// cluster-key-slot (what ioredis itself uses) ships no type declarations.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot of a key (CRC16 of its hash tag, or of the whole key), 0 to 16383. */
  export default function calculateSlot(key: string | Buffer): number
}
