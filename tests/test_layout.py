"""The package's shape, read from its source with `ast`: core/ closed under imports and layered, the package's
units layered bottom-up, no import inside a function, no long function, the budgets in code lines, the
tape's reading path, and no speed shortcut inside core/.

Run `python -m pytest tests/test_layout.py -s` to see the tables: each core/ module's code lines, tokens per
line and long lines; each folder's size; the layers; the hops of the tape's reading path.
"""
import ast
import io
import json
import os
import pathlib
import re
import importlib
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / 'minigrad'
CORE = PKG / 'core'
FILES = sorted(PKG.rglob('*.py'))

# core/'s files bottom-up: a file imports only files of the layers below its own.
CORE_LAYERS = [['errors'], ['validate', 'names'], ['primitive'], ['dtypes'], ['ops'], ['functional', 'autodiff'],
               ['conversions', 'inplace'], ['tensor'], ['graph'], ['creation'], ['interpreter'], ['control'],
               ['__init__']]
CORE_RANK = {m: i for i, layer in enumerate(CORE_LAYERS) for m in layer}
TEACHING = ['primitive', 'errors', 'ops', 'functional', 'autodiff', 'tensor', 'graph', 'interpreter', 'control']
HELPERS = ['dtypes', 'validate', 'names', 'conversions', 'inplace', 'creation']

# The package's units bottom-up: a top-level module, a sub-package (its files import each other freely), or
# one file of course/ (minigrad/__init__ imports course/testing.py and course/bench.py imports minigrad).
# A unit imports only units of the layers below its own. Display goes the other way: viz fills
# core.primitive's hooks.display. List only existing files: a layer named for a missing file fails.
LAYERS = [['core'], ['fast'], ['compiler'], ['pytree'], ['session'], ['transforms'], ['nn'], ['onnx'], ['viz'],
          ['course', 'course.hints'], ['course.testing', 'course.checks'], ['__init__'],
          ['course.bench', 'course.check_notebook'], ['checks', 'bench', 'check_notebook']]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}

# Imports allowed inside a function: optional dependencies, loaded only when the feature is used.
LAZY_OK = {
    'onnx/exporter.py': {'onnx'},                                # load_onnx: export_onnx / import_onnx only
    'nn/modules.py': {'ipywidgets', 'IPython.display'},          # fit()'s progress bar in a notebook
    'viz/__init__.py': {f'minigrad.viz.{m}' for m in ('frames', 'stepper', 'pass_stepper', 'path_stepper',
                                                      'loop_stepper', 'trace_stepper', 'memory')},  # ipywidgets: not at import
    'viz/draw.py': {'graphviz', 'pygraphviz'},                   # whichever renderer this machine has
    'viz/memory.py': {'matplotlib', 'matplotlib.pyplot'},        # memory_timeline only
    'viz/vizjs.py': {'js', 'pyodide.code', 'pyodide.ffi'},       # in the browser (JupyterLite) only
}

TEACHING_BUDGET = 2200      # code lines of core/'s nine teaching modules together, in plain mode
HELPERS_BUDGET = 320        # code lines of core/'s helpers together
DENSITY_LIMIT = 12.5        # tokens per code line in each core/ module (tinygrad's sz.py measure)
LONG_LINE = 100             # characters: a code line longer than this is a long line
LONG_SHARE = 0.04           # at most this share of core/'s code lines is long
TAPE_PATH_BUDGET = 1000     # code lines of the core/ functions that run from `a*b` to `.backward()`, plain mode
FUNCTION_LIMIT = 60         # lines of any function, its docstring included
# Code lines of every other folder ('top level': the modules directly in minigrad/ together): today's sizes,
# re-set by hand when a folder's size changes on purpose.
FOLDER_CEILINGS = {'compiler': 1939, 'transforms': 1874, 'nn': 494, 'onnx': 754, 'viz': 1101, 'course': 783,
                   'top level': 418}


