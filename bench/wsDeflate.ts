/**
 * What a permessage-deflate flood from one address costs a `ws` server, plain and protected by tollbooth/ws (default
 * options), and what it does to the latency of legitimate clients meanwhile.
 *
 *   npm run bench:ws-deflate
 *
 * - Server (this process): a `ws` WebSocketServer on 127.0.0.1 with `perMessageDeflate: true`, echoing every
 *   message; `plain` without protection, `tollbooth` under `protectWebSocketServer(wss, {})`.
 * - Attacker (a process of its own, from 127.0.0.1): ATTACK_SLOTS raw sockets at once, each negotiating
 *   permessage-deflate and writing text frames of 85 bytes that inflate to 65,535 bytes each, as fast as the socket
 *   takes them, reconnecting as soon as a socket is closed. A refused upgrade waits its Retry-After (the `flood`
 *   phase), or tries again at once (the `flood + churn` phase: a handshake flood on top).
 * - Legitimate clients (a process of its own, from 127.0.0.2, another identity): LEGIT_CLIENTS `ws` clients with
 *   permessage-deflate, each sending a 1 KiB JSON message every LEGIT_INTERVAL_MS and timing its echo.
 *
 * Each round measures, per server, the legitimate clients alone (`quiet`), then with each flood, for PHASE_MS each,
 * starting every phase once the server is idle again. The server's CPU is process CPU time over a phase (100% = one
 * core); a flood's cost is its phase's CPU less the quiet phase's. ROUNDS rounds, the servers' order reversed every
 * other round; medians shown.
 *
 * tollbooth is imported by its own name (`dist/`, the published build; the script builds first).
 */
import { once } from 'node:events'
import net from 'node:net'
import { cpus } from 'node:os'
import { createInterface } from 'node:readline'
import { setTimeout as sleep } from 'node:timers/promises'
import { constants, deflateRawSync } from 'node:zlib'
import { protectWebSocketServer, type WebSocketProtection } from 'tollbooth/ws'
import { WebSocket, WebSocketServer } from 'ws'
import { LatencyHistogram } from './latency.js'
import { fmt, loadAverage, median, pct } from './report.js'
import { ScriptProcess } from './scriptProcess.js'

const ATTACK_SLOTS = 20
const PHASE_MS = 8_000
const LEGIT_CLIENTS = 5
const LEGIT_INTERVAL_MS = 50
const ROUNDS = 3
/** The target of tollbooth/ws: a deflate flood from one address costs the server at most a tenth of a core. */
const TARGET_CORES = 0.1

interface AttackJob {
  port: number
  slots: number
  ms: number
  /** Whether a refused upgrade waits its Retry-After (else it tries again at once). */
  honourRetryAfter: boolean
}

interface AttackResult {
  /** Bytes the kernel took from the attacker's sockets (they may sit unread in the server's kernel buffers). */
  wireBytes: number
  upgrades: number
  refusals: number
}

interface LegitJob {
  port: number
  clients: number
  intervalMs: number
  ms: number
}

interface LegitResult {
  echoes: number
  sent: number
  p50: number
  p99: number
  unexpectedCloses: number
}

// ---------------------------------------------------------------------------------------------------------------
// The attacker and the legitimate clients (child processes)
// ---------------------------------------------------------------------------------------------------------------

/** One masked client text frame, RSV1 set (compressed), whose payload inflates to 65,535 bytes of 'a'. */
function bombFrame(): Buffer {
  const deflated = deflateRawSync(Buffer.alloc(65_535, 0x61), { finishFlush: constants.Z_SYNC_FLUSH })
  // permessage-deflate sends a message without the flush's trailing 00 00 ff ff.
  const payload = deflated.subarray(0, deflated.length - 4)
  if (payload.length > 125) throw new Error(`a bomb frame of ${payload.length} bytes needs a longer header`)
  const mask = Buffer.from([0x12, 0x34, 0x56, 0x78])
  const masked = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] as number)))
  return Buffer.concat([Buffer.from([0xc1, 0x80 | payload.length]), mask, masked])
}

