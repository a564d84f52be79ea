// Undo actions, run newest first. Every action runs even when an earlier one fails: a conformance run must
// leave nothing behind, whatever the plugin did.

export class CleanupStack {
  readonly #actions: { label: string; action: () => Promise<unknown> | unknown }[] = [];

  defer(label: string, action: () => Promise<unknown> | unknown): void {
    this.#actions.push({ label, action });
  }

  /** Runs and forgets every action; returns one message per action that failed. */
  async run(): Promise<string[]> {
    const failures: string[] = [];
    for (let entry = this.#actions.pop(); entry !== undefined; entry = this.#actions.pop()) {
      try {
        await entry.action();
      } catch (error) {
        failures.push(`${entry.label}: ${(error as Error).message}`);
      }
    }
    return failures;
  }
}
