/**
 * Type tests check themselves: `typeErrors(file)` compiles one test file (and what it imports) with the project's
 * compiler options, so that a type that stops compiling fails `vitest run`, not only `npm run typecheck`.
 */
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const REPO = fileURLToPath(new URL('../../..', import.meta.url))

/** The diagnostics of compiling `file` under tsconfig.json, as `path(line,col): message`; none when it compiles. */
export function typeErrors(file: string): string[] {
  const { config } = ts.readConfigFile(`${REPO}/tsconfig.json`, ts.sys.readFile)
  const { options, fileNames } = ts.parseJsonConfigFileContent(config, ts.sys, REPO)
  // The project's own declarations (modules that ship none) come along, as in the whole project.
  const declarations = fileNames.filter((name) => name.endsWith('.d.ts'))
  const program = ts.createProgram([file, ...declarations], { ...options, noEmit: true })
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')
    if (diagnostic.file === undefined || diagnostic.start === undefined) return message
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start)
    return `${relative(REPO, diagnostic.file.fileName)}(${line + 1},${character + 1}): ${message}`
  })
}
