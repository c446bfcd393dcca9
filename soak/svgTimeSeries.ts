/**
 * A time-series line chart as a plain static SVG (no scripts, no external fonts, white background), for the soak
 * report: one line per series, faults marked as labelled vertical lines.
 */
import { escapeXml, niceCeiling } from '../src/cli/simulate/svgChart.js'

export interface Series {
  readonly name: string
  readonly color: string
  /** [seconds since the start, value] */
  readonly points: readonly (readonly [number, number])[]
  readonly dashed?: boolean
}

export interface Marker {
  readonly at: number
  readonly label: string
}

const WIDTH = 960
const HEIGHT = 380
const LEFT = 70
const RIGHT = WIDTH - 20
const TOP = 60
const BOTTOM = HEIGHT - 80
/** Legend entries flow left to right and wrap; an entry takes about this many pixels per character. */
const LEGEND_CHAR_PX = 7
const FONT = 'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif"'

export function renderTimeSeries(options: {
  title: string
  subtitle: string
  yLabel: string
  series: readonly Series[]
  markers: readonly Marker[]
  durationSeconds: number
  /** The top of the y axis; higher values are drawn at the top. By default the highest value fits. */
  yMax?: number
}): string {
  const { series, markers } = options
  const yMax = options.yMax ?? niceCeiling(Math.max(1, ...series.flatMap((s) => s.points.map(([, y]) => y))))
  const x = (t: number) => LEFT + (t / Math.max(1, options.durationSeconds)) * (RIGHT - LEFT)
  const y = (v: number) => BOTTOM - (Math.min(v, yMax) / yMax) * (BOTTOM - TOP)
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ${FONT} font-size="12">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="24" font-size="16" font-weight="bold" fill="#1f2328">${escapeXml(options.title)}</text>`,
    `<text x="${LEFT}" y="42" fill="#59636e">${escapeXml(options.subtitle)}</text>`,
  ]
  for (let i = 0; i <= 4; i++) {
    const value = (yMax * i) / 4
    out.push(
      `<line x1="${LEFT}" x2="${RIGHT}" y1="${y(value)}" y2="${y(value)}" stroke="#d1d9e0"/>`,
      `<text x="${LEFT - 6}" y="${y(value) + 4}" text-anchor="end" fill="#59636e">${formatValue(value)}</text>`,
    )
  }
  const step = Math.max(10, Math.ceil(options.durationSeconds / 12 / 10) * 10)
  for (let t = 0; t <= options.durationSeconds; t += step) {
    out.push(`<text x="${x(t)}" y="${BOTTOM + 16}" text-anchor="middle" fill="#59636e">${t} s</text>`)
  }
  out.push(
    `<text x="14" y="${(TOP + BOTTOM) / 2}" transform="rotate(-90 14 ${(TOP + BOTTOM) / 2})" text-anchor="middle" fill="#59636e">${escapeXml(options.yLabel)}</text>`,
  )
  for (const [i, marker] of markers.entries()) {
    out.push(
      `<line x1="${x(marker.at)}" x2="${x(marker.at)}" y1="${TOP}" y2="${BOTTOM}" stroke="#8c959f" stroke-dasharray="4 3"/>`,
      `<text x="${x(marker.at) + 3}" y="${TOP + 12 + (i % 3) * 13}" fill="#59636e">${escapeXml(marker.label)}</text>`,
    )
  }
  for (const s of series) {
    if (s.points.length === 0) continue
    const path = s.points.map(([t, v], i) => `${i === 0 ? 'M' : 'L'}${x(t).toFixed(1)},${y(v).toFixed(1)}`)
    const dash = s.dashed === true ? ' stroke-dasharray="6 4"' : ''
    out.push(`<path d="${path.join(' ')}" fill="none" stroke="${s.color}" stroke-width="1.5"${dash}/>`)
  }
  let lx = LEFT
  let ly = BOTTOM + 34
  for (const s of series) {
    const width = 16 + s.name.length * LEGEND_CHAR_PX + 24
    if (lx + width > RIGHT && lx > LEFT) {
      lx = LEFT
      ly += 18
    }
    out.push(
      `<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${lx + 16}" y="${ly}" fill="#1f2328">${escapeXml(s.name)}</text>`,
    )
    lx += width
  }
  out.push('</svg>')
  return `${out.join('\n')}\n`
}

function formatValue(value: number): string {
  if (value >= 1000) return `${Math.round(value / 100) / 10}k`
  return Number.isInteger(value) ? String(value) : value.toFixed(1)
}
