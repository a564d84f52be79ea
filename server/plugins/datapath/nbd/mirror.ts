// One Data.mirror: a remote NBD export that receives every write of the volume from now on. A failing
// remote ends the mirror (reported through `onFailure`), never the VM's write.
import type { NbdClient } from "../../../nbd/client.ts";
import { copyExtents, type ExtentReader, flushTarget, zeroRange } from "./transfer.ts";
import type { WriteSink } from "./volume-export.ts";

export class Mirror implements WriteSink {
  readonly target: NbdClient;
  readonly #onFailure: (error: unknown) => void;
  #failed = false;
  #dropped = false;
  #drop!: () => void;
  readonly #droppedSignal = new Promise<void>((resolve) => (this.#drop = resolve));

  constructor(target: NbdClient, onFailure: (error: unknown) => void) {
    this.target = target;
    this.#onFailure = onFailure;
  }

  /**
   * Stops waiting for the remote (the mirror was cancelled): writes waiting on it are acknowledged to the
   * VM at once, since a slow or hung remote must not hold the VM up.
   */
  drop(): void {
    this.#dropped = true;
    this.#drop();
  }

  write(offset: number, data: Buffer, fua: boolean): Promise<void> {
    return this.#send(async () => {
      await this.target.write(offset, data);
      if (fua) await flushTarget(this.target);
    });
  }

  zero(offset: number, length: number): Promise<void> {
    return this.#send(() => zeroRange(this.target, offset, length));
  }

  refresh(volume: ExtentReader, offset: number, length: number): Promise<void> {
    return this.#send(() => copyExtents(volume, this.target, offset, length));
  }

  flush(): Promise<void> {
    return this.#send(() => flushTarget(this.target));
  }

  async #send(body: () => Promise<void>): Promise<void> {
    if (this.#failed || this.#dropped) return;
    const sent = body().catch((error: unknown) => {
      if (this.#failed || this.#dropped) return;
      this.#failed = true;
      this.#onFailure(error);
    });
    await Promise.race([sent, this.#droppedSignal]);
  }
}
