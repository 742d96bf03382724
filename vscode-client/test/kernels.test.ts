import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

import { chooseKernel, findKernels, kernelAtLine, targetFromArgs, variantQuickFix } from '../src/kernels';
import { Uri } from './stubs/vscode';

const EXAMPLES = path.join(__dirname, '..', '..', '..', 'examples');

const AUTOTUNED = `import triton
import triton.language as tl
from triton import jit


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=2),  # a (paren) in a comment
        triton.Config({"BLOCK": 128}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def scaled(x_ptr, n,
           BLOCK: tl.constexpr):
    pid = tl.program_id(0)

    tl.store(x_ptr + pid, 1.0)


@torch.jit.script
def not_a_kernel(x):
    return x


@jit(do_not_specialize=["n"])
def bare(x_ptr, n):
    pass

def helper():
    return 1
`;

describe('kernel detection and targets', () => {
  it('finds the kernels of the repository examples', () => {
    let checked = 0;
    for (const [file, kernel] of [
      ['add_scale.py', 'axpy_kernel'],
      ['softmax.py', 'softmax_kernel'],
      ['matmul.py', 'matmul_kernel'],
    ]) {
      const p = path.join(EXAMPLES, file);
      if (!fs.existsSync(p)) {
        continue;
      }
      const text = fs.readFileSync(p, 'utf8');
      const kernels = findKernels(text);
      assert.deepStrictEqual(kernels.map((k) => k.name), [kernel], file);
      const lines = text.split('\n');
      assert.match(lines[kernels[0].startLine], /^@triton\.jit/);
      assert.match(lines[kernels[0].defLine], new RegExp(`def ${kernel}\\(`));
      // the body ends before the next top-level def
      assert.ok(lines.slice(kernels[0].endLine + 1).some((l) => /^def /.test(l)));
      assert.ok(!lines.slice(kernels[0].defLine + 1, kernels[0].endLine + 1).some((l) => /^def /.test(l)));
      checked++;
    }
    assert.ok(checked > 0, `no example found under ${EXAMPLES}`);
  });

  it('handles stacked multi-line decorators, jit aliases and ignores torch.jit', () => {
    const kernels = findKernels(AUTOTUNED);
    assert.deepStrictEqual(
      kernels.map((k) => [k.name, k.startLine, k.defLine, k.endLine]),
      [
        ['scaled', 5, 13, 17],
        ['bare', 25, 26, 27],
      ],
    );
    assert.strictEqual(kernelAtLine(kernels, 7)?.name, 'scaled', 'inside the autotune configs');
    assert.strictEqual(kernelAtLine(kernels, 16)?.name, 'scaled', 'blank line inside the body');
    assert.strictEqual(kernelAtLine(kernels, 22), undefined, 'torch.jit.script function');
    assert.strictEqual(kernelAtLine(kernels, 30), undefined, 'plain function');
  });

  it('chooses the kernel: explicit, under the cursor, the only one, else asks', () => {
    assert.deepStrictEqual(chooseKernel('given', AUTOTUNED, 0), { kernel: 'given' });
    assert.deepStrictEqual(chooseKernel(undefined, AUTOTUNED, 27), { kernel: 'bare' });
    assert.deepStrictEqual(chooseKernel(undefined, AUTOTUNED, 0), { pick: ['scaled', 'bare'] });
    assert.deepStrictEqual(chooseKernel(undefined, '@triton.jit\ndef k(x):\n    pass\n', undefined), { kernel: 'k' });
    assert.deepStrictEqual(chooseKernel(undefined, 'x = 1\n', 0), { pick: [] });
  });

  it('reads command arguments from lenses, code actions and menus', () => {
    assert.deepStrictEqual(targetFromArgs([{ uri: 'file:///a.py', kernel: 'k', jobId: 'j' }]), { uri: 'file:///a.py', kernel: 'k' });
    assert.deepStrictEqual(targetFromArgs([[{ uri: 'file:///a.py', kernel: 'k' }]]), { uri: 'file:///a.py', kernel: 'k' });
    assert.deepStrictEqual(targetFromArgs([Uri.parse('file:///ws/b.py')]), { uri: 'file:///ws/b.py' });
    assert.deepStrictEqual(targetFromArgs(['file:///ws/b.py', 'kern']), { uri: 'file:///ws/b.py', kernel: 'kern' });
    assert.deepStrictEqual(targetFromArgs([]), {});
    assert.deepStrictEqual(targetFromArgs([{ kernel: 'only' }]), { kernel: 'only' });
  });

  it("recognises the server's found-variant quick fix, and nothing else", () => {
    const edit = { changes: {} };
    const fix = { title: 'Apply found variant of axpy_kernel: 1.30× faster (KernelBand)', kind: { value: 'quickfix' }, edit, data: { kernel: 'axpy_kernel', uri: 'file:///a.py' } };
    assert.deepStrictEqual(variantQuickFix(fix, 'file:///doc.py'), { uri: 'file:///a.py', kernel: 'axpy_kernel' });
    assert.deepStrictEqual(variantQuickFix({ ...fix, data: undefined }, 'file:///doc.py'), { uri: 'file:///doc.py', kernel: 'axpy_kernel' });
    assert.strictEqual(variantQuickFix({ ...fix, kind: 'refactor.rewrite' }, 'u'), undefined);
    assert.strictEqual(variantQuickFix({ ...fix, edit: undefined }, 'u'), undefined, 'disabled (no edit): left alone');
    assert.strictEqual(variantQuickFix({ ...fix, title: 'Create harness for axpy_kernel (KernelBand)' }, 'u'), undefined);
  });
});
