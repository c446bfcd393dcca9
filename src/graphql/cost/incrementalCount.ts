import type { ResponsePlan } from './responsePlan.js'

type Path = readonly (string | number)[]

/**
 * One entry of an incremental response's `incremental` list: a deferred fragment's `data` for the object at
 * `path`, or a stream's `items` for the list at `path` (whose last segment is then the index of the first item).
 * Executors that name their parts by `id` (announced in `pending` with their path) are read the same way.
 */
export interface IncrementalEntry {
  readonly data?: unknown
  readonly items?: readonly unknown[] | null
  readonly path?: Path
  readonly id?: string
  readonly subPath?: Path
}

/** One payload of an incremental response (the first carries `data`, the others `incremental`). */
export interface IncrementalPayload {
  readonly data?: unknown
  readonly incremental?: readonly IncrementalEntry[]
  readonly pending?: readonly { readonly id: string; readonly path: Path }[]
  readonly hasNext?: boolean
}

/**
 * Counts an incremental response (`@defer`, `@stream`) payload by payload, in the same model as a whole response:
 * each part costs what it adds to the response as the client assembles it. The response is assembled here too, from
 * copies of the payloads (which are sent as they are), so that later parts are found by their path in it.
 */
export class IncrementalCount {
  private merged: Record<string, unknown> | undefined
  private readonly pendingPaths = new Map<string, Path>()

  constructor(private readonly plan: ResponsePlan | undefined) {}

  /** What `payload` adds to the response; it is merged in. */
  add(payload: IncrementalPayload): number {
    const plan = this.plan
    if (plan === undefined) return 0
    for (const pending of payload.pending ?? []) this.pendingPaths.set(pending.id, pending.path)
    let cost = 0
    if (payload.data != null && typeof payload.data === 'object' && this.merged === undefined) {
      this.merged = structuredClone(payload.data) as Record<string, unknown>
      cost += plan.cost(this.merged)
    }
    for (const entry of payload.incremental ?? []) {
      const path = this.pathOf(entry)
      if (path === undefined || this.merged === undefined) continue
      if (Array.isArray(entry.items)) {
        // The list's path: the stream's own, or its first item's (an index last).
        const listPath = typeof path.at(-1) === 'number' ? path.slice(0, -1) : path
        cost += plan.streamedCost(this.merged, listPath, entry.items)
        appendItems(this.merged, listPath, structuredClone(entry.items))
      } else if (entry.data != null && typeof entry.data === 'object') {
        cost += plan.deferredCost(this.merged, path, entry.data)
        mergeFields(this.merged, path, structuredClone(entry.data) as Record<string, unknown>)
      }
    }
    return cost
  }

  private pathOf(entry: IncrementalEntry): Path | undefined {
    if (entry.path !== undefined) return entry.path
    const announced = entry.id === undefined ? undefined : this.pendingPaths.get(entry.id)
    return announced === undefined ? undefined : [...announced, ...(entry.subPath ?? [])]
  }
}

function valueAt(root: unknown, path: Path): unknown {
  let value = root
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined
    value = (value as Record<string | number, unknown>)[key]
  }
  return value
}

function appendItems(root: Record<string, unknown>, listPath: Path, items: readonly unknown[]): void {
  const list = valueAt(root, listPath)
  if (Array.isArray(list)) list.push(...items)
}

function mergeFields(root: Record<string, unknown>, path: Path, data: Record<string, unknown>): void {
  const target = valueAt(root, path)
  if (target !== null && typeof target === 'object' && !Array.isArray(target)) Object.assign(target, data)
}
