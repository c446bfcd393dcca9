import type { AlgorithmName } from '../stores/store.js'
import { concurrencyStep } from './concurrency.js'
import { fixedWindowStep } from './fixedWindow.js'
import { gcraStep } from './gcra.js'
import { slidingWindowStep } from './slidingWindow.js'
import type { Step } from './step.js'

type AnyStep = (state: unknown, now: number, op: string, args: readonly (number | string)[]) => Step<unknown>

/** The pure TypeScript step of each algorithm, as the memory store runs it. */
export const algorithmSteps: Record<AlgorithmName, AnyStep> = {
  gcra: gcraStep as AnyStep,
  fixedWindow: fixedWindowStep as AnyStep,
  slidingWindow: slidingWindowStep as AnyStep,
  concurrency: concurrencyStep as AnyStep,
}
