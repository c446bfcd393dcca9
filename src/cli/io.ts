/** The streams a CLI command writes to (the process's, or a test's). */
export interface CliIo {
  readonly stdout: { write(text: string): unknown }
  readonly stderr: { write(text: string): unknown }
}
