/**
 * tollbooth/client runs in browsers: nothing it loads may import a Node module or use a Node global. Two checks:
 * the sources under src/client (and everything they import) type-check with the DOM library and no Node types at
 * all, and the emitted dist/client graph imports nothing but its own relative files (`npm run build` first).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../../..', import.meta.url))
const clientSources = join(root, 'src', 'client')
const clientDist = join(root, 'dist', 'client')

/** A browser's view of the language: ES2022 and the DOM, with no `@types/*` (so no `process`, `Buffer`, `node:*`). */
const browserOptions: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
  types: [],
  strict: true,
  noUncheckedIndexedAccess: true,
  verbatimModuleSyntax: true,
  noEmit: true,
}

/** Diagnostics of compiling `files` the browser's way, one line each. */
function browserDiagnostics(files: string[]): string[] {
  const program = ts.createProgram(files, browserOptions)
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')
    const where = diagnostic.file ? relative(root, diagnostic.file.fileName) : '(options)'
    return `${where}: TS${diagnostic.code} ${text}`
  })
}

function filesUnder(dir: string, extension: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesUnder(join(dir, entry.name), extension)
      : entry.name.endsWith(extension)
        ? [join(dir, entry.name)]
        : [],
  )
}

/** Module specifiers of an emitted ES module: static imports and re-exports, side-effect imports, `import()`. */
function specifiers(code: string): string[] {
  const found: string[] = []
  for (const match of code.matchAll(/(?:^|[;\s])(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g)) {
    found.push(match[1] as string)
  }
  for (const match of code.matchAll(/(?:^|[;\s])import\s*['"]([^'"]+)['"]/g)) found.push(match[1] as string)
  for (const match of code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(match[1] as string)
  return found
}

describe('tollbooth/client is browser-safe', () => {
  it('type-checks with lib ES2022 + DOM and no Node types, with everything it imports', () => {
    const files = filesUnder(clientSources, '.ts')
    expect(files.map((file) => relative(root, file)).sort()).toContain('src/client/index.ts')
    expect(browserDiagnostics(files)).toEqual([])
  })

  it('control: the same check refuses a Node import and Node globals', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollbooth-browser-'))
    try {
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }')
      const file = join(dir, 'nodey.ts')
      writeFileSync(
        file,
        [
          "import { readFileSync } from 'node:fs'",
          'export const a = readFileSync',
          'export const b = process.env.HOME',
          "export const c = Buffer.from('x')",
          'export const d = setTimeout(() => {}, 1).unref()',
        ].join('\n'),
      )
      const codes = browserDiagnostics([file]).map((line) => /TS(\d+)/.exec(line)?.[1])
      // 2307: cannot find module; 2591: cannot find name (install @types/node); 2339: no `unref` on a number.
      expect(codes).toEqual(['2307', '2591', '2591', '2339'])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('the emitted dist/client graph imports only relative files, none of them outside dist', () => {
    const entry = join(clientDist, 'index.js')
    expect(existsSync(entry), 'dist/client/index.js is missing: run `npm run build` first').toBe(true)
    const seen = new Set<string>()
    const outside: string[] = []
    const pending = [entry]
    while (pending.length > 0) {
      const file = pending.pop() as string
      if (seen.has(file)) continue
      seen.add(file)
      for (const specifier of specifiers(readFileSync(file, 'utf8'))) {
        if (!specifier.startsWith('.')) {
          outside.push(`${relative(root, file)} imports ${specifier}`)
          continue
        }
        const target = resolve(dirname(file), specifier)
        if (!target.startsWith(join(root, 'dist')))
          outside.push(`${relative(root, file)} imports ${specifier}`)
        else pending.push(target)
      }
    }
    expect(outside).toEqual([])
    // The walk did follow the graph: the entry, its own modules and the core helpers they share.
    const reached = [...seen].map((file) => relative(root, file)).sort()
    expect(reached).toContain('dist/client/fetchWithRetry.js')
    expect(reached).toContain('dist/core/errors.js')
  })

  it('control: the graph walk sees every import form', () => {
    const code = [
      "import { a } from 'node:fs'",
      "export { b } from './b.js'",
      "import './side-effect.js'",
      "const c = await import('node:path')",
      "export * from '../core/errors.js'",
      "import d, { e } from 'ws'",
    ].join('\n')
    expect(specifiers(code).sort()).toEqual(
      ['../core/errors.js', './b.js', './side-effect.js', 'node:fs', 'node:path', 'ws'].sort(),
    )
  })
})
