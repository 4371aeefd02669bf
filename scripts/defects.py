#!/usr/bin/env python3
"""The test suite's strength, measured: deliberate defects in minigrad/, each run against the fast slice.

A fixed list of defects (below), each one edit of a file under minigrad/ (the exact old text, which must
occur exactly once, and the new text): a swapped VJP argument, an off-by-one axis, a dropped ``params``, a
wrong dtype rule, a skipped guard, a buffer reused while alive, a hint shown on "not done yet", ... spread
over core, compiler, transforms, nn, onnx, viz, the course's checks and the fast layer.

For each defect the script copies a pristine minigrad/ into a scratch copy of the checkout (made once per run
in a temporary directory: the checkout itself is never edited, others may be working in it), applies the
edit, and runs the fast slice there with PYTHONPATH pointing at the copy:

    python -m pytest tests -m "not env and not slow" -x -q -p no:cacheprovider

with a per-defect timeout. A failing or erroring run has caught the defect; a passing run missed it. The
report is a table (caught / missed / timeout / stale: the old text is not in the file any more) with the
first failing test, and optionally JSON (--json) to compare two suites.

    python3 scripts/defects.py                     # every defect (about 1-3 min each on 2 cores)
    python3 scripts/defects.py --only 3 --only 17  # some of them (--only 3,17 too)
    python3 scripts/defects.py --list              # the list
    python3 scripts/defects.py --check             # every defect still applies (no test run)
    python3 scripts/defects.py --no-baseline ...   # skip the run without a defect (see below)
    python3 scripts/defects.py --tests-from HEAD~5 # the library as it is, the tests of another commit
    python3 scripts/defects.py --ref HEAD          # library and tests of a commit, not the working tree

First the slice runs once without a defect (and without -x): a test failing there (work in progress in the
checkout) is deselected from every defect's run and listed, so it cannot count as catching a defect.
The Python is .venv-test's (made by `python3 dev.py test`) unless --python is given. Compiled numba kernels
go to a cache directory of the run (seeded from ~/.cache/minigrad when it exists), so a defect never leaves
a kernel in the user's cache.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLICE = ['-m', 'not env and not slow', '-x', '-q', '-p', 'no:cacheprovider']
IGNORE = shutil.ignore_patterns('.git', '.venv', '.venv-test', 'build', 'dist', '*.egg-info', '__pycache__',
                                '.pytest_cache', '.hypothesis', 'artifacts', '.ci')


class Defect:
    def __init__(self, area, what, file, old, new):
        self.area, self.what, self.file, self.old, self.new = area, what, file, old, new


D = Defect
DEFECTS = [
    # ------------------------------------------------------------------ core: VJPs, shape and dtype rules, the tape
    D('core', 'mul VJP: the arguments swapped (d/dx = g * x)', 'minigrad/core/ops.py',
      '    _unbroadcast(mul(g, y), x) if n[0] else None,\n    _unbroadcast(mul(g, x), y) if n[1] else None))',
      '    _unbroadcast(mul(g, x), x) if n[0] else None,\n    _unbroadcast(mul(g, y), y) if n[1] else None))'),
    D('core', 'div VJP: d/dy loses its minus sign', 'minigrad/core/ops.py',
      '_unbroadcast(neg(mul(g, div(out, y))), y) if n[1] else None), saves_out=True)',
      '_unbroadcast(mul(g, div(out, y)), y) if n[1] else None), saves_out=True)'),
    D('core', 'cos VJP: sin without the minus sign', 'minigrad/core/ops.py',
      'return (neg(mul(g, sin(x))),)', 'return (mul(g, sin(x)),)'),
    D('core', 'tanh VJP: 1 + tanh**2', 'minigrad/core/ops.py',
      'return (mul(g, add(1, neg(mul(out, out)))),)', 'return (mul(g, add(1, mul(out, out))),)'),
    D('core', 'where VJP: the branches swapped for x', 'minigrad/core/ops.py',
      'gx = _unbroadcast(where(c, g, 0), x) if n[1] else None',
      'gx = _unbroadcast(where(c, 0, g), x) if n[1] else None'),
    D('core', 'maximum VJP: a tie gives the whole gradient to both inputs', 'minigrad/core/ops.py',
      'half = where(tie, mul(g, 0.5), g)', 'half = g'),
    D('core', 'pow VJP: x ** y instead of x ** (y - 1) for a constant exponent', 'minigrad/core/ops.py',
      'else mul(mul(g, y), pow_(x, y - 1))', 'else mul(mul(g, y), pow_(x, y))'),
    D('core', 'wrong dtype rule: the sum of unsigned ints keeps their dtype (not uint64)', 'minigrad/core/ops.py',
      "if op == 'sum' and dt.kind in 'biu':", "if op == 'sum' and dt.kind in 'bi':"),
    D('core', 'transpose VJP: the permutation instead of its inverse', 'minigrad/core/ops.py',
      'axes=None if axes is None else tuple(np.argsort(axes).tolist())),)',
      'axes=None if axes is None else tuple(axes)),)'),
    D('core', 'skipped guard: reshape with -1 accepts a size that does not divide', 'minigrad/core/ops.py',
      'ok = shape.count(-1) == 1 and rest != 0 and size % rest == 0', 'ok = shape.count(-1) == 1 and rest != 0'),
    D('core', 'max VJP: tied maxima each get the whole gradient', 'minigrad/core/ops.py',
      'return (div(mul(broadcast_like(g, x, axes=axes), mask), count),)',
      'return (mul(broadcast_like(g, x, axes=axes), mask),)'),
    D('core', "wrong dtype rule: cast's VJP keeps the cotangent's dtype", 'minigrad/core/ops.py',
      "return (cast(g, dtype=aval_of(x).dtype),)       # back to the input's dtype", 'return (g,)'),
    D('core', 'skipped guard: backward does not check tensors changed in place after the tape saved them',
      'minigrad/core/tensor.py', 'if inplace.stale:\n            inplace.check_saved(order)',
      'if False:\n            inplace.check_saved(order)'),
    D('core', "dropped params: the tape calls a VJP without the node's params (axis, shape, ...)",
      'minigrad/core/tensor.py', 'g, out, *saved, **node.params)', 'g, out, *saved)'),
    D('core', 'reverse sweep: a second cotangent replaces the first instead of adding to it',
      'minigrad/core/autodiff.py', 's = ct[k] = P.add(prev, gi)', 's = ct[k] = gi'),
    D('core', 'buffer reused while alive: cotangents added in place into an array the sweep does not own',
      'minigrad/core/autodiff.py', 'elif id(prev) in owned and type(gi) is np.ndarray', 'elif type(gi) is np.ndarray'),
    D('core', 'wrong dtype rule: a Python float beside an int array takes the int dtype', 'minigrad/core/dtypes.py',
      "kinds, default = ('iuf', int64) if isinstance(value, int) else ('f', float64)",
      "kinds, default = ('iuf', int64) if isinstance(value, int) else ('iuf', float64)"),
    D('core', "off by one: an integer dtype's range leaves out its largest value", 'minigrad/core/dtypes.py',
      'return range(int(info.min), int(info.max) + 1)', 'return range(int(info.min), int(info.max))'),
    D('core', 'off-by-one axis: axis == ndim is accepted (and means axis 0)', 'minigrad/core/primitive.py',
      'if not -ndim <= a < ndim:', 'if not -ndim <= a <= ndim:'),
    # ------------------------------------------------------------------ compiler
    D('compiler', 'skipped guard: x * 0 -> 0 for floats too (inf * 0 is nan)', 'minigrad/compiler/simplify.py',
      "if o.dtype.kind in 'biu':", "if o.dtype.kind in 'biuf':"),
    D('compiler', 'wrong dtype rule: x * 1 -> x even when the product has another dtype',
      'minigrad/compiler/simplify.py',
      'if prim.unit is not None and x.dtype == o.dtype and uniform(c, prim.unit, FOLD_LIMIT):',
      'if prim.unit is not None and uniform(c, prim.unit, FOLD_LIMIT):'),
    D('compiler', 'dropped params: CSE merges nodes that differ only in their params (sum over another axis)',
      'minigrad/compiler/cse.py', '(node.op, tuple(map(id, ins)), _key(node.params) if node.params else ())',
      '(node.op, tuple(map(id, ins)), ())'),
    D('compiler', 'buffer reused while alive: a view does not keep its base alive', 'minigrad/compiler/memory.py',
      'b.last = max(b.last, v.last)', 'b.last = max(b.last, v.first)'),
    D('compiler', 'buffer reused while alive: written in place over an input that is read later',
      'minigrad/compiler/memory.py', "dying = [i for i in st.ins if i.kind == 'temp' and i.last == s and",
      "dying = [i for i in st.ins if i.kind == 'temp' and i.last >= s and"),
    D('compiler', 'dropped params: copy_node ignores the params it is given', 'minigrad/compiler/rewrite.py',
      'params = node.params if params is None else params', 'params = node.params'),
    D('compiler', 'fma matched with its operands in the wrong order (c * a + b)', 'minigrad/compiler/ops.py',
      'return [*m.node.inputs, c]', 'return [c, *m.node.inputs]'),
    D('compiler', 'skipped guard: where(0 < x, x, c) becomes relu(x) for any c', 'minigrad/compiler/ops.py',
      'uniform(c.node.inputs[0], 0) and uniform(zero, 0) \\', 'uniform(c.node.inputs[0], 0) \\'),
    D('compiler', "relu on the numpy backend keeps fmax's -0.0 (where gives +0.0)", 'minigrad/compiler/ops.py',
      "return f\"{ctx.fn('fmax')}({x}, 0, out={out}); {ctx.fn('add')}({out}, 0, out={out})\"",
      "return f\"{ctx.fn('fmax')}({x}, 0, out={out})\""),
    # ------------------------------------------------------------------ transforms
    D('transforms', 'mul JVP: the tangents times the wrong operands', 'minigrad/transforms/forward.py',
      'P.mul.jvp = lambda p, t, out: _tsum(out, _scale(t[0], p[1]), _scale(t[1], p[0]))',
      'P.mul.jvp = lambda p, t, out: _tsum(out, _scale(t[0], p[0]), _scale(t[1], p[1]))'),
    D('transforms', 'cos JVP: sin without the minus sign', 'minigrad/transforms/forward.py',
      'P.cos.jvp = _derivative(lambda x, out: P.neg(P.sin(x)))', 'P.cos.jvp = _derivative(lambda x, out: P.sin(x))'),
    D('transforms', 'max JVP: the tangents at tied maxima summed, not averaged', 'minigrad/transforms/forward.py',
      'return P.div(P.sum_(P.mul(tx, mask), axis=axis, keepdims=keepdims), count)',
      'return P.sum_(P.mul(tx, mask), axis=axis, keepdims=keepdims)'),
    D('transforms', "off-by-one axis: vmap's reduction rule forgets the batch axis", 'minigrad/transforms/batching.py',
      'return prim(vals[0], axis=tuple(a + 1 for a in axes), **params)', 'return prim(vals[0], axis=tuple(axes), **params)'),
    D('transforms', "off-by-one axis: vmap's concatenate rule joins along the batch axis",
      'minigrad/transforms/batching.py', 'for v, d in zip(vals, dims)], axis=ax + 1)',
      'for v, d in zip(vals, dims)], axis=ax)'),
    D('transforms', "skipped guard: jit's scalar guards take -0.0 for 0.0 and miss nan", 'minigrad/transforms/guards.py',
      'return type(v), v.hex()', 'return type(v), v'),
    D('transforms', 'skipped guard: jit reuses its entry after a Module attribute was rebound',
      'minigrad/transforms/jit.py', 'return self.epoch == Rebinds.count and self.check()', 'return self.check()'),
    # ------------------------------------------------------------------ nn
    D('nn', "dropped params: a Module's parameters leave out its sub-modules'", 'minigrad/nn/modules.py',
      "            for n, sub in m.__dict__.get('_modules', {}).items():\n                walk(sub, f'{pre}{n}.')\n",
      ''),
    D('nn', 'SGD with momentum steps by the gradient, not the momentum buffer', 'minigrad/nn/optim.py',
      "return p - h['lr'] * buf, {'momentum_buffer': buf}", "return p - h['lr'] * g, {'momentum_buffer': buf}"),
    D('nn', "Adam without the first moment's bias correction", 'minigrad/nn/optim.py',
      "new_p = p - (h['lr'] / bc1) * (m / (v ** 0.5 / bc2 ** 0.5 + h['eps']))",
      "new_p = p - h['lr'] * (m / (v ** 0.5 / bc2 ** 0.5 + h['eps']))"),
    D('nn', "losses: reduction='mean' sums and 'sum' averages", 'minigrad/nn/modules.py',
      "return per_item.mean() if reduction == 'mean' else per_item.sum() if reduction == 'sum' else per_item",
      "return per_item.sum() if reduction == 'mean' else per_item.mean() if reduction == 'sum' else per_item"),
    D('nn', 'off-by-one axis: cross-entropy normalises over the batch axis', 'minigrad/nn/modules.py',
      'logp = F.log_softmax(logits, axis=-1)', 'logp = F.log_softmax(logits, axis=0)'),
    # ------------------------------------------------------------------ onnx
    D('onnx', 'export: reductions always keep their dims', 'minigrad/onnx/exporter.py',
      "keep = int(bool(node.params.get('keepdims')))", 'keep = 1'),
    D('onnx', 'export: Transpose with the permutation reversed', 'minigrad/onnx/exporter.py',
      "extra = {} if axes is None else {'perm': list(axes)}", "extra = {} if axes is None else {'perm': list(axes)[::-1]}"),
    D('onnx', "import: a reduction's keepdims defaults to 0 (ONNX says 1)", 'minigrad/onnx/importer.py',
      "return [prim(xs[0], axis=axes, keepdims=bool(a.get('keepdims', 1)))]",
      "return [prim(xs[0], axis=axes, keepdims=bool(a.get('keepdims', 0)))]"),
    D('onnx', "import: Gemm reads transA for B (nn.Linear's transB ignored)", 'minigrad/onnx/importer.py',
      "((xs[0], 'transA'), (xs[1], 'transB'))", "((xs[0], 'transA'), (xs[1], 'transA'))"),
    # ------------------------------------------------------------------ viz
    D('viz', 'draw: a leaf that requires grad is drawn as a constant (and a constant as a leaf)',
      'minigrad/viz/draw.py', "else 'leaf' if t.requires_grad else 'constant'",
      "else 'constant' if t.requires_grad else 'leaf'"),
    D('viz', 'draw: over max_nodes, the end of the graph (the outputs) is hidden, not its beginning',
      'minigrad/viz/draw.py', 'hidden = set(keys[:-max_nodes]) - hl', 'hidden = set(keys[max_nodes:]) - hl'),
    D('viz', 'Stepper: ops not run yet are not marked pending', 'minigrad/viz/frames.py',
      "g.attrib.update({'opacity': '0.3', 'class': 'node mg-pending'})", "g.attrib.update({'opacity': '0.3', 'class': 'node'})"),
    D('viz', "draw: the gradient row loses its 'grad' label", 'minigrad/viz/draw.py',
      'color="{BWD}">grad {esc(preview(grad))}</font>', 'color="{BWD}">{esc(preview(grad))}</font>'),
    # ------------------------------------------------------------------ course: exercise checks and hints
    D('course', 'a hint shown on "not done yet"', 'minigrad/course/checks.py',
      "'above with your code, then run this cell again', show_values=False)",
      "'above with your code, then run this cell again', show_values=False,\n"
      "                             hint=_ladder(self.key, None, self.hint))"),
    D('course', 'the stronger hint on the first failure (the ladder records before it looks)',
      'minigrad/course/checks.py', '    again = diagnosis in seen\n    seen.append(diagnosis)\n',
      '    seen.append(diagnosis)\n    again = diagnosis in seen\n'),
    D('course', "a check's close() accepts an answer of the wrong shape that broadcasts", 'minigrad/course/checks.py',
      'ok = g.shape == np.shape(expected) and bool(np.allclose(g, expected, rtol=rtol, atol=atol))',
      'ok = bool(np.allclose(g, expected, rtol=rtol, atol=atol))'),
    D('course', "a crash's mistake is found by exception class only, not by a fragment of its message",
      'minigrad/course/checks.py', 'if k == type(exc).__name__ or k in str(exc)), None)',
      'if k == type(exc).__name__), None)'),
    D('course', 'numerical_grad: central differences divided by eps, not 2 eps', 'minigrad/course/testing.py',
      'gflat[i] = (up - down) / (2 * eps)', 'gflat[i] = (up - down) / eps'),
    D('course', 'skipped guard: gradcheck fails only when every entry is off', 'minigrad/course/testing.py',
      'ok &= not bad.any()', 'ok &= not bad.all()'),
    # ------------------------------------------------------------------ the fast layer
    D('fast', "the fast layer's tape walk sorts producers first", 'minigrad/fast.py',
      'nodes.sort(key=T._SEQ, reverse=True)', 'nodes.sort(key=T._SEQ)'),
    D('fast', "buffer reused while alive: one fresh gradient array becomes two leaves' .grad", 'minigrad/fast.py',
      'and id(g) not in given and g.flags.writeable:', 'and g.flags.writeable:'),
]


# ------------------------------------------------------------------ applying a defect
def apply(defect, root: Path) -> None:
    """Edit root/defect.file; the old text must occur exactly once (else ValueError: the defect is stale)."""
    path = root / defect.file
    text = path.read_text(encoding='utf-8')
    n = text.count(defect.old)
    if n != 1:
        raise ValueError(f'{defect.file}: the old text occurs {n} times (expected once): {defect.old[:60]!r}')
    path.write_text(text.replace(defect.old, defect.new), encoding='utf-8')


def snapshot(dest: Path, ref: str | None, tests_from: str | None) -> None:
    """A copy of the checkout at dest: the working tree (without venvs, caches, .git), or git `ref`; with
    tests/, conftest.py and pyproject.toml taken from git `tests_from` when given."""
    if ref is None:
        shutil.copytree(ROOT, dest, ignore=IGNORE)
    else:
        dest.mkdir(parents=True)
        _git_extract(ref, dest, [])
    if tests_from is not None:
        shutil.rmtree(dest / 'tests')
        _git_extract(tests_from, dest, ['tests', 'conftest.py', 'pyproject.toml'])


def _git_extract(ref, dest, paths):
    archive = subprocess.run(['git', '-C', str(ROOT), 'archive', ref, *paths], capture_output=True, check=True)
    subprocess.run(['tar', '-x', '-C', str(dest)], input=archive.stdout, check=True)


# ------------------------------------------------------------------ running the slice
def failing_tests(python, work: Path, env: dict, timeout: float, extra: list) -> tuple[list, float, str]:
    """The node ids of the tests failing in the slice without a defect (the whole slice, not stopping early)."""
    t0 = time.monotonic()
    r = subprocess.run([python, '-m', 'pytest', 'tests', *[a for a in SLICE if a != '-x'], '-rfE', *extra], cwd=work,
                       env=env, capture_output=True, text=True, timeout=timeout * 3, stdin=subprocess.DEVNULL)
    ids = [ln.split(' ', 1)[1].split(' - ')[0] for ln in r.stdout.splitlines() if ln.startswith(('FAILED ', 'ERROR '))]
    summary = next((ln.strip('= ') for ln in reversed(r.stdout.splitlines()) if ' in ' in ln), '')
    if r.returncode not in (0, 1) or (r.returncode == 1 and not ids):
        sys.exit(f'the slice without a defect did not run (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-2000:]}')
    return ids, time.monotonic() - t0, summary


def run_slice(python, work: Path, env: dict, timeout: float, extra: list) -> tuple[str, float, str]:
    """(outcome, seconds, first failing test or the summary line)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([python, '-m', 'pytest', 'tests', *SLICE, *extra], cwd=work, env=env,
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 'timeout', time.monotonic() - t0, f'no result within {timeout:.0f} s'
    seconds = time.monotonic() - t0
    lines = r.stdout.splitlines()
    failed = next((ln.split(' ', 1)[1] for ln in lines if ln.startswith(('FAILED ', 'ERROR '))), '')
    summary = next((ln.strip('= ') for ln in reversed(lines) if re.search(r'\d+ (passed|failed|error)', ln)), '')
    last_err = (r.stderr.strip().splitlines() or [''])[-1]
    if r.returncode == 0:
        return 'missed', seconds, summary
    if r.returncode in (1, 2):            # tests failed, or collection/import stopped the run
        return 'caught', seconds, (failed or summary or last_err)[:160]
    return f'error {r.returncode}', seconds, (summary or last_err)[:160]


def environment(work: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ('MINIGRAD_BACKEND', 'HYPOTHESIS_PROFILE', 'PYTHONPATH')}
    env.update(PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE='1', MINIGRAD_CACHE_DIR=str(cache))
    return env


def selected(only) -> list[int]:
    if not only:
        return list(range(1, len(DEFECTS) + 1))
    picked = sorted({int(x) for item in only for x in str(item).split(',') if x.strip()})
    bad = [i for i in picked if not 1 <= i <= len(DEFECTS)]
    if bad:
        sys.exit(f'--only: no defect {bad} (there are {len(DEFECTS)}; see --list)')
    return picked


def table(rows) -> str:
    out = [f'{"#":>3}  {"area":<10} {"outcome":<8} {"time":>6}  defect / first failing test']
    for r in rows:
        out.append(f'{r["id"]:>3}  {r["area"]:<10} {r["outcome"]:<8} {r["seconds"]:>5.0f}s  {r["what"]}')
        if r['detail']:
            out.append(f'{"":>31}{r["detail"]}')
    caught = sum(r['outcome'] == 'caught' for r in rows)
    out.append(f'caught {caught} of {len(rows)}; missed: {[r["id"] for r in rows if r["outcome"] == "missed"]}; '
               f'other: {[(r["id"], r["outcome"]) for r in rows if r["outcome"] not in ("caught", "missed")]}')
    return '\n'.join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--only', action='append', metavar='N', help='run defect N only (repeat, or N,M,...)')
    ap.add_argument('--list', action='store_true', help='list the defects and exit')
    ap.add_argument('--check', action='store_true', help='check that every defect applies; run no tests')
    ap.add_argument('--no-baseline', action='store_true',
                    help='do not run the slice without a defect first (its failing tests are then not deselected)')
    ap.add_argument('--ref', help='take the library and the tests from this git ref, not the working tree')
    ap.add_argument('--tests-from', help='take tests/, conftest.py and pyproject.toml from this git ref')
    ap.add_argument('--timeout', type=float, default=900, help='seconds per defect (default 900)')
    ap.add_argument('--python', default=str(ROOT / '.venv-test' / 'bin' / 'python'), help="default: .venv-test's")
    ap.add_argument('--pytest-args', default='', help='more pytest arguments, e.g. "--deselect tests/x.py::t"')
    ap.add_argument('--json', help='also write the results to this file')
    ap.add_argument('--keep', action='store_true', help='keep the scratch directory')
    args = ap.parse_args(argv)
    ids = selected(args.only)
    if args.list:
        for i in ids:
            d = DEFECTS[i - 1]
            print(f'{i:>3}  {d.area:<10} {d.file:<34} {d.what}')
        return 0
    tmp = Path(tempfile.mkdtemp(prefix='minigrad-defects-'))
    try:
        return _run(args, ids, tmp)
    finally:
        if args.keep:
            print(f'scratch directory kept: {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(args, ids, tmp: Path) -> int:
    work, pristine, cache = tmp / 'checkout', tmp / 'minigrad', tmp / 'kernel-cache'
    snapshot(work, args.ref, args.tests_from)
    shutil.copytree(work / 'minigrad', pristine)
    stale = []
    for i in ids:
        probe = tmp / 'probe'
        shutil.copytree(pristine, probe / 'minigrad')
        try:
            apply(DEFECTS[i - 1], probe)
        except ValueError as e:
            stale.append(i)
            print(f'defect {i} is stale: {e}', file=sys.stderr)
        shutil.rmtree(probe)
    if args.check:
        print(f'{len(ids) - len(stale)} of {len(ids)} defects apply' + (f'; stale: {stale}' if stale else ''))
        return 1 if stale else 0
    user_cache = Path.home() / '.cache' / 'minigrad'
    if user_cache.is_dir() and not os.environ.get('MINIGRAD_CACHE_DIR'):
        shutil.copytree(user_cache, cache, symlinks=True)
    env = environment(work, cache)
    where = subprocess.run([args.python, '-c', 'import minigrad; print(minigrad.__file__)'], cwd=work, env=env,
                           capture_output=True, text=True)
    if not where.stdout.strip().startswith(str(work)):
        sys.exit(f'the copy is not what `import minigrad` finds: {where.stdout.strip() or where.stderr[-500:]}')
    extra = args.pytest_args.split() + ['--basetemp', str(tmp / 'pytest')]
    print(f'slice: pytest tests {" ".join(SLICE + extra)}  (in {work}, timeout {args.timeout:.0f} s a defect)',
          flush=True)
    failing = []
    if not args.no_baseline:
        failing, seconds, summary = failing_tests(args.python, work, env, args.timeout, extra)
        print(f'without a defect ({seconds:.0f} s): {summary}', flush=True)
        for node in failing:
            print(f'  failing without a defect, deselected below: {node}', flush=True)
            extra += ['--deselect', node]
    rows = []
    for i in ids:
        d = DEFECTS[i - 1]
        row = dict(id=i, area=d.area, what=d.what, file=d.file)
        if i in stale:
            row.update(outcome='stale', seconds=0.0, detail='the old text is not in the file (once)')
        else:
            shutil.rmtree(work / 'minigrad')
            shutil.copytree(pristine, work / 'minigrad')
            apply(d, work)
            outcome, seconds, detail = run_slice(args.python, work, env, args.timeout, extra)
            row.update(outcome=outcome, seconds=seconds, detail=detail)
        rows.append(row)
        print(f'{i:>3} {row["outcome"]:<8} {row["seconds"]:5.0f}s  {d.what}  [{row["detail"]}]', flush=True)
    shutil.rmtree(work / 'minigrad')
    shutil.copytree(pristine, work / 'minigrad')
    print()
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({'failing_without_a_defect': failing, 'defects': rows}, indent=1)
                                   + '\n', encoding='utf-8')
    return 0 if all(r['outcome'] == 'caught' for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
