/**
 * The SVG chart of one simulated pattern: one panel per algorithm, requests per time bucket as stacked bars,
 * admitted (green) under refused (red).
 *
 * Written by hand rather than with a charting library: the chart is a few hundred rectangles, and the output must be
 * a plain static file that GitHub renders in a README (no scripts, no external fonts, a white background so it stays
 * readable in dark mode). All panels share both axes, so bars compare across algorithms at a glance.
 */

import { formatMs, formatRate } from './format.js'
import type { Outcome, Policy } from './replay.js'
import type { AlgorithmSummary, PatternReport } from './summary.js'

export interface ChartPanel {
  readonly summary: AlgorithmSummary
  readonly outcomes: readonly Outcome[]
}

const WIDTH = 960
const PLOT_LEFT = 64
const PLOT_RIGHT = WIDTH - 20
const PLOT_WIDTH = PLOT_RIGHT - PLOT_LEFT
const HEADER_HEIGHT = 92
/** Panel title line, plot, tick labels. */
const PANEL_HEIGHT = 172
const PANEL_TITLE = 18
const PLOT_HEIGHT = 112
const FOOTER_HEIGHT = 36
/** More bars than this get too thin to read at GitHub's README width. */
const MAX_BUCKETS = 150
const MAX_TICKS = 12

const COLORS = {
  admitted: '#2da44e',
  refused: '#cf222e',
  text: '#1f2328',
  muted: '#59636e',
  grid: '#d1d9e0',
  boundary: '#8c959f',
}
const FONT = 'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif"'

/** Renders the chart of `report`; `panels` in the order they are drawn, top to bottom. */
export function renderChart(report: PatternReport, panels: readonly ChartPanel[]): string {
  const { pattern, policy } = report
  const durationMs = pattern.durationMs
  const bucketMs = niceStep(durationMs / MAX_BUCKETS)
  const bucketCount = Math.max(1, Math.ceil(durationMs / bucketMs))
  const counted = panels.map((panel) => bucketize(panel.outcomes, bucketMs, bucketCount))
  const tallest = Math.max(1, ...counted.flatMap((buckets) => buckets.map((b) => b.admitted + b.refused)))
  const yMax = niceCeiling(tallest)
  const height = HEADER_HEIGHT + panels.length * PANEL_HEIGHT + FOOTER_HEIGHT
  const axis = timeAxis(durationMs)

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ${FONT} font-size="12">`,
    `<title>${escapeXml(`tollbooth simulate: ${pattern.name}`)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    text(PLOT_LEFT, 28, `${pattern.name}`, { size: 18, weight: 'bold' }),
    text(PLOT_LEFT, 48, pattern.description, { color: COLORS.muted }),
    text(
      PLOT_LEFT,
      66,
      `${pattern.requests.length} requests; every algorithm configured for ${policy.limit} per ${formatMs(policy.windowMs)}`,
      { color: COLORS.muted },
    ),
    ...legend(84, bucketMs),
  ]
  panels.forEach((panel, index) => {
    out.push(
      ...drawPanel(panel.summary, counted[index] ?? [], {
        top: HEADER_HEIGHT + index * PANEL_HEIGHT,
        bucketMs,
        yMax,
        axis,
        policy,
        durationMs,
      }),
    )
  })
  out.push(
    text(
      PLOT_LEFT + PLOT_WIDTH / 2,
      height - 12,
      `time since start (${axis.unit}); dashed lines: window boundaries`,
      { anchor: 'middle', color: COLORS.muted },
    ),
    '</svg>',
  )
  return `${out.join('\n')}\n`
}

interface Bucket {
  admitted: number
  refused: number
}

/** Counts arrivals per bucket (a leaky bucket's admitted request is counted when it arrives, not when it leaves). */
export function bucketize(outcomes: readonly Outcome[], bucketMs: number, bucketCount: number): Bucket[] {
  const buckets = Array.from({ length: bucketCount }, () => ({ admitted: 0, refused: 0 }))
  for (const outcome of outcomes) {
    const bucket = buckets[Math.min(bucketCount - 1, Math.floor(outcome.atMs / bucketMs))] as Bucket
    if (outcome.allowed) bucket.admitted++
    else bucket.refused++
  }
  return buckets
}

