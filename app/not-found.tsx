import Link from "next/link";
import { PageHeader } from "@/components/page-header.tsx";
import { buttonClasses } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";

export default function NotFound() {
  return (
    <main id="main" className="mx-auto flex max-w-6xl flex-col gap-8 px-4 py-6 sm:px-6 lg:px-10 lg:py-10">
      <PageHeader title="Page not found" description="There is no console page at this address." />
      <Link href="/" className={cn(buttonClasses({ variant: "secondary" }), "w-fit")}>
        Go to the dashboard
      </Link>
    </main>
  );
}
