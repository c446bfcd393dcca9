import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * The layers of src/, lowest first (docs/DESIGN's order): a file imports only from its own layer or below, and no
 * files import each other in a loop. The entry file src/index.ts sits above them all.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['core', 'types'],
  ['identity'],
  ['http', 'client'],
  ['graphql', 'ws', 'socketio', 'fastify', 'nestjs'],
  ['metrics', 'cli'],
]

const SRC = fileURLToPath(new URL('../../src', import.meta.url))

type ImportGraph = ReadonlyMap<string, readonly string[]>

/** Every .ts file of `root`, by its path relative to `root`, with the files of `root` it imports. */
function importGraph(root: string): ImportGraph {
  const files: string[] = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(path)
    }
  }
  walk(root)
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
    const imports = importedFiles
      .map((imported) => imported.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => toKey(root, resolve(dirname(file), name).replace(/\.js$/, '.ts')))
    graph.set(toKey(root, file), imports)
  }
  return graph
}

function toKey(root: string, file: string): string {
  return relative(root, file).split(sep).join('/')
}

/** The layer of a file: its index in LAYERS, or LAYERS.length for an entry file at the root of src/. */
function layerOf(file: string): number {
  const folder = file.includes('/') ? file.slice(0, file.indexOf('/')) : undefined
  if (folder === undefined) return LAYERS.length
  const layer = LAYERS.findIndex((folders) => folders.includes(folder))
  if (layer === -1) throw new Error(`src/${folder}/ is in no layer: add it to LAYERS`)
  return layer
}

/** Imports from a file to one in a higher layer, as `from -> to`. */
function upwardImports(graph: ImportGraph): string[] {
  const found: string[] = []
  for (const [file, imports] of graph) {
    for (const imported of imports) {
      if (layerOf(imported) > layerOf(file)) found.push(`${file} -> ${imported}`)
    }
  }
  return found
}

/** The import cycles of `graph`, each as the files on it (Tarjan's strongly connected components of size > 1). */
function importCycles(graph: ImportGraph): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const cycles: string[][] = []
  const visit = (file: string): void => {
    index.set(file, counter)
    low.set(file, counter)
    counter += 1
    stack.push(file)
    onStack.add(file)
    for (const imported of graph.get(file) ?? []) {
      if (!graph.has(imported)) continue
      if (!index.has(imported)) {
        visit(imported)
        low.set(file, Math.min(low.get(file) as number, low.get(imported) as number))
      } else if (onStack.has(imported)) {
        low.set(file, Math.min(low.get(file) as number, index.get(imported) as number))
      }
    }
    if (low.get(file) !== index.get(file)) return
    const component: string[] = []
    let member: string | undefined
    do {
      member = stack.pop() as string
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1) cycles.push(component.sort())
  }
  for (const file of graph.keys()) if (!index.has(file)) visit(file)
  return cycles
}

describe('the layers of src/', () => {
  const graph = importGraph(SRC)

  it('reads the imports of every source file', () => {
    expect(graph.size).toBeGreaterThan(100)
    expect(graph.get('core/stores/redisStore.ts')).toContain('core/hashKey.ts')
    expect(new Set(graph.get('index.ts'))).toEqual(
      new Set(['core/index.ts', 'core/headers.ts', 'identity/index.ts']),
    )
  })

  it('has no import from a lower layer to a higher one', () => {
    expect(upwardImports(graph)).toEqual([])
  })

  it('has no import cycle', () => {
    expect(importCycles(graph)).toEqual([])
  })
})

describe('the checks themselves', () => {
  it('find an import that runs up a layer, and a cycle', () => {
    const graph: ImportGraph = new Map([
      ['core/a.ts', ['http/b.ts']],
      ['http/b.ts', ['http/c.ts']],
      ['http/c.ts', ['http/b.ts', 'core/a.ts']],
    ])
    expect(upwardImports(graph)).toEqual(['core/a.ts -> http/b.ts'])
    expect(importCycles(graph)).toEqual([['core/a.ts', 'http/b.ts', 'http/c.ts']])
  })
})
