"use client";

import { Alert } from "./alert.tsx";
import { Button } from "./button.tsx";

/** A failed query where its data would be: the message in words and a retry; the rest of the page goes on. */
export function QueryError({ error, what, onRetry }: { error: { message: string } | null; what: string; onRetry?: () => void }) {
  if (error === null) return null;
  return (
    <Alert tone="error" title={`Could not load ${what}`}>
      <div className="flex flex-wrap items-center justify-between gap-2">
        <span>{error.message}</span>
        {onRetry ? (
          <Button size="sm" variant="secondary" onClick={onRetry}>
            Try again
          </Button>
        ) : null}
      </div>
    </Alert>
  );
}
