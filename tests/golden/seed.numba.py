def build(np, B, K, conv):
    ndarray = np.ndarray
    np_empty = np.empty
    np_copyto = np.copyto
    dt_float32 = np.dtype('float32')
    b0 = B[0]
    def run(v0, v1, v2, S, O):
        nonlocal b0
        if v0.__class__ is not ndarray or v0.dtype != dt_float32 or v0.shape != (3,) or not v0.flags.c_contiguous: v0 = conv(0, v0)  # w
        if v1.__class__ is not ndarray or v1.dtype != dt_float32 or v1.shape != (3,) or not v1.flags.c_contiguous: v1 = conv(1, v1)  # x
        if v2.__class__ is not ndarray or v2.dtype != dt_float32 or v2.shape != (3,) or not v2.flags.c_contiguous: v2 = conv(2, v2)  # b
        if b0 is None: b0 = np_empty((3,), dt_float32)  # handed to the last caller
        o0 = b0 if O is None else O[0]  # add
        K[0](v0, v1, v2, o0)  # add = kernel
        if O is not None:  # out=: the results not computed into O already
            return O[0]
        r_0 = o0; b0 = None  # hand the buffer to the caller
        return r_0
    return run


# ---- kernel 0: k_b644b8a7755d1089c2e1.py (numba)
@njit(void(In('float32', 1), In('float32', 1), In('float32', 1), Out('float32', 1)), cache=True, error_model='numpy')
def kernel(a0, a1, a2, o0):
    n0, = o0.shape
    for i in range(n0):
        w = a0[i]
        x = a1[i]
        b = a2[i]
        add_mul = np.float32(w * x)  # add:mul = mul
        add = np.float32(add_mul + b)  # add
        o0[i] = add
