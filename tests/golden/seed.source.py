def build(np, B, K, conv):
    ndarray = np.ndarray
    np_empty = np.empty
    np_multiply = np.multiply
    np_add = np.add
    np_copyto = np.copyto
    dt_float32 = np.dtype('float32')
    b0 = B[0]
    def run(v0, v1, v2, S, O):
        nonlocal b0
        if v0.__class__ is not ndarray or v0.dtype != dt_float32 or v0.shape != (3,): v0 = conv(0, v0)  # w
        if v1.__class__ is not ndarray or v1.dtype != dt_float32 or v1.shape != (3,): v1 = conv(1, v1)  # x
        if v2.__class__ is not ndarray or v2.dtype != dt_float32 or v2.shape != (3,): v2 = conv(2, v2)  # b
        if b0 is None: b0 = np_empty((3,), dt_float32)  # handed to the last caller
        o0 = b0 if O is None else O[0]  # add
        np_multiply(v0, v1, out=b0)  # add:mul = mul
        np_add(b0, v2, out=o0)  # add = add
        if O is not None:  # out=: the results not computed into O already
            return O[0]
        r_0 = o0; b0 = None  # hand the buffer to the caller
        return r_0
    return run
