"""Code rewrites of the kernel body, each recognising its pattern and editing with
libcst (formatting and comments of untouched lines kept):

- ``pipeline_loop``: a loop of the kernel over ``range(...)`` that loads (a K loop)
  becomes ``tl.range(..., num_stages=S)``, so the compiler software-pipelines that loop
  with S stages independently of the launch's num_stages, or
  ``tl.range(..., loop_unroll_factor=U)``. Only where the installed Triton's
  ``tl.range`` takes that keyword (feature-detected).
- ``pid_swizzle``: a 2D-tiled ``tl.dot`` kernel launched on a 1D grid that maps
  ``pid_m = pid // num_pid_n; pid_n = pid % num_pid_n`` (row-major tile order) gets
  the grouped ordering of the Triton matmul tutorial (GROUP_M rows of tiles walked
  column by column), so programs running together share A and B tiles in L2. The set
  of tiles is the same (a permutation of program ids), so results do not change.
- ``persistent``: a 1D kernel over ``offs = pid * BLOCK + tl.arange(0, BLOCK)`` masked
  by ``offs < n`` becomes a grid-stride loop ``for pid in range(tl.program_id(0),
  tl.cdiv(n, BLOCK), tl.num_programs(0))`` and its launch grid ``(E,)`` becomes
  ``(min(E, P),)`` with P a multiple of the SM count (132 on H100/H200): fewer, longer
  programs; every tile is still visited exactly once.
- ``rows_per_program``: a row-wise kernel (``row = tl.program_id(0)``, grid ``(E,)``)
  handles R rows per program: the kernel gets a trailing ``n_rows_kb`` parameter (the
  launch passes E), its body loops ``for row in range(tl.program_id(0), n_rows_kb,
  tl.num_programs(0))`` and the grid becomes ``((E + R - 1) // R,)``.
- ``block_ptr``: in a ``tl.dot`` kernel, pointer blocks built as
  ``base + offs_r[:, None] * s_r + offs_c[None, :] * s_c``, loaded with masks (other 0)
  and stepped with ``ptrs += BLOCK * s``, become ``tl.make_block_ptr`` /
  ``tl.load(..., boundary_check=(0, 1), padding_option="zero")`` / ``tl.advance`` (or
  the ``.advance`` method where Triton no longer exports ``tl.advance``); the bounds come from the masks or ``% M``.
Both loop rewrites refuse kernels whose body mutates a parameter (``X += row * s``) or
carries a value across what would become iterations.
"""
from __future__ import annotations

import inspect
from typing import Optional

import libcst as cst

from .edits import Edits, add_kwarg, int_value, names_in, walk
from .rewrites import Rewrites

PIPELINE_STAGES: tuple[int, ...] = (2, 3, 4)
LOOP_UNROLL: tuple[int, ...] = (2, 4)
ROWS_PER_PROGRAM: tuple[int, ...] = (2, 4, 8)
PERSISTENT_PROGRAMS: tuple[int, ...] = (264, 528, 1056)  # 2, 4, 8 programs per SM of a 132-SM H100/H200
SWIZZLE_GROUPS: tuple[int, ...] = (4, 8)


def tl_range_params() -> set[str]:
    """Keyword parameters of the installed ``tl.range`` (empty without one)."""
    try:
        import triton.language as tl

        return set(inspect.signature(tl.range.__init__).parameters) - {"self"}
    except Exception:  # no triton, or no tl.range (Triton < 3.0)
        return set()


def block_pointers_supported() -> bool:
    """tl.make_block_ptr exists and works: Triton 3.9 keeps the name but raises
    ("Block pointers have been removed in favor of the tensor descriptor API")."""
    try:
        import triton.language as tl

        fn = getattr(tl, "make_block_ptr", None)
        if fn is None:
            return False
        text = (getattr(fn, "__doc__", "") or "") + inspect.getsource(getattr(fn, "fn", fn))
        return "have been removed" not in text
    except Exception:  # source unavailable: trust the name
        return hasattr(tl, "make_block_ptr")


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.target, self.new = target, new

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.new if original_node is self.target else updated_node


