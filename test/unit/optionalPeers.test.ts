import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
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

/**
 * The packages an entry file loads when it runs: the bare specifiers of every value import and re-export (type-only
 * ones are erased), following the relative ones through src/.
 */
function runtimePackages(entry: string): string[] {
  const packages = new Set<string>()
  const seen = new Set<string>()
  const visit = (file: string): void => {
    if (seen.has(file)) return
    seen.add(file)
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022)
    for (const statement of source.statements) {
      const specifier = valueSpecifier(statement)
      if (specifier === undefined) continue
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier).replace(/\.js$/, '.ts'))
      else packages.add(specifier)
    }
  }
  visit(entry)
  return [...packages].sort()
}

/** The module an import or export statement loads at run time; undefined when it is type-only (or not one). */
function valueSpecifier(statement: ts.Statement): string | undefined {
  if (ts.isImportDeclaration(statement)) {
    const clause = statement.importClause
    const typeOnly =
      clause !== undefined &&
      (clause.isTypeOnly ||
        (clause.name === undefined &&
          clause.namedBindings !== undefined &&
          ts.isNamedImports(clause.namedBindings) &&
          clause.namedBindings.elements.length > 0 &&
          clause.namedBindings.elements.every((element) => element.isTypeOnly)))
    return typeOnly ? undefined : (statement.moduleSpecifier as ts.StringLiteral).text
  }
  if (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined) {
    const clause = statement.exportClause
    const typeOnly =
      statement.isTypeOnly ||
      (clause !== undefined &&
        ts.isNamedExports(clause) &&
        clause.elements.length > 0 &&
        clause.elements.every((element) => element.isTypeOnly))
    return typeOnly ? undefined : (statement.moduleSpecifier as ts.StringLiteral).text
  }
  return undefined
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

  it('only tollbooth/nestjs imports @nestjs/*, so no other entry needs NestJS', () => {
    const nestjs = join(src, 'nestjs')
    const importers = sourceFiles(src)
      .filter((file) => !file.startsWith(nestjs))
      .filter((file) => /from '@nestjs\//.test(readFileSync(file, 'utf8')))
    expect(importers).toEqual([])
  })

  it('tollbooth/nestjs loads only @nestjs/common and @nestjs/core of the peers: Nest on Express needs no fastify, ws or graphql', () => {
    const dependencies = Object.keys(
      (JSON.parse(readFileSync(join(src, '..', 'package.json'), 'utf8')) as { dependencies: object })
        .dependencies,
    )
    const peers = runtimePackages(join(src, 'nestjs', 'index.ts')).filter(
      (name) => !name.startsWith('node:') && !dependencies.includes(name),
    )
    expect(peers).toEqual(['@nestjs/common', '@nestjs/core'])
  })

  it('tollbooth/graphql and tollbooth/apollo load graphql-query-complexity only when `estimators` ask for it', () => {
    for (const entry of [join(src, 'graphql', 'index.ts'), join(src, 'graphql', 'apollo', 'index.ts')]) {
      expect(runtimePackages(entry)).not.toContain('graphql-query-complexity')
    }
    // It is required where the option is read: the walk above looks for the right spelling.
    expect(readFileSync(join(src, 'graphql', 'cost', 'complexityEstimators.ts'), 'utf8')).toContain(
      "createRequire(import.meta.url)('graphql-query-complexity')",
    )
  })

  it('the runtime import walk sees through type-only imports and follows relative ones', () => {
    // tollbooth/fastify imports fastify-plugin (a dependency) for its value, and fastify only for types.
    expect(runtimePackages(join(src, 'fastify', 'index.ts'))).toContain('fastify-plugin')
    expect(runtimePackages(join(src, 'fastify', 'index.ts'))).not.toContain('fastify')
  })
})
