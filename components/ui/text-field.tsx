import type { ComponentProps } from "react";
import { Field, inputClasses } from "./field.tsx";

export interface TextFieldProps extends Omit<ComponentProps<"input">, "id" | "value" | "onChange" | "className"> {
  label: string;
  value: string;
  onChange: (value: string) => void;
  hint?: string;
  error?: string;
  className?: string;
}

/** A labelled one-line text input, marked invalid while it has an error. */
export function TextField({ label, value, onChange, hint, error, className, ...props }: TextFieldProps) {
  return (
    <Field label={label} hint={hint} error={error} className={className}>
      {(id, describedBy) => (
        <input
          id={id}
          aria-describedby={describedBy}
          aria-invalid={error ? true : undefined}
          className={inputClasses}
          value={value}
          onChange={(event) => onChange(event.target.value)}
          {...props}
        />
      )}
    </Field>
  );
}
