"use client";

// Placeholders until the tasks work lands (owner: tasks helper).
export function RunningTasksSummary() {
  return null;
}

export function RecentFailures() {
  return null;
}
