/**
 * Runs the `tollbooth` bin as a user does: the built `dist/cli/index.js` (`npm test` builds it in `pretest`) in a
 * process of its own, with its exit code and both streams.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url))
export const BIN = join(REPO_ROOT, 'dist/cli/index.js')

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** `tollbooth ...args` in `cwd` (default: the repository), or another copy of the bin given as `bin`. */
export function tollbooth(
  args: readonly string[],
  { cwd = REPO_ROOT, bin = BIN }: { cwd?: string; bin?: string } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}
