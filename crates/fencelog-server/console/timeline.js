// A stream's token timeline: when ownership changed and what each owner
// wrote. From the fence history route when the server has one (GET
// /v1/streams/{s}/fences), otherwise from the tokens seen in the records
// themselves. Pure, so the unit tests run it in Node.

const same = (a, b) => String(a) === String(b);

/**
 * Records (in seq order) → runs of one token: `{token, firstSeq, lastSeq,
 * count, firstMs, lastMs, sample}`, oldest first. `sample` is the first
 * record of the run, to show what that owner wrote.
 */
export function runsFromRecords(records) {
  const runs = [];
  for (const r of records) {
    const last = runs[runs.length - 1];
    if (last && same(last.token, r.fencing_token) && last.lastSeq + 1 === r.seq) {
      last.lastSeq = r.seq;
      last.count++;
      last.lastMs = r.timestamp_ms;
      continue;
    }
    runs.push({
      token: r.fencing_token,
      firstSeq: r.seq,
      lastSeq: r.seq,
      count: 1,
      firstMs: r.timestamp_ms,
      lastMs: r.timestamp_ms,
      sample: r,
    });
  }
  return runs;
}

/** Adds live records to runs made by {@link runsFromRecords}, in place. */
export function extendRuns(runs, records) {
  const merged = runsFromRecords(records);
  const last = runs[runs.length - 1];
  const first = merged[0];
  if (last && first && same(last.token, first.token) && last.lastSeq + 1 === first.firstSeq) {
    last.lastSeq = first.lastSeq;
    last.count += first.count;
    last.lastMs = first.lastMs;
    merged.shift();
  }
  runs.push(...merged);
  return runs;
}

/**
 * A token the stream accepted without a record carrying it (a fence, or
 * a write this view did not read): the state's highest token when no run
 * has it. `null` when the newest run's token is the highest.
 */
export function fencedAbove(runs, state) {
  if (!state || !state.highest_token) return null;
  const newest = runs[runs.length - 1];
  if (newest && BigInt(newest.token) >= BigInt(state.highest_token)) return null;
  return { token: state.highest_token, atSeq: state.next_seq };
}

/**
 * Fence history entries (newest first, `{fencing_token, first_seq,
 * timestamp_ms, by}`) → the same runs, oldest first: each token owns the
 * seqs from its `first_seq` up to the next token's.
 */
export function runsFromFences(fences, state) {
  const oldestFirst = [...fences].reverse();
  return oldestFirst.map((f, i) => {
    const end = i + 1 < oldestFirst.length ? oldestFirst[i + 1].first_seq : state.next_seq;
    return {
      token: f.fencing_token,
      firstSeq: f.first_seq,
      lastSeq: end - 1,
      count: Math.max(0, end - f.first_seq),
      firstMs: f.timestamp_ms,
      lastMs: null,
      by: f.by,
      sample: null,
    };
  });
}