class CodeRewrites(Rewrites):
    # ---- pipeline: range -> tl.range(num_stages=S)
    def pipeline_loops(self) -> list[cst.For]:
        out = []
        for n in walk(self.kdef.body):
            if not isinstance(n, cst.For) or not isinstance(n.iter, cst.Call):
                continue
            it = n.iter
            builtin = isinstance(it.func, cst.Name) and it.func.value == "range"
            lang = self.is_lang_call(it, "range") and not any(a.keyword is not None for a in it.args)
            loads = any(self.is_lang_call(c, "load") or self.is_lang_call(c, "dot") for c in walk(n.body))
            if (builtin or lang) and loads and not any(a.star for a in it.args):
                out.append(n)
        return out

    def pipeline_rewrites(self) -> list[tuple[str, str, Edits]]:
        if "num_stages" not in tl_range_params():
            return []
        loops = self.pipeline_loops()
        if not loops:
            return []
        lang = self.lang_prefix()
        func = cst.parse_expression(f"{lang}.range")
        lines = ", ".join(str(self.line(f)) for f in loops)
        out = []
        for s in PIPELINE_STAGES:
            def edit(n: cst.CSTNode, s: int = s) -> cst.CSTNode:
                it = n.iter  # type: ignore[attr-defined]
                kw = cst.Arg(cst.Integer(str(s)), keyword=cst.Name("num_stages"),
                             equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                args = list(it.args)
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                return n.with_changes(iter=it.with_changes(func=func, args=[*args, kw]))  # type: ignore[attr-defined]

            edits: Edits = {id(f): [edit] for f in loops}
            out.append((f"tl_range:{s}", f"loops over range at lines {lines} of {self.kernel} -> "
                        f"{lang}.range(..., num_stages={s})", edits))
        if "loop_unroll_factor" in tl_range_params():  # Triton 3.2+: unrolling, pipelining left to the launch
            for u in LOOP_UNROLL:
                def unroll(n: cst.CSTNode, u: int = u) -> cst.CSTNode:
                    it = n.iter  # type: ignore[attr-defined]
                    kw = cst.Arg(cst.Integer(str(u)), keyword=cst.Name("loop_unroll_factor"),
                                 equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
                    args = list(it.args)
                    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    return n.with_changes(iter=it.with_changes(func=func, args=[*args, kw]))  # type: ignore[attr-defined]

                out.append((f"tl_range_unroll:{u}", f"loops over range at lines {lines} of {self.kernel} -> "
                            f"{lang}.range(..., loop_unroll_factor={u})", {id(f): [unroll] for f in loops}))
        return out

    # ---- reordering: grouped program ids for 2D tiles
    def _pid_names(self) -> set[str]:
        out = set()
        for stmt in self.kdef.body.body:
            target, value = self.simple_assign(stmt)
            if target and value is not None and self.is_lang_call(value, "program_id"):
                args = value.args  # type: ignore[attr-defined]
                if args and int_value(args[0].value) == 0:
                    out.add(target)
        return out

    def _cdiv_vars(self) -> dict[str, cst.BaseExpression]:
        out = {}
        for stmt in self.kdef.body.body:
            target, value = self.simple_assign(stmt)
            if target and value is not None and self.is_lang_call(value, "cdiv"):
                out[target] = value
        return out

    def swizzle_rewrites(self) -> list[tuple[str, str, Edits]]:
        if not any(self.is_lang_call(n, "dot") for n in walk(self.kdef.body)):
            return []
        pids, cdivs = self._pid_names(), self._cdiv_vars()
        body = list(self.kdef.body.body)
        found: Optional[tuple[int, str, str, str, str]] = None  # index, pid_m, pid_n, pid, num_pid_n
        for i in range(len(body) - 1):
            a = self._divmod(body[i], pids)
            b = self._divmod(body[i + 1], pids)
            if a and b and {a[1], b[1]} == {"//", "%"} and a[2] == b[2] and a[3] == b[3]:
                m, n = (a, b) if a[1] == "//" else (b, a)
                found = (i, m[0], n[0], m[2], m[3])
                break
        if found is None:
            return []
        i, pid_m, pid_n, pid, npn = found
        if npn not in cdivs:
            return []
        others = [v for v in cdivs if v != npn and self.line(body[0]) <= self.line(body[i])]
        npm = next((v for v in others if v.endswith("_m") or v.endswith("m")), others[0] if others else None)
        if npm is None:
            return []
        taken = names_in(self.kdef)
        fresh = {n: n if n not in taken else f"{n}_kb" for n in ("num_pid_in_group", "group_id", "first_pid_m", "group_size_m")}
        if any(v in taken for v in fresh.values()):
            return []
        out = []
        for g in SWIZZLE_GROUPS:
            code = (
                f"{fresh['num_pid_in_group']} = {g} * {npn}\n"
                f"{fresh['group_id']} = {pid} // {fresh['num_pid_in_group']}\n"
                f"{fresh['first_pid_m']} = {fresh['group_id']} * {g}\n"
                f"{fresh['group_size_m']} = min({npm} - {fresh['first_pid_m']}, {g})\n"
                f"{pid_m} = {fresh['first_pid_m']} + (({pid} % {fresh['num_pid_in_group']}) % {fresh['group_size_m']})\n"
                f"{pid_n} = ({pid} % {fresh['num_pid_in_group']}) // {fresh['group_size_m']}\n"
            )
            new = list(cst.parse_module(code).body)
            first, second = body[i], body[i + 1]
            new[0] = new[0].with_changes(leading_lines=first.leading_lines)  # type: ignore[attr-defined]
            edits: Edits = {
                id(first): [lambda _n, new=new: cst.FlattenSentinel(new)],
                id(second): [lambda _n: cst.RemoveFromParent()],
            }
            out.append((f"pid_swizzle:{g}", f"grouped program-id ordering (GROUP_M={g}) for {pid_m}/{pid_n} "
                        f"at line {self.line(first)} of {self.kernel}", edits))
        return out

    def _divmod(self, stmt: cst.CSTNode, pids: set[str]) -> Optional[tuple[str, str, str, str]]:
        """``x = pid // n`` or ``x = pid % n`` -> (x, op, pid, n)."""
        target, value = self.simple_assign(stmt)
        if not target or not isinstance(value, cst.BinaryOperation):
            return None
        op = "//" if isinstance(value.operator, cst.FloorDivide) else "%" if isinstance(value.operator, cst.Modulo) else None
        if op and isinstance(value.left, cst.Name) and value.left.value in pids and isinstance(value.right, cst.Name):
            return target, op, value.left.value, value.right.value
        return None

    # ---- tiling: persistent (grid-stride) 1D kernels
    def persistent_rewrites(self, programs: tuple[int, ...] = PERSISTENT_PROGRAMS) -> list[tuple[str, str, Edits]]:
        pid_calls = [n for n in walk(self.kdef.body) if self.is_lang_call(n, "program_id")]
        if len(pid_calls) != 1 or any(isinstance(n, cst.Return) for n in walk(self.kdef.body)):
            return []
        if any(self.is_lang_call(n, "num_programs") for n in walk(self.kdef.body)):
            return []
        body = list(self.kdef.body.body)
        idx = next((i for i, st in enumerate(body) if self.simple_assign(st)[0] in self._pid_names()), None)
        inline = None  # ``offs = tl.program_id(0) * BLOCK + ...``: the call becomes the loop variable
        if idx is not None:
            pid = self.simple_assign(body[idx])[0]
            rest = body[idx + 1:]
        else:
            idx = next((i for i, st in enumerate(body) if any(m is pid_calls[0] for m in walk(st))), None)
            pid = "pid" if "pid" not in names_in(self.kdef) else "pid_kb"
            if idx is None or pid in names_in(self.kdef):
                return []
            inline = body[idx].visit(_ReplaceNode(pid_calls[0], cst.Name(pid)))
            inline = inline.with_changes(leading_lines=[])  # its comments go above the loop
            rest = [inline, *body[idx + 1:]]
        bound = self._tile_bound(rest, pid)  # type: ignore[arg-type]
        if bound is None or not self._loop_safe(rest):
            return []
        offs, block, n = bound
        grids = self._grid_elements()
        if not grids:
            return []
        lang = self.lang_prefix()
        head = cst.parse_statement(
            f"for {pid} in range({lang}.program_id(0), {lang}.cdiv({n}, {block}), {lang}.num_programs(0)):\n    pass\n"
        )
        header = head.body.header  # type: ignore[attr-defined]
        if inline is None and isinstance(body[idx], cst.SimpleStatementLine):
            header = body[idx].trailing_whitespace  # keep the pid line's comment on the loop's line
        loop = head.with_changes(body=head.body.with_changes(body=rest, header=header),  # type: ignore[attr-defined]
                                 leading_lines=body[idx].leading_lines)
        new_body = body[:idx] + [loop]
        out = []
        for p in programs:
            edits: Edits = {id(self.kdef.body): [lambda n, new_body=new_body: n.with_changes(body=new_body)]}  # type: ignore[attr-defined]
            for e in grids:
                edits[id(e)] = [lambda n, p=p: cst.Call(cst.Name("min"), [
                    cst.Arg(n, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(cst.Integer(str(p)))])]
            out.append((f"persistent:{p}", f"persistent grid-stride loop over tiles of {offs} in {self.kernel}, "
                        f"grid capped at {p} programs", edits))
        return out

    def _tile_bound(self, stmts: list[cst.BaseStatement], pid: str) -> Optional[tuple[str, str, str]]:
        """(offsets name, BLOCK, size param) of ``offs = pid * BLOCK + tl.arange(0, BLOCK)``
        (directly or through ``start = pid * BLOCK``) masked by ``offs < n`` somewhere."""
        products: dict[str, str] = {}
        for st in stmts:
            target, value = self.simple_assign(st)
            if not target or value is None:
                continue
            b = self._multiple_of_block(value)
            if b and pid in names_in(value):
                products[target] = b
                continue
            b = self._offsets_block(value, {k: v for k, v in products.items()})
            if b and (pid in names_in(value) or names_in(value) & set(products)):
                for n in walk(self.kdef.body):
                    if (isinstance(n, cst.Comparison) and isinstance(n.left, cst.Name) and n.left.value == target
                            and len(n.comparisons) == 1 and isinstance(n.comparisons[0].operator, cst.LessThan)
                            and isinstance(n.comparisons[0].comparator, cst.Name)
                            and n.comparisons[0].comparator.value in self.params
                            and n.comparisons[0].comparator.value not in self.constexprs):
                        return target, b, n.comparisons[0].comparator.value
                return None
        return None

    def _grid_elements(self) -> Optional[list[cst.BaseExpression]]:
        """The single element E of every launch's 1D grid ``(E,)``; None if one is not that."""
        out = []
        for call, fn in self.launches():
            node, _ = self.grid_definition(call, fn)
            if isinstance(node, cst.Assign):
                node = node.value
            if isinstance(node, cst.Lambda):
                node = node.body
            if isinstance(node, cst.FunctionDef):
                return None
            if not isinstance(node, cst.Tuple) or len(node.elements) != 1:
                return None
            out.append(node.elements[0].value)
        return out or None

    def _loop_safe(self, rest: list[cst.BaseStatement]) -> bool:
        """The statements can run once per iteration: no parameter is reassigned and every
        augmented assignment updates a value first bound inside them."""
        bound: set[str] = set()
        for st in rest:
            for n in walk(st):
                if isinstance(n, cst.Assign):
                    for t in n.targets:
                        bound |= names_in(t.target)
                elif isinstance(n, cst.For):
                    bound |= names_in(n.target)
        for st in rest:
            for n in walk(st):
                targets: set[str] = set()
                if isinstance(n, cst.AugAssign):
                    targets = names_in(n.target)
                    if not targets <= bound:
                        return False
                elif isinstance(n, cst.Assign):
                    targets = {x for t in n.targets for x in names_in(t.target)}
                if targets & set(self.params):
                    return False
        return True

    # ---- vectorization: several rows per program
    def rows_rewrites(self, rows: tuple[int, ...] = ROWS_PER_PROGRAM) -> list[tuple[str, str, Edits]]:
        pid_calls = [n for n in walk(self.kdef.body) if self.is_lang_call(n, "program_id")]
        if len(pid_calls) != 1 or any(isinstance(n, (cst.Return, cst.Yield)) for n in walk(self.kdef.body)):
            return []
        if any(self.is_lang_call(n, "num_programs") for n in walk(self.kdef.body)):
            return []
        params = self.kdef.params
        if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or params.kwonly_params or params.star_kwarg \
                or any(p.default is not None for p in params.params):
            return []
        body = list(self.kdef.body.body)
        idx = next((i for i, st in enumerate(body) if self.simple_assign(st)[0] in self._pid_names()), None)
        if idx is None:
            return []
        row = self.simple_assign(body[idx])[0]
        rest = body[idx + 1:]
        if self._tile_bound(rest, row) is not None or not self._loop_safe(rest):  # type: ignore[arg-type]
            return []  # a 1D tiled kernel: that is ``persistent``
        grids = self._grid_elements()
        launches = self.launches()
        if not grids or len(grids) != len(launches):
            return []
        lambda_params = {p.name.value for call, fn in launches for n in [self.grid_definition(call, fn)[0]]
                         if isinstance(n, cst.Lambda) for p in n.params.params}
        if any(names_in(e) & lambda_params for e in grids):
            return []
        taken = names_in(self.module)
        new = "n_rows_kb"
        while new in taken:
            new += "_"
        lang = self.lang_prefix()
        head = cst.parse_statement(f"for {row} in range({lang}.program_id(0), {new}, {lang}.num_programs(0)):\n    pass\n")
        header = body[idx].trailing_whitespace if isinstance(body[idx], cst.SimpleStatementLine) else head.body.header  # type: ignore[attr-defined]
        loop = head.with_changes(body=head.body.with_changes(body=rest, header=header),  # type: ignore[attr-defined]
                                 leading_lines=body[idx].leading_lines)
        new_body = body[:idx] + [loop]
        last = params.params[-1]
        new_params = [*params.params[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                      cst.Param(cst.Name(new))]
        out = []
        for r in rows:
            edits: Edits = {
                id(self.kdef.body): [lambda n, b=new_body: n.with_changes(body=b)],  # type: ignore[attr-defined]
                id(self.kdef.params): [lambda n, ps=new_params: n.with_changes(params=ps)],  # type: ignore[attr-defined]
            }
            for (call, _fn), e in zip(launches, grids):
                code = self.code(e)
                edits[id(e)] = [lambda _n, code=code, r=r: cst.parse_expression(f"({code} + {r - 1}) // {r}")]
                edits.setdefault(id(call), []).append(
                    lambda n, code=code: add_kwarg(n, new, cst.parse_expression(code)))  # type: ignore[arg-type]
            out.append((f"rows:{r}", f"{r} rows per program in {self.kernel} (loop over {row}, grid / {r})", edits))
        return out

    # ---- access_layout: block pointers for tl.dot kernels
    def block_ptr_rewrites(self) -> list[tuple[str, str, Edits]]:
        try:
            import triton.language as tl

            if not block_pointers_supported():
                return []
            # Triton <= 3.x: tl.advance(p, offsets); newer: only the method p.advance(offsets)
            functional = hasattr(tl, "advance")
            if not functional and not hasattr(getattr(tl, "tensor", object), "advance"):
                return []
        except Exception:
            return []
        if not any(self.is_lang_call(n, "dot") for n in walk(self.kdef.body)):
            return []
        offsets = self._offset_defs()
        lang = self.lang_prefix()
        edits: Edits = {}
        done = []
        for stmt in walk(self.kdef.body):
            target, value = self.simple_assign(stmt)
            if not target or value is None:
                continue
            parsed = self._ptr_block(value)
            if parsed is None:
                continue
            base, (r_offs, r_stride), (c_offs, c_stride) = parsed
            if r_offs not in offsets or c_offs not in offsets:
                continue
            r_bound, c_bound = self._bound(r_offs, offsets), self._bound(c_offs, offsets)
            uses = self._ptr_uses(target, stmt)
            if r_bound is None or c_bound is None or uses is None:
                continue
            loads, steps = uses
            step_edits = {}
            for st, aug in steps:
                d = self._step(aug.value, r_stride, c_stride)  # type: ignore[arg-type]
                if d is None:
                    break
                call = (f"{lang}.advance({target}, ({d[0]}, {d[1]}))" if functional
                        else f"{target}.advance(({d[0]}, {d[1]}))")
                new = cst.parse_statement(f"{target} = {call}\n")
                step_edits[id(st)] = [lambda n, new=new: new.with_changes(leading_lines=n.leading_lines,  # type: ignore[attr-defined]
                                                                          trailing_whitespace=n.trailing_whitespace)]  # type: ignore[attr-defined]
            else:
                make = cst.parse_expression(
                    f"{lang}.make_block_ptr(base={base}, shape=({r_bound}, {c_bound}), strides=({r_stride}, {c_stride}), "
                    f"offsets=({offsets[r_offs][0]}, {offsets[c_offs][0]}), "
                    f"block_shape=({offsets[r_offs][1]}, {offsets[c_offs][1]}), order=(1, 0))")
                edits[id(value)] = [lambda _n, make=make: make]
                for ld in loads:
                    edits[id(ld)] = [lambda n: n.with_changes(args=[  # type: ignore[attr-defined]
                        n.args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),  # type: ignore[attr-defined]
                        cst.Arg(cst.parse_expression("(0, 1)"), keyword=cst.Name("boundary_check"), equal=_eq(),
                                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                        cst.Arg(cst.SimpleString('"zero"'), keyword=cst.Name("padding_option"), equal=_eq())])]
                edits.update(step_edits)
                done.append(target)
        if not done:
            return []
        return [("block_ptr", f"block pointers (tl.make_block_ptr / tl.advance) for {', '.join(done)} in {self.kernel}",
                 edits)]

    def _offset_defs(self) -> dict[str, tuple[str, str]]:
        """offs name -> (start expression, BLOCK) for ``start + tl.arange(0, BLOCK)``
        (optionally ``(...) % M``) and ``tl.arange(0, BLOCK)`` (start 0)."""
        out = {}
        for stmt in self.kdef.body.body:
            target, value = self.simple_assign(stmt)
            if not target or value is None:
                continue
            v = value
            if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Modulo):
                v = v.left
            v = v.with_changes(lpar=[], rpar=[]) if hasattr(v, "lpar") else v
            b = self.arange_block(v)
            if b:
                out[target] = ("0", b)
            elif isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Add):
                b = self.arange_block(v.right)
                if b and names_in(v.left) and not any(self.is_lang_call(n, "arange") for n in walk(v.left)):
                    out[target] = (self.code(v.left), b)
        return out

    def _bound(self, offs: str, offsets: dict[str, tuple[str, str]]) -> Optional[str]:
        """The parameter an offsets vector is bounded by: ``offs... < P`` or ``< P - ...``
        in a mask, or ``% P`` in its definition."""
        for n in walk(self.kdef.body):
            if not isinstance(n, cst.Comparison) or len(n.comparisons) != 1:
                continue
            left = n.left.value if isinstance(n.left, cst.Subscript) else n.left
            if not (isinstance(left, cst.Name) and left.value == offs):
                continue
            if not isinstance(n.comparisons[0].operator, cst.LessThan):
                continue
            right = n.comparisons[0].comparator
            if isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Subtract):
                right = right.left
            if isinstance(right, cst.Name) and right.value in self.params:
                return right.value
        for stmt in self.kdef.body.body:
            target, value = self.simple_assign(stmt)
            if target == offs and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo) \
                    and isinstance(value.right, cst.Name) and value.right.value in self.params:
                return value.right.value
        return None

    def _ptr_block(self, e: cst.BaseExpression) -> Optional[tuple[str, tuple[str, str], tuple[str, str]]]:
        """``base + r[:, None] * s_r + c[None, :] * s_c`` -> (base, (r, s_r), (c, s_c))."""
        terms: list[cst.BaseExpression] = []
        while isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add):
            terms.insert(0, e.right)
            e = e.left
        terms.insert(0, e)
        if len(terms) != 3 or not isinstance(terms[0], cst.Name) or terms[0].value not in self.params:
            return None
        dims: dict[str, tuple[str, str]] = {}
        for t in terms[1:]:
            if not (isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)
                    and isinstance(t.left, cst.Subscript) and isinstance(t.left.value, cst.Name)
                    and isinstance(t.right, cst.Name)):
                return None
            idx = self.code(t.left).split("[", 1)[1].replace(" ", "")
            kind = "r" if idx == ":,None]" else "c" if idx == "None,:]" else None
            if kind is None or kind in dims:
                return None
            dims[kind] = (t.left.value.value, t.right.value)
        if set(dims) != {"r", "c"}:
            return None
        return terms[0].value, dims["r"], dims["c"]

    def _ptr_uses(self, name: str, definition: cst.CSTNode) -> Optional[tuple[list[cst.Call], list[tuple[cst.CSTNode, cst.AugAssign]]]]:
        """Every use of the pointer block: loads (first argument, other 0 or absent) and
        ``name += ...`` steps as whole statements; None if it is used any other way."""
        loads, steps, seen = [], [], set()
        for n in walk(self.kdef.body):
            if self.is_lang_call(n, "load") and n.args and isinstance(n.args[0].value, cst.Name) \
                    and n.args[0].value.value == name:  # type: ignore[attr-defined]
                other = next((a for a in n.args if a.keyword is not None and a.keyword.value == "other"), None)  # type: ignore[attr-defined]
                if other is not None and self.code(other.value).strip() not in ("0", "0.0", "0."):
                    return None
                if any(a.keyword is not None and a.keyword.value not in ("mask", "other") for a in n.args) \
                        or sum(1 for a in n.args if a.keyword is None) > 1:  # type: ignore[attr-defined]
                    return None
                loads.append(n)  # type: ignore[arg-type]
                seen.add(id(n.args[0].value))  # type: ignore[attr-defined]
            elif isinstance(n, cst.SimpleStatementLine) and len(n.body) == 1 and isinstance(n.body[0], cst.AugAssign) \
                    and isinstance(n.body[0].target, cst.Name) and n.body[0].target.value == name:
                if not isinstance(n.body[0].operator, cst.AddAssign):
                    return None
                steps.append((n, n.body[0]))
                seen.add(id(n.body[0].target))
        target_ids = {id(t.target) for t in definition.body[0].targets}  # type: ignore[attr-defined]
        for n in walk(self.kdef.body):
            if isinstance(n, cst.Name) and n.value == name and id(n) not in seen and id(n) not in target_ids:
                return None
        return (loads, steps) if loads else None

    @staticmethod
    def _step(e: cst.BaseExpression, r_stride: str, c_stride: str) -> Optional[tuple[str, str]]:
        """``BLOCK * s`` (or ``s * BLOCK``) -> the advance along the dimension of s."""
        if not (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply)):
            return None
        for amount, stride in ((e.left, e.right), (e.right, e.left)):
            if isinstance(stride, cst.Name) and isinstance(amount, cst.Name):
                if stride.value == r_stride:
                    return amount.value, "0"
                if stride.value == c_stride:
                    return "0", amount.value
        return None


def _eq() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
