import { CircuitBreaker, type CircuitBreakerOptions, worstBreakerState } from '../circuitBreaker.js'
import type { BreakerState } from '../hooks.js'

/** Node addresses churn with failovers and restarts: past this many breakers, closed ones are forgotten. */
const MAX_NODES = 256

/**
 * One circuit breaker per Redis node (one in all for a standalone Redis): on a cluster, a master that stops
 * answering stops only the calls for its own slots, and its half-open probe goes to it, not to a healthy master.
 */
export class NodeBreakers {
  private readonly breakers = new Map<string, CircuitBreaker>()

  constructor(
    private readonly owner: string,
    private readonly options: CircuitBreakerOptions,
    private readonly onChange: (node: string, from: BreakerState, to: BreakerState) => void,
  ) {
    // Checks the options now, at startup, rather than at the first call.
    new CircuitBreaker(owner, options, () => {})
  }

  /** The breaker of the node at `address`. */
  of(address: string): CircuitBreaker {
    let breaker = this.breakers.get(address)
    if (breaker === undefined) {
      if (this.breakers.size >= MAX_NODES) this.forgetOne()
      breaker = new CircuitBreaker(this.owner, this.options, (from, to) => this.onChange(address, from, to))
      this.breakers.set(address, breaker)
    }
    return breaker
  }

  /** The worst state among the nodes: `open` when any node's breaker is open. */
  get state(): BreakerState {
    return worstBreakerState([...this.breakers.values()].map((breaker) => breaker.state))
  }

  private forgetOne(): void {
    for (const [address, breaker] of this.breakers) {
      if (breaker.state === 'closed') {
        this.breakers.delete(address)
        return
      }
    }
    const oldest = this.breakers.keys().next().value
    if (oldest !== undefined) this.breakers.delete(oldest)
  }
}
