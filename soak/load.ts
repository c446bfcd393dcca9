/**
 * The soak's load: identities sending GraphQL over HTTP at fixed rates (well-behaved ones under their budget, greedy
 * ones far over it), chat WebSocket connections sending messages, and graphql-ws connections holding a subscription
 * (and, for the busy profile, pinging), spread over the live instances. Everything each identity sent and got back is
 * recorded for the report.
 */
import { WebSocket } from 'ws'

/** One GraphQL request and its answer. */
export interface Sent {
  readonly at: number
  /** The instance it was sent to. */
  readonly instance: string
  readonly status: number
  /** The cost the budget kept (requested − refund); 0 when refused. */
  readonly charged: number
  /** The budget left after it (`r` of the RateLimit field), if the response said. */
  readonly remaining: number | undefined
  readonly latencyMs: number
}

export interface HttpClass {
  readonly name: string
  /** Budget of these identities in the example server: capacity and refill per second. */
  readonly budget: { readonly capacity: number; readonly refillPerSecond: number }
  /** Whether the class asks for more than its budget (then ≥ 95 % of the budget is expected, no more). */
  readonly greedy: boolean
  readonly cost: number
  readonly perSecond: number
  readonly identities: readonly { readonly name: string; readonly headers: Record<string, string> }[]
}

export interface WebSocketClient {
  readonly identity: string
  readonly kind: 'chat' | 'graphql-ws'
  open: boolean
  /** Instance the socket is (or was last) open on. */
  instance: string
  /** When its socket was closed by its instance's death, until it is open again elsewhere. */
  lostAt: number | undefined
  reconnects: { lostAt: number; backAt: number }[]
}

/** WebSocket messages so far, from the clients' side: what they sent, and the graphql-ws pings among them answered. */
export interface WebSocketTraffic {
  /** Messages sent to the servers (chat messages and graphql-ws pings). */
  sent: number
  pings: number
  pongs: number
}

/** Where requests go: the live instances, in turn. */
export interface Targets {
  urls(): readonly { readonly name: string; readonly url: string }[]
}

const PING = JSON.stringify({ type: 'ping' })

/** `{ posts(first: N) { id } }` costs N and returns N (up to 100): nothing is refunded. */
function query(cost: number): string {
  return `{ posts(first: ${cost}) { id } }`
}

export class Load {
  readonly sent = new Map<string, Sent[]>()
  readonly sockets: WebSocketClient[] = []
  /** Extra connections past a cap that were let through: when, whose, which kind. */
  readonly capBreaches: { at: number; identity: string; kind: string }[] = []
  readonly traffic: WebSocketTraffic = { sent: 0, pings: 0, pongs: 0 }
  private readonly timers: NodeJS.Timeout[] = []
  private readonly live = new Set<WebSocket>()
  private turn = 0
  private stopped = false

  constructor(
    private readonly targets: Targets,
    readonly classes: readonly HttpClass[],
  ) {}

  private next(): { name: string; url: string } | undefined {
    const urls = this.targets.urls()
    return urls.length === 0 ? undefined : urls[this.turn++ % urls.length]
  }

  /**
   * Starts every identity's requests, each on a timer of its own rate. The identities of a class start spread over
   * one period, so that hundreds of them do not send in the same instant.
   */
  startHttp(): void {
    for (const group of this.classes) {
      const period = 1000 / group.perSecond
      group.identities.forEach((identity, i) => {
        const records: Sent[] = []
        this.sent.set(identity.name, records)
        const send = () => void this.send(group, identity.headers, records)
        const start = setTimeout(
          () => {
            if (this.stopped) return
            send()
            this.timers.push(setInterval(send, period))
          },
          (period * i) / group.identities.length,
        )
        this.timers.push(start)
      })
    }
  }

