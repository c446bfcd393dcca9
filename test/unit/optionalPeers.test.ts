import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const src = fileURLToPath(new URL('../../src', import.meta.url))

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  )
}

describe('optional peers', () => {
  it('the core imports ioredis for its types only, so `import "tollbooth"` works without ioredis installed', () => {
    const valueImports = sourceFiles(join(src, 'core'))
      .concat(sourceFiles(join(src, 'http')), sourceFiles(join(src, 'identity')), [join(src, 'index.ts')])
      .flatMap((file) =>
        readFileSync(file, 'utf8')
          .split('\n')
          .filter((line) => /^import (?!type ).*from '(ioredis|ws|graphql|graphql-yoga)'/.test(line))
          .map((line) => `${file}: ${line}`),
      )
    expect(valueImports).toEqual([])
  })

  it('only tollbooth/apollo imports @apollo/server, so tollbooth/graphql works without it', () => {
    const apolloFiles = [join(src, 'apollo'), join(src, 'graphql', 'apollo')]
    const importers = sourceFiles(src)
      .filter((file) => !apolloFiles.some((dir) => file.startsWith(dir)))
      .filter((file) => /from '@apollo\/server/.test(readFileSync(file, 'utf8')))
    expect(importers).toEqual([])
    // The Apollo adapter does import it: the check above looks for the right spelling.
    expect(readFileSync(join(src, 'graphql', 'apollo', 'apolloHttp.ts'), 'utf8')).toMatch(
      /from '@apollo\/server'/,
    )
  })
})
