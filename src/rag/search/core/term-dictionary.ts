/**
 * The index-wide term table: each term string once (term → global id), the live document frequency of
 * every term, and how many segments hold it (a term no segment holds is forgotten and its id reused).
 */
export class TermDictionary {
  private readonly ids = new Map<string, number>();
  private readonly terms: (string | undefined)[] = [];
  private df = new Uint32Array(1024);
  private segmentCounts = new Uint32Array(1024);
  private readonly freeIds: number[] = [];
  private liveTerms = 0;
  /** Bumped whenever a term is forgotten (its id may then be reused): ids cached elsewhere hold until it changes. */
  forgetEpoch = 0;

  /** Distinct terms with live df > 0. */
  get vocabularySize(): number {
    return this.liveTerms;
  }

  idOf(term: string): number | undefined {
    return this.ids.get(term);
  }

  termOf(id: number): string {
    const term = this.terms[id];
    if (term === undefined) throw new Error(`term id ${id} is not in use`);
    return term;
  }

  documentFrequency(id: number): number {
    return this.df[id] ?? 0;
  }

  /** The id of `term`, created if new; counts one more segment holding it. */
  acquire(term: string): number {
    return this.acquireResolved(term, this.ids.get(term));
  }

  /**
   * `acquire` with the lookup already done: `known` is `idOf(term)` as of a moment since which the
   * dictionary has not changed (a prepared write checks this with the index version). Batched writes
   * resolve each term of a new segment once, in `prepare`, not again here.
   */
  acquireResolved(term: string, known: number | undefined): number {
    let id = known;
    if (id === undefined) {
      id = this.freeIds.pop() ?? this.terms.length;
      if (id >= this.df.length) {
        const capacity = Math.max(id + 1, this.df.length * 2);
        const df = new Uint32Array(capacity);
        df.set(this.df);
        this.df = df;
        const counts = new Uint32Array(capacity);
        counts.set(this.segmentCounts);
        this.segmentCounts = counts;
      }
      this.terms[id] = term;
      this.ids.set(term, id);
    }
    this.segmentCounts[id] = (this.segmentCounts[id] ?? 0) + 1;
    return id;
  }

  /**
   * One more segment holds each of these terms (all already in use). A tight loop over the counts: a
   * merge's apply retains every term of the merged segment on the event loop.
   */
  retainAll(ids: Uint32Array): void {
    const counts = this.segmentCounts;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? 0;
      const count = counts[id] ?? 0;
      // A term in use is held by at least one segment (acquire counts the first).
      if (count === 0) throw new Error(`term id ${id} is not in use`);
      counts[id] = count + 1;
    }
  }

  /** One segment fewer holds each of these terms; forgets those that no segment holds any more. */
  releaseAll(ids: Uint32Array): void {
    const counts = this.segmentCounts;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? 0;
      const count = (counts[id] ?? 0) - 1;
      counts[id] = count;
      if (count === 0) this.forget(id);
    }
  }

  private forget(id: number): void {
    if ((this.df[id] ?? 0) !== 0) throw new Error("term dictionary: released a term with live documents");
    this.ids.delete(this.termOf(id));
    this.terms[id] = undefined;
    this.freeIds.push(id);
    this.forgetEpoch++;
  }

  addDocumentFrequency(id: number, delta: number): void {
    const before = this.df[id] ?? 0;
    const after = before + delta;
    if (after < 0) throw new Error("term dictionary: negative document frequency");
    this.df[id] = after;
    if (before === 0 && after > 0) this.liveTerms++;
    else if (before > 0 && after === 0) this.liveTerms--;
  }
}
