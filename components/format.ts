/** "1 plugin", "2 plugins". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** A plugin may leave a descriptive field empty; say so instead of showing a blank. */
export function stated(value: string): string {
  return value.trim() === "" ? "Not stated" : value;
}
