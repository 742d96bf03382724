import * as assert from 'assert';

import { parseProposalQuery, proposalRef, ProposalStore } from '../src/proposals';

describe('proposal documents', () => {
  const target = { uri: 'file:///ws/my%20dir/add%26scale.py', kernel: 'axpy_kernel' };

  it('round-trips side, kernel and source uri through the query; keeps the file name', () => {
    const ref = proposalRef('proposed', target);
    assert.strictEqual(ref.path, '/add&scale.py');
    assert.deepStrictEqual(parseProposalQuery(ref.query), { side: 'proposed', target });
    assert.strictEqual(parseProposalQuery('side=left&kernel=k&src=x'), undefined);
    assert.strictEqual(parseProposalQuery(''), undefined);
  });

  it('serves both sides, replaces them (with a change event) and forgets them', () => {
    const changed: string[] = [];
    const store = new ProposalStore((ref) => changed.push(ref.query));
    const refs = store.put(target, 'orig', 'new');
    assert.strictEqual(store.text(refs.original.query), 'orig');
    assert.strictEqual(store.text(refs.proposed.query), 'new');
    assert.deepStrictEqual(changed, [], 'first put is not a change');
    store.put(target, 'orig', 'newer');
    assert.deepStrictEqual(changed, [refs.proposed.query]);
    assert.strictEqual(store.text(refs.proposed.query), 'newer');
    const other = store.put({ uri: target.uri, kernel: 'other' }, 'a', 'b');
    store.delete(target);
    assert.strictEqual(store.text(refs.proposed.query), undefined);
    assert.strictEqual(store.text(other.proposed.query), 'b');
    assert.strictEqual(store.size, 3, 'the other kernel: its two sides and its evidence');
    store.put(target, 'o', 'p', '# evidence');
    const evidence = proposalRef('evidence', target);
    assert.strictEqual(evidence.path, '/KernelBand evidence axpy_kernel.md');
    assert.strictEqual(store.text(evidence.query), '# evidence');
  });
});
