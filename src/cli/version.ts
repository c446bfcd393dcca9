import { readFile } from 'node:fs/promises'

/**
 * The package's version, read when asked from the package.json two levels above this file: `src/cli/` in the
 * repository, `dist/cli/` when built and in an installed package, so the number printed is the one installed.
 */
export async function packageVersion(): Promise<string> {
  const text = await readFile(new URL('../../package.json', import.meta.url), 'utf8')
  const { version } = JSON.parse(text) as { version?: unknown }
  if (typeof version !== 'string') throw new Error('package.json has no "version"')
  return version
}
