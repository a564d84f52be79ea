import type { ComponentProps } from "react";
import { cn } from "./cn.ts";

/** A dialog's form: submitting runs `onSubmit` in place (no page load); fields stack as the dialogs lay them out. */
export function DialogForm({ onSubmit, className, ...props }: Omit<ComponentProps<"form">, "onSubmit"> & { onSubmit: () => void }) {
  return (
    <form
      className={cn("flex flex-col gap-4", className)}
      onSubmit={(event) => {
        event.preventDefault();
        onSubmit();
      }}
      {...props}
    />
  );
}
