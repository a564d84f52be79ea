"use client";

// Placeholder until the datasources work lands (owner: datasources helper).
export function SrCharts({ srRef }: { srRef: string }) {
  void srRef;
  return null;
}
