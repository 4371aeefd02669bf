"""The compiler's speed ledger: the numbered items after the line 'Speed ledger.' in the docstring of
minigrad/compiler/__init__.py, and the ``# speed:`` comments under minigrad/compiler/, name the same places.

An item's title (its text up to the first ': ', over lines if need be) names places, each name in the file
named before it: ``3. file.py ``fn`` / ``other``, more.py ``Cls.meth``: what it does ...``. A marker belongs
to the innermost function or class holding it or defined on the line below it (by qualified name:
``Codegen.spares``, ``cse.key``), else to the module-level statement holding it or starting on the line
below it (by the name it binds: ``MAX_GROUP``). Each place must be named by as many items as it has
markers: a marker added without an item, an item without its marker, or a second marker in a function
one item names, all fail.
"""
import ast
import collections
import io
import pathlib
import re
import tokenize

COMPILER = pathlib.Path(__file__).resolve().parent.parent / 'minigrad' / 'compiler'
HEADING = 'Speed ledger.'
MARKER = re.compile(r'#\s*speed\s*:', re.I)


def ledger_items(doc: str) -> list:
    """[(number, [(file, name), ...])] for each item after the heading line: a line starting ``N. `` at
    column 0 and its indented continuation lines; the places come from its title (up to the first ': ')."""
    lines = [line.rstrip() for line in doc.split('\n')]
    if HEADING not in [line.strip() for line in lines]:
        raise ValueError(f'no line {HEADING!r} in the docstring')
    texts, open_ = [], False
    for line in lines[[line.strip() for line in lines].index(HEADING) + 1:]:
        m = re.match(r'(\d+)\.\s', line)
        if m:
            texts.append((int(m[1]), line[m.end():]))
        elif open_ and line.startswith(' ') and line.strip():
            texts[-1] = (texts[-1][0], texts[-1][1] + ' ' + line.strip())
        open_ = bool(m) or open_ and line.startswith(' ') and bool(line.strip())
    items = []
    for n, text in texts:
        if ': ' not in text:
            raise ValueError(f'ledger item {n} has no title (places, then ": "): {text!r}')
        places, file = [], None
        for f, name in re.findall(r'(\w+\.py)|``([\w.]+)``', text.split(': ', 1)[0]):
            if f:
                file = f
            elif file is None:
                raise ValueError(f'ledger item {n} names ``{name}`` before any file')
            else:
                places.append((file, name))
        items.append((n, places))
    return items


def _binds(stmt):
    """The name a module-level statement binds (an assignment's or a for loop's first target, an import's
    first name), or None."""
    target = (stmt.targets[0] if isinstance(stmt, ast.Assign) else
              stmt.target if isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For)) else None)
    if isinstance(target, (ast.Tuple, ast.List)):
        target = target.elts[0]
    if target is not None:
        return ast.unparse(target)
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return stmt.names[0].asname or stmt.names[0].name
    return None


def markers(src: str, file: str) -> list:
    """[(file, owner)] for each ``# speed:`` comment of `src` (comments only: never text in a string)."""
    spans = []                              # (first line, last line, name, 1 for a def or class)

    def visit(node, prefix, in_def):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                spans.append((first, child.end_lineno, prefix + child.name, 1))
                visit(child, prefix + child.name + '.', True)
                continue
            if not in_def and isinstance(child, ast.stmt) and _binds(child):
                spans.append((child.lineno, child.end_lineno, _binds(child), 0))
            visit(child, prefix, in_def)
    visit(ast.parse(src), '', False)
    found = []
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == tokenize.COMMENT and MARKER.match(t.string):
            i = t.start[0]
            holding = [s for s in spans if s[0] - 1 <= i <= s[1]]
            defs = [s for s in holding if s[3]] or holding       # a def's own markers before a statement's
            found.append((file, max(defs)[2] if defs else f'line {i}'))
    return found


def mismatch(items, marked) -> tuple:
    """(places marked more often than items name them, places named more often than marked)."""
    named = collections.Counter(p for _, places in items for p in places)
    marked = collections.Counter(marked)
    return sorted((marked - named).elements()), sorted((named - marked).elements())


def compiler_ledger():
    tree = ast.parse((COMPILER / '__init__.py').read_text())
    return ledger_items(ast.get_docstring(tree) or '')


