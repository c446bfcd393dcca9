/**
 * The soak's short profile (soak/soak.ts): the example server on a Redis Cluster of 3 masters + 3 replicas, 2
 * instances under load from many identities, an instance SIGKILLed while it holds WebSocket sockets, then a master
 * SIGKILLed; every guarantee `npm run soak` checks must hold (report.ts). About a minute.
 */
import { describe, expect, it } from 'vitest'
import { judge } from '../../soak/report.js'
import { runSoak, SHORT } from '../../soak/soak.js'

describe('npm run soak, short profile', () => {
  it('holds every guarantee through an instance crash and a master failover', async () => {
    const report = judge(await runSoak(SHORT))
    const failed = report.checks.filter((check) => !check.passed)
    expect(failed, report.table).toEqual([])
    // What it judged: the classes, the WebSocket caps, both faults, the probe, the instances' health.
    expect(report.checks.map((check) => check.name)).toEqual(
      expect.arrayContaining([
        'anonymous, greedy: at least 95 % of the budget (no false refusals), never more',
        'anonymous, well-behaved: nothing refused',
        'WebSocket sockets per identity: none admitted past the cap (store up)',
        'outside faults the store answers (at most 1 % of decisions by the fail policy)',
        'kill-instance: its leases are freed within leaseMs and its identities reconnected elsewhere',
        'kill-master: decisions come back from the store while it is watched',
        'admission probe: nothing admitted beyond budget while no fault disturbs',
        'nothing thrown or unhandled, no instance died on its own',
      ]),
    )
  }, 240_000)
})
