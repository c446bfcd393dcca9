/**
 * How many distinct strings were added, in bounded memory: exact up to `EXACT_CAP`, then a HyperLogLog.
 *
 * Why this shape: a set of every identity would grow with the traffic (160,000 clients, or a botnet rotating
 * addresses, would cost megabytes per limiter and window), and a plain HyperLogLog misreports the small counts a
 * quiet deployment sees (3 users read as 2 when two of them share a register). So a counter first keeps the
 * 53-bit hashes themselves — exact, short of a hash collision (about 1 in 10^10 at 1024 identities) — and once
 * more than `EXACT_CAP` are distinct, folds them into `2^PRECISION` one-byte registers and drops the set. Each
 * `add` is one hash of the string and one set or register update; the string itself is never kept.
 *
 * The hash is seeded at random per process: identities are the clients' choice, and with a known seed a client
 * could craft a few thousand whose hashes all land in high registers, and make the gauge read millions.
 */
import { randomInt } from 'node:crypto'

/** Distinct hashes kept exactly before switching to the sketch. */
export const EXACT_CAP = 1024
/** log2 of the number of HyperLogLog registers. */
export const PRECISION = 12
/** 4096 one-byte registers: 4 KiB, whatever the number of identities. */
export const REGISTERS = 1 << PRECISION
/**
 * The sketch's relative error: its standard error is 1.04 / √REGISTERS ≈ 1.6 %; the bound is three of them, which
 * holds for all but about 3 estimates in 1000.
 */
export const ESTIMATE_ERROR_BOUND = 0.05

const TWO_POW_32 = 4_294_967_296
/** The bias correction of the raw HyperLogLog estimate for m ≥ 128 registers (Flajolet et al., 2007). */
const ALPHA = 0.7213 / (1 + 1.079 / REGISTERS)

/** This process's hash seed (see above). */
const PROCESS_SEED = randomInt(0, 2 ** 32)

export class DistinctCounter {
  /** The hashes seen while there are at most EXACT_CAP of them; undefined once the registers took over. */
  private exact: Set<number> | undefined = new Set()
  private registers: Uint8Array | undefined

  /** @param seed of the hash; tests fix it, to get the same estimate on every run. */
  constructor(private readonly seed: number = PROCESS_SEED) {}

  add(value: string): void {
    const hash = hash53(value, this.seed)
    if (this.exact === undefined) {
      this.observe(hash)
      return
    }
    this.exact.add(hash)
    if (this.exact.size <= EXACT_CAP) return
    this.registers = new Uint8Array(REGISTERS)
    for (const seen of this.exact) this.observe(seen)
    this.exact = undefined
  }

  /** Distinct values added: exact while `isExact`, else the HyperLogLog estimate (rounded). */
  count(): number {
    if (this.exact !== undefined) return this.exact.size
    const registers = this.registers as Uint8Array
    let sum = 0
    let zeros = 0
    for (let i = 0; i < REGISTERS; i++) {
      const rank = registers[i] as number
      sum += 2 ** -rank
      if (rank === 0) zeros++
    }
    const raw = (ALPHA * REGISTERS * REGISTERS) / sum
    // Small range: the raw estimate is biased upwards while registers are still empty; linear counting is not.
    if (raw <= 2.5 * REGISTERS && zeros > 0) return Math.round(REGISTERS * Math.log(REGISTERS / zeros))
    return Math.round(raw)
  }

  /** Forgets everything, back to exact counting. */
  clear(): void {
    if (this.exact === undefined) this.exact = new Set()
    else this.exact.clear()
    this.registers = undefined
  }

  /** True while the count is exact (at most EXACT_CAP distinct values). */
  get isExact(): boolean {
    return this.exact !== undefined
  }

  /** What the counter holds now: hashes in the exact set, bytes of registers. Neither grows past its cap. */
  get footprint(): { readonly exactHashes: number; readonly registerBytes: number } {
    return { exactHashes: this.exact?.size ?? 0, registerBytes: this.registers?.byteLength ?? 0 }
  }

  private observe(hash: number): void {
    // `>>> 0` keeps the low 32 bits of the 53-bit hash; the high 21 bits choose the register.
    const low = hash >>> 0
    const index = ((hash - low) / TWO_POW_32) & (REGISTERS - 1)
    const rank = Math.clz32(low) + 1
    const registers = this.registers as Uint8Array
    if (rank > (registers[index] as number)) registers[index] = rank
  }
}

/**
 * A 53-bit hash of a string (cyrb53: two multiplicative 32-bit lanes mixed at the end), as one number so that a
 * decision allocates nothing. Not cryptographic: it only has to spread identities evenly, and with a seed the client
 * does not know, the ones a client chooses too.
 */
export function hash53(value: string, seed = 0): number {
  let h1 = 0xdeadbeef ^ seed
  let h2 = 0x41c6ce57 ^ seed
  for (let i = 0; i < value.length; i++) {
    const char = value.charCodeAt(i)
    h1 = Math.imul(h1 ^ char, 2_654_435_761)
    h2 = Math.imul(h2 ^ char, 1_597_334_677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2_246_822_507)
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3_266_489_909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2_246_822_507)
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3_266_489_909)
  return TWO_POW_32 * (h2 & 0x1fffff) + (h1 >>> 0)
}
