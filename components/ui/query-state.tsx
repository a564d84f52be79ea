"use client";

import { Alert } from "./alert.tsx";
import { Button } from "./button.tsx";

/** The browser's own words for a request that never got an answer, said for people. */
function inWords(message: string): string {
  return /^(Failed to fetch|NetworkError|Load failed|network error)/i.test(message) ? "The console cannot be reached. Check the network, or whether the console is running." : message;
}

/** A failed query where its data would be: the message in words and a retry; the rest of the page goes on. */
export function QueryError({ error, what, onRetry }: { error: { message: string } | null; what: string; onRetry?: () => void }) {
  if (error === null) return null;
  return (
    <Alert tone="error" title={`Could not load ${what}`}>
      <div className="flex flex-wrap items-center justify-between gap-2">
        <span>{inWords(error.message)}</span>
        {onRetry ? (
          <Button size="sm" variant="secondary" onClick={onRetry}>
            Try again
          </Button>
        ) : null}
      </div>
    </Alert>
  );
}