interface PanelLayout {
  readonly top: number
  readonly bucketMs: number
  readonly yMax: number
  readonly axis: TimeAxis
  readonly policy: Policy
  readonly durationMs: number
}

function drawPanel(summary: AlgorithmSummary, buckets: readonly Bucket[], layout: PanelLayout): string[] {
  const { top, yMax, axis, policy, durationMs } = layout
  const plotTop = top + PANEL_TITLE + 6
  const plotBottom = plotTop + PLOT_HEIGHT
  const out: string[] = [
    `<g class="panel" data-algorithm="${summary.algorithm}">`,
    `<text x="${PLOT_LEFT}" y="${top + 12}" fill="${COLORS.text}"><tspan font-weight="bold" font-size="14">${escapeXml(capitalize(summary.label))}</tspan><tspan fill="${COLORS.muted}" dx="8">${escapeXml(summary.config)}</tspan></text>`,
    text(PLOT_RIGHT, top + 12, panelStats(summary, policy), { anchor: 'end', color: COLORS.text }),
  ]
  // Horizontal grid with the count scale.
  for (const value of yTicks(yMax)) {
    const y = round(plotBottom - (value / yMax) * PLOT_HEIGHT)
    out.push(line(PLOT_LEFT, y, PLOT_RIGHT, y, value === 0 ? COLORS.muted : COLORS.grid))
    out.push(text(PLOT_LEFT - 6, y + 4, String(value), { anchor: 'end', color: COLORS.muted, size: 11 }))
  }
  const labelY = (plotTop + plotBottom) / 2
  out.push(
    `<text x="18" y="${labelY}" transform="rotate(-90 18 ${labelY})" text-anchor="middle" fill="${COLORS.muted}" font-size="11">requests</text>`,
  )
  // The bars: admitted at the bottom, refused stacked on top. A non-empty part is at least 1 px, so a single
  // refusal among hundreds is still visible.
  const scale = (count: number) => (count === 0 ? 0 : Math.max(1, (count / yMax) * PLOT_HEIGHT))
  const slot = PLOT_WIDTH / buckets.length
  const barWidth = round(slot > 4 ? slot - 1 : slot)
  buckets.forEach((bucket, index) => {
    const x = round(PLOT_LEFT + index * slot)
    const admittedHeight = scale(bucket.admitted)
    const refusedHeight = scale(bucket.refused)
    if (admittedHeight > 0) {
      out.push(rect(x, plotBottom - admittedHeight, barWidth, admittedHeight, COLORS.admitted))
    }
    if (refusedHeight > 0) {
      out.push(rect(x, plotBottom - admittedHeight - refusedHeight, barWidth, refusedHeight, COLORS.refused))
    }
  })
  // Window boundaries: where a fixed window resets (and a sliding window's counters roll over).
  const boundaries = Math.floor((durationMs - 1) / policy.windowMs)
  if (boundaries <= 40) {
    for (let k = 1; k <= boundaries; k++) {
      const x = round(PLOT_LEFT + ((k * policy.windowMs) / durationMs) * PLOT_WIDTH)
      out.push(
        `<line x1="${x}" y1="${plotTop}" x2="${x}" y2="${plotBottom}" stroke="${COLORS.boundary}" stroke-dasharray="4 3"/>`,
      )
    }
  }
  // Time ticks under every panel, so each reads on its own.
  for (let at = 0; at <= durationMs; at += axis.stepMs) {
    const x = round(PLOT_LEFT + (at / durationMs) * PLOT_WIDTH)
    out.push(line(x, plotBottom, x, plotBottom + 4, COLORS.muted))
    out.push(text(x, plotBottom + 16, axis.label(at), { anchor: 'middle', color: COLORS.muted, size: 11 }))
  }
  out.push('</g>')
  return out
}