def rel(p):
    return p.relative_to(PKG).as_posix()


def module_file(name):
    """The file of module `name` ('minigrad.core.ops' -> minigrad/core/ops.py), None outside minigrad or if absent."""
    parts = name.split('.')
    if parts[0] != 'minigrad':
        return None
    path = PKG.joinpath(*parts[1:])
    if len(parts) > 1 and path.with_suffix('.py').is_file():
        return path.with_suffix('.py')
    return path / '__init__.py' if (path / '__init__.py').is_file() else None


def imports(p):
    """(line, absolute module name, inside a function?) for every import in file p: relative imports resolved,
    and `from package import name` read as the submodule when `name` is one (as Python imports it)."""
    return list(dict.fromkeys(_imports(p)))


def _imports(p):
    tree = ast.parse(p.read_text())
    pkg = ['minigrad', *p.relative_to(PKG).parent.parts]
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                yield n.lineno, a.name, id(n) in inner
        elif isinstance(n, ast.ImportFrom):
            base = '.'.join((pkg[:len(pkg) - n.level + 1] if n.level else []) + ([n.module] if n.module else []))
            for a in n.names:
                sub = f'{base}.{a.name}'
                yield n.lineno, sub if module_file(sub) else base, id(n) in inner


def unit_of(p):
    """The layer unit of file p: 'session', '__init__', 'compiler' (any file of it), 'course.checks'."""
    parts = p.relative_to(PKG).with_suffix('').parts
    if parts[0] == 'course' and len(parts) > 1:
        return 'course' if parts[1] == '__init__' else f'course.{parts[1]}'
    return parts[0]


def minigrad_imports(p):
    """(line, module, file) for each import of a minigrad module in p; file is None if no such module exists."""
    return [(line, mod, module_file(mod)) for line, mod, _ in imports(p) if mod.split('.')[0] == 'minigrad']


# --- core/ is closed under imports and layered ---

def test_core_is_closed_under_imports():
    """A core/ file imports minigrad.core's files, the standard library and numpy: nothing else."""
    bad = []
    for p in CORE.glob('*.py'):
        for line, mod, _ in imports(p):
            top = mod.split('.')[0]
            if top == 'minigrad' and not (module_file(mod) and module_file(mod).parent == CORE):
                bad.append(f'core/{p.name}:{line} imports {mod}, outside core/')
            elif top not in ('minigrad', 'numpy') and top not in sys.stdlib_module_names:
                bad.append(f'core/{p.name}:{line} imports {mod}, third-party')
    assert not bad, 'core/ must be closed under imports:\n' + '\n'.join(bad)


def core_graph():
    """core/'s file-level import graph: 'tensor' -> {'ops', ...}."""
    return {p.stem: {f.stem for _, _, f in minigrad_imports(p) if f and f.parent == CORE} for p in CORE.glob('*.py')}


def find_cycle(graph):
    """A cycle of `graph` (node -> successors) as [a, b, ..., a], or None when the graph is acyclic."""
    state = {}                                          # 1: on the current path, 2: done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path)):
                return cycle
        state[node] = 2
        path.pop()
        return None
    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


@pytest.mark.parametrize('graph, cycle', [({'a': {'b'}, 'b': {'c'}, 'c': set()}, None),
                                          ({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}, ['a', 'b', 'c', 'a']),
                                          ({'a': {'b', 'c'}, 'b': {'c'}, 'c': {'c'}}, ['c', 'c'])])
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_core_has_no_import_cycles():
    graph = core_graph()
    assert len(graph) == len(CORE_RANK) and graph['tensor'] >= {'ops', 'autodiff'}     # the reader sees core's imports
    cycle = find_cycle(graph)
    assert cycle is None, 'import cycle in core/: ' + ' -> '.join(cycle)


