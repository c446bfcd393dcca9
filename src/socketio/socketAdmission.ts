import type { Lease } from '../core/limiters/concurrencyLimit.js'
import type { SharedBudget } from '../ws/sharedBudget.js'
import type { EventGuard } from './eventGuard.js'

/**
 * One admitted socket: the identity it is counted under, the connection slot it holds, its event guard, and the
 * release of its slot (and of its share of the identity's budget), exactly once whichever way it ends.
 */
export class SocketAdmission {
  private released = false

  constructor(
    readonly identity: string,
    readonly lease: Lease,
    readonly guard: EventGuard,
    private readonly budget: SharedBudget | undefined,
  ) {}

  release(): Promise<void> {
    if (this.released) return Promise.resolve()
    this.released = true
    this.guard.stop()
    this.budget?.leave(this.identity)
    return this.lease.release()
  }
}
