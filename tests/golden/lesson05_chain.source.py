def build(np, B, K, conv):
    ndarray = np.ndarray
    np_empty = np.empty
    np_multiply = np.multiply
    np_exp = np.exp
    np_add = np.add
    np_power = np.power
    np_copyto = np.copyto
    dt_float32 = np.dtype('float32')
    c1 = K[0]  # two
    c2 = K[1]  # mul
    c3 = K[2]  # const_1
    b0 = B[0]
    def run(v0, S, O):
        nonlocal b0
        if v0.__class__ is not ndarray or v0.dtype != dt_float32 or v0.shape != (4,): v0 = conv(0, v0)  # x
        if b0 is None: b0 = np_empty((4,), dt_float32)  # handed to the last caller
        o0 = b0 if O is None else O[0]  # pow
        np_multiply(v0, c2, out=b0)  # mul_1 = mul
        np_exp(b0, out=b0)  # exp = exp
        np_add(b0, b0, out=b0)  # add = add
        np_add(b0, c3, out=b0)  # add_1 = add
        np_power(b0, c1, out=o0)  # pow = pow
        if O is not None:  # out=: the results not computed into O already
            return O[0]
        r_0 = o0; b0 = None  # hand the buffer to the caller
        return r_0
    return run
