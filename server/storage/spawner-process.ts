// The small process spawner.ts starts: it starts plugin scripts for its parent and answers each run's outcome.
// It holds next to nothing, so the fork() behind each start is cheap here (see spawner.ts).
import { killRunning, run } from "./run-script.ts";
import type { RunReply, RunRequest } from "./spawner.ts";

process.on("message", (request: RunRequest) => {
  run(request).then(
    (outcome): RunReply => ({ id: request.id, run: outcome }),
    (error: unknown): RunReply => ({ id: request.id, error: error instanceof Error ? error.message : String(error) }),
  ).then((reply) => process.send!(reply));
});
// The parent is gone, ended or killed: no one waits for the scripts still under way, so they stop as a time-out
// stops them. A call that made something the parent never heard of is undone by
// its next start (toolstack/volume-intents.ts), which must not find such a call still running.
process.on("disconnect", () => {
  killRunning();
  process.exit(0);
});
