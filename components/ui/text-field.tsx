import type { ComponentProps } from "react";
import { cn } from "./cn.ts";
import { Field, inputClasses } from "./field.tsx";

export interface TextFieldProps extends Omit<ComponentProps<"input">, "id" | "value" | "onChange" | "className"> {
  label: string;
  value: string;
  onChange: (value: string) => void;
  hint?: string;
  error?: string;
  className?: string;
  /** Several lines (a textarea this many rows high) instead of one. */
  rows?: number;
}

/** A labelled text input, one line or `rows` of them, marked invalid while it has an error. */
export function TextField({ label, value, onChange, hint, error, className, rows, ...props }: TextFieldProps) {
  return (
    <Field label={label} hint={hint} error={error} className={className}>
      {(id, describedBy) => {
        const shared = { id, value, "aria-describedby": describedBy, "aria-invalid": error ? true : undefined } as const;
        return rows === undefined ? (
          <input {...shared} className={inputClasses} onChange={(event) => onChange(event.target.value)} {...props} />
        ) : (
          <textarea {...shared} rows={rows} maxLength={props.maxLength} className={cn(inputClasses, "h-auto py-2")} onChange={(event) => onChange(event.target.value)} />
        );
      }}
    </Field>
  );
}
