import type { Reporter, TestModule } from 'vitest/node'

/**
 * Prints one last line, `Tests: N passed, N failed, N skipped`, after vitest's own summary: the plain form that
 * tools reading only a run's closing line understand, whatever the test runner.
 */
export default class CountsReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 }
    for (const testModule of testModules) {
      for (const test of testModule.children.allTests()) counts[test.result().state]++
    }
    // A module that failed to load has no tests but is a failure.
    const brokenModules = testModules.filter((m) => m.state() === 'failed' && !m.children.size).length
    const failed = counts.failed + brokenModules
    process.stdout.write(
      `Tests: ${counts.passed} passed, ${failed} failed, ${counts.skipped + counts.pending} skipped\n`,
    )
  }
}
