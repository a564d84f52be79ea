// The toolstack's one query interface. SQL is written once, in the subset SQLite and PostgreSQL share:
// `?` placeholders, TEXT / BIGINT / DOUBLE PRECISION columns, no AUTOINCREMENT, no RETURNING, no upserts
// with engine-specific syntax. Each engine's adapter turns placeholders into its own form.

export type SqlValue = string | number | null;
export type Row = Record<string, SqlValue>;

export interface Queryable {
  all<T extends object = Row>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  get<T extends object = Row>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement; answers the number of rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface Database extends Queryable {
  readonly engine: "sqlite" | "postgres";
  /** Runs `body` in one transaction: all its changes or none. Transactions never interleave. */
  transaction<T>(body: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Calls `listener` after every transaction this connection commits, once its changes are visible to every
   * other connection (waking readers any earlier would let them miss the change).
   */
  onCommit(listener: () => void): void;
  close(): Promise<void>;
}
