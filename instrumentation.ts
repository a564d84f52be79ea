// Runs once when the console's server starts: transfers a previous console process left running go on
// without waiting for a browser (URL imports are fetched on; uploads whose bytes all arrived are imported).
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  const [{ resumeUrlImports }, { resumeCompleteUploads }] = await Promise.all([import("./server/transfers/url-import/import-url.ts"), import("./server/transfers/upload/tus.ts")]);
  // In the background: the server answers meanwhile; a failure is recorded on the transfer itself.
  void Promise.all([resumeUrlImports(), resumeCompleteUploads()]).catch((error: unknown) => console.error("resuming transfers:", error));
}