def test_core_files_import_only_lower_layers():
    graph = core_graph()
    print('\ncore/ bottom-up: ' + ' < '.join(', '.join(layer) for layer in CORE_LAYERS))
    assert set(graph) == set(CORE_RANK), f'core/ files without a layer: {sorted(set(graph) - set(CORE_RANK))}; ' \
                                         f'layers without a file: {sorted(set(CORE_RANK) - set(graph))}'
    bad = [f'core/{me}.py (layer {CORE_RANK[me]}) imports {dep} (layer {CORE_RANK[dep]})'
           for me, deps in sorted(graph.items()) for dep in sorted(deps) if CORE_RANK[dep] >= CORE_RANK[me]]
    assert not bad, 'upward imports in core/:\n' + '\n'.join(bad)


def test_core_files_are_teaching_modules_or_helpers():
    assert sorted(p.stem for p in CORE.glob('*.py')) == sorted(TEACHING + HELPERS + ['__init__'])


# --- the package's layers ---

def units():
    return {unit_of(p) for p in FILES}


def test_every_module_has_a_layer():
    missing, absent = sorted(units() - set(RANK)), sorted(set(RANK) - units())
    assert not missing, f'units without a layer (add them to LAYERS): {missing}'
    assert not absent, f'LAYERS names units that do not exist: {absent}'


def upward(edges, rank):
    """The imports among `edges` ((where, importer unit, imported unit)) that do not go down a layer."""
    bad = []
    for where, me, dep in edges:
        if me != dep and (me not in rank or dep not in rank):
            bad.append(f'{where}: {me} imports {dep}, and {dep if dep not in rank else me} has no layer')
        elif me != dep and rank[dep] >= rank[me]:
            bad.append(f'{where}: {me} (layer {rank[me]}) imports {dep} (layer {rank[dep]})')
    return list(dict.fromkeys(bad))


def test_upward_finds_an_upward_import():
    rank = {'core': 0, 'compiler': 1, 'course.checks': 2, 'course.testing': 2}
    edges = [('a', 'compiler', 'core'), ('b', 'core', 'core'), ('c', 'core', 'compiler'),
             ('d', 'course.checks', 'course.testing'), ('e', 'compiler', 'pytree')]
    assert [b[0] for b in upward(edges, rank)] == ['c', 'd', 'e']
    assert ('minigrad.course.checks' in [m for _, m, _ in imports(PKG / 'checks.py')]   # from .course import checks
            and 'minigrad.core.ops' in [m for _, m, _ in imports(CORE / 'tensor.py')])


def test_no_upward_imports():
    edges, unknown = [], []
    for p in FILES:
        for line, mod, f in minigrad_imports(p):
            if f is None:
                unknown.append(f'{rel(p)}:{line} imports {mod}, which does not exist')
            else:
                edges.append((f'{rel(p)}:{line}', unit_of(p), unit_of(f)))
    print('\npackage bottom-up:\n' + '\n'.join(f'layer {i}: {", ".join(layer)}' for i, layer in enumerate(LAYERS)))
    bad = unknown + upward(edges, RANK)
    assert not bad, 'upward imports:\n' + '\n'.join(bad)


def test_no_imports_inside_functions():
    bad = [f'{rel(p)}:{line} imports {mod} inside a function' for p in FILES for line, mod, inner in imports(p)
           if inner and mod not in LAZY_OK.get(rel(p), ())]
    assert not bad, '\n'.join(bad)


def test_no_function_over_60_lines():
    long = []
    for p in FILES:
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > FUNCTION_LIMIT:
                long.append(f'{rel(p)}:{n.lineno} {n.name}: {n.end_lineno - n.lineno + 1} lines')
    assert not long, '\n'.join(long)


# --- sizes ---

def docstring_lines(src) -> set:
    docs = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body \
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant) \
                and isinstance(n.body[0].value.value, str):
            docs.update(range(n.body[0].lineno, n.body[0].end_lineno + 1))
    return docs


