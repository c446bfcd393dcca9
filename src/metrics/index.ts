/**
 * tollbooth/metrics — Prometheus metrics through `prom-client` (an optional peer dependency): hooks for limiters and
 * stores, an `onOperation` for `useTollbooth`, and gauges read from WebSocket protections and stores at scrape time.
 *
 * Labels hold only names the application chose (limiter, store, WebSocket server), decision sources, results,
 * operation types and refusal codes: never an identity, a key, an operation name or anything else a client picks.
 */
export {
  createPrometheusMetrics,
  type PrometheusMetrics,
  type PrometheusMetricsOptions,
  type WatchedStore,
  type WatchedWebSocketProtection,
} from './prometheusMetrics.js'
