"""Vectorisable tanh, exp and log for loop kernels (the numba backend only; numpy stays exact).

numba calls libm for ``math.tanh`` and friends: a scalar call per element, which stops LLVM
from vectorising the loop (so groups used to stop at every tanh). These are the forms XLA and
Eigen use instead: range reduction, a polynomial, and selects (``a if c else b``, never
min/max) for clamps and special values, all plain arithmetic that vectorises.

* exp: x = k ln2 + r (|r| <= ln2/2; k read from the low bits of x/ln2 + 1.5*2^52, Cody-Waite
  split of ln2), exp(r) by its Taylor series, times 2^k built from bits (in two halves for float64,
  so subnormal results round once).
* log: x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the bits; log(1+f) through s = f/(2+f) and
  the atanh series in s^2 (fdlibm's arrangement); float64 subnormals are scaled by 2^54 first.
* tanh, float64: |x| < 0.625 by x P(x^2) (Chebyshev fit, error < 1e-17), else 1 - 2/(exp(2|x|)+1);
  float32: Eigen's and XLA's odd rational x P(x^2)/Q(x^2) in float32 on x clamped to +-7.905.
* float32 exp and log compute in float64 with shorter polynomials, then round once: within 1 ulp of
  the correctly rounded value; float32 tanh and the float64 versions: a few ulps (scripts/ulp_error.py
  measures them all; tests/test_approx.py holds the bounds).

Each function below is pasted into the loop of the kernels that use it (``pasted``: so a kernel's
cache key covers its approximation), in single-assignment form with selects for its conditionals.
Cold compile of a kernel with 30 float32 tanhs (measured interleaved, on one loaded machine): 10.5-11.5 s
as ``@njit(inline='always')`` helpers (numba types every call site again, and its SSA pass is quadratic
in the basic blocks each ``a if c else b`` makes), 3.5-4.1 s pasted this way. Plain ``@njit`` helpers
compile fast, but LLVM does not inline them into a large kernel, which then runs scalar (7x slower).
``f64_bits`` and ``bits_f64`` are bit casts, ``select`` an LLVM select and ``fma`` LLVM's fused
multiply-add (numba intrinsics): the polynomials are chains of fma, one instruction per coefficient, without fast-math anywhere (which would break
nan, inf and -0.0; the kernel loops never contract a*b+c, which numpy rounds twice).
"""
from __future__ import annotations

import ast
import functools
import inspect

import numpy as np

try:
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def f64_bits(typingctx, x):
        """The bits of a float64 as an int64 (a bit cast, no conversion)."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(64))
        return types.int64(types.float64), codegen

    @intrinsic
    def bits_f64(typingctx, i):
        """The float64 whose bits are the int64 `i`."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())
        return types.float64(types.int64), codegen

    @intrinsic
    def fma(typingctx, a, b, c):
        """a * b + c rounded once (llvm.fma: one instruction on FMA hardware; it vectorises)."""
        if not (isinstance(a, types.Float) and a == b == c):
            return None

        def codegen(context, builder, signature, args):
            t = args[0].type
            fn = builder.module.declare_intrinsic('llvm.fma', [t], ir.FunctionType(t, [t, t, t]))
            return builder.call(fn, args)
        return a(a, b, c), codegen

    @intrinsic
    def select(typingctx, c, a, b):
        """``a if c else b`` as one LLVM select, both sides computed: no branch, so no basic block
        (numba's SSA pass is quadratic in blocks) and nothing that stops vectorisation."""
        if not (isinstance(c, types.Boolean) and a == b):
            return None

        def codegen(context, builder, signature, args):
            return builder.select(*args)
        return a(c, a, b), codegen
except ImportError:          # the numpy backend needs none of this
    f64_bits = bits_f64 = fma = select = None


def exp_f64(x):
    x = -746.0 if x < -746.0 else x          # selects, not min/max: nan passes both
    x = 710.0 if x > 710.0 else x
    t = x * 1.4426950408889634 + 6755399441055744.0     # 1.5*2^52: round(x/ln2) lands in the low bits
    kf = t - 6755399441055744.0
    k = f64_bits(t) - 0x4338000000000000
    r = (x - kf * 0.6931471803691238) - kf * 1.9082149292705877e-10    # ln2 = hi + lo, kf*hi exact
    p = fma(1.6059043836821613e-10, r, 2.08767569878681e-09)
    p = fma(p, r, 2.505210838544172e-08)
    p = fma(p, r, 2.755731922398589e-07)
    p = fma(p, r, 2.7557319223985893e-06)
    p = fma(p, r, 2.48015873015873e-05)
    p = fma(p, r, 0.0001984126984126984)
    p = fma(p, r, 0.001388888888888889)
    p = fma(p, r, 0.008333333333333333)
    p = fma(p, r, 0.041666666666666664)
    p = fma(p, r, 0.16666666666666666)
    p = fma(p, r, 0.5)
    p = fma(p, r, 1.0)
    p = fma(p, r, 1.0)
    h = k >> 1                                # 2^k as 2^h * 2^(k-h): each half is a normal number
    return p * bits_f64((h + 1023) << 52) * bits_f64((k - h + 1023) << 52)