def code_line_numbers(src) -> set:
    """The numbers of the lines holding code: blank, comment and docstring lines left out."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines = {i for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type not in skip
             for i in range(t.start[0], t.end[0] + 1)}
    return lines - docstring_lines(src)


def code_lines(p) -> int:
    """Lines holding code: blank, comment and docstring lines are not counted."""
    return len(code_line_numbers(p.read_text()))


def long_lines(p) -> int:
    """Code lines longer than LONG_LINE characters."""
    src = p.read_text()
    text = src.splitlines()
    return sum(len(text[i - 1]) > LONG_LINE for i in code_line_numbers(src))


def tokens_per_line(p) -> float:
    """tinygrad's sz.py density over code lines: OP, NAME, NUMBER and STRING tokens outside docstrings,
    per line those tokens span (a docstring would count as one sparse line and hide dense code)."""
    src = p.read_text()
    docs, count, lines = docstring_lines(src), 0, set()
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type in (tokenize.OP, tokenize.NAME, tokenize.NUMBER, tokenize.STRING) and t.start[0] not in docs:
            count += 1
            lines.update(range(t.start[0], t.end[0] + 1))
    return count / max(1, len(lines))


@pytest.mark.parametrize('source, expected', [('x = 1\n\n# note\n', 1), ('def f():\n    """Doc\n    more."""\n    return 1\n', 2)])
def test_code_lines_skips_blanks_comments_and_docstrings(tmp_path, source, expected):
    p = tmp_path / 'm.py'
    p.write_text(source)
    assert code_lines(p) == expected


def test_density_does_not_count_docstrings(tmp_path):
    p = tmp_path / 'm.py'
    p.write_text('def f(a, b):\n    """Many\n    words."""\n    return a + b\n')
    assert tokens_per_line(p) == 12 / 2         # def f ( a , b ) :  and  return a + b


def test_long_lines_counts_code_lines_only(tmp_path):
    p = tmp_path / 'm.py'
    p.write_text(f'# {"c" * LONG_LINE}\nx = {"1" * LONG_LINE}\ny = 1\n')
    assert long_lines(p) == 1


def core_sizes(names):
    return {m: code_lines(CORE / f'{m}.py') for m in names}


def test_teaching_core_within_budget():
    print(f'\n{"lines":>5} {"tok/line":>8} {"long":>4}  core/ module')
    for m in TEACHING + HELPERS + ['__init__']:
        p = CORE / f'{m}.py'
        print(f'{code_lines(p):5d} {tokens_per_line(p):8.1f} {long_lines(p):4d}  {m}{" (helper)" if m in HELPERS else ""}')
    n = sum(core_sizes(TEACHING).values())
    print(f'{n:5d}  teaching modules (budget {TEACHING_BUDGET})')
    assert n <= TEACHING_BUDGET, f"core/'s teaching modules: {n} code lines > {TEACHING_BUDGET}"


def test_core_helpers_within_budget():
    n = sum(core_sizes(HELPERS).values())
    print(f'\n{n:5d}  core/ helpers (budget {HELPERS_BUDGET})')
    assert n <= HELPERS_BUDGET, f"core/'s helpers: {n} code lines > {HELPERS_BUDGET}"


def test_core_is_not_dense():
    dense = {p.stem: round(tokens_per_line(p), 2) for p in sorted(CORE.glob('*.py')) if tokens_per_line(p) > DENSITY_LIMIT}
    assert not dense, f'over {DENSITY_LIMIT} tokens per line: {dense}'


def test_core_has_few_long_lines():
    files = sorted(CORE.glob('*.py'))
    long, total = sum(long_lines(p) for p in files), sum(code_lines(p) for p in files)
    print(f"\n{long} of core/'s {total} code lines are over {LONG_LINE} characters: {long / total:.1%} "
          f'(at most {LONG_SHARE:.0%})')
    assert long <= LONG_SHARE * total, f'{long} long lines > {LONG_SHARE:.0%} of {total} (the table gives them per module)'


def folder_of(p):
    parts = p.relative_to(PKG).parts
    return parts[0] if len(parts) > 1 else 'top level'


def test_folder_sizes_within_ceilings():
    sizes = {}
    for p in FILES:
        sizes[folder_of(p)] = sizes.get(folder_of(p), 0) + code_lines(p)
    print(f'\n{"lines":>5} {"ceiling":>7}  folder')
    print('\n'.join(f'{n:5d} {FOLDER_CEILINGS.get(f, "-"):>7}  {f}' for f, n in sorted(sizes.items(), key=lambda kv: kv[1])))
    over = [f'{f}: {n} code lines > {FOLDER_CEILINGS.get(f)}' for f, n in sizes.items()
            if f != 'core' and not n <= FOLDER_CEILINGS.get(f, -1)]
    assert not over, over


# --- the tape's reading path ---

TAPE_SCRIPT = '''
import json, os, sys
import minigrad as mg
a = mg.tensor([1., 2.], requires_grad=True)
b = mg.tensor([3., 4.], requires_grad=True)
core = os.path.join(os.path.dirname(mg.__file__), 'core') + os.sep
seen = {}
def profile(frame, event, arg):
    code = frame.f_code
    if event == 'call' and code.co_filename.startswith(core):
        seen.setdefault((code.co_filename, code.co_firstlineno, code.co_name), code.co_qualname)
sys.setprofile(profile)
(a * b).sum().backward()
sys.setprofile(None)
print(json.dumps({'package': mg.__file__, 'calls': [[*key, q] for key, q in seen.items()]}))
'''


def own_lines(src, first, name):
    """The code lines of the function whose code object starts at line `first` (its def, or its first decorator)
    and is called `name`, less those of the functions and classes defined inside it (a lambda inside a function
    is counted with it)."""
    tree, code = ast.parse(src), code_line_numbers(src)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for n in ast.walk(tree):
        start = min([n.lineno] + [d.lineno for d in getattr(n, 'decorator_list', [])]) if hasattr(n, 'lineno') else 0
        if start == first and (isinstance(n, ast.Lambda) and name == '<lambda>' or isinstance(n, defs) and n.name == name):
            inner = {i for m in ast.walk(n) if m is not n and isinstance(m, defs + (ast.ClassDef,))
                     for i in range(min([m.lineno] + [d.lineno for d in m.decorator_list]), m.end_lineno + 1)}
            return len({i for i in code if start <= i <= n.end_lineno} - inner)
    raise LookupError(f'no function {name} at line {first}')


def tape_path():
    """[(hop, code lines)] of each core/ function `(a * b).sum().backward()` runs, in first-call order."""
    env = {**os.environ, 'MINIGRAD_PLAIN': '1', 'PYTHONPATH': str(ROOT)}
    run = subprocess.run([sys.executable, '-c', TAPE_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert pathlib.Path(out['package']).resolve() == PKG / '__init__.py'        # this checkout's minigrad
    hops = []
    for file, first, name, qualname in out['calls']:
        if name.startswith('<') and name != '<lambda>':     # comprehensions: lines of the function around them
            continue
        p = pathlib.Path(file)
        where = f'{p.name}:{first}:' if name == '<lambda>' else f'{p.name}:'
        hops.append((where + qualname.replace('<locals>.', ''), own_lines(p.read_text(), first, name)))
    return hops


def test_own_lines_leaves_out_inner_functions():
    src = 'def f(x):\n    """Doc."""\n    def g(y):\n        return y\n    h = lambda z: z\n    return g(x)\nk = lambda: 0\n'
    assert [own_lines(src, 1, 'f'), own_lines(src, 3, 'g'), own_lines(src, 7, '<lambda>')] == [3, 2, 1]


def test_tape_reading_path_within_budget():
    hops = tape_path()
    total = sum(n for _, n in hops)
    print(f'\nthe tape\'s reading path (MINIGRAD_PLAIN=1), core/ functions in first-call order:')
    print('\n'.join(f'  {hop} ({n} code lines)' for hop, n in hops))
    print(f'{total} code lines in {len(hops)} hops (budget {TAPE_PATH_BUDGET})')
    assert len(hops) > 5 and any('backward' in hop for hop, _ in hops)
    assert total <= TAPE_PATH_BUDGET, f"the tape's reading path: {total} code lines > {TAPE_PATH_BUDGET}"


# --- speed shortcuts live in fast.py, its docstring the ledger ---

def test_no_speed_marker_in_core():
    marked = [f'core/{p.name}:{t.start[0]}' for p in sorted(CORE.glob('*.py'))
              for t in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
              if t.type == tokenize.COMMENT and re.match(r'#\s*speed:', t.string, re.I)]
    assert not marked, f'speed shortcuts belong in minigrad/fast.py, not core/: {marked}'


def ledger_items(doc):
    """The names of a ledger's numbered items, in order: lines `N. ``name``: ...`."""
    return re.findall(r'^\s*\d+\.\s+``([\w.]+)``:', doc, re.M)


