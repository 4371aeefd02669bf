"""The exercise hints, one table per task, kept here, not in the check cells, so that a hint is read
only when it is given. minigrad.checks picks the level: 'nudge' (a failure with no detected mistake), the
nudge named by the mistake a test detected, and 'more' (the same failure again, or ``hint(task)``).
No entry is solution code or the exact formula (tests/test_checks.py scans them against solutions/).
Lessons 05-08 number their tasks 1, 2, ...: their keys are '05-1' and so on.
"""

HINTS = {
    # -- 01 computational graphs
    '1.1': dict(nudge='z depends on a through two intermediate values: each path from a to z contributes the '
                      'product of the local derivatives along it',
                more='write the local derivative on every edge (of a product with respect to one factor: the '
                     'other factor), then add one product per path',
                only_u='you followed only the path through u (the sum a + b); a also reaches z through v',
                only_v='you followed only the path through v (the product a * b); a also reaches z through u'),
    '1.2': dict(nudge='a central difference looks the same distance to both sides of x and divides by the '
                      'distance between its two samples',
                more='sample f one step eps to the right of x and one step eps to the left: the two samples are '
                     '2 eps apart',
                one_sided='you sampled f only at x and to its right (one-sided, less accurate): a central '
                          'difference also looks to the left',
                twice='the two points are 2 eps apart: divide by that distance, not by eps',
                ignores_eps='use the eps you are given: with eps 0.1 the central difference of x**3 is not quite '
                            '3 x**2, and your answer does not move with eps'),
    '1.3': dict(nudge='a path from out either has reached wrt or continues through one of out\'s inputs: let '
                      'the function call itself for each input and combine the results',
                more='a path that has reached wrt is complete (factor one); a node with no entry leads nowhere '
                     '(zero); otherwise each edge contributes its local derivative times the recursive result',
                no_end='no path ever ends: when out == wrt the path is complete and counts with factor 1',
                merged='m has TWO edges to x (x is used twice): each edge is its own path; do not merge them'),
    '1.4': dict(nudge='one visit per node: hand each node\'s finished gradient on to its inputs, in an order in '
                      'which a node\'s gradient is complete before it is passed on',
                more='seed the output\'s own gradient with one, walk `order` as given (out first), and for every '
                     'edge add local times the node\'s gradient into the input\'s gradient',
                overwrite='w gets a contribution from a AND from b: accumulate them (+=), do not overwrite',
                no_seed='nothing flows: the output\'s own gradient, grad[out] must start at 1.0',
                order='visit the nodes in the order given (out first): walking it backwards passes gradients on '
                      'before they are complete, so nothing reaches w'),
    '1.5': dict(nudge='run fn on tensors that require grad inside a Tape, so that tape.entries lists every '
                      'intermediate result; read the gradients after backward()',
                more='backward() keeps .grad only on leaves unless a non-leaf asked to keep it: ask every '
                     'recorded output to keep its gradient before backward(), and give back floats in tape order',
                no_retain='call retain_grad() on every entry.output BEFORE the backward pass: backward() drops the '
                          'gradients of non-leaf values unless they were retained',
                pair='give back a pair: the list of the inputs\' gradients and the list of the intermediates\'',
                tape_order='the right values in the wrong order: list the intermediates in tape order'),
    # -- 02 dynamic tape
    '2.1': dict(nudge='each op returns a new Value that remembers its inputs, each paired with the local '
                      'derivative of the result with respect to that input',
                more='for a sum both local derivatives are one; for a product, the derivative with respect to '
                     'one factor is the value of the other factor',
                no_edges='pass the edges to Value: the result must record both of its inputs in its parents',
                swapped='d(a*b)/da is the value of b: each input\'s local derivative is the OTHER value'),
    '2.2': dict(nudge='keep your own stack (a list) instead of recursing, and put a node into the order only '
                      'after all of its parents are in it',
                more='push each node twice: once to expand it (its unvisited parents go on the stack after it) '
                     'and once, underneath them, to be appended when it comes off again',
                duplicate='remember the nodes you have visited (a set of their ids) and skip them',
                parents_after='append a node only after all of its parents: push it back on the stack, marked '
                              'as expanded, underneath its parents',
                recursion='recursion uses one Python stack frame per level: keep your own stack (a list)'),
    '2.3': dict(nudge='walk from the root back to the leaves, passing each node\'s gradient on to its parents; '
                      'a value used twice collects both contributions',
                more='seed the root\'s gradient with one; visit the nodes in reverse topological order and add '
                     'local times the node\'s gradient into each parent\'s gradient',
                overwrite='w is used twice, so its two contributions must add up, not overwrite each other',
                order='the gradient must reach a node before the node passes it on: walk the topological order '
                      'reversed (root first)'),
    '2.4': dict(nudge='tanh has one input, so the result has one parent edge; its local derivative can be '
                      'written with the output value itself',
                more='compute tanh once and reuse it: the derivative of tanh can be written with tanh\'s own '
                     'output alone (recall the identity between tanh and its derivative)',
                one_parent='tanh(v) must give back a Value with one parent edge: (v, local derivative)',
                x_squared='you wrote the derivative with the input x: it is written with tanh\'s own output, the '
                          'value you just computed'),
    '2.5': dict(nudge='a parameter update is not part of the model: make it where nothing is recorded, step '
                      'against the gradient, and clear the gradients for the next backward()',
                more='inside mg.no_grad move each parameter in place by lr times its gradient, downhill; '
                     'afterwards set every parameter\'s gradient to None',
                recorded='the update was recorded into the graph: do it inside a with-block of mg.no_grad',
                not_reset='the gradients were not cleared: set each p.grad to None after the update, or the next '
                          'backward() adds to the old one',
                uphill='step against the gradient (minus!): moving along it climbs the loss'),
    # -- 03 tensors and VJPs
    '3.1': dict(nudge='broadcasting stretched the input in two ways: it added leading axes and it stretched '
                      'axes of size 1; undo both by summing',
                more='first sum away the leading axes that shape does not have; then sum, keeping the axis, '
                     'over every axis where shape has a 1 and g does not',
                no_keepdims='axes of size 1 must stay in the result\'s shape: sum them with keepdims=True',
                leading='g has more axes than shape: sum away the extra leading axes first'),
    '3.2': dict(nudge='the impl computes log(1 + e^x) on numpy arrays without overflowing; the VJP builds, from '
                      'minigrad ops on g and x, one cotangent per input',
                more='numpy has a function for log(e^a + e^b) that never overflows; the derivative of softplus '
                     'is the logistic sigmoid; a VJP returns its cotangents in a tuple',
                overflow='np.log(1 + np.exp(x)) overflows for large x: np.logaddexp computes the same safely',
                not_tuple='a VJP returns one cotangent per input, in a tuple (here a one-element tuple)',
                derivative='e^x is the derivative of the inside only: the chain rule also divides by 1 + e^x (a '
                           'function minigrad has under another name)',
                numpy_vjp='your VJP computes with numpy: build it from minigrad ops on g and x, so that it can '
                          'be differentiated again (task 3.5 does)'),
    '3.3': dict(nudge='one cotangent per input, each in its own input\'s shape (the inputs were broadcast '
                      'together), and None for an input that needs no gradient',
                more='differentiate the square of x - y with respect to each input (they differ in sign), scale by '
                     'g, and reduce each to its input\'s shape with sum_to_like (in mg.ops)',
                shape='the gradients do not have the inputs\' shapes: reduce each with sum_to_like (in mg.ops)',
                sign='the derivative for y is the NEGATIVE of the one for x'),
    '3.4': dict(nudge='let the shapes decide: each gradient has its input\'s shape, and only one product of G '
                      'with a (transposed) input gives that shape',
                more='dA has shape (5, 3) and is a product of G (5, 2) with B or its transpose; dB has shape '
                     '(3, 2) and is a product of A or its transpose with G: choose what fits',
                shapes='the shapes do not fit a matrix product: transpose one factor so that the inner sizes '
                       'agree',
                dB_transposed='your dB has the shape of B\'s transpose: multiply in the other order'),
    '3.5': dict(nudge='differentiate twice: the first backward() must build a graph for the gradient itself, '
                      'which you then differentiate again',
                more='backward with create_graph=True makes x.grad a tensor with its own graph: keep it, clear '
                     'x.grad, and call backward() on the first derivative you kept',
                added_in='reset x.grad to None before the second backward(): otherwise the first derivative is '
                         'added in',
                no_graph='the first derivative has no graph to differentiate: pass create_graph=True to the '
                         'first backward()',
                softplus_vjp='right for x**3, sin and exp, wrong for softplus: your softplus VJP (task 3.2) '
                             'cannot be differentiated; build it from minigrad ops'),
    # -- 04 static graphs
    '4.1': dict(nudge='a static graph runs by walking its nodes in order and remembering every output\'s '
                      'value: sources take theirs from feeds or params, other nodes run their primitive',
                more='keep values by the id of each output Symbol; feeds is keyed by placeholder name; an op '
                     'runs its primitive\'s impl on its inputs\' values with its params as keyword arguments',
                no_params='a node\'s parameters matter (here axis=0): pass the node\'s params to impl as '
                          'keyword arguments',
                feeds_key='feeds is keyed by the placeholder\'s name (a string), not by its Symbol',
                not_list='interpret must give back one value per fetch, in a list (or tuple)'),
    '4.2': dict(nudge='a node is needed when a fetch is its output or a needed node reads one of its outputs: '
                      'mark backwards from the fetches',
                more='walk graph.nodes from last to first; when a node is marked, mark the producers of all of '
                     'its inputs; give back the marked nodes in graph order',
                transitive='follow inputs transitively: the producer of an input needs its own inputs too',
                order='the right nodes in the wrong order: keep graph order (as in graph.nodes)'),
    '4.3': dict(nudge='the loop must live in the graph, and its body receives Symbols: a Python `if` cannot '
                      'choose between them',
                more='mg.while_loop with a condition (the two values differ) and a body giving both new values; '
                     'choose each new value elementwise with mg.where',
                python_if='a Python `if` on Symbols cannot choose: select the new values with mg.where',
                no_loop='the graph has no while node: the loop itself must be in the graph (mg.while_loop)'),
    '4.4': dict(nudge='a branch in a static graph is a cond node, which runs only the chosen side; the slope '
                      'comes from the graph\'s own gradients',
                more='mg.cond takes a predicate on |x| and two functions without arguments, one per side of the '
                     'kink; then ask mg.gradients for dh/dx',
                no_cond='build the branch with mg.cond: it runs only the chosen side (mg.where computes both)'),
    '4.5': dict(nudge='going back, visit the iterations in reverse, each with the input it saw going forward; '
                      'the parameter a is read by every iteration',
                more='pop each saved input, recompute its tanh, add this iteration\'s share to the gradient of a, '
                     'and only then multiply the running gradient by this iteration\'s derivative along v',
                dv0='pop the saved inputs last first, and use each iteration\'s own input for its local '
                    'derivative',
                overwrite='a is read by EVERY iteration: add up the contributions, do not overwrite',
                order='an iteration\'s share of the gradient of a uses the running gradient BEFORE it is '
                      'multiplied by that iteration\'s own derivative'),
    # -- 05 graph compiler
    '05-1': dict(nudge='fold a node when all of its inputs are already constants in the new graph: compute its '
                       'value now and put a constant in its place',
                 more='look at the inputs you are given for the new graph (a node folded a moment ago is a '
                      'constant there); skip sources; run the primitive\'s impl on the constants\' values with the '
                      'node\'s params; give back a list holding the new constant',
                 any_const='fold only when ALL of a node\'s inputs are constants: a placeholder has no value yet',
                 no_inputs='fold only a node that has inputs: a placeholder has none, and no value yet',
                 chain='a chain of constants folds only if each node sees its folded inputs: test the new '
                       'inputs `ins`, not node.inputs',
                 not_list='the rewrite gives back a list with one new Symbol per output of the node (or None to '
                          'copy the node), not a bare Symbol'),
    '05-2': dict(nudge='two nodes compute the same thing when they run the same op with the same params on the '
                       'same (already merged) inputs: key them by that and reuse the first node\'s outputs',
                 more='make the key from the op name, the ids of the NEW inputs and the params in a hashable '
                      'sorted form; leave sources and assign nodes out of it',
                 old_inputs='the key must use the ids of the new inputs: two nodes only look alike once their '
                            'inputs were merged',
                 sources='two placeholders are two different inputs: never merge placeholder, variable, constant '
                         'or assign nodes',
                 params='sum(axis=0) and sum(axis=1) are different computations: the params belong in the key'),
    '05-3': dict(nudge='an add with a mul input can become one fma node, but only if nothing else needs the '
                       'mul\'s result',
                 more='count the uses of every symbol of the old graph (node inputs and graph outputs); at an add '
                      'look at BOTH inputs for a mul used once; the fma takes the mul\'s new inputs and the other',
                 multi_use='only fuse a mul whose result has exactly one use',
                 output_use='a graph output counts as a use too: count graph.outputs',
                 one_side='b + w*x is an fma too: the mul can be either input of the add'),
    '05-4': dict(nudge='a value is alive from the step that creates it to the last step that reads it; inputs '
                       'exist before the first step and outputs must survive the program',
                 more='graph inputs start at -1, other values at their producing step; move `last` on at every '
                      'read, a later read replacing an earlier one; outputs end at the number of steps',
                 inputs_first='graph inputs are there before the first step: their first step is -1',
                 outputs_last='a graph output must survive the whole program: it lives to len(schedule)',
                 outputs_none='the lesson\'s memory plan writes None for "alive at the end"; here the end is a '
                              'step number, len(schedule), so ranges compare as numbers',
                 first_read='a value read at two steps lives until the LATER one: update its last step at every '
                            'read'),
    '05-5': dict(nudge='a value can be written into the buffer of a value that dies at this very step; never '
                       'into a graph input\'s buffer (the caller owns it)',
                 more='at each step reuse the buffer of an input of this step (not a graph input) whose range '
                      'ends here, else a freed buffer, else a new one; then free the buffers of values that died',
                 no_reuse='y could be written into p\'s buffer: p (the value named mul) is last read by the step '
                          'that makes y',
                 caller='the caller owns the inputs\' buffers: never write into them, even when an input is dead',
                 overlap='two values that are alive at the same time must never share a buffer',
                 no_pool='after each step, give the buffers of values whose range ended there back to a free pool'),
    # -- 06 tracing
    '06-1': dict(nudge='a symbolic trace calls fn on placeholders instead of arrays, inside the graph you '
                       'return, so that fn\'s ops become the graph\'s nodes',
                 more='make a Graph; inside its as_default() block create one placeholder per example (its dtype '
                      'and shape) and call fn on them; give back the graph, the placeholders and the result',
                 other_graph='create the placeholders AND call fn inside the graph\'s as_default() block, or the '
                             'nodes go to another graph'),
    '06-2': dict(nudge='replay the tape into a graph: the example inputs become placeholders, and every entry '
                       'becomes the same primitive applied to Symbols',
                 more='map id(tensor) to its Symbol as you go (inputs to placeholders, entry outputs to new '
                      'nodes); an unseen tensor is a constant, a number stays; apply each entry\'s primitive with '
                      'its params',
                 constant_input='the input must become a placeholder, not a constant: look tensors up by their '
                                'id first',
                 ops='the graph should hold the tape\'s ops in tape order: one node per entry'),
    '06-3': dict(nudge='a concrete trace (symbolic=False) freezes the branch the example took: compare it with '
                       'the eager function on each probe',
                 more='trace once on the example with symbolic=False; compare the traced function with fn on a '
                      'tensor of each probe (np.allclose) and collect the indices that differ',
                 symbolic='a symbolic trace cannot take a Python branch on a value: trace with symbolic=False'),
    '06-4': dict(nudge='a Python `if` runs once, while tracing: the branch must be a graph node that chooses on '
                       'every call',
                 more='compute the norm with tensor ops, then let mg.cond pick between the scaled and the '
                      'unscaled x',
                 no_cond='the traced graph has no cond node: the branch must be mg.cond, not a Python `if`'),
    '06-5': dict(nudge='a cache keyed by what a trace depends on: trace only when the key is new',
                 more='key the cache by the shape and the dtype of every argument; count a trace only when you '
                      'add a cache entry',
                 dtype='the dtype is part of the signature: float64 needs its own trace',
                 retrace='trace only when the signature is new: calls with a shape and dtype seen before reuse '
                         'the cache'),
    '06-6': dict(nudge='a call retraces only when no cached entry\'s guards hold: guards check shapes and '
                       'dtypes, the values of Python scalars, and the outcomes of branches',
                 more='go call by call and ask: is there an earlier trace with this shape, this n and the same '
                      'branch outcome?',
                 call1='the first call always traces',
                 call2='call 2 has the same shape, the same n and the same branch outcome as call 1: a cache hit',
                 call3='call 3 makes the sum negative: the branch outcome is guarded, so it traces again',
                 call4='call 4 has a new shape (4,): a shape guard fails',
                 call5='call 5 has n == 3: the value of a Python scalar is guarded, so it traces again',
                 call6='call 6 fits the entry call 3 traced (shape (3,), n == 2, the same branch outcome)'),
    # -- 07 training
    '07-1': dict(nudge='build the loss from Tensor operations so that backward() can reach pred, and reduce it '
                       'to one number by summing',
                 more='only Tensor operators (no numpy, no .numpy()): square the differences elementwise and sum '
                      'over every element, without averaging',
                 mean='that is the mean: sum the squares, do not average',
                 numpy='numpy results have no graph: use Tensor operators',
                 not_scalar='sum over every element (no axis): the loss is one number'),
    '07-2': dict(nudge='a layer\'s weights are nn.Parameter attributes, so that parameters() finds them; '
                       'nn.Linear stores its weight as (out, in) and adds a bias',
                 more='initialise the weight uniformly within 1/sqrt(in_features) either side of 0, shape (out, '
                      'in), the bias as zeros; forward maps (batch, in) to (batch, out) and adds the bias',
                 shape='weight is (out, in) = (3, 4), like nn.Linear\'s',
                 not_param='both must be nn.Parameter attributes, so that parameters() finds them',
                 bounds='draw the weights uniformly within 1/sqrt(in_features) either side of 0',
                 no_bias='the bias got no gradient: forward must add self.bias, so that it takes part',
                 no_graph='compute forward with minigrad ops on the Parameters, so that backward() reaches them'),
    '07-3': dict(nudge='plain SGD moves each parameter against its gradient by lr times it, without recording '
                       'anything, and leaves parameters without a gradient alone',
                 more='work on the numpy arrays (the .data of the parameter and of its gradient), so that nothing '
                      'is recorded; skip parameters whose .grad is None',
                 no_skip='skip parameters whose .grad is None: they took no part in the loss',
                 uphill='step against the gradient (minus)'),
    '07-4': dict(nudge='Adam keeps per parameter a step count and running averages of the gradient and of its '
                       'square, corrects their start-up bias towards zero, and steps by their ratio',
                 more='count the step before using it (the first step is step 1); divide each running average '
                      'by one minus its beta to the power of the step, then step as in the lesson\'s Adam',
                 t_late='count the step first: with a step count of 0 the bias correction divides by zero',
                 no_correction='the first step is about 3x too long: m and v start at zero, so early on they are too '
                               'small; Adam divides each by a bias correction that depends on the step'),
    '07-5': dict(linear='a single linear layer draws a straight boundary: add a hidden layer with a nonlinearity',
                 nudge='two moons are not separable by a line: the model needs a hidden layer with a '
                       'nonlinearity, and enough training steps',
                 more='two hidden layers of 16 with tanh between them, nn.CrossEntropyLoss, and a few hundred '
                      'full-batch Adam steps are plenty'),
    # -- 08 performance
    '08-1': dict(nudge='the first call of a function can be slow (caches, compilation): make one untimed call, '
                       'then time several and take the median',
                 more='one warm-up call, then `repeat` calls each timed with time.perf_counter; give back their '
                      'median in seconds, as a float',
                 no_warmup='make one untimed call of fn first (the warm-up), then `repeat` timed calls',
                 ms='give the time in seconds, not milliseconds'),
    '08-2': dict(nudge='numpy\'s ufuncs can write into an existing array (their out= argument) instead of '
                       'allocating a new one',
                 more='multiply into out, then add b into out in place, and give out back to the caller',
                 not_out='fma_into must give back the `out` array itself, so the caller knows where the result is',
                 allocates='w * x allocates a new array even when you copy it into out: let each ufunc write '
                           'into out (out=)'),
    '08-3': dict(nudge='count array passes: every read or write of an n-element array moves n * itemsize bytes',
                 more='list the arrays each loop reads and writes: unfused runs two loops (the intermediate is '
                      'written, then read again), fused a single loop',
                 no_write='the fused pass still WRITES its result: count the write too',
                 itemsize='multiply by itemsize: a float64 takes 8 bytes'),
    '08-4': dict(nudge='time the three versions with your median_time, and make the speedup how many times '
                       'faster the fused version is than the unfused one',
                 more='unfused writes the product into p and then the sum into y; fused calls fma_into; the '
                      'speedup is the slower time divided by the faster',
                 inverted='the speedup is the unfused time divided by the fused one (the slower time divided by '
                          'the faster)'),
    '08-5': dict(nudge='compiling pays off once the time saved per step adds up to the compile time; if a step '
                       'saves nothing it never does',
                 more='the saving per step is eager minus compiled; when it is not positive the answer is '
                      'infinite; otherwise round the number of steps up to a whole number',
                 no_ceil='round UP to a whole number of steps (math.ceil)',
                 no_inf='when the compiled step saves nothing it never pays off: the answer is infinity (math.inf)'),
    '08-6': dict(nudge='compile the same chain once per backend, time each with median_time, and compare them '
                       'as numpy time over numba time',
                 more='one chain_program for \'numpy\' and one for \'numba\', both timed on the same x; divide the '
                      'numpy backend\'s median time by the numba backend\'s',
                 pred='predicted_speedup() must give back your prediction: a positive number',
                 tuple='give back a ratio of two times, not the times',
                 same_backend='compile one program per backend: \'numpy\' and \'numba\'',
                 inverted='divide the numpy backend\'s time by the numba backend\'s (the slower by the faster)'),
    # -- 09 higher order
    '9.1': dict(nudge='a JVP rule pushes a tangent forward: the output\'s tangent is the input\'s tangent times '
                      'the derivative of the op at x',
                more='differentiate x**3 by hand and scale the tangent dx by that derivative',
                no_dx='the output\'s tangent is the derivative times the tangent of x (dx)',
                power='check your derivative of x**3: the power rule lowers the exponent by one, not by two'),
    '9.2': dict(nudge='mg.jvp pushes v through f and gives back (value, tangent): the directional derivative is '
                      'the tangent',
                more='call mg.jvp with x as the primal and v as the tangent, take the tangent, and make it a float',
                value='mg.jvp returns (value, tangent): you want the second thing it returns'),
    '9.3': dict(nudge='J e_i is column i of the Jacobian and e_j^T J is row j: one jvp per input direction gives '
                      'the columns, one backward per output direction the rows',
                more='keep the tangent of mg.jvp along each unit vector of the inputs: those are the columns. For '
                     'each unit vector of the outputs, run f on a fresh leaf that requires grad and go backward with '
                     'that vector as the gradient: the leaf\'s .grad is a row',
                transposed='your Jacobian by columns is transposed: stack the tangents as columns (axis=1)',
                rows_transposed='your Jacobian by rows is transposed: stack the rows along axis 0',
                accumulated='your rows add up the rows before them (.grad accumulates): give each row a fresh leaf',
                freed='a backward frees the tape it went through: run f again on a fresh leaf for each row'),
    '9.4': dict(nudge='count passes: forward mode pushes one tangent per pass, reverse mode pulls one cotangent '
                      'per pass; which has to make more of them here?',
                more='by columns makes one pass per input, by rows one per output: pick the mode with fewer. To '
                     'count, give each of your two functions a wrapper of f that adds one to a counter',
                predict='think about what each mode pays for: reverse mode makes one pass per output, forward mode '
                        'one per input',
                count='count the calls of f each of your two functions makes: by rows makes one pass per output',
                not_restarted='the count by rows includes the passes by columns: start the counter again from 0',
                library='mg.jacfwd and mg.jacrev make one batched pass each: count the passes of your own two '
                        'functions',
                not_counted='a pass is a run of f: give your two functions a wrapper of f that adds one to a counter, '
                            'and report what it saw'),
    '9.5': dict(nudge='differentiate twice: the first backward must record the gradient\'s own computation, '
                      'and the second differentiates the gradient\'s dot product with v',
                more='a backward with create_graph=True leaves x.grad as a tensor with a graph: keep it, clear '
                     'x.grad, multiply the kept gradient by v, sum, and call backward on that',
                added_in='the gradient itself was added to your answer: clear x.grad before the second backward',
                gradient='that is the gradient, not H v: the second backward differentiates the dot product of '
                         'the gradient with v',
                no_graph='the first derivative has no graph to differentiate: the first backward needs '
                         'create_graph=True'),
    '9.6': dict(nudge='a per-example gradient is the gradient of one example\'s loss: make the gradient function '
                      'of one example, then map it over the batch',
                more='the gradient function of the loss (with respect to its first argument) gives w\'s gradient '
                     'for one example; vmap runs it on every row of X and Y at once when in_axes says w is shared '
                     '(None) and X, Y are batched along axis 0; then take the norm of each example\'s gradient',
                in_axes='vmap batched w along its axis 0 as well: w is shared by every example, so its entry in '
                        'in_axes is None',
                one_gradient='one number came back: that is the gradient of the whole batch\'s loss; map the '
                             'one-example gradient over the batch instead',
                squared='those are the squared norms: take the square root'),
    # -- 11 deployment
    '11.1': dict(nudge='export_onnx can write into any file-like object: an in-memory bytes buffer gives you '
                       'the model\'s bytes',
                 more='make an io.BytesIO, export y with x as its input into it, and give back the buffer\'s contents',
                 not_bytes='give back the bytes themselves (the buffer\'s getvalue()), not the buffer'),
    '11.2': dict(nudge='an ONNX model stores its constant tensors as initializers in model.graph',
                 more='each initializer of the model\'s graph has a .name: collect the names, sorted',
                 unsorted='the initializer names, sorted'),
    '11.3': dict(nudge='a lowering adds ONNX nodes through the builder b and gives back their outputs; ONNX has '
                       'an operator for tanh',
                 more='one call of b.op with the ONNX operator\'s name, the inputs xs and the node\'s output name',
                 wrong_op='the first ONNX op is not Tanh: lower tanh to ONNX\'s Tanh operator',
                 not_list='a lowering gives back the list of output names that b.op returns, not one name'),
    '11.4': dict(nudge='export traces the function once, so the Python loop is unrolled for the depth you '
                       'trace with: count the MatMul nodes of the exported model',
                 more='export a function of x that calls net with the given depth, on the example input; count '
                      'the nodes whose op_type is MatMul',
                 depth_ignored='your counts do not grow with depth: pass depth=depth to the net inside the '
                               'traced function'),
}
