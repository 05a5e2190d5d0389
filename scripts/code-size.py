#!/usr/bin/env python3
"""Sizes of a Rust source tree: the largest files, the largest functions (from `fn` to the
closing brace at the same indent), and how many pass 1 000 and 100 lines.
Usage: scripts/code-size.py crates/foresight-daemon/src

With --report and a crate's directory, the before/after report of issue 34 for that crate:
the above, every function over 100 lines, the largest structs' field counts, the import
cycles between the modules of each directory (as `tests/layers.rs` of the daemon reads
references: `crate::` and `super::` paths outside comments), and the tests per test binary.
Usage: scripts/code-size.py --report crates/foresight-daemon"""
import os
import re
import sys


def rust_files(root):
    out = []
    for r, _, fs in os.walk(root):
        out += [os.path.join(r, f) for f in fs if f.endswith('.rs')]
    return sorted(out)


def functions(files, root):
    funcs = []
    for f in files:
        lines = open(f).read().split('\n')
        for i, line in enumerate(lines):
            m = re.match(r'(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?fn\s+(\w+)', line)
            if not m:
                continue
            ind = len(m.group(1))
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(('{', ';')):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith('{'):
                k = j + 1
                while k < len(lines) and not (lines[k].startswith(' ' * ind + '}')
                                              and len(lines[k]) - len(lines[k].lstrip()) == ind):
                    k += 1
                funcs.append((k - i + 1, m.group(6), os.path.relpath(f, root)))
    return sorted(funcs, reverse=True)


def sizes_report(root):
    files = rust_files(root)
    sizes = sorted(((sum(1 for _ in open(f)), f) for f in files), reverse=True)
    print("largest files:")
    for n, f in sizes[:10]:
        print(f"  {n:5} {os.path.relpath(f, root)}")
    funcs = functions(files, root)
    print("largest functions:")
    for n, name, f in funcs[:10]:
        print(f"  {n:5} {name} ({f})")
    print("functions over 100 lines:", sum(1 for n, _, _ in funcs if n > 100),
          " files over 1000 lines:", sum(1 for n, _ in sizes if n > 1000))
    return files, funcs


def struct_fields(files, root):
    """(fields, name, file) of every braced struct: its lines at one indent deeper that
    name a field."""
    out = []
    for f in files:
        lines = open(f).read().split('\n')
        for i, line in enumerate(lines):
            m = re.match(r'(\s*)(pub(\([^)]*\))?\s+)?struct\s+(\w+)[^;(]*\{\s*$', line)
            if not m:
                continue
            ind, n, k = len(m.group(1)), 0, i + 1
            while k < len(lines) and not (lines[k].startswith(' ' * ind + '}')
                                          and len(lines[k]) - len(lines[k].lstrip()) == ind):
                if re.match(r' {%d}(pub(\([^)]*\))?\s+)?\w+\s*:' % (ind + 4), lines[k]):
                    n += 1
                k += 1
            out.append((n, m.group(4), os.path.relpath(f, root)))
    return sorted(out, reverse=True)


def without_comments(text):
    out = []
    for line in text.split('\n'):
        i = line.find('//')
        out.append(line[:i] if i >= 0 and line[:i].count('"') % 2 == 0 else line)
    return '\n'.join(out)


def modules(src):
    mods = {}
    for f in rust_files(src):
        m = os.path.relpath(f, src)[:-3].split(os.sep)
        if m[-1] in ('mod', 'lib'):
            m.pop()
        mods[tuple(m)] = without_comments(open(f).read())
    return mods


def expand(rest):
    ident = re.match(r'\w*', rest).group(0)
    after = rest[len(ident):]
    if not ident:
        if after.startswith('{'):
            items, depth, start = [], 0, 1
            for i, c in enumerate(after[1:], 1):
                if c == '{':
                    depth += 1
                elif c == '}' and depth == 0:
                    items.append(after[start:i])
                    break
                elif c == '}':
                    depth -= 1
                elif c == ',' and depth == 0:
                    items.append(after[start:i])
                    start = i + 1
            return [p for item in items for p in expand(item.strip())]
        return []
    if after.startswith('::'):
        tails = expand(after[2:])
        return [[ident] + t for t in tails] if tails else [[ident]]
    return [[ident]]


def edges(src):
    mods = modules(src)
    known = set(mods)

    def target(path):
        for n in range(len(path), -1, -1):
            if tuple(path[:n]) in known:
                return tuple(path[:n])
        return ()

    reexports = {}
    for line in mods.get((), '').split('\n'):
        if line.strip().startswith('pub use '):
            parts = line.strip()[8:].rstrip(';').split('::')
            reexports[parts[-1]] = target(parts)
    out = set()
    for frm, text in mods.items():
        for m in re.finditer(r'(?<![\w:])(crate|super)::', text):
            for path in expand(text[m.end():]):
                if m.group(1) == 'crate':
                    r = reexports.get(path[0])
                    absolute = list(r) if r is not None and (
                        len(path) == 1 or (path[0],) not in known) else path
                else:
                    absolute = list(frm[:-1]) + path
                to = target(absolute)
                if to != frm:
                    out.add((frm, to))
    return out


def cycles(src):
    """Per directory, the groups of its child modules that reach each other (strongly
    connected, two or more): each is an import cycle."""
    graphs = {}
    for frm, to in edges(src):
        common = 0
        while common < min(len(frm), len(to)) and frm[common] == to[common]:
            common += 1
        if len(frm) > common and len(to) > common:
            graphs.setdefault(frm[:common], {}).setdefault(frm[common], set()).add(to[common])
    found = []
    for d, g in sorted(graphs.items()):
        index, low, stack, on, n = {}, {}, [], set(), [0]

        def visit(v):
            index[v] = low[v] = n[0]
            n[0] += 1
            stack.append(v)
            on.add(v)
            for w in g.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(('::'.join(d) or 'crate', sorted(group)))

        for v in sorted(set(g) | {w for ws in g.values() for w in ws}):
            if v not in index:
                visit(v)
    return found


def tests_per_binary(crate):
    """`#[test]`s (any attribute ending in `test]`, `tokio::test` included) per test
    binary: the library's unit tests, and each file or directory under tests/."""
    def count(paths):
        return sum(len(re.findall(r'#\[(\w+::)*test(\([^)]*\))?\]', open(p).read()))
                   for p in paths)
    out = [('lib (unit)', count(rust_files(os.path.join(crate, 'src'))))]
    tests = os.path.join(crate, 'tests')
    if os.path.isdir(tests):
        for e in sorted(os.listdir(tests)):
            p = os.path.join(tests, e)
            if e.endswith('.rs'):
                out.append((e[:-3], count([p])))
            elif os.path.isfile(os.path.join(p, 'main.rs')):
                out.append((e, count(rust_files(p))))
    return out


def report(crate):
    src = os.path.join(crate, 'src')
    files, funcs = sizes_report(src)
    print("functions over 100 lines:")
    for n, name, f in funcs:
        if n > 100:
            print(f"  {n:5} {name} ({f})")
    structs = struct_fields(files, src)
    print("largest structs (fields):",
          ", ".join(f"{name} {n} ({f})" for n, name, f in structs[:3]))
    found = cycles(src)
    print("import cycles between modules:", len(found))
    for d, group in found:
        print(f"  in {d}: {' <-> '.join(group)}")
    print("tests per binary:",
          ", ".join(f"{b} {n}" for b, n in tests_per_binary(crate)))


if sys.argv[1] == '--report':
    report(sys.argv[2])
else:
    sizes_report(sys.argv[1])