def test_ledger_items_reads_the_numbered_items():
    doc = ('Speed shortcuts.\n\n1. ``fast_apply``: replaces primitive.apply; bench row tape, 1.8x\n'
           '2. ``sum_reduce``: np.add.reduce, see 1. ``not_an_item``: inside a line\n'
           '   continued; ``loose``: not numbered\n10. ``tenth``: two digits\n11. plain words: no name\n')
    assert ledger_items(doc) == ['fast_apply', 'sum_reduce', 'tenth']


def test_fast_ledger_names_every_item():
    if not (PKG / 'fast.py').exists():
        pytest.skip('minigrad/fast.py is not written yet')
    items = ledger_items(ast.get_docstring(ast.parse((PKG / 'fast.py').read_text())) or '')
    fast = importlib.import_module('minigrad.fast')
    assert items, 'no ledger items in the docstring of minigrad/fast.py'
    assert len(items) == len(set(items)), f'ledger items named twice: {items}'
    assert set(items) == set(fast.ITEMS), f'ledger only: {sorted(set(items) - set(fast.ITEMS))}; ' \
                                          f'ITEMS only: {sorted(set(fast.ITEMS) - set(items))}'


# --- the README ---

def readme_entries():
    """The entries of the README's layout block under minigrad/: [(names, text)], names as `core/`, `session.py`."""
    block = (ROOT / 'README.md').read_text().split('## Library layout', 1)[1].split('```')[1]
    entries, inside = [], False
    for line in block.splitlines():
        if re.match(r'  \S', line):
            names, _, text = line[2:].partition('  ')
            entries.append((names.split(', '), text))
        elif inside and line.startswith('   '):                    # an entry's next line
            entries[-1] = (entries[-1][0], entries[-1][1] + ' ' + line.strip())
        inside = line.startswith('  ') and (inside or re.match(r'  \S', line) is not None)
    return entries


def readme_name(unit):
    if unit.split('.')[0] in ('core', 'course') or (PKG / unit).is_dir():
        return unit.split('.')[0] + '/'
    return f'{unit}.py'


def test_readme_layout_names_every_module_bottom_up():
    entries = readme_entries()
    listed = [n for names, _ in entries for n in names]
    rank = {}
    for u in units():
        rank[readme_name(u)] = min(rank.get(readme_name(u), len(LAYERS)), RANK.get(u, len(LAYERS)))
    assert sorted(listed) == sorted(rank), f'README layout: missing {sorted(set(rank) - set(listed))}, ' \
                                           f'not in the package {sorted(set(listed) - set(rank))}'
    assert [rank[n] for n in listed] == sorted(rank[n] for n in listed), f'README lists units out of layer order: {listed}'
    core_text = ' '.join(text for names, text in entries if names == ['core/'])
    unnamed = [m for m in TEACHING + HELPERS if not re.search(rf'\b{m}\b', core_text)]
    assert not unnamed, f"README's core/ entry does not name {unnamed}"