async function attack(job: AttackJob): Promise<AttackResult> {
  const burst = Buffer.concat(Array.from({ length: 64 }, () => bombFrame()))
  const result: AttackResult = { wireBytes: 0, upgrades: 0, refusals: 0 }
  const deadline = performance.now() + job.ms
  const left = () => Math.max(0, deadline - performance.now())
  const handshake =
    `GET / HTTP/1.1\r\nHost: 127.0.0.1:${job.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n' +
    'Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n'

  async function slot(): Promise<void> {
    while (left() > 0) {
      const socket = net.connect({ port: job.port, host: '127.0.0.1' })
      socket.on('error', () => {})
      const closed = once(socket, 'close')
      let head = ''
      const upgraded = await new Promise<boolean>((resolve) => {
        socket.once('connect', () => socket.write(handshake))
        const onData = (data: Buffer) => {
          head += data.toString('latin1')
          if (!head.includes('\r\n\r\n')) return
          socket.off('data', onData)
          // Never read again: what the server sends back stays in the kernel.
          socket.pause()
          resolve(head.startsWith('HTTP/1.1 101'))
        }
        socket.on('data', onData)
        socket.once('close', () => resolve(false))
      })
      if (!upgraded) {
        result.refusals++
        socket.destroy()
        await closed
        const retryAfter = Number(/\r\nretry-after: *(\d+)/i.exec(head)?.[1] ?? 0)
        if (job.honourRetryAfter && retryAfter > 0) await sleep(Math.min(retryAfter * 1000, left()))
        continue
      }
      result.upgrades++
      while (!socket.destroyed && left() > 0) {
        const flushed = socket.write(burst, (error) => {
          if (!error) result.wireBytes += burst.length
        })
        if (flushed) await new Promise((resolve) => setImmediate(resolve))
        else await Promise.race([once(socket, 'drain'), closed, sleep(left())])
      }
      socket.destroy()
      await closed
    }
  }

  await Promise.all(Array.from({ length: job.slots }, () => slot()))
  return result
}

async function legit(job: LegitJob): Promise<LegitResult> {
  const latency = new LatencyHistogram()
  const result = { echoes: 0, sent: 0, unexpectedCloses: 0 }
  let stopping = false
  const message = JSON.stringify({ type: 'chat', text: 'x'.repeat(1000) })
  const clients = await Promise.all(
    Array.from(
      { length: job.clients },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(`ws://127.0.0.1:${job.port}`, { localAddress: '127.0.0.2' })
          ws.once('open', () => resolve(ws))
          ws.once('error', reject)
        }),
    ),
  )
  const timers = clients.map((ws) => {
    const sentAt: number[] = []
    ws.on('message', () => {
      const sent = sentAt.shift()
      if (sent === undefined) return
      result.echoes++
      latency.add(performance.now() - sent)
    })
    ws.on('close', () => {
      if (!stopping) result.unexpectedCloses++
    })
    ws.on('error', () => {})
    return setInterval(() => {
      if (ws.readyState !== WebSocket.OPEN) return
      sentAt.push(performance.now())
      result.sent++
      ws.send(message)
    }, job.intervalMs)
  })
  await sleep(job.ms)
  for (const timer of timers) clearInterval(timer)
  // The echoes of the last messages.
  await sleep(200)
  stopping = true
  for (const ws of clients) ws.terminate()
  return { ...result, p50: latency.percentile(50), p99: latency.percentile(99) }
}

async function serveJobs(run: (job: never) => Promise<unknown>): Promise<void> {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === '') continue
    process.stdout.write(`${JSON.stringify(await run(JSON.parse(line) as never))}\n`)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The servers (this process)
// ---------------------------------------------------------------------------------------------------------------

interface Contender {
  readonly name: string
  readonly port: number
  readonly wss: WebSocketServer
  readonly protection: WebSocketProtection | undefined
  /** Messages that reached the app's handler. */
  handled: number
}

