import Link from "next/link";
import { PageHeader } from "@/components/page-header.tsx";
import { buttonClasses } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";

export default function NotFound() {
  return (
    <>
      <PageHeader title="Page not found" description="There is no console page at this address." />
      <Link href="/" className={cn(buttonClasses({ variant: "secondary" }), "w-fit")}>
        Go to the dashboard
      </Link>
    </>
  );
}
