/**
 * The user documentation (README.md and docs/*.md) as a user meets it:
 * - every relative link reaches a file of the repository, and every `#anchor` a heading of its target, under
 *   GitHub's slug rules;
 * - every fenced block marked ```ts or ```typescript compiles as pasted, each block a file of its own, under
 *   `strict` and `nodenext`, against the BUILT package (`npm test` builds it first): the blocks are written into
 *   `.doc-snippets/` inside the repository, so `import … from 'tollbooth'` resolves through the package's own name
 *   and `exports` to dist/*.d.ts, and graphql-yoga, ioredis, ws, graphql-ws and prom-client from node_modules.
 *   Fragments, shell sessions and outputs use another fence tag (text, sh, console, graphql, json).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))
const snippetDir = join(root, '.doc-snippets')
const TYPESCRIPT_FENCES = new Set(['ts', 'typescript'])

interface Fence {
  /** The info string's first word: `ts`, `sh`, … ('' when the fence has none). */
  readonly lang: string
  /** 1-based line of the opening fence. */
  readonly line: number
  readonly code: string
}

interface MarkdownFile {
  /** Path from the repository root, as reported. */
  readonly path: string
  readonly fences: Fence[]
  /** The lines outside fenced blocks, with their 1-based line numbers. */
  readonly prose: { line: number; text: string }[]
  /** The anchors its headings get on GitHub. */
  readonly anchors: Set<string>
}

function documentationFiles(): string[] {
  const docs = join(root, 'docs')
  return [
    'README.md',
    ...readdirSync(docs)
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ]
}

function readMarkdown(path: string): MarkdownFile {
  const lines = readFileSync(join(root, path), 'utf8').split('\n')
  const fences: Fence[] = []
  const prose: { line: number; text: string }[] = []
  const headings: string[] = []
  let open: { marker: string; lang: string; line: number; body: string[] } | undefined
  lines.forEach((text, index) => {
    const line = index + 1
    const fence = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/.exec(text)
    if (open !== undefined) {
      const closing = fence?.[1]
      if (closing !== undefined && text.trim() === closing && closing.startsWith(open.marker)) {
        fences.push({ lang: open.lang, line: open.line, code: open.body.join('\n') })
        open = undefined
      } else {
        open.body.push(text)
      }
      return
    }
    if (fence !== null) {
      open = { marker: fence[1] ?? '```', lang: (fence[2] ?? '').toLowerCase(), line, body: [] }
      return
    }
    prose.push({ line, text })
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)
    if (heading !== null) headings.push(heading[1] ?? '')
  })
  if (open !== undefined) throw new Error(`${path}:${open.line}: a fenced block is never closed`)
  return { path, fences, prose, anchors: githubAnchors(headings) }
}

/**
 * GitHub's heading anchors (github-slugger over the heading's rendered text): markup and link targets go, the text
 * is lowercased, everything but letters, marks, digits, connector punctuation (`_`), `-` and spaces is dropped,
 * spaces become `-`, and a repeated slug gets `-1`, `-2`, … in order.
 */
function githubAnchors(headings: readonly string[]): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const heading of headings) {
    const text = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .replace(/`/g, '')
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

/** Links of the prose: `[text](target)`, `![alt](target)` and `[label]: target`, inline code spans left out. */
function links(file: MarkdownFile): { line: number; target: string }[] {
  const found: { line: number; target: string }[] = []
  for (const { line, text } of file.prose) {
    const withoutCode = text.replace(/(`+)[^`]*?\1/g, '')
    for (const match of withoutCode.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      found.push({ line, target: match[1] ?? '' })
    }
    const reference = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(withoutCode)
    if (reference !== null) found.push({ line, target: reference[1] ?? '' })
  }
  return found
}

function brokenLinks(files: readonly MarkdownFile[]): string[] {
  const byPath = new Map(files.map((file) => [file.path, file]))
  const problems: string[] = []
  for (const file of files) {
    for (const { line, target } of links(file)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:: not the repository's
      const where = `${file.path}:${line}: ${target}`
      const hash = target.indexOf('#')
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash))
      const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1))
      const resolved =
        pathPart === '' ? file.path : relative(root, resolve(root, dirname(file.path), pathPart))
      if (resolved.startsWith('..') || !existsSync(join(root, resolved))) {
        problems.push(`${where}: no such file (${resolved})`)
        continue
      }
      if (anchor === undefined) continue
      if (statSync(join(root, resolved)).isDirectory() || !resolved.endsWith('.md')) {
        problems.push(`${where}: an anchor into something that is not a Markdown file`)
        continue
      }
      const targetFile = byPath.get(resolved) ?? readMarkdown(resolved)
      if (!targetFile.anchors.has(anchor)) {
        problems.push(`${where}: no heading of ${resolved} has the anchor #${anchor}`)
      }
    }
  }
  return problems
}

