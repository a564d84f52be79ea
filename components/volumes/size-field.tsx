"use client";

import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";

export const UNITS = { GiB: 1024 ** 3, MiB: 1024 ** 2 } as const;
export type SizeUnit = keyof typeof UNITS;

export interface SizeValue {
  amount: string;
  unit: SizeUnit;
}

/** The bytes a size field means, or why it means none (checked again by the server). */
export function parseSize(value: SizeValue): { bytes: number } | { error: string } {
  const text = value.amount.trim();
  if (text === "") return { error: "Enter a size." };
  const amount = Number(text);
  if (!Number.isFinite(amount)) return { error: "The size must be a number." };
  if (amount <= 0) return { error: "The size must be more than zero." };
  const bytes = Math.round(amount * UNITS[value.unit]);
  if (!Number.isSafeInteger(bytes)) return { error: "The size is too large." };
  return { bytes };
}

/** A size as an amount in the largest unit that keeps it whole enough: 1.5 GiB, 512 MiB. */
export function sizeValue(bytes: number): SizeValue {
  const gib = bytes / UNITS.GiB;
  if (gib >= 1 && Math.round(gib * 100) === gib * 100) return { amount: String(gib), unit: "GiB" };
  return { amount: String(Math.ceil((bytes / UNITS.MiB) * 100) / 100), unit: "MiB" };
}

/** A number input with its unit beside it; one label for both (the unit select has its own name). */
export function SizeField({
  label,
  value,
  onChange,
  error,
  hint,
}: {
  label: string;
  value: SizeValue;
  onChange: (value: SizeValue) => void;
  error?: string;
  hint?: string;
}) {
  return (
    <Field label={label} error={error} hint={hint}>
      {(id, describedBy) => (
        <div className="flex gap-2">
          <div className="min-w-0 flex-1">
          <input
            id={id}
            aria-describedby={describedBy}
            aria-invalid={error ? true : undefined}
            inputMode="decimal"
            type="number"
            min="0"
            step="any"
            value={value.amount}
            onChange={(event) => onChange({ ...value, amount: event.target.value })}
            className={inputClasses}
          />
          </div>
          {/* The shared classes make controls full width: the wrappers size them. */}
          <div className="w-28 shrink-0">
            <select
              aria-label={`${label}: unit`}
              value={value.unit}
              onChange={(event) => onChange({ ...value, unit: event.target.value as SizeUnit })}
              className={selectClasses}
            >
              {Object.keys(UNITS).map((unit) => (
                <option key={unit} value={unit}>
                  {unit}
                </option>
              ))}
            </select>
          </div>
        </div>
      )}
    </Field>
  );
}
