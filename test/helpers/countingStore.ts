import { EventEmitter, once } from 'node:events'
import type { Reply, Store, StoreRequest } from '../../src/core/stores/store.js'

/** A real store, passed through, counting the operations it completed (`op` and `op:key`). */
export class CountingStore implements Store {
  readonly kind: Store['kind']
  private readonly counts = new Map<string, number>()
  private readonly completed = new EventEmitter()

  constructor(private readonly inner: Store) {
    this.kind = inner.kind
  }

  count(op: string, key?: string): number {
    return this.counts.get(key === undefined ? op : `${op}:${key}`) ?? 0
  }

  /** Resolves once `predicate` holds after a completed operation (the test's own timeout bounds the wait). */
  async until(predicate: () => boolean): Promise<void> {
    while (!predicate()) await once(this.completed, 'op')
  }

  async run(request: StoreRequest): Promise<Reply> {
    const reply = await this.inner.run(request)
    for (const name of [request.op, `${request.op}:${request.key}`]) {
      this.counts.set(name, (this.counts.get(name) ?? 0) + 1)
    }
    this.completed.emit('op')
    return reply
  }

  consumeAll(requests: readonly StoreRequest[]): Promise<Reply[]> {
    return this.inner.consumeAll(requests)
  }

  delete(limiter: string, key: string): Promise<void> {
    return this.inner.delete(limiter, key)
  }
}