interface Snippet {
  readonly file: string
  readonly source: string
  readonly fenceLine: number
}

/** Writes each TypeScript block to a file of its own and compiles them all in one program. */
function typeCheck(files: readonly MarkdownFile[]): { snippets: Snippet[]; problems: string[] } {
  rmSync(snippetDir, { recursive: true, force: true })
  mkdirSync(snippetDir, { recursive: true })
  const snippets: Snippet[] = []
  for (const doc of files) {
    for (const fence of doc.fences) {
      if (!TYPESCRIPT_FENCES.has(fence.lang)) continue
      const name = `${doc.path.replace(/[/.]/g, '_')}_${fence.line}.ts`
      const file = join(snippetDir, name)
      // `export {}` on a line of its own after the block: each block is a module, so two blocks declaring the same
      // name do not collide; the block's own lines keep their numbers.
      writeFileSync(file, `${fence.code}\nexport {}\n`)
      snippets.push({ file, source: doc.path, fenceLine: fence.line })
    }
  }
  const program = ts.createProgram(
    snippets.map((snippet) => snippet.file),
    {
      strict: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts'],
      types: ['node'],
      skipLibCheck: true,
      noEmit: true,
      // What docs/nestjs.md tells NestJS users to set: Nest's decorators are legacy ones with emitted metadata.
      // Blocks without decorators compile the same either way.
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
    },
  )
  const bySnippetFile = new Map(snippets.map((snippet) => [resolve(snippet.file), snippet]))
  const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n  ')
    const snippet = diagnostic.file ? bySnippetFile.get(resolve(diagnostic.file.fileName)) : undefined
    if (diagnostic.file === undefined || diagnostic.start === undefined)
      return `TS${diagnostic.code}: ${message}`
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start)
    if (snippet === undefined) {
      return `${relative(root, diagnostic.file.fileName)}:${line + 1}:${character + 1}: TS${diagnostic.code}: ${message}`
    }
    // The block's first line is the line after its opening fence.
    const docLine = snippet.fenceLine + 1 + line
    return `${snippet.source}:${docLine}:${character + 1} (block at line ${snippet.fenceLine}): TS${diagnostic.code}: ${message}`
  })
  return { snippets, problems }
}

describe('documentation', () => {
  const files = documentationFiles().map(readMarkdown)

  it('covers the README and every guide', () => {
    expect(files.map((file) => file.path)).toEqual([
      'README.md',
      'docs/benchmarks.md',
      'docs/core.md',
      'docs/graphql.md',
      'docs/http.md',
      'docs/nestjs.md',
      'docs/operations.md',
      'docs/security.md',
      'docs/socketio.md',
      'docs/tuning.md',
      'docs/websocket.md',
    ])
  })

  it('every relative link reaches a file, and every anchor a heading of it', () => {
    expect(brokenLinks(files)).toEqual([])
  })

  it('every fenced block says what it holds (ts, sh, text, …)', () => {
    const untagged = files.flatMap((file) =>
      file.fences.filter((fence) => fence.lang === '').map((fence) => `${file.path}:${fence.line}`),
    )
    expect(untagged).toEqual([])
  })

  it('every ```ts block type-checks as pasted against the built package', { timeout: 180_000 }, () => {
    if (!existsSync(join(root, 'dist/index.d.ts')))
      throw new Error('dist/ is missing: run `npm run build` first')
    const { snippets, problems } = typeCheck(files)
    expect(snippets.length).toBeGreaterThanOrEqual(10)
    expect(problems).toEqual([])
  })
})
