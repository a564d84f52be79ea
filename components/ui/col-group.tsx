/** A table's column widths as classes ("" leaves a column the rest), so a table and its skeleton share them. */
export function ColGroup({ widths }: { widths: string[] }) {
  return (
    <colgroup>
      {widths.map((width, index) => (
        <col key={index} className={width || undefined} />
      ))}
    </colgroup>
  );
}
