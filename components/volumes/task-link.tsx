import Link from "next/link";

/** The link a started copy's message carries. */
export function TaskLink() {
  return (
    <Link href="/tasks" className="font-medium underline underline-offset-2">
      Follow it on the Tasks page
    </Link>
  );
}