async function echoServer(name: string, protect: boolean): Promise<Contender> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: true })
  await once(wss, 'listening')
  const contender: Contender = {
    name,
    port: (wss.address() as { port: number }).port,
    wss,
    protection: protect ? protectWebSocketServer(wss, {}) : undefined,
    handled: 0,
  }
  wss.on('connection', (ws) => {
    ws.on('error', () => {})
    ws.on('message', (data, isBinary) => {
      contender.handled++
      ws.send(data, { binary: isBinary })
    })
  })
  return contender
}

type PhaseName = 'quiet' | 'flood' | 'flood + churn'
const PHASES: readonly PhaseName[] = ['quiet', 'flood', 'flood + churn']

interface Phase {
  readonly cores: number
  readonly legit: LegitResult
  readonly attack: AttackResult | undefined
  /** Flood messages that reached the app's handler. */
  readonly floodHandled: number
}

/** Waits until this process uses under 5% of a core over 250 ms (a flood's leftovers are done), 20 s at most. */
async function untilIdle(): Promise<void> {
  for (let i = 0; i < 80; i++) {
    const cpu = process.cpuUsage()
    await sleep(250)
    const used = process.cpuUsage(cpu)
    if ((used.user + used.system) / 250_000 < 0.05) return
  }
}

async function phase(
  contender: Contender,
  name: PhaseName,
  legitClients: ScriptProcess,
  attacker: ScriptProcess,
): Promise<Phase> {
  for (const ws of contender.wss.clients) ws.terminate()
  await untilIdle()
  const handledBefore = contender.handled
  const cpu = process.cpuUsage()
  const started = performance.now()
  legitClients.send(
    JSON.stringify({
      port: contender.port,
      clients: LEGIT_CLIENTS,
      intervalMs: LEGIT_INTERVAL_MS,
      ms: PHASE_MS,
    }),
  )
  if (name !== 'quiet') {
    const job: AttackJob = {
      port: contender.port,
      slots: ATTACK_SLOTS,
      ms: PHASE_MS,
      honourRetryAfter: name === 'flood',
    }
    attacker.send(JSON.stringify(job))
  }
  const [legitLine, attackLine] = await Promise.all([
    legitClients.next(),
    name === 'quiet' ? undefined : attacker.next(),
  ])
  const used = process.cpuUsage(cpu)
  const seconds = (performance.now() - started) / 1000
  const legitResult = JSON.parse(legitLine) as LegitResult
  return {
    cores: (used.user + used.system) / 1e6 / seconds,
    legit: legitResult,
    attack: attackLine === undefined ? undefined : (JSON.parse(attackLine) as AttackResult),
    floodHandled: contender.handled - handledBefore - legitResult.sent,
  }
}

