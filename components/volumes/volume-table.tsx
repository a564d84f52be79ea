"use client";

// Placeholder until the volumes work lands (owner: volumes helper).
export function VolumeTable({ srRef }: { srRef: string }) {
  void srRef;
  return null;
}
