import { readdirSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** Folders that hold what tools made, not the project's sources. */
const GENERATED = new Set(['.git', 'node_modules', 'dist', 'coverage'])

/** Leftovers of a merge, a patch or an editor: `x.orig`, `x.rej`, `x.bak`, `x~`, `.x.swp`, `#x#`. */
function isLeftover(name: string): boolean {
  return (
    /\.(orig|rej|bak)$/.test(name) ||
    name.endsWith('~') ||
    /^\..*\.sw[a-p]$/.test(name) ||
    /^#.*#$/.test(name)
  )
}

function leftovers(dir: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!GENERATED.has(entry.name)) found.push(...leftovers(join(dir, entry.name)))
    } else if (isLeftover(entry.name)) {
      found.push(relative(ROOT, join(dir, entry.name)))
    }
  }
  return found
}

describe('the tree', () => {
  it('holds no leftover of a merge, a patch or an editor', () => {
    expect(leftovers(ROOT)).toEqual([])
  })

  it('tells such leftovers from the project’s files', () => {
    const names = ['documentPlan.ts.orig', 'a.rej', 'b.bak', 'c.ts~', '.d.ts.swp', '#e.ts#']
    expect(names.filter(isLeftover)).toEqual(names)
    expect(['documentPlan.ts', 'orig.ts', 'backup.md', '.swcrc'].filter(isLeftover)).toEqual([])
  })
})
