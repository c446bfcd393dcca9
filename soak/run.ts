/**
 * `npm run soak`: several instances of the example server on a Redis Cluster (3 masters + 3 replicas) under load
 * and faults; writes a report (Markdown and SVG charts, in ./soak-report unless `--out <dir>`), prints its table and
 * exits non-zero when a guarantee does not hold. `--short` runs the short profile the test suite runs.
 */
import { judge, writeReport } from './report.js'
import { FULL, runSoak, SHORT } from './soak.js'

const profile = process.argv.includes('--short') ? SHORT : FULL
const out = process.argv.includes('--out')
  ? (process.argv[process.argv.indexOf('--out') + 1] as string)
  : 'soak-report'
const started = performance.now()
const run = await runSoak(profile, (line) =>
  console.log(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}`),
)
const report = judge(run)
await writeReport(report, out)
console.log(`\n${report.table}\n`)
console.log(`report: ${out}/report.md; ${((performance.now() - started) / 1000).toFixed(0)} s in all`)
process.exit(report.checks.every((check) => check.passed) ? 0 : 1)
