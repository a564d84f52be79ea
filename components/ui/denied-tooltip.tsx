/**
 * Why a control does nothing for this user (their role), shown under it while it is hovered or focused; the
 * control names it with aria-describedby. Put both in a `group relative` wrapper.
 */
export function DeniedTooltip({ id, reason }: { id: string; reason: string }) {
  return (
    <span
      id={id}
      role="tooltip"
      className="pointer-events-none absolute top-full right-0 z-40 mt-1.5 hidden w-max max-w-64 rounded-md bg-zinc-900 px-2.5 py-1.5 text-xs font-normal text-white shadow-lg group-focus-within:block group-hover:block dark:bg-zinc-100 dark:text-zinc-900"
    >
      {reason}
    </span>
  );
}