function panelStats(summary: AlgorithmSummary, policy: Policy): string {
  const parts = [
    `admitted ${summary.admitted}`,
    `refused ${summary.refused}`,
    `most in any ${formatMs(policy.windowMs)}: ${summary.maxAdmittedInWindow}`,
  ]
  if (summary.maxDelayMs > 0) parts.push(`longest wait ${formatMs(summary.maxDelayMs)}`)
  return parts.join('  ·  ')
}

function legend(y: number, bucketMs: number): string[] {
  const items: string[] = []
  let x = PLOT_LEFT
  for (const [label, color] of [
    ['admitted', COLORS.admitted],
    ['refused', COLORS.refused],
  ] as const) {
    items.push(rect(x, y - 10, 12, 12, color), text(x + 17, y, label, { color: COLORS.text }))
    x += 90
  }
  items.push(
    `<line x1="${x}" y1="${y - 4}" x2="${x + 16}" y2="${y - 4}" stroke="${COLORS.boundary}" stroke-dasharray="4 3"/>`,
    text(x + 22, y, 'window boundary', { color: COLORS.text }),
    text(x + 150, y, `each bar: requests arriving within ${formatMs(bucketMs)}`, { color: COLORS.muted }),
  )
  return items
}

interface TimeAxis {
  readonly unit: string
  readonly stepMs: number
  label(ms: number): string
}

/** Ticks at a round interval, labelled in seconds, minutes or hours depending on the span. */
function timeAxis(durationMs: number): TimeAxis {
  const stepMs = niceStep(durationMs / MAX_TICKS)
  const [unit, unitMs] =
    durationMs <= 600_000 ? ['s', 1000] : durationMs <= 36_000_000 ? ['min', 60_000] : ['h', 3_600_000]
  return { unit, stepMs, label: (ms) => formatRate(ms / unitMs) }
}

/**
 * The smallest "round" duration at least `ms` long: 1-2-5 steps below a second, then the steps a clock face uses
 * (1, 2, 5, 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; hours).
 */
export function niceStep(ms: number): number {
  const steps = [
    1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000,
    300_000, 600_000, 900_000, 1_800_000, 3_600_000,
  ]
  for (const step of steps) if (step >= ms) return step
  return Math.ceil(ms / 3_600_000) * 3_600_000
}

/** The smallest 1, 2, 2.5 or 5 × 10^k at least `value`, so the scale's ticks are round numbers. */
export function niceCeiling(value: number): number {
  const magnitude = 10 ** Math.floor(Math.log10(value))
  for (const factor of [1, 2, 2.5, 5, 10]) {
    const candidate = factor * magnitude
    if (candidate >= value && Number.isInteger(candidate)) return candidate
  }
  return 10 * magnitude
}

/** 0, the middle (when it is a whole number) and the top. */
function yTicks(yMax: number): number[] {
  return Number.isInteger(yMax / 2) ? [0, yMax / 2, yMax] : [0, yMax]
}

function text(
  x: number,
  y: number,
  content: string,
  style: { anchor?: 'start' | 'middle' | 'end'; color?: string; size?: number; weight?: string } = {},
): string {
  const attributes = [`x="${round(x)}"`, `y="${round(y)}"`, `fill="${style.color ?? COLORS.text}"`]
  if (style.anchor !== undefined && style.anchor !== 'start') attributes.push(`text-anchor="${style.anchor}"`)
  if (style.size !== undefined) attributes.push(`font-size="${style.size}"`)
  if (style.weight !== undefined) attributes.push(`font-weight="${style.weight}"`)
  return `<text ${attributes.join(' ')}>${escapeXml(content)}</text>`
}

function rect(x: number, y: number, width: number, height: number, fill: string): string {
  return `<rect x="${round(x)}" y="${round(y)}" width="${round(width)}" height="${round(height)}" fill="${fill}"/>`
}

function line(x1: number, y1: number, x2: number, y2: number, stroke: string): string {
  return `<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" stroke="${stroke}"/>`
}

/** Two decimals are plenty for pixels and keep the file small. */
function round(value: number): number {
  return Math.round(value * 100) / 100
}

function capitalize(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1)
}

/** Pattern names and descriptions can come from a file: escape everything that is markup in XML. */
export function escapeXml(value: string): string {
  return value
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;')
}
