#!/usr/bin/env python3
"""Sizes of a Rust source tree: the largest files, the largest functions (from `fn` to the
closing brace at the same indent), and how many pass 1 000 and 100 lines.
Usage: scripts/code-size.py crates/foresight-daemon/src"""
import os
import re
import sys
root=sys.argv[1]
files=[]
for r,_,fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'): files.append(os.path.join(r,f))
sizes=sorted(((sum(1 for _ in open(f)),f) for f in files),reverse=True)
print("largest files:"); [print(f"  {n:5} {f[len(root)+1:]}") for n,f in sizes[:10]]
funcs=[]
for f in files:
    lines=open(f).read().split('\n')
    i=0
    while i<len(lines):
        m=re.match(r'(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?fn\s+(\w+)',lines[i])
        if m:
            ind=len(m.group(1))
            # find opening brace line then matching closing at same indent
            j=i
            while j<len(lines) and not lines[j].rstrip().endswith('{') and not lines[j].rstrip().endswith(';'): j+=1
            if j<len(lines) and lines[j].rstrip().endswith('{'):
                k=j+1
                while k<len(lines) and not (lines[k].startswith(' '*ind+'}') and len(lines[k])-len(lines[k].lstrip())==ind): k+=1
                funcs.append((k-i+1,m.group(5),f[len(root)+1:]))
        i+=1
funcs.sort(reverse=True)
print("largest functions:"); [print(f"  {n:5} {name} ({f})") for n,name,f in funcs[:10]]
print("functions over 100 lines:",sum(1 for n,_,_ in funcs if n>100), " files over 1000 lines:",sum(1 for n,_ in sizes if n>1000))
