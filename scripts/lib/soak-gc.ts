/**
 * Full garbage collections in a child process, through its inspector on loopback (the child runs with
 * `--inspect=127.0.0.1:<port>`). V8 collects lazily: a busy process's RSS climbs for a minute or two and
 * then falls back, so two RSS samples taken without a collection tell more about the garbage
 * collector's timing than about leaks. Samples taken right after a full collection do not.
 */
import { WebSocket } from "undici";

export class InspectorGc {
  private socket: WebSocket | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, () => void>();

  constructor(private readonly inspectorPort: number) {}

  async connect(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let targets: Array<{ webSocketDebuggerUrl: string }> = [];
    for (;;) {
      try {
        targets = (await (
          await fetch(`http://127.0.0.1:${this.inspectorPort}/json/list`)
        ).json()) as typeof targets;
        if (targets.length > 0) break;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) throw new Error(`no inspector on port ${this.inspectorPort}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", () => reject(new Error("inspector connection failed")), {
        once: true,
      });
    });
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number };
      if (message.id !== undefined) {
        this.pending.get(message.id)?.();
        this.pending.delete(message.id);
      }
    });
    this.socket = socket;
  }

  /** Runs a full collection in the child and resolves once it is done. */
  collect(): Promise<void> {
    const socket = this.socket;
    if (!socket) return Promise.reject(new Error("not connected"));
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      socket.send(JSON.stringify({ id, method: "HeapProfiler.collectGarbage" }));
    });
  }

  close(): void {
    this.socket?.close();
    this.socket = null;
  }
}