def exp_f32(x):
    y = np.float64(x)
    y = -104.0 if y < -104.0 else y
    y = 89.0 if y > 89.0 else y
    t = y * 1.4426950408889634 + 6755399441055744.0
    kf = t - 6755399441055744.0
    r = y - kf * 0.6931471805599453
    p = fma(2.48015873015873e-05, r, 0.0001984126984126984)
    p = fma(p, r, 0.001388888888888889)
    p = fma(p, r, 0.008333333333333333)
    p = fma(p, r, 0.041666666666666664)
    p = fma(p, r, 0.16666666666666666)
    p = fma(p, r, 0.5)
    p = fma(p, r, 1.0)
    p = fma(p, r, 1.0)
    return np.float32(p * bits_f64((f64_bits(t) - 0x4338000000000000 + 1023) << 52))


def log_f64(x):
    tiny = x < 2.2250738585072014e-308
    y = x * 18014398509481984.0 if tiny else x        # 2^54: a subnormal becomes normal
    b = f64_bits(y)
    k = (b - 0x3fe6a09e667f3bcd) >> 52               # m = y / 2^k in [sqrt(1/2), sqrt(2))
    f = bits_f64(b - (k << 52)) - 1.0
    ef = bits_f64(k + 0x4338000000000000) - 6755399441055744.0      # float(k) without a conversion
    ef = ef - 54.0 if tiny else ef
    s = f / (2.0 + f)
    z = s * s
    R = fma(0.08695652173913043, z, 0.09523809523809523)
    R = fma(R, z, 0.10526315789473684)
    R = fma(R, z, 0.11764705882352941)
    R = fma(R, z, 0.13333333333333333)
    R = fma(R, z, 0.15384615384615385)
    R = fma(R, z, 0.18181818181818182)
    R = fma(R, z, 0.2222222222222222)
    R = fma(R, z, 0.2857142857142857)
    R = fma(R, z, 0.4)
    R = fma(R, z, 0.6666666666666666)
    R = R * z
    hfsq = 0.5 * f * f
    r = ef * 0.6931471803691238 - ((hfsq - (s * (hfsq + R) + ef * 1.9082149292705877e-10)) - f)
    r = -np.inf if x == 0.0 else r
    return r if x > 0.0 and x < np.inf else (x if x == np.inf or x != x else (-np.inf if x == 0.0 else np.nan))


def log_f32(x):
    y = np.float64(x)                                 # float32 subnormals are normal float64s
    b = f64_bits(y)
    k = (b - 0x3fe6a09e667f3bcd) >> 52
    f = bits_f64(b - (k << 52)) - 1.0
    ef = bits_f64(k + 0x4338000000000000) - 6755399441055744.0
    s = f / (2.0 + f)
    z = s * s
    R = fma(0.15384615384615385, z, 0.18181818181818182)
    R = fma(R, z, 0.2222222222222222)
    R = fma(R, z, 0.2857142857142857)
    R = fma(R, z, 0.4)
    R = fma(R, z, 0.6666666666666666)
    r = ef * 0.6931471805599453 + (f - s * (f - R * z))
    r = r if y > 0.0 and y < np.inf else (y if y == np.inf or y != y else (-np.inf if y == 0.0 else np.nan))
    return np.float32(r)


def tanh_f64(x):
    a = -x if x < 0.0 else x
    u = x * x
    p = fma(-1.6001499513001042e-05, u, 7.698563199045423e-05)
    p = fma(p, u, -0.00022841018529512851)
    p = fma(p, u, 0.0005862314316050611)
    p = fma(p, u, -0.0014549293858543903)
    p = fma(p, u, 0.003591982521583925)
    p = fma(p, u, -0.008863220021256096)
    p = fma(p, u, 0.021869487483410596)
    p = fma(p, u, -0.053968253925945696)
    p = fma(p, u, 0.13333333333245254)
    p = fma(p, u, -0.33333333333332615)
    p = fma(p, u, 1.0)
    t = 1.0 - 2.0 / (exp_f64(a + a) + 1.0)           # inf -> 1; nan stays nan
    t = -t if x < 0.0 else t
    return x * p if a < 0.625 else t                  # x * p keeps -0.0


def tanh_f32(x):
    c = np.float32(7.90531110763549805)               # tanh rounds to +-1 beyond (Eigen's rational)
    xc = c if x > c else x
    xc = -c if xc < -c else xc
    u = xc * xc
    p = fma(np.float32(-2.76076847742355e-16), u, np.float32(2.00018790482477e-13))
    p = fma(p, u, np.float32(-8.60467152213735e-11))
    p = fma(p, u, np.float32(5.12229709037114e-08))
    p = fma(p, u, np.float32(1.48572235717979e-05))
    p = fma(p, u, np.float32(6.37261928875436e-04))
    p = fma(p, u, np.float32(4.89352455891786e-03))
    q = fma(np.float32(1.19825839466702e-06), u, np.float32(1.18534705686654e-04))
    q = fma(q, u, np.float32(2.26843463243900e-03))
    q = fma(q, u, np.float32(4.89352518554385e-03))
    a = -x if x < 0 else x
    r = x if a < np.float32(0.0004) else xc * p / q     # x itself near 0: keeps -0.0 and subnormals
    s = np.float32(1.0) if x > 0 else (np.float32(-1.0) if x < 0 else x)     # sign(x), nan stays nan: no 2nd division
    return r if a < np.float32(9.0) else s               # +-1 exactly where tanh rounds to it (and at +-inf)


