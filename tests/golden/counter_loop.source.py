def build(np, B, K, conv):
    ndarray = np.ndarray
    np_array = np.array
    c0 = K[0]  # first
    c1 = K[1]  # second
    def run(S):
        v2, v3, v4, = K[2](c0, c1, **K[3])  # while = while
        r_0 = np_array(v2)
        r_1 = np_array(v3)
        return [r_0, r_1]
    return run