def compiler_markers():
    return [m for p in sorted(COMPILER.rglob('*.py'))
            for m in markers(p.read_text(), p.relative_to(COMPILER).as_posix())]


FAKE_DOC = '''The compiler. 1. a.py ``f``: before the heading, no item.

Speed ledger.

Places named in the intro, a.py ``f``: no item either.

1. a.py ``f`` / ``C.m``, b.py ``MAX``: two files, three places; a continuation
   names c.py ``g``: not a title.
2. b.py
   ``outer.inner``: a title over two lines (measured 2026-11-28, 1.0 -> 0.5 s).

Text after the ledger names d.py ``h``: not an item.
'''
FAKE_A = '''"""# speed: in a docstring, no marker"""
def f():
    x = '# speed: in a string, no marker'
    return x   # speed: inside f


class C:
    # speed: just above m (and its decorator)
    @staticmethod
    def m():
        pass
'''
FAKE_B = '''import numpy as np

# speed: just above an assignment
MAX = 3


def outer():
    def inner():   # Speed: on the def line, any case
        pass
    return inner
'''


def test_the_parsers_on_made_up_sources():
    items = ledger_items(FAKE_DOC)
    assert items == [(1, [('a.py', 'f'), ('a.py', 'C.m'), ('b.py', 'MAX')]), (2, [('b.py', 'outer.inner')])]
    marked = markers(FAKE_A, 'a.py') + markers(FAKE_B, 'b.py')
    assert marked == [('a.py', 'f'), ('a.py', 'C.m'), ('b.py', 'MAX'), ('b.py', 'outer.inner')]
    assert mismatch(items, marked) == ([], [])
    # a marker without an item: a new place, or a second marker where an item names one
    assert mismatch(items, marked + markers('# speed: at the end\n', 'c.py')) == ([('c.py', 'line 1')], [])
    second = FAKE_A.replace("    x = '#", "    # speed: a second shortcut in f\n    x = '#")
    assert mismatch(items, markers(second, 'a.py') + markers(FAKE_B, 'b.py')) == ([('a.py', 'f')], [])
    # an item without its marker
    assert mismatch(items, marked[1:]) == ([], [('a.py', 'f')])
    assert mismatch(items[:1], marked) == ([('b.py', 'outer.inner')], [])
    # a title that names a function before its file, or no title at all, is an error, not an empty item
    for bad in ('Speed ledger.\n1. ``f`` in a.py: what\n',
                'Speed ledger.\n1. a.py ``f`` without a colon\n\nx: y\n',
                'no heading\n1. a.py ``f``: what\n'):
        try:
            ledger_items(bad)
        except ValueError:
            continue
        raise AssertionError(f'ledger_items accepted {bad!r}')


def test_every_compiler_speed_marker_is_in_the_ledger():
    """Each ``# speed:`` marker under minigrad/compiler/ is a place a ledger item names, and each place an
    item names has its marker (counted: one marker per item naming the place)."""
    items = compiler_ledger()
    assert len(items) >= 10, 'no ledger found in minigrad/compiler/__init__.py'
    assert [n for n, _ in items] == list(range(1, len(items) + 1)), 'ledger items not numbered 1, 2, ...'
    assert all(places for _, places in items), f'items naming no place: {[n for n, p in items if not p]}'
    files = {p.relative_to(COMPILER).as_posix() for p in COMPILER.rglob('*.py')}
    unknown = {f for _, places in items for f, _ in places} - files
    assert not unknown, f'items name files not in minigrad/compiler/: {sorted(unknown)}'
    marked_only, named_only = mismatch(items, compiler_markers())
    assert marked_only == [], f'# speed: markers no ledger item names: {marked_only}'
    assert named_only == [], f'ledger items without their # speed: marker: {named_only}'


def test_compiler_markers_say_what():
    """A marker says what its shortcut does: ``# speed: <what>``, never a bare ``# speed:``."""
    bare = [(p.name, t.start[0]) for p in sorted(COMPILER.rglob('*.py'))
            for t in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
            if t.type == tokenize.COMMENT and MARKER.match(t.string)
            and not MARKER.sub('', t.string, 1).strip()]
    assert bare == []
