import { describe, expect, it } from 'vitest'
import { resolveSocketIoOptions } from '../../../src/socketio/options.js'

/** The error `resolveSocketIoOptions(options)` throws: its stable code and its message. */
function refusal(options: unknown): { code: unknown; message: string } {
  try {
    resolveSocketIoOptions(options as never)
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: (error as Error).message }
  }
  throw new Error('accepted')
}

describe('protectSocketIo options', () => {
  it('defaults every limit', () => {
    const resolved = resolveSocketIoOptions()
    expect(resolved.limits).toEqual({
      maxConnectionsPerIdentity: 10,
      eventsPerSecond: 50,
      eventBurst: 50,
      eventCost: undefined,
      identityEvents: false,
      dropsBeforeDisconnect: 20,
      abuseFactor: 10,
    })
    expect(resolved.handshakesPerIp).toEqual({ capacity: 20, refillPerSecond: 2 })
    expect(resolved.name).toBe('socket.io')
    expect(resolved.packetsPerSecond).toBe(200)
  })

  it.each([
    [{ eventsPerSecnd: 5 }, 'eventsPerSecnd'],
    [{ handshakesPerIp: { capacity: 5, refillPerSec: 1 } }, 'refillPerSec'],
    [{ identityEvents: { capacity: 5, refillPerSecond: 1, bach: 2 } }, 'bach'],
    [{ namespaces: { '/admin': { maxConnectionsPerIdentiy: 1 } } }, 'maxConnectionsPerIdentiy'],
    [{ eventsPerSecond: 0 }, 'eventsPerSecond'],
    [{ eventCost: { export: 0 } }, 'eventCost.export'],
    [{ eventCost: { export: 2.5 } }, 'eventCost.export'],
    [{ eventCost: 'export' }, 'eventCost'],
    [{ identityEvents: { capacity: 5, refillPerSecond: 1, batch: 6 } }, 'identityEvents.batch'],
    [{ namespaces: { admin: {} } }, 'namespaces.admin'],
    [{ namespaces: { '/admin': { eventBurst: -1 } } }, 'namespaces./admin.eventBurst'],
    [{ maxPacketBytes: 0 }, 'maxPacketBytes'],
    [{ name: 'a{b}' }, 'name'],
    [{ failPolicy: 'opened' }, 'failPolicy'],
    [{ identify: 'user' }, 'identify'],
  ])('refuses %j, naming %s', (options, option) => {
    const { code, message } = refusal(options)
    expect(code).toBe('TOLLBOOTH_ERR_INVALID_OPTION')
    expect(message).toContain(option)
  })

  it('keeps only what a namespace set, a rate bringing its own burst', () => {
    const resolved = resolveSocketIoOptions({
      eventsPerSecond: 10,
      eventBurst: 40,
      namespaces: { '/admin': { eventsPerSecond: 2 }, '/chat': { maxConnectionsPerIdentity: 3 } },
    })
    expect(resolved.namespaces.get('/admin')).toEqual({ eventsPerSecond: 2, eventBurst: 2 })
    expect(resolved.namespaces.get('/chat')).toEqual({ maxConnectionsPerIdentity: 3 })
  })
})
