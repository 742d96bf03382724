/**
 * Texts of the read-only documents behind the review diff
 * (`kernelband-proposal:/<file name>?side=original|proposed&kernel=K&src=<document uri>`).
 * The path keeps the file's name, so the diff editor shows it and highlights it as Python.
 * Pure: the VS Code content provider in the controller only forwards to this store.
 */
import { Target } from './kernels';

export type Side = 'original' | 'proposed' | 'evidence';

export interface ProposalDocRef {
  /** Uri path: `/<file name>`. */
  path: string;
  /** Uri query identifying the side, kernel and source document. */
  query: string;
}

function fileName(uri: string): string {
  const path = uri.split('?')[0].split('#')[0];
  const last = path.split('/').pop() || 'kernel.py';
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** The evidence document's name (its tab, and its markdown preview's "Preview <name>"). */
export function evidenceTitle(target: Target): string {
  return `KernelBand evidence ${target.kernel}`;
}

export function proposalRef(side: Side, target: Target): ProposalDocRef {
  const q = new URLSearchParams({ side, kernel: target.kernel, src: target.uri });
  const path = side === 'evidence' ? `/${evidenceTitle(target)}.md` : `/${fileName(target.uri)}`;
  return { path, query: q.toString() };
}

export function parseProposalQuery(query: string): { side: Side; target: Target } | undefined {
  const q = new URLSearchParams(query);
  const side = q.get('side');
  const kernel = q.get('kernel');
  const src = q.get('src');
  if ((side !== 'original' && side !== 'proposed' && side !== 'evidence') || !kernel || !src) {
    return undefined;
  }
  return { side, target: { uri: src, kernel } };
}

function key(side: Side, target: Target): string {
  return `${side}\u0000${target.uri}\u0000${target.kernel}`;
}

export class ProposalStore {
  private readonly texts = new Map<string, string>();

  /** @param changed called with the query of each document whose text changed (to fire onDidChange). */
  constructor(private readonly changed?: (ref: ProposalDocRef) => void) {}

  /** Stores both sides (and the evidence) for the target; returns their references. */
  put(target: Target, original: string, proposed: string, evidence = ''): Record<Side, ProposalDocRef> {
    const refs = { original: proposalRef('original', target), proposed: proposalRef('proposed', target), evidence: proposalRef('evidence', target) };
    for (const [side, text] of [
      ['original', original],
      ['proposed', proposed],
      ['evidence', evidence],
    ] as const) {
      const k = key(side, target);
      const before = this.texts.get(k);
      this.texts.set(k, text);
      if (before !== undefined && before !== text) {
        this.changed?.(refs[side]);
      }
    }
    return refs;
  }

  /** The text for a proposal document's query; undefined if unknown (e.g. after a reload). */
  text(query: string): string | undefined {
    const parsed = parseProposalQuery(query);
    return parsed ? this.texts.get(key(parsed.side, parsed.target)) : undefined;
  }

  delete(target: Target): void {
    for (const side of ['original', 'proposed', 'evidence'] as const) {
      this.texts.delete(key(side, target));
    }
  }

  get size(): number {
    return this.texts.size;
  }
}
