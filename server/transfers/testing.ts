// Test helper for the transfers: the console process "going away" without a word to anyone, as a crash or a
// restart would — its URL downloads and its import pipelines stop where they are, and the toolstack tasks
// they ran are left as they are (the next console finds them in the transfers' state files).
import { runningPipelines } from "./upload/pipeline.ts";
import { stopUrlDownloads } from "./url-import/import-url.ts";

export function dropConsoleProcess(): void {
  stopUrlDownloads();
  for (const pipeline of runningPipelines()) pipeline.abandon();
}
