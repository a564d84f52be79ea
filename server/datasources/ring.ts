/** A fixed-capacity buffer that keeps the newest `capacity` items: memory stays bounded however long it runs. */
export class Ring<T> {
  readonly capacity: number;
  #items: T[] = [];
  #next = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`ring capacity must be a positive integer, not ${capacity}`);
    this.capacity = capacity;
  }

  get size(): number {
    return this.#items.length;
  }

  push(item: T): void {
    if (this.#items.length < this.capacity) this.#items.push(item);
    else this.#items[this.#next] = item;
    this.#next = (this.#next + 1) % this.capacity;
  }

  /** Oldest first. */
  toArray(): T[] {
    return this.#items.length < this.capacity ? [...this.#items] : [...this.#items.slice(this.#next), ...this.#items.slice(0, this.#next)];
  }

  /** The newest item, if any. */
  last(): T | undefined {
    return this.#items.length === 0 ? undefined : this.#items[(this.#next - 1 + this.capacity) % this.capacity];
  }
}