  private async send(group: HttpClass, headers: Record<string, string>, records: Sent[]): Promise<void> {
    const target = this.next()
    if (target === undefined || this.stopped) return
    const started = performance.now()
    const at = Date.now()
    try {
      const response = await fetch(`${target.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
        body: JSON.stringify({ query: query(group.cost) }),
        signal: AbortSignal.timeout(5000),
      })
      const body = (await response.json()) as {
        extensions?: { cost?: { requestedQueryCost?: number; actualQueryCost?: number } }
      }
      const cost = body.extensions?.cost
      const charged =
        response.status === 200 && cost !== undefined
          ? Math.min(cost.requestedQueryCost ?? 0, cost.actualQueryCost ?? 0)
          : 0
      const remaining = /;r=(\d+)/.exec(response.headers.get('ratelimit') ?? '')?.[1]
      records.push({
        at,
        instance: target.name,
        status: response.status,
        charged,
        remaining: remaining === undefined ? undefined : Number(remaining),
        latencyMs: performance.now() - started,
      })
    } catch {
      records.push({
        at,
        instance: target.name,
        status: 0,
        charged: 0,
        remaining: undefined,
        latencyMs: performance.now() - started,
      })
    }
  }

  /**
   * Keeps `perIdentity` sockets of each identity open, each on another instance; a lost socket is opened again
   * elsewhere every 250 ms until admitted. Chat sockets send a message a second; graphql-ws ones hold a
   * subscription, and send graphql-ws pings at `pingsPerSecond` if given. Every 5 s each identity tries one socket
   * more than `cap`: admitted, it is a breach.
   */
  startWebSockets(
    kind: 'chat' | 'graphql-ws',
    identities: readonly string[],
    perIdentity: number,
    cap: number,
    pingsPerSecond = 0,
  ): void {
    identities.forEach((identity, i) => {
      for (let slot = 0; slot < perIdentity; slot++) {
        const client: WebSocketClient = {
          identity,
          kind,
          open: false,
          instance: '',
          lostAt: undefined,
          reconnects: [],
        }
        this.sockets.push(client)
        this.keepOpen(client, i + slot, pingsPerSecond)
      }
      const probe = setInterval(() => void this.probeCap(kind, identity, cap), 5000)
      this.timers.push(probe)
    })
  }

  private keepOpen(client: WebSocketClient, offset: number, pingsPerSecond: number): void {
    if (this.stopped) return
    const again = () => setTimeout(() => this.keepOpen(client, offset + 1, pingsPerSecond), 250).unref()
    const urls = this.targets.urls()
    const target = urls[offset % Math.max(1, urls.length)]
    if (target === undefined) {
      again()
      return
    }
    void this.connect(client.kind, client.identity, target.url).then((socket) => {
      if (socket === undefined) {
        again()
        return
      }
      client.open = true
      client.instance = target.name
      if (client.lostAt !== undefined) {
        client.reconnects.push({ lostAt: client.lostAt, backAt: Date.now() })
        client.lostAt = undefined
      }
      const chatter = client.kind === 'chat' ? this.chatter(socket, client.identity) : undefined
      const pinger = pingsPerSecond > 0 ? this.pinger(socket, pingsPerSecond) : undefined
      socket.once('close', () => {
        clearInterval(chatter)
        clearInterval(pinger)
        client.open = false
        if (this.stopped) return
        client.lostAt ??= Date.now()
        again()
      })
    })
  }

  /** A chat message a second. */
  private chatter(socket: WebSocket, identity: string): NodeJS.Timeout {
    return setInterval(() => {
      if (socket.readyState !== socket.OPEN) return
      socket.send(`hello from ${identity}`)
      this.traffic.sent++
    }, 1000)
  }

  /** graphql-ws pings (`{"type":"ping"}`, which the server answers with a pong), counted with their pongs. */
  private pinger(socket: WebSocket, perSecond: number): NodeJS.Timeout {
    socket.on('message', (data) => {
      if ((JSON.parse(data.toString()) as { type: string }).type === 'pong') this.traffic.pongs++
    })
    return setInterval(() => {
      if (socket.readyState !== socket.OPEN) return
      socket.send(PING)
      this.traffic.sent++
      this.traffic.pings++
    }, 1000 / perSecond)
  }

  private async probeCap(kind: 'chat' | 'graphql-ws', identity: string, cap: number): Promise<void> {
    const open = this.sockets.filter((s) => s.identity === identity && s.kind === kind && s.open).length
    if (open < cap || this.stopped) return
    const target = this.next()
    if (target === undefined) return
    const extra = await this.connect(kind, identity, target.url)
    if (extra === undefined) return
    this.capBreaches.push({ at: Date.now(), identity, kind })
    extra.terminate()
  }

  /** Opens one socket as `identity`: resolved once usable (graphql-ws: subscribed), undefined when refused. */
  private connect(
    kind: 'chat' | 'graphql-ws',
    identity: string,
    url: string,
  ): Promise<WebSocket | undefined> {
    const headers = { 'x-forwarded-for': identity }
    const socket =
      kind === 'chat'
        ? new WebSocket(`${url.replace(/^http/, 'ws')}/chat`, { headers })
        : new WebSocket(`${url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', { headers })
    return new Promise((resolve) => {
      const fail = () => {
        socket.terminate()
        resolve(undefined)
      }
      socket.once('unexpected-response', fail)
      socket.once('error', fail)
      socket.once('close', () => resolve(undefined))
      socket.once('open', () => {
        this.live.add(socket)
        socket.once('close', () => this.live.delete(socket))
        if (kind === 'chat') return resolve(socket)
        socket.on('message', (data) => {
          const message = JSON.parse(data.toString()) as { type: string }
          if (message.type === 'connection_ack') {
            socket.send(
              JSON.stringify({
                id: '1',
                type: 'subscribe',
                payload: { query: 'subscription { messageAdded { id } }' },
              }),
            )
            resolve(socket)
          }
        })
        socket.send(JSON.stringify({ type: 'connection_init' }))
      })
    })
  }

  /** Open sockets per identity and kind now (what the clients hold). */
  openSockets(): Map<string, number> {
    const counts = new Map<string, number>()
    for (const client of this.sockets) {
      if (!client.open) continue
      const id = `${client.kind} ${client.identity}`
      counts.set(id, (counts.get(id) ?? 0) + 1)
    }
    return counts
  }

  /** Sockets lost with `instance`: marked, so that their way back elsewhere is timed. */
  lostWith(instance: string, at: number): void {
    for (const client of this.sockets) if (client.instance === instance && client.open) client.lostAt = at
  }

  stop(): void {
    this.stopped = true
    for (const timer of this.timers) clearInterval(timer)
    for (const socket of this.live) socket.terminate()
  }
}