async function main(): Promise<void> {
  const attacker = new ScriptProcess('attacker', import.meta.url, ['--attack'])
  const legitClients = new ScriptProcess('legitimate clients', import.meta.url, ['--legit'])
  const contenders = [
    await echoServer('plain ws, perMessageDeflate', false),
    await echoServer('tollbooth/ws defaults', true),
  ]
  const rounds = new Map<Contender, Record<PhaseName, Phase>[]>(contenders.map((c) => [c, []]))
  try {
    console.log(
      `Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'}), load average before: ${loadAverage()}`,
    )
    console.log(
      `flood: ${ATTACK_SLOTS} raw sockets from 127.0.0.1, ${bombFrame().length}-byte frames inflating to 65,535 bytes, ` +
        `reconnecting; legitimate: ${LEGIT_CLIENTS} ws clients from 127.0.0.2, a 1 KiB message every ` +
        `${LEGIT_INTERVAL_MS} ms each; ${PHASE_MS / 1000} s a phase, ${ROUNDS} rounds, medians shown; CPU is the ` +
        "server process' CPU time over the phase (100% = one core)\n",
    )
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 0 ? [...contenders].reverse() : contenders
      for (const contender of order) {
        const measured = {} as Record<PhaseName, Phase>
        for (const name of PHASES) {
          const result = await phase(contender, name, legitClients, attacker)
          measured[name] = result
          const attackNote =
            result.attack === undefined
              ? ''
              : `, ${(result.attack.wireBytes / 1e6).toFixed(1)} MB sent, ${fmt(result.attack.upgrades)} upgrades, ` +
                `${fmt(result.attack.refusals)} refused, ${fmt(result.floodHandled)} flood messages handled`
          console.log(
            `round ${round}  ${contender.name.padEnd(28)} ${name.padEnd(14)} CPU ${pct(result.cores).padStart(4)}` +
              `  legit p50 ${result.legit.p50.toFixed(2)} ms p99 ${result.legit.p99.toFixed(2)} ms` +
              `, ${result.legit.sent - result.legit.echoes} lost${attackNote}`,
          )
        }
        rounds.get(contender)?.push(measured)
      }
    }
    console.log()
    console.log(
      [
        'server'.padEnd(28),
        'flood CPU'.padStart(10),
        '+churn CPU'.padStart(11),
        'quiet p50/p99 ms'.padStart(18),
        'flood p50/p99 ms'.padStart(18),
        'lost echoes'.padStart(12),
      ].join(' '),
    )
    const costOf = (all: Record<PhaseName, Phase>[], name: PhaseName) =>
      median(all.map((r) => r[name].cores - r.quiet.cores))
    const latencyOf = (all: Record<PhaseName, Phase>[], name: PhaseName) =>
      `${median(all.map((r) => r[name].legit.p50)).toFixed(2)}/${median(all.map((r) => r[name].legit.p99)).toFixed(2)}`
    for (const contender of contenders) {
      const all = rounds.get(contender) ?? []
      const lost = all.reduce((sum, r) => sum + r.flood.legit.sent - r.flood.legit.echoes, 0)
      console.log(
        [
          contender.name.padEnd(28),
          pct(costOf(all, 'flood')).padStart(10),
          pct(costOf(all, 'flood + churn')).padStart(11),
          latencyOf(all, 'quiet').padStart(18),
          latencyOf(all, 'flood').padStart(18),
          String(lost).padStart(12),
        ].join(' '),
      )
    }
    const protectedRounds = rounds.get(contenders[1] as Contender) ?? []
    const cost = costOf(protectedRounds, 'flood')
    console.log(
      `\ntollbooth/ws: the deflate flood costs ${pct(cost)} of a core (median of ${ROUNDS}); target ≤ ` +
        `${pct(TARGET_CORES)}: ${cost <= TARGET_CORES ? 'met' : `NOT met (${pct(cost - TARGET_CORES)} over)`}`,
    )
    // The churn phase adds upgrades refused as fast as the attacker sends them: their cost, one by one.
    const perRefusal = median(
      protectedRounds.map((r) => {
        const refused = (r['flood + churn'].attack?.refusals ?? 0) - (r.flood.attack?.refusals ?? 0)
        return ((r['flood + churn'].cores - r.flood.cores) * (PHASE_MS / 1000) * 1e6) / refused
      }),
    )
    console.log(
      `tollbooth/ws: an upgrade refused (429) costs the server about ${perRefusal.toFixed(0)} µs of CPU, Node's HTTP ` +
        'parsing and the TCP connection included',
    )
    console.log(`load average after: ${loadAverage()}`)
  } finally {
    await attacker.stop(5_000)
    await legitClients.stop(5_000)
    for (const contender of contenders) {
      await contender.protection?.close()
      for (const ws of contender.wss.clients) ws.terminate()
      await new Promise((resolve) => contender.wss.close(resolve))
    }
  }
}

if (process.argv.includes('--attack')) await serveJobs((job: AttackJob) => attack(job))
else if (process.argv.includes('--legit')) await serveJobs((job: LegitJob) => legit(job))
else await main()
