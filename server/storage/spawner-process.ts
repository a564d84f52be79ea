// The small process spawner.ts starts: it starts plugin scripts for its parent and answers each run's outcome.
// It holds next to nothing, so the fork() behind each start is cheap here (see spawner.ts).
import { setPriority } from "node:os";
import { run } from "./run-script.ts";
import { PLUGIN_NICENESS, type RunReply, type RunRequest } from "./spawner.ts";

// Plugin scripts, and the daemons they start, run niced (they inherit it): on a busy host the toolstack's own
// answers (reads, event.from, task progress) come first, and storage work takes the CPU that is left.
try {
  setPriority(PLUGIN_NICENESS);
} catch {
  // Not allowed here: the scripts run at our priority.
}

process.on("message", (request: RunRequest) => {
  run(request).then(
    (outcome): RunReply => ({ id: request.id, run: outcome }),
    (error: unknown): RunReply => ({ id: request.id, error: error instanceof Error ? error.message : String(error) }),
  ).then((reply) => process.send!(reply));
});
// The parent is gone: scripts still running go on (they are detached), as they would have without this process.
process.on("disconnect", () => process.exit(0));
