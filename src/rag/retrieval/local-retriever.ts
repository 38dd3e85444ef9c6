/**
 * What the local embedder and reranker (embedder.ts, reranker.ts) share: a model of the text generation
 * app in this process, reached through its port, named by the request or else the port's default, and
 * owned (loaded, closed) by that app.
 */

export abstract class LocalRetriever<Model extends { readonly name: string }> {
  /** The name of the model that answered, once one has. */
  protected resolvedName: string | undefined;

  constructor(
    protected readonly port: { resolve(model: string | null): Model },
    protected readonly requested: string | null,
  ) {}

  get model(): string {
    return this.requested ?? this.resolvedName ?? "";
  }

  /** The name of the model that would serve now; undefined when none of this process can. */
  protected servedName(): string | undefined {
    try {
      return this.port.resolve(this.requested).name;
    } catch {
      return undefined;
    }
  }

  // The model belongs to the text generation app, which closes it.
  close = async (): Promise<void> => undefined;
}