# name -> (what it is, the helpers it calls); the measured errors are in scripts/ulp_error.py's output
APPROX = {
    'exp_f64': ('exp: Cody-Waite reduction + degree-13 Taylor, float64', ()),
    'exp_f32': ('exp: reduction + degree-8 Taylor in float64, rounded once to float32', ()),
    'log_f64': ('log: exponent from bits + atanh series (fdlibm arrangement), float64', ()),
    'log_f32': ('log: exponent from bits + atanh series in float64, rounded once to float32', ()),
    'tanh_f64': ('tanh: x P(x^2) below 0.625, else 1 - 2/(exp(2|x|)+1), float64', ('exp_f64',)),
    'tanh_f32': ('tanh: odd rational x P(x^2)/Q(x^2) in float32 on x clamped to +-7.905 (Eigen, XLA)', ()),
}


def pasted(fn: str, arg: str, prefix: str) -> tuple[list, str]:
    """The statements of approximation `fn` applied to the expression `arg`, and the variable holding
    the result: what a loop kernel runs in place of a call. Every assignment gets a new name
    (``<prefix>_<name><k>``: numba's SSA pass is slow on reassigned names), ``a if c else b`` becomes
    ``select(c, a, b)`` and ``and``/``or`` become ``&``/``|`` (branches would split the loop into basic
    blocks); an approximation it calls is pasted before the line that calls it.

    >>> pasted('exp_f32', 'x0', 't3')[1]
    't3_out'
    """
    # speed: pasted single-assignment lines with selects, not a call of a helper function (cold compile)
    lines, out = _template(fn)
    fill = [(_PREFIX, prefix), (_ARG, arg)]
    return [_fill(line, fill) for line in lines], _fill(out, fill)


_PREFIX, _ARG = '\x00p', '\x00a'     # stand-ins in a template, filled in per kernel


def _fill(text, pairs):
    for old, new in pairs:
        text = text.replace(old, new)
    return text


@functools.lru_cache(maxsize=None)
def _template(fn: str) -> tuple[tuple, str]:
    """pasted(fn, _ARG, _PREFIX), built once per approximation: reading and rewriting its source took 4 ms a
    kernel (16 s for the 4,000 kernels of an 8,000-op chain)."""
    # speed: built once per approximation (lru_cache) and filled in per kernel, not rewritten per kernel
    prefix, arg = _PREFIX, _ARG
    tree = ast.parse(inspect.getsource(globals()[fn])).body[0]
    version, lines, n = {tree.args.args[0].arg: 0}, [f'{prefix}_{tree.args.args[0].arg}0 = {arg}'], [0]

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.Name(f'{prefix}_{node.id}{version[node.id]}', node.ctx) if node.id in version else node

        def visit_IfExp(self, node):
            self.generic_visit(node)
            return ast.Call(ast.Name('select', ast.Load()), [node.test, node.body, node.orelse], [])

        def visit_BoolOp(self, node):
            self.generic_visit(node)
            op, out = ast.BitAnd() if isinstance(node.op, ast.And) else ast.BitOr(), node.values[0]
            for v in node.values[1:]:
                out = ast.BinOp(out, op, v)
            return out

        def visit_Call(self, node):
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id in APPROX:     # tanh_f64 calls exp_f64
                n[0] += 1
                inner, out = pasted(node.func.id, ast.unparse(node.args[0]), f'{prefix}_{n[0]}')
                lines.extend(inner)
                return ast.Name(out, ast.Load())
            return node
    for st in tree.body:
        value = ast.unparse(Rename().visit(st.value))
        if isinstance(st, ast.Return):
            lines.append(f'{prefix}_out = {value}')
        else:
            name = st.targets[0].id
            version[name] = version.get(name, -1) + 1
            lines.append(f'{prefix}_{name}{version[name]} = {value}')
    return tuple(lines), f'{prefix}_out'


def call(name: str, dtype, arg: str, ctx) -> str:
    """A kernel rule's expression: the approximation of `name` for `dtype` applied to `arg`, its
    statements pasted into the loop (``ctx.lines``; recorded in ``ctx.approx``). Not float32: float64."""
    # speed: a vectorisable approximation in the loop, not numba's call of libm (which keeps the loop scalar)
    fn = f'{name}_f32' if np.dtype(dtype) == np.float32 else f'{name}_f64'
    ctx.approx.add(fn)
    lines, out = pasted(fn, arg, ctx.fresh())
    ctx.lines += [f'# {fn}({arg}): approximation pasted from minigrad/compiler/approx.py'] + lines
    return out
